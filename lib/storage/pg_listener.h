// PgMatrixListener: one dedicated PostgreSQL connection that LISTENs on the
// `farm_matrix` channel (raised by the jobs triggers of migration 2, payload
// = matrix id) and fans the notifications out to in-process subscribers
// (MatrixEvents), so any number of WatchMatrix streams cost one connection.
//
// Contract:
//  - Thread-safe. One background thread owns the connection; Subscribe /
//    Unsubscribe may be called from any thread, also from inside a wake
//    callback's caller chain as long as not from the callback itself.
//  - Callbacks run on the listener thread with the subscriber table locked:
//    they must be cheap and non-blocking, and must not call Subscribe or
//    Unsubscribe.
//  - Robust to the database going away: a broken connection is dropped and
//    re-opened with backoff (50 ms .. 2 s); after every (re)connect, once
//    LISTEN is in place, all subscribers are woken because notifications
//    sent meanwhile are lost. A silent reconnect (new backend pid) counts too.
//  - Stop() (also the destructor) joins the thread within ~one wait slice
//    (200 ms).
#ifndef LIB_STORAGE_PG_LISTENER_H_
#define LIB_STORAGE_PG_LISTENER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "lib/storage/repositories.h"

namespace farm::storage {

class PgMatrixListener final : public MatrixEvents {
 public:
  static constexpr char kChannel[] = "farm_matrix";

  // `uri`: libpq URI or key=value string of the database to listen on.
  explicit PgMatrixListener(std::string uri);
  PgMatrixListener(const PgMatrixListener&) = delete;
  PgMatrixListener& operator=(const PgMatrixListener&) = delete;
  ~PgMatrixListener() override;

  void Start();
  void Stop();

  Handle Subscribe(int64_t matrix_id, std::function<void()> wake) override;
  void Unsubscribe(Handle handle) override;

  // Observability (tests, logs): notifications received on the channel,
  // successful LISTEN set-ups (first connect included), and whether LISTEN
  // is in place right now.
  int64_t notifications() const { return notifications_.load(); }
  int64_t connects() const { return connects_.load(); }
  bool listening() const { return listening_.load(); }

 private:
  struct Sub {
    int64_t matrix_id;
    std::function<void()> wake;
  };
  void Loop();
  // Wakes the subscribers of `ids` (all of them when `all`).
  void Dispatch(const std::set<int64_t>& ids, bool all);
  // Sleeps up to `d` unless stopping; returns false when stopping.
  bool SleepFor(std::chrono::milliseconds d);

  const std::string uri_;
  std::mutex mu_;  // guards subs_, next_, stop_
  std::condition_variable cv_;
  std::map<Handle, Sub> subs_;
  Handle next_ = 1;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<int64_t> notifications_{0};
  std::atomic<int64_t> connects_{0};
  std::atomic<bool> listening_{false};
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_LISTENER_H_
