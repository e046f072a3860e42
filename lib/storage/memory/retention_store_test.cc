// Retention on the memory store: what a prune keeps (matrices a regression
// uses, the newest of each analyser series, kernel builds a queued job
// waits for, unfinished matrices), what goes, in how many transactions,
// and the raw-only prune that keeps samples.
#include "lib/storage/memory/memory_retention_store.h"

#include <string>

#include <gtest/gtest.h>

#include "lib/storage/contract/test_rows.h"
#include "lib/storage/memory/memory_store.h"

namespace farm::storage {
namespace {

constexpr int kJobs = 4;
constexpr size_t kRawBytes = 100;

class RetentionTest : public ::testing::Test {
 protected:
  // A matrix of kJobs bulk jobs (commits c0..c{kJobs-1}); finished at `at`
  // (each job succeeded with one result of two samples and kRawBytes of
  // raw output) unless `finish` is false (its jobs stay queued).
  int64_t AddMatrix(absl::Time at, const std::string& workload = "dma-map-bench",
                    bool finish = true, int jobs = kJobs) {
    NewMatrix m = testrows::Matrix(jobs, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
    for (pb::Job& j : m.jobs) j.mutable_workload()->set_name(workload);
    absl::StatusOr<CreatedMatrix> created = store_.CreateMatrix(m);
    EXPECT_TRUE(created.ok()) << created.status();
    const int64_t id = created->matrix.id();
    store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
      t.matrices[id].created_at = at - absl::Hours(1);
      for (auto& entry : t.jobs) {
        JobRow& row = entry.second;
        if (row.job.matrix_id() != id || !finish) continue;
        row.job.set_state(pb::JOB_STATE_SUCCEEDED);
        row.finished_at = at;
        ResultRow& r = t.results[{entry.first, 1}];
        r.matrix_id = id;
        for (const char* metric : {"throughput", "latency"}) {
          pb::Sample* s = r.samples.Add();
          s->set_metric(metric);
          s->set_value(1);
        }
        r.raw_output = std::string(kRawBytes, 'x');
        r.raw_format = "emu-json";
        r.finished_at = at;
      }
      return 0;
    });
    return id;
  }
  void AddRegression(int64_t matrix_id, const std::string& last_good,
                     const std::string& first_bad) {
    store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
      pb::Regression& g = t.regressions[++t.last_regression_id].regression;
      g.set_id(t.last_regression_id);
      g.set_matrix_id(matrix_id);
      g.set_catalog("c");
      g.set_platform("p");
      g.set_workload("dma-map-bench");
      g.set_last_good(last_good);
      g.set_first_bad(first_bad);
      return 0;
    });
  }
  bool Exists(int64_t matrix_id) { return store_.GetMatrix(matrix_id).ok(); }
  PruneOptions Options(bool dry_run, bool raw_only = false) {
    PruneOptions o;
    o.cutoff = now_ - absl::Hours(24 * 180);
    o.dry_run = dry_run;
    o.raw_only = raw_only;
    o.history_depth = 2;
    o.batch_jobs = kJobs;
    return o;
  }

  const absl::Time now_ = absl::FromUnixSeconds(1800000000);
  const absl::Time old_ = now_ - absl::Hours(24 * 365);
  MemoryStore store_;
  MemoryRetentionStore retention_{&store_.db()};
};

TEST_F(RetentionTest, KeepsWhatAnswersUseAndDeletesTheRestInBatches) {
  const int64_t m1 = AddMatrix(old_), m2 = AddMatrix(old_), m3 = AddMatrix(old_);
  const int64_t m4 = AddMatrix(old_), m5 = AddMatrix(old_);
  const int64_t recent = AddMatrix(now_ - absl::Hours(1));
  const int64_t running = AddMatrix(old_, "fio-nvme", /*finish=*/false);
  AddRegression(m2, "no-such-commit", "no-such-commit");

  absl::StatusOr<pb::PruneResponse> dry = retention_.Prune(Options(true));
  ASSERT_TRUE(dry.ok()) << dry.status();
  // Newest 2 of the series: `recent` (not old) and m5. m2: the regression's.
  EXPECT_EQ(dry->pruned().matrices(), 3);
  EXPECT_EQ(dry->pruned().jobs(), 3 * kJobs);
  EXPECT_EQ(dry->pruned().results(), 3 * kJobs);
  EXPECT_EQ(dry->pruned().samples(), 3 * kJobs * 2);
  EXPECT_EQ(dry->pruned().raw_outputs(), 3 * kJobs);
  EXPECT_EQ(dry->pruned().raw_bytes(), static_cast<int64_t>(3 * kJobs * kRawBytes));
  EXPECT_EQ(dry->kept_for_regressions(), 1);
  ASSERT_EQ(dry->kept_regression_matrices_size(), 1);
  EXPECT_EQ(dry->kept_regression_matrices(0), m2);
  EXPECT_EQ(dry->kept_for_history(), 1);
  EXPECT_EQ(dry->unfinished(), 1);
  EXPECT_EQ(dry->batches(), 0);
  for (int64_t id : {m1, m2, m3, m4, m5, recent, running}) EXPECT_TRUE(Exists(id)) << id;

  absl::StatusOr<pb::PruneResponse> real = retention_.Prune(Options(false));
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->pruned().SerializeAsString(), dry->pruned().SerializeAsString())
      << real->DebugString();
  EXPECT_EQ(real->batches(), 3);  // kJobs jobs per batch
  for (int64_t id : {m1, m3, m4}) EXPECT_FALSE(Exists(id)) << id;
  for (int64_t id : {m2, m5, recent, running}) EXPECT_TRUE(Exists(id)) << id;
  store_.db().Read([&](const MemoryDatabase::Tables& t) {
    EXPECT_EQ(t.jobs.size(), 4u * kJobs);
    EXPECT_EQ(t.results.size(), 3u * kJobs);  // the running matrix has none
    return 0;
  });

  absl::StatusOr<pb::PruneResponse> again = retention_.Prune(Options(false));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->pruned().matrices(), 0);
  EXPECT_EQ(again->batches(), 0);
}

TEST_F(RetentionTest, AMatrixMeasuringARegressionsCommitsIsKept) {
  // The regression's cell at c7 / c8: only the 9-commit matrix measured them.
  const int64_t wide = AddMatrix(old_, "dma-map-bench", true, 9);
  const int64_t narrow = AddMatrix(old_, "dma-map-bench", true, 2);
  AddRegression(0, "c7", "c8");
  for (int i = 0; i < 2; ++i) AddMatrix(old_ + absl::Hours(1));  // the series' newest two
  absl::StatusOr<pb::PruneResponse> r = retention_.Prune(Options(false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Exists(wide));
  EXPECT_FALSE(Exists(narrow));
  EXPECT_EQ(r->kept_for_regressions(), 1);
}

TEST_F(RetentionTest, EachSeriesKeepsItsNewest) {
  const int64_t a1 = AddMatrix(old_, "a"), a2 = AddMatrix(old_, "a"), a3 = AddMatrix(old_, "a");
  const int64_t b1 = AddMatrix(old_, "b");
  for (int i = 0; i < 2; ++i) AddMatrix(old_, "a");  // a's newest two
  absl::StatusOr<pb::PruneResponse> r = retention_.Prune(Options(false));
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t id : {a1, a2, a3}) EXPECT_FALSE(Exists(id)) << id;
  EXPECT_TRUE(Exists(b1));  // the only matrix of series b
  EXPECT_EQ(r->kept_for_history(), 3);
}

TEST_F(RetentionTest, AKernelBuildAQueuedJobWaitsForIsKept) {
  const int64_t build = AddMatrix(old_, "kbuild");
  for (int i = 0; i < 2; ++i) AddMatrix(old_, "kbuild");
  const int64_t waiting = AddMatrix(old_, "fio-nvme", /*finish=*/false);
  store_.db().Write([&](MemoryDatabase::Tables& t, MemoryDatabase::Changes&) {
    int64_t build_job = 0;
    for (auto& entry : t.jobs) {
      if (entry.second.job.matrix_id() == build) build_job = entry.first;
    }
    for (auto& entry : t.jobs) {
      if (entry.second.job.matrix_id() == waiting) entry.second.job.set_waits_for_job(build_job);
    }
    return 0;
  });
  absl::StatusOr<pb::PruneResponse> r = retention_.Prune(Options(false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Exists(build));
  EXPECT_EQ(r->kept_for_builds(), 1);
}

TEST_F(RetentionTest, RawOnlyKeepsSamplesAndSaysTheOutputWasPruned) {
  const int64_t m1 = AddMatrix(old_), m2 = AddMatrix(old_), m3 = AddMatrix(old_);
  const int64_t recent = AddMatrix(now_ - absl::Hours(1));
  AddRegression(m2, "no-such-commit", "no-such-commit");
  absl::StatusOr<pb::PruneResponse> r = retention_.Prune(Options(false, /*raw_only=*/true));
  ASSERT_TRUE(r.ok()) << r.status();
  // The history rule keeps rows, not raw output: m3 (a newest) loses it too.
  EXPECT_EQ(r->pruned().matrices(), 2);
  EXPECT_EQ(r->pruned().jobs(), 0);
  EXPECT_EQ(r->pruned().samples(), 0);
  EXPECT_EQ(r->pruned().raw_outputs(), 2 * kJobs);
  EXPECT_EQ(r->pruned().raw_bytes(), static_cast<int64_t>(2 * kJobs * kRawBytes));
  for (int64_t id : {m1, m2, m3, recent}) {
    absl::StatusOr<std::vector<pb::Result>> results = store_.ListResults(id, 0, 100, true, 0);
    ASSERT_TRUE(results.ok()) << results.status();
    ASSERT_EQ(results->size(), static_cast<size_t>(kJobs));
    const pb::Result& first = results->front();
    EXPECT_EQ(first.samples_size(), 2) << id;
    const bool pruned = id == m1 || id == m3;
    EXPECT_EQ(first.has_raw_pruned_at(), pruned) << id;
    EXPECT_EQ(first.raw_size(), pruned ? 0 : static_cast<int64_t>(kRawBytes)) << id;
    absl::StatusOr<RawOutputSlice> slice = store_.ReadRawOutput(first.job_id(), 0, 0, 10);
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(slice->raw_pruned_at.has_value(), pruned) << id;
  }
}

TEST(PlanPruneTest, BatchesNeverSplitAMatrix) {
  std::vector<MatrixRetentionFacts> facts;
  for (int64_t jobs : {3, 3, 10, 1, 1}) {
    MatrixRetentionFacts f;
    f.id = static_cast<int64_t>(facts.size()) + 1;
    f.finished = true;
    f.finished_at = absl::UnixEpoch();
    f.jobs = jobs;
    facts.push_back(f);
  }
  PruneOptions o;
  o.cutoff = absl::UnixEpoch() + absl::Hours(1);
  o.batch_jobs = 5;
  const PrunePlan plan = PlanPrune(facts, o);
  ASSERT_EQ(plan.batches.size(), 3u);
  EXPECT_EQ(plan.batches[0], (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(plan.batches[1], (std::vector<int64_t>{3}));
  EXPECT_EQ(plan.batches[2], (std::vector<int64_t>{4, 5}));
}

TEST(PlanPruneTest, RefusesOptionsThatCannotRun) {
  MemoryStore store;
  MemoryRetentionStore retention(&store.db());
  PruneOptions o;
  o.history_depth = 0;
  EXPECT_EQ(retention.Prune(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::storage
