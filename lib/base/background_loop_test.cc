// BackgroundLoop: passes repeat with the pause they ask for, Wake() cuts a
// pause short, Stop() is prompt even during a long pause, joins, runs
// at_exit once on the loop thread, and Start() after Stop() runs again.
#include "lib/base/background_loop.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace farm::base {
namespace {

// Polls `done` for up to 10 s (generous for a loaded machine).
template <typename Fn>
bool Eventually(Fn done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(BackgroundLoopTest, RepeatsPassesWithTheirPause) {
  std::atomic<int> passes{0};
  BackgroundLoop loop([&] {
    passes.fetch_add(1);
    return absl::Milliseconds(1);
  });
  loop.Start();
  EXPECT_TRUE(Eventually([&] { return passes.load() >= 5; }));
  loop.Stop();
  const int after_stop = passes.load();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(passes.load(), after_stop) << "no pass after Stop() returned";
}

TEST(BackgroundLoopTest, WakeEndsALongPause) {
  std::atomic<int> passes{0};
  BackgroundLoop loop([&] {
    passes.fetch_add(1);
    return absl::Hours(1);
  });
  loop.Start();
  ASSERT_TRUE(Eventually([&] { return passes.load() == 1; }));
  loop.Wake();
  EXPECT_TRUE(Eventually([&] { return passes.load() == 2; }));
}

TEST(BackgroundLoopTest, WakeDuringAPassRunsAnotherPass) {
  std::atomic<int> passes{0};
  absl::Notification in_pass, woken;
  BackgroundLoop loop([&] {
    if (passes.fetch_add(1) == 0) {
      in_pass.Notify();
      woken.WaitForNotification();
    }
    return absl::Hours(1);
  });
  loop.Start();
  in_pass.WaitForNotification();
  loop.Wake();
  woken.Notify();
  EXPECT_TRUE(Eventually([&] { return passes.load() == 2; }));
}

TEST(BackgroundLoopTest, StopIsPromptJoinsAndRunsAtExitOnce) {
  std::atomic<int> exits{0};
  std::thread::id pass_thread, exit_thread;
  absl::Notification ran;
  BackgroundLoop loop(
      [&] {
        pass_thread = std::this_thread::get_id();
        if (!ran.HasBeenNotified()) ran.Notify();
        return absl::Hours(1);
      },
      [&] {
        exit_thread = std::this_thread::get_id();
        exits.fetch_add(1);
      });
  loop.Start();
  ran.WaitForNotification();
  const absl::Time t0 = absl::Now();
  loop.Stop();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_EQ(exits.load(), 1);
  EXPECT_EQ(exit_thread, pass_thread);
  EXPECT_NE(exit_thread, std::this_thread::get_id());
  loop.Stop();
  EXPECT_EQ(exits.load(), 1) << "a second Stop() is a no-op";
}

TEST(BackgroundLoopTest, StoppingIsVisibleToALongPass) {
  absl::Notification in_pass;
  std::atomic<bool> saw_stop{false};
  BackgroundLoop* self = nullptr;
  BackgroundLoop loop([&] {
    in_pass.Notify();
    while (!self->stopping()) absl::SleepFor(absl::Milliseconds(1));
    saw_stop.store(true);
    return absl::ZeroDuration();
  });
  self = &loop;
  loop.Start();
  in_pass.WaitForNotification();
  loop.Stop();
  EXPECT_TRUE(saw_stop.load());
}

TEST(BackgroundLoopTest, StartAfterStopRunsAgain) {
  std::atomic<int> passes{0};
  BackgroundLoop loop([&] {
    passes.fetch_add(1);
    return absl::Hours(1);
  });
  loop.Start();
  ASSERT_TRUE(Eventually([&] { return passes.load() == 1; }));
  loop.Stop();
  loop.Start();
  EXPECT_TRUE(Eventually([&] { return passes.load() == 2; }));
}

}  // namespace
}  // namespace farm::base
