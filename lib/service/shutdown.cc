#include "lib/service/shutdown.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace farm::service {

ShutdownSignals::ShutdownSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  thread_ = std::thread([this] { TakeSignals(); });
}

ShutdownSignals::~ShutdownSignals() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  // A signal aimed at the thread itself ends its sigwait; closing_ tells it
  // that this one is not a shutdown request.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void ShutdownSignals::TakeSignals() {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals_, &sig) != 0) continue;
    std::function<void(int)> on_stop;
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      if (signal_ != 0) {
        spdlog::warn("second signal {}: exiting now", sig);
        spdlog::default_logger()->flush();
        std::fflush(nullptr);
        // Threads inside abandoned work are not joined: the process ends.
        std::_Exit(0);
      }
      signal_ = sig;
      on_stop = std::move(on_stop_);
    }
    if (on_stop) on_stop(sig);
  }
}

void ShutdownSignals::OnStop(std::function<void(int)> on_stop) {
  int sig = 0;
  {
    absl::MutexLock lock(&mu_);
    sig = signal_;
    if (sig == 0) {
      on_stop_ = std::move(on_stop);
      return;
    }
  }
  on_stop(sig);
}

int ShutdownSignals::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* signal) { return *signal != 0; }, &signal_));
  return signal_;
}

bool ShutdownSignals::WaitFor(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](int* signal) { return *signal != 0; }, &signal_),
                              timeout);
}

bool ShutdownSignals::stop_requested() const {
  absl::MutexLock lock(&mu_);
  return signal_ != 0;
}

}  // namespace farm::service
