#include "lib/storage/pg/pg_pool.h"

#include <algorithm>
#include <utility>

namespace farm::storage {
namespace {

bool IsUnavailableState(const std::string& sqlstate) {
  // Class 08: connection exceptions; 57P01..57P03: admin/crash shutdown,
  // cannot connect now (server starting or stopping).
  return sqlstate.rfind("08", 0) == 0 || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

}  // namespace

absl::Status CurrentExceptionToStatus(const std::string& what) {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(what + ": database connection lost: " + e.what());
  } catch (const pqxx::in_doubt_error& e) {
    return absl::UnavailableError(what + ": commit outcome unknown: " + e.what());
  } catch (const pqxx::sql_error& e) {
    const std::string state = e.sqlstate();
    std::string msg = what + ": " + e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (IsUnavailableState(state)) return absl::UnavailableError(msg);
    if (state == "40001" || state == "40P01") return absl::AbortedError(msg);
    if (state == "23505") return absl::AlreadyExistsError(msg);
    return absl::InternalError(msg + " (sqlstate " + state + ")");
  } catch (const std::exception& e) {
    return absl::InternalError(what + ": " + e.what());
  } catch (...) {
    return absl::InternalError(what + ": unknown exception");
  }
}

std::string RedactDatabaseUri(const std::string& text) {
  // URI form: scheme://user:PASSWORD@host; key=value form: password=PASSWORD.
  std::string out = text;
  for (size_t scheme = out.find("://"); scheme != std::string::npos;
       scheme = out.find("://", scheme + 3)) {
    const size_t start = scheme + 3;
    const size_t at = out.find('@', start);
    const size_t end = out.find_first_of(" /?\n\"'", start);
    if (at == std::string::npos || (end != std::string::npos && end < at)) continue;
    const size_t colon = out.find(':', start);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 9)) {
    const size_t start = p + 9;
    size_t end = out.find_first_of(" &\n", start);
    if (end == std::string::npos) end = out.size();
    out.replace(start, end - start, "***");
  }
  return out;
}

std::string WithConnectTimeout(const std::string& uri, int seconds) {
  std::string out = uri;
  if (out.find("connect_timeout") != std::string::npos) return out;
  const bool is_uri = out.rfind("postgres", 0) == 0 && out.find("://") != std::string::npos;
  if (is_uri) {
    out += (out.find('?') == std::string::npos ? "?" : "&");
    out += "connect_timeout=" + std::to_string(seconds);
  } else {
    out += " connect_timeout=" + std::to_string(seconds);
  }
  return out;
}

std::string WithSessionOptions(const std::string& conninfo, int statement_timeout_ms) {
  std::string out = conninfo;
  const bool is_uri = out.rfind("postgres", 0) == 0 && out.find("://") != std::string::npos;
  const auto add = [&](const std::string& key, const std::string& uri_value,
                       const std::string& kv_value) {
    if (out.find(key + "=") != std::string::npos) return;
    if (is_uri) {
      out += (out.find('?') == std::string::npos ? "?" : "&");
      out += key + "=" + uri_value;
    } else {
      out += " " + key + "=" + kv_value;
    }
  };
  add("keepalives", "1", "1");
  add("keepalives_idle", "10", "10");
  add("keepalives_interval", "5", "5");
  add("keepalives_count", "4", "4");
  // JIT off: the farm's statements are short OLTP ones, but jsonb functions
  // (the claim's real-run rule) lift the planner's cost estimate over
  // jit_above_cost, and compiling then costs more than the statement: the
  // claim of 200 jobs ran in 79 ms with JIT and 9 ms without.
  std::string options = "-c jit=off";
  if (statement_timeout_ms > 0) {
    options += " -c statement_timeout=" + std::to_string(statement_timeout_ms);
  }
  std::string escaped;  // URI form: percent-encode the space and '='
  for (char c : options) {
    if (c == ' ') {
      escaped += "%20";
    } else if (c == '=') {
      escaped += "%3D";
    } else {
      escaped += c;
    }
  }
  add("options", escaped, "'" + options + "'");
  return out;
}

PgPool::PgPool(PgPoolOptions options) : options_(std::move(options)) {
  conninfo_ = WithSessionOptions(WithConnectTimeout(options_.uri, options_.connect_timeout_seconds),
                                 options_.statement_timeout_ms);
  const int n = std::max(1, options_.size);
  for (int i = 0; i < n; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    free_.push_back(slots_.back().get());
  }
}

PgPool::~PgPool() = default;

absl::StatusOr<PgPool::Slot*> PgPool::Acquire() {
  Slot* slot = nullptr;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &PgPool::HasFreeSlot));
    slot = free_.back();
    free_.pop_back();
    if (slot->conn != nullptr && slot->conn->is_open()) return slot;
    slot->conn.reset();
    if (std::chrono::steady_clock::now() < next_connect_) {
      free_.push_back(slot);
      return absl::UnavailableError("database unavailable (reconnect backing off)");
    }
  }
  // Connect outside the lock: it can take up to connect_timeout.
  try {
    auto conn = std::make_unique<pqxx::connection>(conninfo_);
    slot->conn = std::move(conn);
    slot->prepared = 0;
    absl::MutexLock lock(&mu_);
    backoff_ = std::chrono::milliseconds(0);
    next_connect_ = {};
    return slot;
  } catch (...) {
    absl::Status st = CurrentExceptionToStatus("connect");
    absl::MutexLock lock(&mu_);
    backoff_ = std::min(std::chrono::milliseconds(2000),
                        std::max(std::chrono::milliseconds(50), backoff_ * 2));
    next_connect_ = std::chrono::steady_clock::now() + backoff_;
    free_.push_back(slot);
    // Any failure to connect is an outage from the caller's point of view.
    return absl::UnavailableError(RedactDatabaseUri(std::string(st.message())));
  }
}

void PgPool::Prepare(const std::string& name, const std::string& sql) {
  absl::MutexLock lock(&mu_);
  // Several stores may share a pool and register the same statement.
  for (const auto& [n, q] : statements_) {
    if (n == name && q == sql) return;
  }
  statements_.emplace_back(name, sql);
}

void PgPool::SyncPrepared(Slot* slot) {
  std::vector<std::pair<std::string, std::string>> missing;
  {
    absl::MutexLock lock(&mu_);
    if (slot->prepared >= statements_.size()) return;
    missing.assign(statements_.begin() + static_cast<std::ptrdiff_t>(slot->prepared),
                   statements_.end());
  }
  for (const auto& [name, sql] : missing) {
    slot->conn->prepare(name, sql);
    ++slot->prepared;
  }
}

void PgPool::Release(Slot* slot, bool broken) {
  if (broken) slot->conn.reset();
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

absl::Status PgPool::Run(const std::function<absl::Status(pqxx::connection&)>& fn) {
  absl::StatusOr<Slot*> slot = Acquire();
  if (!slot.ok()) return slot.status();
  absl::Status st;
  bool broken = false;
  try {
    SyncPrepared(*slot);
    st = fn(*(*slot)->conn);
    broken = !(*slot)->conn->is_open();
  } catch (...) {
    st = CurrentExceptionToStatus("database");
    broken = !(*slot)->conn->is_open() || absl::IsUnavailable(st);
  }
  Release(*slot, broken);
  return st;
}

}  // namespace farm::storage
