// The agent's lease loop end to end against the real scheduler gRPC services
// in-process (testing/memory_scheduler.h, in-memory repositories): jobs
// leased and reported, results that finish together sharing ReportResults
// calls, reports retried across a transient UNAVAILABLE and a scheduler
// restart, a stale report dropped, revoked or reaped leases dropped
// unreported, and a running job's progress sent with the heartbeats. The store's clock is a manual
// one, so no lease expires unless a test steps it; each test takes milliseconds to a second.
#include "agent/agent.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "testing/memory_scheduler.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

const char* const kCatalog = R"(
catalog: test-iommu
commits:
  - id: v5.10
    subject: "Linux 5.10"
  - id: v5.11
    subject: "Linux 5.11"
)";

// `repeats` jobs on one commit and mode.
std::string Spec(int repeats) {
  return absl::StrCat(R"(
name: agent-test
catalog: test-iommu
platform: intel-vtd-2s12c
commits: [v5.11]
modes: [strict]
workloads:
  - name: iozone-nfsrdma
    params: {threads: 2, tests: [write]}
repeats: )",
                      repeats, "\nexecutor: emulator\n");
}

// The emulator capability, run by the test: each job returns one sample at
// once, unless the test holds jobs back (Hold) until a number of them have
// started or until their lease is cancelled.
class TestExecutor final : public Executor {
 public:
  struct Control {
    absl::Mutex mu;
    int started ABSL_GUARDED_BY(mu) = 0;
    int finished ABSL_GUARDED_BY(mu) = 0;
    // A job returns once this many have started (0: at once).
    int release_at ABSL_GUARDED_BY(mu) = 0;
    // Attempts up to this one run until cancelled.
    int block_attempts ABSL_GUARDED_BY(mu) = 0;
    // Appended to each raw output (bytes a tool might print).
    std::string raw_suffix ABSL_GUARDED_BY(mu);
    // Non-empty: each job reports this phase as its progress when it starts.
    std::string progress_phase ABSL_GUARDED_BY(mu);
  };
  explicit TestExecutor(Control* control) : control_(control) {}

  std::string capability() const override { return "emulator"; }
  std::string version() const override { return "agent-test-1"; }
  absl::StatusOr<ExecutionResult> Run(const pb::Job& job, CancelToken& cancel) override {
    LeaseContext none;
    none.lease.set_attempt(1);
    return RunLeased(job, cancel, none);
  }
  absl::StatusOr<ExecutionResult> RunLeased(const pb::Job& job, CancelToken& cancel,
                                            const LeaseContext& lease) override {
    bool block;
    {
      absl::MutexLock lock(&control_->mu);
      ++control_->started;
      auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_->mu) {
        return control_->started >= control_->release_at;
      };
      // Bounded: a lost job must not hang the test.
      control_->mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(10));
      block = lease.lease.attempt() <= control_->block_attempts;
      if (!control_->progress_phase.empty() && lease.progress) {
        pb::JobProgress p;
        p.set_phase(control_->progress_phase);
        p.set_objects(job.id());
        lease.progress(p);
      }
    }
    if (block && cancel.SleepFor(absl::Seconds(10))) return absl::CancelledError("revoked");
    absl::MutexLock lock(&control_->mu);
    ++control_->finished;
    ExecutionResult r;
    pb::Sample s;
    s.set_metric("throughput");
    s.set_value(1.0 + static_cast<double>(job.id()));
    s.set_unit("ops/s");
    r.samples.push_back(s);
    r.raw_output = "raw-" + std::to_string(job.id()) + control_->raw_suffix;
    r.raw_format = "none";
    return r;
  }

 private:
  Control* const control_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::MemorySchedulerOptions options;
    options.config.lease_ttl = absl::Milliseconds(300);  // heartbeats every 100 ms
    options.config.retry.base_backoff = absl::Milliseconds(10);
    options.clock = [this] { return clock_.Now(); };
    auto started = testing::MemoryScheduler::Start(std::move(options));
    ASSERT_TRUE(started.ok()) << started.status();
    scheduler_ = *std::move(started);
    pb::LoadCatalogRequest req;
    req.set_yaml(kCatalog);
    req.set_source_name("test.yaml");
    ASSERT_TRUE(scheduler_->jobs().LoadCatalog(req).ok());
  }

  void TearDown() override {
    if (agent_ != nullptr) {
      agent_->Shutdown();
      run_.join();
    }
  }

  int64_t Submit(int repeats) {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(Spec(repeats));
    auto resp = scheduler_->jobs().SubmitMatrix(req, "tester");
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? resp->matrix().id() : 0;
  }

  void StartAgent(int slots) {
    AgentOptions opts;
    opts.client.server = scheduler_->address();
    opts.name = "agent-test";
    opts.slots = slots;
    opts.drain_timeout = absl::Milliseconds(500);
    opts.idle_poll = absl::Milliseconds(10);
    std::vector<std::unique_ptr<Executor>> executors;
    executors.push_back(std::make_unique<TestExecutor>(&control_));
    agent_ = std::make_unique<Agent>(opts, std::move(executors), nullptr);
    run_ = std::thread([this] { run_status_ = agent_->Run(); });
  }

  pb::MatrixCounts Counts(int64_t matrix_id) {
    pb::GetMatrixRequest req;
    req.set_matrix_id(matrix_id);
    auto m = scheduler_->jobs().GetMatrix(req);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? m->counts() : pb::MatrixCounts();
  }

  // Polls `done` every few milliseconds for up to `limit`.
  static bool Eventually(const std::function<bool()>& done,
                         absl::Duration limit = absl::Seconds(5)) {
    const absl::Time give_up = absl::Now() + limit;
    while (!done()) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  // The scheduler stored `succeeded` results and the agent has counted them
  // (it counts once the report call returned, a moment after the store).
  bool MatrixDone(int64_t matrix_id, int64_t succeeded) {
    return Eventually([&] {
      return Counts(matrix_id).succeeded() == succeeded && agent_->stats().succeeded == succeeded;
    });
  }

  int Started() {
    absl::MutexLock lock(&control_.mu);
    return control_.started;
  }

  testing::ManualClock clock_;
  std::unique_ptr<testing::MemoryScheduler> scheduler_;
  TestExecutor::Control control_;
  std::unique_ptr<Agent> agent_;
  std::thread run_;
  absl::Status run_status_;
};

TEST_F(AgentTest, LeasesRunsAndReportsEveryJobOnce) {
  const int64_t mid = Submit(6);
  StartAgent(2);
  ASSERT_TRUE(MatrixDone(mid, 6)) << Counts(mid).ShortDebugString();
  EXPECT_EQ(Started(), 6);  // none ran twice
  auto results = scheduler_->store().ListResults(mid, 0, 100, true, 1 << 20);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 6u);
  for (const pb::Result& r : *results) {
    EXPECT_EQ(r.raw_output(), "raw-" + std::to_string(r.job_id()));
    EXPECT_EQ(r.attempt(), 1);
  }
  EXPECT_EQ(agent_->stats().succeeded, 6);
  EXPECT_EQ(agent_->stats().registrations, 1);
  agent_->Shutdown();
  run_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_;
  agent_.reset();
}

TEST_F(AgentTest, ResultsFinishedTogetherShareReportResultsCalls) {
  constexpr int kJobs = 8;
  {
    absl::MutexLock lock(&control_.mu);
    control_.release_at = kJobs;  // all eight return at once
  }
  const int64_t mid = Submit(kJobs);
  StartAgent(kJobs);
  ASSERT_TRUE(MatrixDone(mid, kJobs)) << Counts(mid).ShortDebugString();
  const std::vector<int> batches = scheduler_->report_batches();
  int results = 0, largest = 0;
  for (int n : batches) {
    results += n;
    largest = std::max(largest, n);
  }
  EXPECT_EQ(results, kJobs);
  EXPECT_GT(largest, 1) << "no two results shared a call";
  EXPECT_LT(agent_->stats().report_calls, kJobs);
  EXPECT_EQ(agent_->stats().report_calls, static_cast<int64_t>(batches.size()));
  EXPECT_EQ(agent_->stats().succeeded, kJobs);
}

TEST_F(AgentTest, ReportIsRetriedAfterATransientUnavailable) {
  scheduler_->FailNext("ReportResults", 2, grpc::StatusCode::UNAVAILABLE);
  const int64_t mid = Submit(1);
  StartAgent(1);
  ASSERT_TRUE(MatrixDone(mid, 1)) << Counts(mid).ShortDebugString();
  EXPECT_EQ(agent_->stats().report_calls, 3);  // two refused, the third stored
  EXPECT_EQ(scheduler_->report_batches().size(), 1u);
  EXPECT_EQ(agent_->stats().succeeded, 1);
  EXPECT_EQ(Started(), 1);
}

TEST_F(AgentTest, ReportWaitsOutASchedulerRestartOnTheSamePort) {
  {
    absl::MutexLock lock(&control_.mu);
    control_.release_at = 2;  // the job waits until the test lets it go
  }
  const int64_t mid = Submit(1);
  StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return Started() == 1; }));
  scheduler_->Stop();
  {
    absl::MutexLock lock(&control_.mu);
    control_.release_at = 0;
  }
  // The report meets no server; the agent backs off and tries again.
  ASSERT_TRUE(Eventually([&] { return agent_->stats().report_calls >= 1; }));
  absl::SleepFor(absl::Milliseconds(150));
  EXPECT_EQ(agent_->stats().succeeded, 0);
  ASSERT_TRUE(scheduler_->Restart().ok());
  ASSERT_TRUE(MatrixDone(mid, 1)) << Counts(mid).ShortDebugString();
  EXPECT_EQ(agent_->stats().succeeded, 1);
  EXPECT_EQ(agent_->stats().registrations, 1);  // the session survived the restart
  EXPECT_EQ(Started(), 1);
}

// gRPC answers UNIMPLEMENTED for a request it cannot parse as well as for
// a method it lacks: one such answer sends a few results singly, then the
// agent batches again.
TEST_F(AgentTest, BatchingResumesAfterAnUnimplementedReportResults) {
  scheduler_->FailNext("ReportResults", 1, grpc::StatusCode::UNIMPLEMENTED);
  constexpr int kJobs = ReportBatcher::kSingleReports + 4;
  const int64_t mid = Submit(kJobs);
  StartAgent(1);  // one result at a time: each call carries one
  ASSERT_TRUE(MatrixDone(mid, kJobs)) << Counts(mid).ShortDebugString();
  EXPECT_EQ(scheduler_->report_batches().size(), 4u);  // the results after the single ones
  EXPECT_EQ(agent_->stats().report_calls, 1 + ReportBatcher::kSingleReports + 4);
  EXPECT_EQ(Started(), kJobs);
}

// Bytes that are not UTF-8 in a tool's output would make the report
// unparseable to the scheduler; they are stored as U+FFFD instead.
TEST_F(AgentTest, InvalidUtf8InAToolsOutputIsStoredAsReplacementCharacters) {
  {
    absl::MutexLock lock(&control_.mu);
    control_.raw_suffix = " dev\xB5";  // a Latin-1 byte
  }
  const int64_t mid = Submit(3);
  StartAgent(1);
  ASSERT_TRUE(MatrixDone(mid, 3)) << Counts(mid).ShortDebugString();
  auto results = scheduler_->store().ListResults(mid, 0, 100, true, 1 << 20);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  for (const pb::Result& r : *results) {
    EXPECT_EQ(r.raw_output(), "raw-" + std::to_string(r.job_id()) + " dev\xEF\xBF\xBD");
  }
  EXPECT_EQ(scheduler_->report_batches().size(), 3u);  // every call a ReportResults
}

TEST_F(AgentTest, StaleReportIsDroppedNotRetried) {
  scheduler_->FailNext("ReportResults", 1, grpc::StatusCode::FAILED_PRECONDITION);
  const int64_t mid = Submit(1);
  StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return agent_->stats().stale == 1; }));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(agent_->stats().report_calls, 1);
  EXPECT_EQ(agent_->stats().succeeded, 0);
  EXPECT_TRUE(scheduler_->report_batches().empty());
  EXPECT_EQ(Counts(mid).succeeded(), 0);
}

TEST_F(AgentTest, RevokedLeaseIsDroppedNotReported) {
  {
    absl::MutexLock lock(&control_.mu);
    control_.block_attempts = 1;
  }
  const int64_t mid = Submit(1);
  StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return Started() == 1; }));
  pb::CancelMatrixRequest cancel;
  cancel.set_matrix_id(mid);
  ASSERT_TRUE(
      scheduler_->jobs().CancelMatrix(cancel, {"tester", scheduler::Role::kSubmitter}).ok());
  // The next heartbeat names the lease revoked; the running job is cancelled.
  ASSERT_TRUE(Eventually([&] { return agent_->stats().revoked == 1; }));
  EXPECT_EQ(agent_->stats().succeeded, 0);
  EXPECT_EQ(agent_->stats().failed, 0);
  EXPECT_TRUE(scheduler_->report_batches().empty());
  EXPECT_EQ(agent_->stats().report_calls, 0);
}

// What a running job reports through LeaseContext.progress reaches the
// scheduler with the next heartbeat and is kept on the job, for its attempt.
TEST_F(AgentTest, ARunningJobsProgressGoesOutWithTheHeartbeat) {
  {
    absl::MutexLock lock(&control_.mu);
    control_.block_attempts = 1;
    control_.progress_phase = "compile";
  }
  const int64_t mid = Submit(1);
  StartAgent(1);
  std::vector<pb::JobProgress> building;
  ASSERT_TRUE(Eventually([&] {
    auto got = scheduler_->store().ListBuilding(mid);
    if (got.ok()) building = *got;
    return got.ok() && !building.empty();
  }));
  ASSERT_EQ(building.size(), 1u);
  EXPECT_EQ(building[0].phase(), "compile");
  EXPECT_EQ(building[0].attempt(), 1);
  EXPECT_EQ(building[0].objects(), building[0].job_id());
  EXPECT_EQ(building[0].commit_id(), "v5.11");
}

TEST_F(AgentTest, ReapedLeaseIsDroppedAndTheNextAttemptReported) {
  {
    absl::MutexLock lock(&control_.mu);
    control_.block_attempts = 1;
  }
  const int64_t mid = Submit(1);
  StartAgent(1);
  ASSERT_TRUE(Eventually([&] { return Started() == 1; }));
  // Expire the lease on the store's clock and reap it; a heartbeat between
  // the two extends the lease again, so step until a reap takes it.
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Seconds(10));
    auto reaped = scheduler_->reaper().RunOnce();
    return reaped.ok() && reaped->requeued + reaped->failed > 0;
  }));
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Seconds(1));  // past the retry backoff
    return Counts(mid).succeeded() == 1 && agent_->stats().succeeded == 1;
  })) << Counts(mid).ShortDebugString();
  EXPECT_EQ(agent_->stats().revoked, 1);
  EXPECT_EQ(agent_->stats().succeeded, 1);
  EXPECT_EQ(Started(), 2);
  auto results = scheduler_->store().ListResults(mid, 0, 10, false, 0);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ((*results)[0].attempt(), 2);
}

}  // namespace
}  // namespace farm::agent
