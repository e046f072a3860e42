#include "scheduler/worker_pool.h"

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace farm::scheduler {
namespace {

TEST(WorkerPoolTest, AdmitRefusesOnceTheQueueBoundIsReached) {
  WorkerPool pool(1, 2);
  absl::Notification running, release;
  ASSERT_EQ(pool.Admit([&] {
    running.Notify();
    release.WaitForNotification();
  }),
            WorkerPool::Admission::kQueued);
  running.WaitForNotification();  // the only thread is busy from here on
  int ran = 0;
  EXPECT_EQ(pool.Admit([&] { ++ran; }), WorkerPool::Admission::kQueued);
  EXPECT_EQ(pool.Admit([&] { ++ran; }), WorkerPool::Admission::kQueued);
  EXPECT_EQ(pool.Admit([&] { ++ran; }), WorkerPool::Admission::kFull);
  // Continuations of admitted work are never refused.
  EXPECT_TRUE(pool.Post([&] { ++ran; }));
  release.Notify();
  pool.Stop();
  EXPECT_EQ(ran, 3);
  EXPECT_EQ(pool.Admit([] {}), WorkerPool::Admission::kStopped);
}

TEST(WorkerPoolTest, UnboundedPoolAlwaysAdmits) {
  WorkerPool pool(1);
  absl::Notification release;
  ASSERT_EQ(pool.Admit([&] { release.WaitForNotification(); }), WorkerPool::Admission::kQueued);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(pool.Admit([] {}), WorkerPool::Admission::kQueued);
  release.Notify();
}

}  // namespace
}  // namespace farm::scheduler
