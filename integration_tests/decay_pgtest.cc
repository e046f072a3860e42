// A long emulator run whose IOVA allocator ages raises a `decay` finding and
// a steady one does not: a real farm (PostgreSQL, the scheduler in-process,
// a farm-agent child running the emulator) runs dma-map-bench for one
// virtual second with and without `aging` (docs/emulator.md "Aging"), the
// runs' throughput per interval is stored with their samples, and one pass
// of the analyzer over the matrix records the decay of the aging cell only:
// in the regressions table (kind decay, confirmed, the fall as magnitude),
// through the AnalysisService as farmctl reads it, and as an alert.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "services/analyzer/analyzer.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

// One commit the agent's own catalog (linux-iommu) lacks, so it runs the
// keys the scheduler resolved for it.
const char* const kCatalog = R"(
catalog: decay-test
commits:
  - id: d000001
    subject: "base"
)";

// One virtual second of strict 512 KiB mappings (above the largest size
// the rcache caches, so every one walks the rbtree), two threads; the aging
// cell adds 30,000 long-lived half-size mappings per thread over the run.
const char* const kSpec = R"(name: decay-test
catalog: decay-test
platform: intel-vtd-2s12c
commits: [d000001]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 2, seconds: 1, granule: 128}
  - name: dma-map-bench
    params: {threads: 2, seconds: 1, granule: 128, aging: 30000}
executor: emulator
seed: 11
repeats: 2
)";

class CapturingSink final : public analyzer::AlertSink {
 public:
  absl::Status Post(const std::vector<analyzer::Alert>& alerts) override {
    absl::MutexLock l(&mu_);
    posted_.insert(posted_.end(), alerts.begin(), alerts.end());
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> CreateSilence(const analyzer::Silence&) override {
    return std::string("s1");
  }
  absl::Status ExpireSilence(const std::string&) override { return absl::OkStatus(); }
  std::vector<analyzer::Alert> posted() {
    absl::MutexLock l(&mu_);
    return posted_;
  }

 private:
  absl::Mutex mu_;
  std::vector<analyzer::Alert> posted_ ABSL_GUARDED_BY(mu_);
};

// Never called: a matrix of one commit has nothing to top up or bisect.
class NoSubmitter final : public analyzer::JobSubmitter {
 public:
  absl::StatusOr<int64_t> Submit(const pb::MatrixSpec&, const std::string& key) override {
    ADD_FAILURE() << "unexpected submission " << key;
    return absl::FailedPreconditionError("no submissions in this test");
  }
};

class DecayPgTest : public testing::FarmTest {};

TEST_F(DecayPgTest, AnAgingAllocatorDecaysAndASteadyOneDoesNot) {
  StartScheduler(testing::FarmMode::kPlaintext);
  ASSERT_FALSE(HasFatalFailure());
  LoadCatalog(kCatalog);
  absl::Status up;
  auto agent = StartAgent({.name = "decay-agent", .slots = 2}, &up);
  ASSERT_TRUE(up.ok()) << up;
  const int64_t matrix = Submit(kSpec, Client());
  ASSERT_GT(matrix, 0);
  const std::string jobs = absl::StrCat("FROM jobs WHERE matrix_id = ", matrix);
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while (Sql(absl::StrCat("SELECT count(*) ", jobs, " AND state IN (1, 2)")) > 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  ASSERT_EQ(Sql(absl::StrCat("SELECT count(*) ", jobs, " AND state = 3")), 4)
      << SqlText(absl::StrCat("SELECT string_agg(failure_reason, '; ') ", jobs));

  // Every run's throughput sample carries its series: 20 intervals.
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM result_samples s JOIN jobs j ON j.id = s.job_id "
                             "WHERE j.matrix_id = ",
                             matrix,
                             " AND s.metric = 'throughput' "
                             "AND jsonb_array_length(s.series->'intervals') = 20")),
            4);

  storage::PgPool pool(storage::PgPoolOptions{DbUri(), 2, 5});
  std::unique_ptr<storage::AnalyzerStore> store = storage::NewPgAnalyzerStore(&pool);
  NoSubmitter submitter;
  CapturingSink sink;
  analyzer::Analyzer a(store.get(), &submitter, &sink, {}, analyzer::AnalyzerOptions{});
  ASSERT_TRUE(a.Tick().ok());
  EXPECT_EQ(a.matrices_analyzed(), 1);

  // One regression: the aging cell's decay. The steady cell raised nothing.
  EXPECT_EQ(Sql("SELECT count(*) FROM regressions"), 1) << SqlText(
      "SELECT string_agg(kind || ' ' || params::text || ' ' || note, '; ') "
      "FROM regressions");
  EXPECT_EQ(SqlText("SELECT kind FROM regressions"), "decay");
  EXPECT_EQ(SqlText("SELECT params->>'aging' FROM regressions"), "30000");
  EXPECT_EQ(SqlText("SELECT metric FROM regressions"), "throughput");
  EXPECT_EQ(Sql("SELECT state FROM regressions"),
            static_cast<int64_t>(pb::REGRESSION_STATE_CONFIRMED));
  EXPECT_EQ(SqlText("SELECT first_bad FROM regressions"), "d000001");
  EXPECT_EQ(SqlText("SELECT state FROM bisects"), "done");
  EXPECT_EQ(Sql("SELECT count(*) FROM regressions WHERE magnitude < -0.05"), 1)
      << SqlText("SELECT magnitude::text FROM regressions");

  // What farmctl regressions reads.
  pb::ListRegressionsRequest lr;
  pb::ListRegressionsResponse list;
  ASSERT_TRUE(Call(Client(), "/iommufarm.v1.AnalysisService/ListRegressions", lr, &list).ok());
  ASSERT_EQ(list.regressions_size(), 1);
  const pb::Regression& r = list.regressions(0);
  EXPECT_EQ(r.kind(), "decay");
  EXPECT_EQ(r.params().at("aging"), "30000");
  EXPECT_NE(r.note().find("decay within runs: throughput fell"), std::string::npos) << r.note();
  std::cout << "decay: " << r.magnitude() << " p=" << r.p_value() << "\n" << r.note() << "\n";

  // And the alert.
  const std::vector<analyzer::Alert> alerts = sink.posted();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].labels.at("kind"), "decay");
  EXPECT_EQ(alerts[0].labels.at("alert_group"), "decay:d000001");
  EXPECT_EQ(alerts[0].labels.at("params"), "aging=30000,granule=128,seconds=1,threads=2");
  EXPECT_NE(alerts[0].annotations.at("summary").find("within each run at d000001"),
            std::string::npos)
      << alerts[0].annotations.at("summary");
}

}  // namespace
}  // namespace farm
