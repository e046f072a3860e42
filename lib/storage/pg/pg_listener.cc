#include "lib/storage/pg/pg_listener.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "absl/strings/numbers.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {
namespace {

using Clock = std::chrono::steady_clock;

// Collects matrix ids; runs inside get_notifs/await_notification on the
// listener thread.
class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, std::set<int64_t>* ids, bool* any, std::atomic<int64_t>* count)
      : pqxx::notification_receiver(c, PgMatrixListener::kChannel),
        ids_(ids),
        any_(any),
        count_(count) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    *any_ = true;
    count_->fetch_add(1);
    int64_t id = 0;
    if (absl::SimpleAtoi(payload, &id)) ids_->insert(id);
  }

 private:
  std::set<int64_t>* const ids_;
  bool* const any_;
  std::atomic<int64_t>* const count_;
};

// How often an idle listener checks that its connection still works (a
// server restart can leave a socket that never becomes readable).
constexpr auto kHealthCheck = std::chrono::seconds(2);
constexpr long kWaitMicros = 200000;

}  // namespace

struct PgMatrixListener::Session {
  std::unique_ptr<pqxx::connection> conn;
  std::unique_ptr<Receiver> receiver;  // declared after conn: destroyed (UNLISTEN) first
  int pid = 0;
  std::set<int64_t> ids;  // notified since the last dispatch
  bool any = false;
  Clock::time_point next_check;
};

PgMatrixListener::PgMatrixListener(std::string uri)
    : uri_(WithConnectTimeout(uri, 3)),
      loop_([this] { return Pass(); }, [this] { Disconnect(); }) {}

PgMatrixListener::~PgMatrixListener() { Stop(); }

MatrixEvents::Handle PgMatrixListener::Subscribe(int64_t matrix_id, std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  const Handle h = next_++;
  subs_.emplace(h, Sub{matrix_id, std::move(wake)});
  return h;
}

void PgMatrixListener::Unsubscribe(Handle handle) {
  // Dispatch holds mu_ while calling back, so once we hold it no callback of
  // this handle is running.
  absl::MutexLock lock(&mu_);
  subs_.erase(handle);
}

void PgMatrixListener::Dispatch(const std::set<int64_t>& ids, bool all) {
  absl::MutexLock lock(&mu_);
  for (auto& [h, sub] : subs_) {
    if (all || ids.count(sub.matrix_id) != 0) sub.wake();
  }
}

bool PgMatrixListener::Connect() {
  auto session = std::make_unique<Session>();
  try {
    session->conn = std::make_unique<pqxx::connection>(uri_);
    session->receiver = std::make_unique<Receiver>(*session->conn, &session->ids, &session->any,
                                                   &notifications_);  // issues LISTEN
    pqxx::nontransaction n(*session->conn);
    session->pid = n.exec1("SELECT pg_backend_pid()")[0].as<int>();
  } catch (const std::exception& e) {
    backoff_ = std::min(std::chrono::milliseconds(2000),
                        std::max(std::chrono::milliseconds(50), backoff_ * 2));
    spdlog::debug("matrix listener: connect failed ({}); retrying in {} ms", e.what(),
                  backoff_.count());
    return false;
  }
  session->next_check = Clock::now() + kHealthCheck;
  session_ = std::move(session);
  backoff_ = std::chrono::milliseconds(0);
  connects_.fetch_add(1);
  listening_.store(true);
  if (connects_.load() > 1) spdlog::info("matrix listener: reconnected, waking every watcher");
  return true;
}

void PgMatrixListener::Disconnect() {
  listening_.store(false);
  session_.reset();
}

absl::Duration PgMatrixListener::Pass() {
  if (session_ == nullptr) {
    if (!Connect()) return absl::FromChrono(backoff_);
    // Whatever was notified before LISTEN took effect is lost: look again.
    Dispatch({}, /*all=*/true);
    return absl::ZeroDuration();
  }
  Session& s = *session_;
  try {
    s.conn->await_notification(0, kWaitMicros);
    if (!s.conn->is_open()) {
      Disconnect();
      return absl::ZeroDuration();
    }
    if (Clock::now() >= s.next_check) {
      s.next_check = Clock::now() + kHealthCheck;
      pqxx::nontransaction n(*s.conn);
      // A different backend means libpqxx reconnected behind our back:
      // start over so LISTEN and the wake-all happen for sure.
      if (n.exec1("SELECT pg_backend_pid()")[0].as<int>() != s.pid) {
        Disconnect();
        return absl::ZeroDuration();
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("matrix listener: connection lost ({})", e.what());
    Disconnect();
    return absl::ZeroDuration();
  }
  if (s.any) {
    std::set<int64_t> woken;
    woken.swap(s.ids);
    s.any = false;
    Dispatch(woken, /*all=*/false);
  }
  return absl::ZeroDuration();
}

}  // namespace farm::storage
