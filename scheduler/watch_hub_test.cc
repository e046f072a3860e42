// WatchHub over the in-memory repositories
// (lib/storage/memory/memory_store.h): the streams of one matrix share its
// reads (counted, not timed), a stream that joins late is handed the newest
// read at once, change events wake one read for all, the caps refuse the next
// stream, the last stream to leave stops the reads, a read refused for good
// is not repeated.
#include "scheduler/watch_hub.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "lib/metrics/metrics.h"
#include "lib/storage/memory/memory_store.h"
#include "scheduler/scheduler_service.h"

namespace farm::scheduler {
namespace {

// The principal the tests submit as.
const Principal kOwner{"tester", Role::kSubmitter};

const char* const kCatalog = R"(
catalog: hub-test
commits:
  - id: v5.10
    subject: "Linux 5.10"
  - id: v5.11
    subject: "Linux 5.11"
)";

// 2 commits x 1 mode x 2 repeats = 4 jobs.
const char* const kSpec = R"(
name: hub-test
catalog: hub-test
platform: intel-vtd-2s12c
commits: v5.10..v5.11
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.01}
repeats: 2
executor: emulator
)";

// What one stream was handed.
class Collector {
 public:
  WatchHub::Sink Sink() {
    return [this](std::shared_ptr<const WatchUpdate> u) {
      absl::MutexLock lock(&mu_);
      updates_.push_back(std::move(u));
    };
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return updates_.size();
  }
  std::shared_ptr<const WatchUpdate> last() {
    absl::MutexLock lock(&mu_);
    return updates_.empty() ? nullptr : updates_.back();
  }
  // Polls (the hub runs on its own threads) with a bound far above need.
  bool WaitFor(
      const std::function<bool(const std::vector<std::shared_ptr<const WatchUpdate>>&)>& ok) {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      {
        absl::MutexLock lock(&mu_);
        if (ok(updates_)) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }
  bool WaitForCount(size_t n) {
    return WaitFor([n](const auto& u) { return u.size() >= n; });
  }

 private:
  absl::Mutex mu_;
  std::vector<std::shared_ptr<const WatchUpdate>> updates_ ABSL_GUARDED_BY(mu_);
};

class WatchHubTest : public ::testing::Test {
 protected:
  WatchHubTest()
      : metrics_(registry_.registry()),
        jobs_(&store_, &store_, &store_, &metrics_, SchedulerConfig()),
        agents_(&store_, &metrics_, SchedulerConfig()) {}

  void SetUp() override {
    pb::LoadCatalogRequest lc;
    lc.set_yaml(kCatalog);
    ASSERT_TRUE(jobs_.LoadCatalog(lc).ok());
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(kSpec);
    absl::StatusOr<pb::SubmitMatrixResponse> sub = jobs_.SubmitMatrix(req, "tester");
    ASSERT_TRUE(sub.ok()) << sub.status();
    matrix_ = sub->matrix().id();
  }

  // A hub reading the memory store, counting its reads.
  std::unique_ptr<WatchHub> Hub(WatchOptions o, storage::MatrixEvents* events = nullptr) {
    return std::make_unique<WatchHub>(
        [this](int64_t id) {
          reads_.fetch_add(1);
          pb::GetMatrixRequest r;
          r.set_matrix_id(id);
          return jobs_.GetMatrix(r);
        },
        &pool_, events, o);
  }

  // Every task posted to the pool so far (without delay) has run.
  void DrainPool() {
    absl::Notification ran;
    pool_.Post([&ran] { ran.Notify(); });
    ran.WaitForNotification();
  }

  storage::MemoryStore store_;
  metrics::MetricsRegistry registry_;
  metrics::SchedulerMetrics metrics_;
  JobService jobs_;
  AgentService agents_;
  WorkerPool pool_{1};  // one thread: tasks run in the order they are due
  std::atomic<int64_t> reads_{0};
  int64_t matrix_ = 0;
};

TEST_F(WatchHubTest, ManyStreamsOfOneMatrixCostOneReadPerTick) {
  WatchOptions o;
  o.fallback_poll = absl::Milliseconds(20);
  std::unique_ptr<WatchHub> hub = Hub(o);
  constexpr int kStreams = 50;
  std::vector<Collector> streams(kStreams);
  std::vector<WatchHub::Handle> handles;
  for (Collector& c : streams) {
    absl::StatusOr<WatchHub::Handle> h = hub->Join(matrix_, "viewer", c.Sink());
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
  EXPECT_EQ(hub->stats().streams.load(), kStreams);
  EXPECT_EQ(hub->stats().matrices.load(), 1);
  // Five fallback ticks seen by the last stream to join.
  ASSERT_TRUE(streams.back().WaitForCount(6));
  for (WatchHub::Handle h : handles) hub->Leave(h);
  const size_t first = streams.front().size();
  for (Collector& c : streams) {
    ASSERT_NE(c.last(), nullptr);
    ASSERT_TRUE(c.last()->matrix.ok()) << c.last()->matrix.status();
    EXPECT_EQ(c.last()->matrix->counts().queued(), 4);
  }
  // Every read went to every stream there: the first stream saw them all
  // (one more may have been running when it left); per-stream reads would
  // be kStreams times as many.
  const int64_t reads = reads_.load();
  EXPECT_GE(reads, 6);
  EXPECT_LE(reads, static_cast<int64_t>(first) + 1);
  EXPECT_EQ(hub->stats().wake_reads.load() + hub->stats().fallback_reads.load(), reads);
  EXPECT_EQ(hub->stats().streams.load(), 0);
  EXPECT_EQ(hub->stats().matrices.load(), 0);
  pool_.Stop();
}

TEST_F(WatchHubTest, ALateStreamIsHandedTheNewestReadAtOnce) {
  WatchOptions o;
  o.fallback_poll = absl::Hours(1);
  std::unique_ptr<WatchHub> hub = Hub(o);
  Collector a, b;
  absl::StatusOr<WatchHub::Handle> ha = hub->Join(matrix_, "viewer", a.Sink());
  ASSERT_TRUE(ha.ok());
  ASSERT_TRUE(a.WaitForCount(1));
  absl::StatusOr<WatchHub::Handle> hb = hub->Join(matrix_, "other", b.Sink());
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(b.size(), 1u);  // in Join, from the read `a` saw
  EXPECT_EQ(b.last(), a.last());
  EXPECT_EQ(reads_.load(), 1);
  hub->Leave(*ha);
  hub->Leave(*hb);
  pool_.Stop();
}

TEST_F(WatchHubTest, AChangeWakesOneReadForEveryStream) {
  WatchOptions o;
  o.fallback_poll = absl::Hours(1);  // every read after the first is a wake-up's
  std::unique_ptr<WatchHub> hub = Hub(o, store_.events());
  std::vector<Collector> streams(10);
  std::vector<WatchHub::Handle> handles;
  for (Collector& c : streams) {
    absl::StatusOr<WatchHub::Handle> h = hub->Join(matrix_, "viewer", c.Sink());
    ASSERT_TRUE(h.ok());
    handles.push_back(*h);
  }
  for (Collector& c : streams) ASSERT_TRUE(c.WaitForCount(1));
  pb::CancelMatrixRequest cancel;
  cancel.set_matrix_id(matrix_);
  ASSERT_TRUE(jobs_.CancelMatrix(cancel, kOwner).ok());
  for (Collector& c : streams) {
    ASSERT_TRUE(c.WaitFor([](const auto& u) {
      return u.back()->matrix.ok() && u.back()->matrix->state() == pb::MATRIX_STATE_CANCELLED;
    }));
  }
  EXPECT_EQ(hub->stats().fallback_reads.load(), 0);
  // The first read and the cancel's (its job updates coalesce within
  // min_interval, or cost one more read at most), for ten streams.
  EXPECT_GE(hub->stats().wake_reads.load(), 2);
  EXPECT_LE(hub->stats().wake_reads.load(), 3);
  // A finished matrix is not read again, notified or not.
  const int64_t reads = reads_.load();
  ASSERT_TRUE(jobs_.CancelMatrix(cancel, kOwner).ok());
  absl::SleepFor(o.min_interval * 2);  // room for a read that must not happen
  DrainPool();
  EXPECT_EQ(reads_.load(), reads);
  for (WatchHub::Handle h : handles) hub->Leave(h);
  pool_.Stop();
}

TEST_F(WatchHubTest, CapsRefuseTheNextStream) {
  WatchOptions o;
  o.fallback_poll = absl::Hours(1);
  o.max_streams = 3;
  o.max_streams_per_principal = 2;
  std::unique_ptr<WatchHub> hub = Hub(o);
  Collector c;
  absl::StatusOr<WatchHub::Handle> a1 = hub->Join(matrix_, "alice", c.Sink());
  absl::StatusOr<WatchHub::Handle> a2 = hub->Join(matrix_ + 1000, "alice", c.Sink());
  ASSERT_TRUE(a1.ok());
  ASSERT_TRUE(a2.ok());
  absl::StatusOr<WatchHub::Handle> a3 = hub->Join(matrix_, "alice", c.Sink());
  EXPECT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a3.status().message().find("principal \"alice\" has its limit of 2"), std::string::npos)
      << a3.status();
  absl::StatusOr<WatchHub::Handle> b1 = hub->Join(matrix_, "bob", c.Sink());
  ASSERT_TRUE(b1.ok());
  absl::StatusOr<WatchHub::Handle> c1 = hub->Join(matrix_, "carol", c.Sink());
  EXPECT_EQ(c1.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c1.status().message().find("limit of 3"), std::string::npos) << c1.status();
  EXPECT_EQ(hub->stats().refused.load(), 2);
  EXPECT_EQ(hub->stats().streams.load(), 3);
  EXPECT_EQ(hub->stats().matrices.load(), 2);
  // A place freed is a place taken.
  hub->Leave(*a1);
  absl::StatusOr<WatchHub::Handle> c2 = hub->Join(matrix_, "carol", c.Sink());
  ASSERT_TRUE(c2.ok()) << c2.status();
  absl::StatusOr<WatchHub::Handle> a4 = hub->Join(matrix_, "alice", c.Sink());
  EXPECT_EQ(a4.status().code(), absl::StatusCode::kResourceExhausted);
  for (auto* h : {&a2, &b1, &c2}) hub->Leave(**h);
  EXPECT_EQ(hub->stats().streams.load(), 0);
  pool_.Stop();
}

TEST_F(WatchHubTest, TheLastStreamToLeaveStopsTheReads) {
  WatchOptions o;
  o.fallback_poll = absl::Hours(1);
  o.min_interval = absl::ZeroDuration();  // a wake-up would post its read at once
  std::unique_ptr<WatchHub> hub = Hub(o, store_.events());
  Collector a, b;
  absl::StatusOr<WatchHub::Handle> ha = hub->Join(matrix_, "viewer", a.Sink());
  absl::StatusOr<WatchHub::Handle> hb = hub->Join(matrix_, "viewer", b.Sink());
  ASSERT_TRUE(ha.ok() && hb.ok());
  ASSERT_TRUE(a.WaitForCount(1));
  ASSERT_TRUE(b.WaitForCount(1));
  hub->Leave(*ha);
  hub->Leave(*hb);
  EXPECT_EQ(hub->stats().matrices.load(), 0);
  const int64_t reads = reads_.load();
  pb::CancelMatrixRequest cancel;
  cancel.set_matrix_id(matrix_);
  ASSERT_TRUE(jobs_.CancelMatrix(cancel, kOwner).ok());  // notifies nobody now
  DrainPool();
  EXPECT_EQ(reads_.load(), reads);
  EXPECT_EQ(a.size(), 1u);
  pool_.Stop();
}

TEST_F(WatchHubTest, AReadRefusedForGoodIsNotRepeatedUntilAStreamJoins) {
  WatchOptions o;
  o.fallback_poll = absl::Milliseconds(1);  // would spin if it read again
  std::unique_ptr<WatchHub> hub = Hub(o);
  Collector a, b;
  absl::StatusOr<WatchHub::Handle> ha = hub->Join(matrix_ + 1000, "viewer", a.Sink());
  ASSERT_TRUE(ha.ok());
  ASSERT_TRUE(a.WaitForCount(1));
  EXPECT_EQ(a.last()->matrix.status().code(), absl::StatusCode::kNotFound);
  absl::SleepFor(absl::Milliseconds(50));  // room for reads that must not happen
  DrainPool();
  EXPECT_EQ(reads_.load(), 1);
  absl::StatusOr<WatchHub::Handle> hb = hub->Join(matrix_ + 1000, "viewer", b.Sink());
  ASSERT_TRUE(hb.ok());
  ASSERT_TRUE(b.WaitForCount(1));
  EXPECT_EQ(reads_.load(), 2);
  hub->Leave(*ha);
  hub->Leave(*hb);
  pool_.Stop();
}

TEST_F(WatchHubTest, NoStreamJoinsOnceThePoolStops) {
  std::unique_ptr<WatchHub> hub = Hub(WatchOptions());
  pool_.BeginStopping();
  Collector c;
  EXPECT_EQ(hub->Join(matrix_, "viewer", c.Sink()).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(hub->stats().streams.load(), 0);
  pool_.Stop();
}

}  // namespace
}  // namespace farm::scheduler
