#include "lib/storage/pg_listener.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "absl/strings/numbers.h"
#include "lib/storage/pg_pool.h"

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

PgMatrixListener::PgMatrixListener(std::string uri) : uri_(WithConnectTimeout(uri, 3)) {}

PgMatrixListener::~PgMatrixListener() { Stop(); }

void PgMatrixListener::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void PgMatrixListener::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

MatrixEvents::Handle PgMatrixListener::Subscribe(int64_t matrix_id, std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  const Handle h = next_++;
  subs_.emplace(h, Sub{matrix_id, std::move(wake)});
  return h;
}

void PgMatrixListener::Unsubscribe(Handle handle) {
  // Dispatch holds mu_ while calling back, so once we hold it no callback of
  // this handle is running.
  std::lock_guard<std::mutex> lock(mu_);
  subs_.erase(handle);
}

void PgMatrixListener::Dispatch(const std::set<int64_t>& ids, bool all) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [h, sub] : subs_) {
    if (all || ids.count(sub.matrix_id) != 0) sub.wake();
  }
}

bool PgMatrixListener::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop_; });
  return !stop_;
}

void PgMatrixListener::Loop() {
  std::chrono::milliseconds backoff{0};
  auto stopping = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  };
  while (!stopping()) {
    std::set<int64_t> ids;
    bool any = false;
    std::unique_ptr<pqxx::connection> conn;
    std::unique_ptr<Receiver> receiver;
    int pid = 0;
    try {
      conn = std::make_unique<pqxx::connection>(uri_);
      receiver = std::make_unique<Receiver>(*conn, &ids, &any, &notifications_);  // issues LISTEN
      pqxx::nontransaction n(*conn);
      pid = n.exec1("SELECT pg_backend_pid()")[0].as<int>();
    } catch (const std::exception& e) {
      receiver.reset();
      conn.reset();
      backoff = std::min(std::chrono::milliseconds(2000),
                         std::max(std::chrono::milliseconds(50), backoff * 2));
      spdlog::debug("matrix listener: connect failed ({}); retrying in {} ms", e.what(),
                    backoff.count());
      SleepFor(backoff);
      continue;
    }
    backoff = std::chrono::milliseconds(0);
    connects_.fetch_add(1);
    listening_.store(true);
    if (connects_.load() > 1) spdlog::info("matrix listener: reconnected, waking every watcher");
    // Whatever was notified before LISTEN took effect is lost: look again.
    Dispatch({}, /*all=*/true);
    auto next_check = Clock::now() + kHealthCheck;
    while (!stopping()) {
      try {
        conn->await_notification(0, kWaitMicros);
        if (!conn->is_open()) break;
        if (Clock::now() >= next_check) {
          next_check = Clock::now() + kHealthCheck;
          pqxx::nontransaction n(*conn);
          // A different backend means libpqxx reconnected behind our back:
          // start over so LISTEN and the wake-all happen for sure.
          if (n.exec1("SELECT pg_backend_pid()")[0].as<int>() != pid) break;
        }
      } catch (const std::exception& e) {
        spdlog::warn("matrix listener: connection lost ({})", e.what());
        break;
      }
      if (any) {
        std::set<int64_t> woken;
        woken.swap(ids);
        any = false;
        Dispatch(woken, /*all=*/false);
      }
    }
    listening_.store(false);
    receiver.reset();
    conn.reset();
  }
}

}  // namespace farm::storage
