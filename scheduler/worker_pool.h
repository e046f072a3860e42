// WorkerPool: a fixed set of threads running posted tasks, plus delayed
// tasks. The gRPC adapters hand every blocking (database) call to it so
// gRPC's callback threads never block on PostgreSQL.
//
// Contract: thread-safe. Stop() runs what is already due, drops delayed
// tasks that are not due, and joins the threads; Post() after Stop() runs
// nothing and returns false. stopping() lets long-lived work (streams)
// notice shutdown. Tasks must not throw.
#ifndef SCHEDULER_WORKER_POOL_H_
#define SCHEDULER_WORKER_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace farm::scheduler {

class WorkerPool final {
 public:
  explicit WorkerPool(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() { Stop(); }

  bool Post(std::function<void()> fn) {
    return PostAfter(std::chrono::milliseconds(0), std::move(fn));
  }

  bool PostAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return false;
    if (delay.count() <= 0) {
      ready_.push_back(std::move(fn));
    } else {
      delayed_.emplace(std::chrono::steady_clock::now() + delay, std::move(fn));
    }
    cv_.notify_one();
    return true;
  }

  // Set before the server shuts down: streams finish at their next step.
  void BeginStopping() { stopping_.store(true); }
  bool stopping() const { return stopping_.load(); }

  // Runs delayed tasks immediately (so streams get their last step and
  // finish), then joins.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopping_.store(true);
      draining_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      while (!delayed_.empty() && (draining_ || delayed_.begin()->first <= now)) {
        ready_.push_back(std::move(delayed_.begin()->second));
        delayed_.erase(delayed_.begin());
      }
      if (!ready_.empty()) {
        std::function<void()> fn = std::move(ready_.front());
        ready_.pop_front();
        lock.unlock();
        fn();
        lock.lock();
        continue;
      }
      if (draining_) return;
      if (delayed_.empty()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, delayed_.begin()->first);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> ready_;  // guarded by mu_
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>>
      delayed_;            // guarded by mu_
  bool draining_ = false;  // guarded by mu_
  bool stopped_ = false;   // guarded by mu_
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_WORKER_POOL_H_
