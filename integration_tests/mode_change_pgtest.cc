// A commit that changes which IOMMU mode its kernel really runs, end to end:
// real PostgreSQL, the real scheduler (in-process), a spawned farm-agent
// running the emulator, the analyzer (in-process, over the PostgreSQL store),
// a real Alertmanager and the farmctl binary.
//
// The test catalog's commit m05 sets fq.init_fails (the lazy DMA domain's
// flush queue cannot be set up, so the kernel falls back to strict,
// emu/model/effective_mode.h): its runs, asked for lazy, report strict in
// their result facts. The analyzer must raise a mode_changed finding between
// the bulk's m04 and m08, confirm it from the runs' stated modes, bisect it
// on the effective mode to m05, alert with both modes, and farmctl
// regressions must show it. A commit that only changes a cost (m05 sets
// fq.size) raises no mode_changed finding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/git_import.h"
#include "integration_tests/analyzer_ticks.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

constexpr int kCommits = 9;  // m00..m08

std::string Id(int i) { return absl::StrFormat("m%02d", i); }

class ModeChangePgTest : public testing::FarmTest {
 protected:
  // Scheduler, one emulator agent, Alertmanager and the test catalog whose
  // commit m05 sets `key: value`.
  void StartFarm(const std::string& key, const std::string& value) {
    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& so) {
      so.db_connections = 4;
      so.worker_threads = 4;
    });
    ASSERT_FALSE(HasFatalFailure());
    auto am = testing::AlertmanagerInstance::Start();
    ASSERT_TRUE(am.ok()) << am.status();
    am_ = std::move(*am);
    std::string yaml = "catalog: mode-test\ncommits:\n";
    for (int i = 0; i < kCommits; ++i) {
      absl::StrAppend(&yaml, "  - id: ", Id(i), "\n    subject: \"test commit ", i, "\"\n");
      if (i == 5) absl::StrAppend(&yaml, "    set: {", key, ": \"", value, "\"}\n");
    }
    jobs_ = pb::JobService::NewStub(
        grpc::CreateChannel(SchedulerAddress(), grpc::InsecureChannelCredentials()));
    analysis_ = pb::AnalysisService::NewStub(
        grpc::CreateChannel(SchedulerAddress(), grpc::InsecureChannelCredentials()));
    pb::LoadCatalogRequest req;
    req.set_yaml(yaml);
    req.set_source_name("mode_change_pgtest");
    pb::LoadCatalogResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = jobs_->LoadCatalog(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    absl::Status up;
    agent_ = StartAgent({.name = "mode-agent", .slots = 2}, &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << agent_->Out();
    pool_ = std::make_unique<storage::PgPool>(storage::PgPoolOptions{DbUri(), 2, 5});
    store_ = storage::NewPgAnalyzerStore(pool_.get());
    submitter_ = NewGrpcJobSubmitter(SchedulerAddress(), "");
    auto sink = NewAlertmanagerSink(am_->BaseUrl());
    ASSERT_TRUE(sink.ok());
    sink_ = std::move(*sink);
  }

  void TearDown() override {
    agent_.reset();
    FarmTest::TearDown();
  }

  // The bulk: m00, m04, m08, lazy only, one short dma-map-bench each.
  int64_t SubmitBulk() {
    const std::string spec =
        "name: mode-test\ncatalog: mode-test\nplatform: intel-vtd-snb16c\n"
        "commits: [m00, m04, m08]\nmodes: [lazy]\nworkloads:\n"
        "  - name: dma-map-bench\n    params: {threads: 1, seconds: 0.0005}\n"
        "repeats: 1\nexecutor: emulator\nanalysis: {bisect: true}\n";
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(spec);
    pb::SubmitMatrixResponse resp;
    grpc::ClientContext ctx;
    const grpc::Status s = jobs_->SubmitMatrix(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.matrix().id();
  }

  // Alertmanager's alert of regression `id` (null if none).
  json AlertOf(int64_t id) {
    auto r = testing::HttpGet(am_->BaseUrl() + "/api/v2/alerts");
    if (!r.ok() || r->status != 200) return nullptr;
    for (const json& al : json::parse(r->body, nullptr, false)) {
      if (al["labels"].value("regression_id", "") == std::to_string(id)) return al;
    }
    return nullptr;
  }

  AnalyzerOptions Options() {
    AnalyzerOptions o;
    o.alert_resend = absl::Hours(1);
    return o;
  }

  std::unique_ptr<testing::AlertmanagerInstance> am_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AnalysisService::Stub> analysis_;
  std::unique_ptr<testing::ChildProcess> agent_;
  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<AnalyzerStore> store_;
  std::unique_ptr<JobSubmitter> submitter_;
  std::unique_ptr<AlertSink> sink_;
};

TEST_F(ModeChangePgTest, ACommitThatFlipsLazyToStrictIsFoundAndBisectedToIt) {
  StartFarm("fq.init_fails", "true");
  const int64_t matrix = SubmitBulk();
  Analyzer a(store_.get(), submitter_.get(), sink_.get(), {}, Options());
  int64_t id = 0;
  TickUntil(
      a,
      [&] {
        const pqxx::result r = SqlRows(absl::StrCat(
            "SELECT id FROM regressions WHERE change_class = ", pb::CHANGE_CLASS_MODE_CHANGED,
            " AND culprit_id <> '' AND alert_firing"));
        if (r.empty()) return false;
        id = r[0][0].as<int64_t>();
        return AlertOf(id).is_object();
      },
      "mode change bisected and alerted", absl::Seconds(240), [&] { return agent_->Out(); });

  // The stored facts: m08's run asked for lazy and ran strict, as the
  // emulated kernel said; m04's ran lazy.
  const pqxx::result facts = SqlRows(absl::StrCat(
      "SELECT j.commit_id, (h.host->>'iommu_mode')::int, (h.host->'guest'->>'requested_mode')::int,"
      " h.host->>'iommu_detail', h.host->'guest'->>'provider' FROM results r JOIN jobs j ON "
      "j.id = r.job_id JOIN result_hosts h ON h.id = r.host_id WHERE j.matrix_id = ",
      matrix, " ORDER BY j.commit_index"));
  ASSERT_EQ(facts.size(), 3u);
  for (const pqxx::row& f : facts) {
    const std::string commit = f[0].as<std::string>();
    EXPECT_EQ(f[1].as<int>(), commit == "m08" ? pb::IOMMU_MODE_STRICT : pb::IOMMU_MODE_LAZY)
        << commit;
    EXPECT_EQ(f[2].as<int>(), pb::IOMMU_MODE_LAZY) << commit;
    EXPECT_EQ(f[4].as<std::string>(), "emulator");
    if (commit == "m08") {
      EXPECT_NE(f[3].as<std::string>().find("iommu_dma_init_fq"), std::string::npos) << f[3];
    }
  }

  // One mode_changed regression, m04..m08, bisected to m05 on the mode.
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM regressions WHERE change_class = ",
                             pb::CHANGE_CLASS_MODE_CHANGED)),
            1);
  const pqxx::result reg = SqlRows(absl::StrCat(
      "SELECT state, metric, mode, last_good, first_bad, culprit_id, bisect_id, per_mode, note "
      "FROM regressions WHERE id = ",
      id));
  EXPECT_EQ(reg[0][0].as<int>(), pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(reg[0][1].as<std::string>(), "effective_mode");
  EXPECT_EQ(reg[0][2].as<int>(), pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(reg[0][5].as<std::string>(), "m05");
  const json per_mode = json::parse(reg[0][7].as<std::string>());
  ASSERT_EQ(per_mode.size(), 1u) << per_mode;
  EXPECT_EQ(per_mode[0]["before"].get<double>(), pb::IOMMU_MODE_LAZY) << per_mode;
  EXPECT_EQ(per_mode[0]["after"].get<double>(), pb::IOMMU_MODE_STRICT) << per_mode;
  const int64_t bisect = reg[0][6].as<int64_t>();
  EXPECT_EQ(SqlRows(absl::StrCat("SELECT culprit_id FROM bisects WHERE id = ", bisect))[0][0]
                .as<std::string>(),
            "m05");
  // Every step was judged on the mode its run stated: the bad ones say
  // strict, the good ones lazy, each from one run.
  const pqxx::result steps = SqlRows(absl::StrCat(
      "SELECT commit_id, verdict, repeats, mean FROM bisect_steps WHERE bisect_id = ", bisect,
      " AND step > 0 ORDER BY step"));
  ASSERT_FALSE(steps.empty());
  for (const pqxx::row& s : steps) {
    const std::string verdict = s[1].as<std::string>();
    const int commit = std::stoi(s[0].as<std::string>().substr(1));
    EXPECT_EQ(verdict, commit >= 5 ? "bad" : "good") << s[0];
    EXPECT_EQ(s[2].as<int>(), 1) << s[0];
    EXPECT_EQ(s[3].as<double>(), commit >= 5 ? pb::IOMMU_MODE_STRICT : pb::IOMMU_MODE_LAZY);
  }

  // The alert says both modes.
  const json al = AlertOf(id);
  EXPECT_EQ(al["annotations"].value("change_class", ""), "mode_changed") << al;
  EXPECT_EQ(al["annotations"].value("mode_before", ""), "lazy") << al;
  EXPECT_EQ(al["annotations"].value("mode_after", ""), "strict") << al;
  EXPECT_EQ(al["annotations"].value("culprit", ""), "m05") << al;
  EXPECT_EQ(al["labels"].value("severity", ""), "critical") << al;

  // farmctl regressions shows it as the mode change it is.
  auto listed = cli::RunProgram({FARMCTL_BIN, "--server", SchedulerAddress(), "regressions"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_NE(listed->find("effective_mode"), std::string::npos) << *listed;
  EXPECT_NE(listed->find("lazy -> strict"), std::string::npos) << *listed;
  EXPECT_NE(listed->find("m05"), std::string::npos) << *listed;
}

TEST_F(ModeChangePgTest, ACommitThatKeepsTheModeRaisesNoModeChange) {
  StartFarm("fq.size", "64");
  const int64_t matrix = SubmitBulk();
  Analyzer a(store_.get(), submitter_.get(), sink_.get(), {}, Options());
  TickUntil(
      a,
      [&] {
        return Sql(absl::StrCat("SELECT count(*) FROM analyzer_state WHERE key = 'matrix:", matrix,
                                "'")) == 1;
      },
      "bulk matrix analysed", absl::Seconds(240), [&] { return agent_->Out(); });
  // The runs stated their modes (all lazy), and none changed.
  EXPECT_EQ(
      Sql(absl::StrCat("SELECT count(*) FROM results r JOIN result_hosts h ON h.id = r.host_id "
                       "WHERE r.matrix_id = ",
                       matrix, " AND (h.host->>'iommu_mode')::int = ", pb::IOMMU_MODE_LAZY)),
      3);
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM regressions WHERE change_class = ",
                             pb::CHANGE_CLASS_MODE_CHANGED)),
            0);
}

}  // namespace
}  // namespace farm::analyzer
