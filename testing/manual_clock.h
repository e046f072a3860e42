// manual_clock: a clock that moves only when a test tells it to, for the
// services' injected clocks (SchedulerConfig, MemorySchedulerOptions, the
// in-memory repositories), so lease expiry and backoff run in no wall time.
//
// Thread-safety: Now() and Advance() may be called from any thread.
#ifndef TESTING_MANUAL_CLOCK_H_
#define TESTING_MANUAL_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace farm::testing {

class ManualClock {
 public:
  explicit ManualClock(absl::Time start = absl::FromUnixSeconds(1767225600)) : now_(start) {}

  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace farm::testing

#endif  // TESTING_MANUAL_CLOCK_H_
