// farm::service::ShutdownSignals: how a farm service turns SIGINT / SIGTERM
// into a clean, bounded shutdown.
//
// The constructor blocks both signals in the calling thread, so every thread
// started afterwards inherits the block and no signal lands in a gRPC or
// PostgreSQL thread, and starts the one thread that takes them with sigwait.
// That thread can therefore do real work: on the first signal it records the
// stop, wakes Wait / WaitFor and runs the OnStop callback (e.g. "drain the
// agent"). A second signal bounds the shutdown: it flushes the logs and ends
// the process at once with exit status 0.
//
// Usage: construct first thing in main, before any thread starts; then either
// Wait() (the scheduler), poll stop_requested() / WaitFor() between passes
// (the analyzer), or OnStop() to interrupt work running in main (the agent).
//
// Thread-safety: every method may be called from any thread. Ownership: one
// instance per process at a time; the callback given to OnStop must stay
// callable until the instance is destroyed. The destructor stops the signal
// thread; the signals stay blocked (a late one stays pending, not fatal).
#ifndef LIB_SERVICE_SHUTDOWN_H_
#define LIB_SERVICE_SHUTDOWN_H_

#include <signal.h>

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace farm::service {

class ShutdownSignals final {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Runs on_stop(signal) on the signal thread at the first signal, or at once
  // (on the caller's thread) when it has already come.
  void OnStop(std::function<void(int)> on_stop);

  // Blocks until the first signal; returns its number.
  int Wait();
  // Blocks up to `timeout`; true when a stop was requested.
  bool WaitFor(absl::Duration timeout);
  bool stop_requested() const;

 private:
  void TakeSignals();

  sigset_t signals_;
  mutable absl::Mutex mu_;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;  // the first signal; 0: none yet
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(int)> on_stop_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace farm::service

#endif  // LIB_SERVICE_SHUTDOWN_H_
