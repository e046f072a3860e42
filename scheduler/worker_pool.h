// WorkerPool: a fixed set of threads running posted tasks, plus delayed
// tasks. The gRPC adapters hand every blocking (database) call to one so
// gRPC's callback threads never block on PostgreSQL; the scheduler keeps
// separate pools so that lease renewals never queue behind expensive calls.
//
// Contract: thread-safe (one mutex guards both queues; tasks run outside
// it). Stop() runs every queued task, delayed ones at once, and joins the
// threads; Post() after Stop() runs nothing and returns false. Admit() is
// Post() with admission control: with a queue bound (max_queued > 0) it
// refuses (kFull) once that many tasks wait, so callers can shed load
// instead of queueing without limit. stopping() lets long-lived work
// (streams) notice shutdown. Tasks must not throw.
#ifndef SCHEDULER_WORKER_POOL_H_
#define SCHEDULER_WORKER_POOL_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace farm::scheduler {

class WorkerPool final {
 public:
  enum class Admission { kQueued, kFull, kStopped };

  // max_queued: ready tasks that may wait for a thread before Admit()
  // refuses (0: no bound). Post()/PostAfter() are never refused for it:
  // they continue work already admitted (a stream's next step).
  explicit WorkerPool(int threads, size_t max_queued = 0) : max_queued_(max_queued) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() { Stop(); }

  bool Post(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_) {
    return PostAfter(std::chrono::milliseconds(0), std::move(fn));
  }

  Admission Admit(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return Admission::kStopped;
    if (max_queued_ > 0 && ready_.size() >= max_queued_) return Admission::kFull;
    ready_.push_back(std::move(fn));
    cv_.Signal();
    return Admission::kQueued;
  }

  size_t max_queued() const { return max_queued_; }

  bool PostAfter(std::chrono::milliseconds delay, std::function<void()> fn)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    if (delay.count() <= 0) {
      ready_.push_back(std::move(fn));
    } else {
      delayed_.emplace(std::chrono::steady_clock::now() + delay, std::move(fn));
    }
    cv_.Signal();
    return true;
  }

  // Set before the server shuts down: streams finish at their next step.
  void BeginStopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

  // Runs delayed tasks immediately (so streams get their last step and
  // finish), then joins. Not from a pool thread.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopping_.store(true);
      draining_ = true;
      cv_.SignalAll();
    }
    for (std::thread& t : threads_) t.join();
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        if (!NextTaskLocked(&fn)) return;
      }
      fn();
    }
  }

  // Waits until a task is due and moves it to *fn; false once draining left
  // nothing to run.
  bool NextTaskLocked(std::function<void()>* fn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      while (!delayed_.empty() && (draining_ || delayed_.begin()->first <= now)) {
        ready_.push_back(std::move(delayed_.begin()->second));
        delayed_.erase(delayed_.begin());
      }
      if (!ready_.empty()) {
        *fn = std::move(ready_.front());
        ready_.pop_front();
        return true;
      }
      if (draining_) return false;
      if (delayed_.empty()) {
        cv_.Wait(&mu_);
      } else {
        cv_.WaitWithTimeout(&mu_, absl::FromChrono(delayed_.begin()->first - now));
      }
    }
  }

  const size_t max_queued_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // a task was posted, or draining began
  std::deque<std::function<void()>> ready_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> delayed_
      ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;  // set in the constructor, joined by Stop()
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_WORKER_POOL_H_
