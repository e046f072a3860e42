// lib/base/background_loop.h: BackgroundLoop, a function run over and over on
// its own thread -- the lease reaper's period, the PostgreSQL listener's
// receive loop.
//
// Each pass calls `pass`, which returns how long to pause before the next
// one (zero: go again at once). Wake() ends the current pause early (a pass
// running at that moment is followed by another one at once); Stop() ends it
// too, waits for a running pass to return and joins the thread. A pass that
// blocks (a network wait) should block in slices and may poll stopping() to
// return early, so Stop() stays prompt.
//
// Thread-safety: Start(), Wake(), Stop() and stopping() may be called from
// any thread except the loop's own (Stop() from inside a pass would join
// itself). Start() after Stop() starts a fresh thread. Ownership: the loop
// owns its thread; `pass` and `at_exit` must stay valid until Stop() returns
// (the destructor calls Stop()).
#ifndef LIB_BASE_BACKGROUND_LOOP_H_
#define LIB_BASE_BACKGROUND_LOOP_H_

#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace farm::base {

class BackgroundLoop final {
 public:
  // `pass` returns the pause before the next pass. `at_exit` (may be empty)
  // runs on the loop thread after the last pass, before Stop() returns: it
  // releases what the passes keep between calls (a connection).
  explicit BackgroundLoop(std::function<absl::Duration()> pass, std::function<void()> at_exit = {})
      : pass_(std::move(pass)), at_exit_(std::move(at_exit)) {}
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;
  ~BackgroundLoop() { Stop(); }

  // Starts the thread; the first pass runs at once. No-op while running.
  void Start() ABSL_LOCKS_EXCLUDED(control_mu_, mu_) {
    absl::MutexLock control(&control_mu_);
    if (thread_.joinable()) return;
    {
      absl::MutexLock lock(&mu_);
      stop_ = false;
      wake_ = false;
    }
    thread_ = std::thread([this] { Run(); });
  }

  // Ends the pause now (or right after the running pass).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    wake_ = true;
  }

  // Idempotent: asks the loop to end and joins it.
  void Stop() ABSL_LOCKS_EXCLUDED(control_mu_, mu_) {
    absl::MutexLock control(&control_mu_);
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // True once Stop() was called: a long pass may return early.
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (stop_) break;
        wake_ = false;  // this pass sees whatever the wake-up was for
      }
      const absl::Duration pause = pass_();
      absl::MutexLock lock(&mu_);
      // Await re-evaluates the condition whenever mu_ is released, so a
      // Wake() or Stop() cuts the pause short.
      mu_.AwaitWithTimeout(absl::Condition(this, &BackgroundLoop::StopOrWake), pause);
      if (stop_) break;
    }
    if (at_exit_) at_exit_();
  }

  bool StopOrWake() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || wake_; }

  const std::function<absl::Duration()> pass_;
  const std::function<void()> at_exit_;

  // Serialises Start() and Stop(); held across the join, never by the loop
  // thread, so a pass may call Wake() and stopping().
  absl::Mutex control_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::thread thread_ ABSL_GUARDED_BY(control_mu_);

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;  // Wake() since the running pass began
};

}  // namespace farm::base

#endif  // LIB_BASE_BACKGROUND_LOOP_H_
