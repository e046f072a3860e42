// PgMatrixListener: one dedicated PostgreSQL connection that LISTENs on the
// `farm_matrix` channel (raised by the jobs triggers of migration 2, payload
// = matrix id) and fans the notifications out to in-process subscribers
// (MatrixEvents), so any number of WatchMatrix streams cost one connection.
//
// Contract:
//  - Thread-safe. One background thread (a BackgroundLoop) owns the
//    connection: each pass waits up to one slice for notifications. Subscribe /
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
#ifndef LIB_STORAGE_PG_PG_LISTENER_H_
#define LIB_STORAGE_PG_PG_LISTENER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/base/background_loop.h"
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

  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }

  Handle Subscribe(int64_t matrix_id, std::function<void()> wake) override ABSL_LOCKS_EXCLUDED(mu_);
  void Unsubscribe(Handle handle) override ABSL_LOCKS_EXCLUDED(mu_);

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
  // The open connection with its LISTEN in place (defined in the .cc).
  struct Session;

  // One pass of the loop: (re)connect, or wait one slice for notifications
  // and dispatch them. Returns the pause before the next pass (the connect
  // backoff, else zero).
  absl::Duration Pass();
  // Opens the connection and issues LISTEN; false (session_ unset) on failure.
  bool Connect();
  // Drops the connection; on the loop thread (a pass, or at_exit).
  void Disconnect();
  // Wakes the subscribers of `ids` (all of them when `all`).
  void Dispatch(const std::set<int64_t>& ids, bool all) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string uri_;
  absl::Mutex mu_;
  std::map<Handle, Sub> subs_ ABSL_GUARDED_BY(mu_);
  Handle next_ ABSL_GUARDED_BY(mu_) = 1;
  // Touched by the loop thread only.
  std::unique_ptr<Session> session_;
  std::chrono::milliseconds backoff_{0};

  std::atomic<int64_t> notifications_{0};
  std::atomic<int64_t> connects_{0};
  std::atomic<bool> listening_{false};
  base::BackgroundLoop loop_;  // last: joined before the fields it uses go
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_LISTENER_H_
