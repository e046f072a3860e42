#include "lib/service/shutdown.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/synchronization/notification.h"

namespace farm::service {
namespace {

TEST(ShutdownSignalsTest, NoSignalNoStop) {
  ShutdownSignals signals;
  EXPECT_FALSE(signals.stop_requested());
  EXPECT_FALSE(signals.WaitFor(absl::Milliseconds(20)));
}

TEST(ShutdownSignalsTest, WaitReturnsTheSignal) {
  ShutdownSignals signals;
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_EQ(signals.Wait(), SIGTERM);
  EXPECT_TRUE(signals.stop_requested());
  EXPECT_TRUE(signals.WaitFor(absl::ZeroDuration()));
}

TEST(ShutdownSignalsTest, OnStopRunsOnTheFirstSignal) {
  ShutdownSignals signals;
  absl::Notification stopped;
  std::atomic<int> seen{0};
  signals.OnStop([&](int sig) {
    seen = sig;
    stopped.Notify();
  });
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  ASSERT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(seen.load(), SIGINT);
}

TEST(ShutdownSignalsTest, OnStopAfterTheSignalRunsAtOnce) {
  ShutdownSignals signals;
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  signals.Wait();
  int seen = 0;
  signals.OnStop([&](int sig) { seen = sig; });
  EXPECT_EQ(seen, SIGTERM);
}

TEST(ShutdownSignalsDeathTest, SecondSignalExitsAtOnce) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        spdlog::set_default_logger(spdlog::stderr_color_mt("shutdown-test"));
        ShutdownSignals signals;
        // A stop that never finishes: only the second signal can end it.
        signals.OnStop([](int) {});
        ::kill(::getpid(), SIGTERM);
        signals.Wait();
        ::kill(::getpid(), SIGTERM);
        ::pause();
      },
      testing::ExitedWithCode(0), "second signal");
}

}  // namespace
}  // namespace farm::service
