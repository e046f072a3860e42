// The scheduler's service classes (scheduler_service.h) on the in-memory
// repositories (lib/storage/memory/memory_store.h): submit, lease, heartbeat,
// report, stale leases, cancellation, results and triage, in milliseconds
// and without PostgreSQL or gRPC. The database clock is a manual one, so
// lease expiry and retry backoff are stepped, not slept. The same flows
// through gRPC and PostgreSQL are scheduler_pgtest's.
#include "scheduler/scheduler_service.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "lib/metrics/metrics.h"
#include "lib/spec/spec_yaml.h"
#include "lib/storage/memory/memory_store.h"
#include "proto/kernel_config.h"
#include "proto/labels.h"
#include "proto/try_commit.h"
#include "testing/manual_clock.h"

namespace farm::scheduler {
namespace {

// The principal the tests submit as, and an admin.
const Principal kOwner{"tester", Role::kSubmitter};
const Principal kAdmin{"root", Role::kAdmin};

const char* const kCatalog = R"(
catalog: test-iommu
commits:
  - id: v5.10
    subject: "Linux 5.10"
    set: {iova.allocator: rcache}
  - id: aaa111
    subject: "iommu: something"
  - id: v5.11
    subject: "Linux 5.11"
    set: {fq.kind: percpu}
  - id: v5.12
    subject: "Linux 5.12"
)";

// 3 commits x 2 modes x 2 repeats = 12 jobs.
const char* const kSpec = R"(
name: unit-test
catalog: test-iommu
platform: intel-vtd-2s12c
commits: aaa111..v5.12
modes: [off, strict]
workloads:
  - name: iozone-nfsrdma
    params: {threads: 2, tests: [write, read]}
repeats: 2
executor: emulator
)";

SchedulerConfig TestConfig() {
  SchedulerConfig c;
  c.lease_ttl = absl::Seconds(2);
  c.retry.base_backoff = absl::Milliseconds(10);
  return c;
}

class SchedulerServiceTest : public ::testing::Test {
 protected:
  SchedulerServiceTest()
      : store_([this] { return clock_.Now(); }),
        metrics_(registry_.registry()),
        config_(TestConfig()),
        jobs_(&store_, &store_, &store_, &metrics_, config_),
        agents_(&store_, &metrics_, config_),
        analysis_(&store_, &store_),
        reaper_(&store_, &metrics_, config_) {}

  void LoadCatalog() {
    pb::LoadCatalogRequest req;
    req.set_yaml(kCatalog);
    req.set_source_name("test.yaml");
    auto resp = jobs_.LoadCatalog(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(resp->catalog().commits_size(), 4);
    EXPECT_EQ(resp->catalog().source(), "file:test.yaml");
  }

  pb::SubmitMatrixResponse Submit(const std::string& spec, const std::string& key = "") {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(spec);
    req.set_idempotency_key(key);
    auto resp = jobs_.SubmitMatrix(req, "tester");
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::SubmitMatrixResponse();
  }

  // The spec reduced to one job (v5.12, off, one repeat).
  static std::string OneJobSpec() {
    std::string one = kSpec;
    one.replace(one.find("aaa111..v5.12"), 13, "[v5.12]");
    one.replace(one.find("[off, strict]"), 13, "[off]");
    one.replace(one.find("repeats: 2"), 10, "repeats: 1");
    return one;
  }

  pb::RegisterResponse Register(const std::string& name, int slots = 4) {
    pb::RegisterRequest req;
    req.set_name(name);
    req.add_capabilities()->set_name("emulator");
    req.set_slots(slots);
    auto resp = agents_.Register(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::RegisterResponse();
  }

  pb::LeaseJobsResponse Lease(const pb::RegisterResponse& a, int max_jobs) {
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(a.agent_id());
    lr.set_session(a.session());
    lr.set_max_jobs(max_jobs);
    auto resp = agents_.LeaseJobs(lr);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::LeaseJobsResponse();
  }

  pb::ReportResultRequest ResultFor(const pb::RegisterResponse& a, const pb::JobLease& l) {
    pb::ReportResultRequest rr;
    rr.set_agent_id(a.agent_id());
    *rr.mutable_lease() = l.lease();
    auto* s = rr.add_samples();
    s->set_metric("throughput");
    s->set_value(100 + l.job().repeat());
    rr.set_raw_output("raw-" + std::to_string(l.job().id()));
    rr.set_raw_format("emu-json");
    return rr;
  }

  pb::HeartbeatResponse Beat(const pb::RegisterResponse& a,
                             const std::vector<pb::LeaseRef>& leases) {
    pb::HeartbeatRequest hb;
    hb.set_agent_id(a.agent_id());
    hb.set_session(a.session());
    for (const auto& l : leases) *hb.add_leases() = l;
    auto resp = agents_.Heartbeat(hb);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::HeartbeatResponse();
  }

  bool MetricsHave(const std::string& line) {
    return registry_.Serialize().find(line) != std::string::npos;
  }

  testing::ManualClock clock_;
  storage::MemoryStore store_;
  metrics::MetricsRegistry registry_;
  metrics::SchedulerMetrics metrics_;
  const SchedulerConfig config_;
  JobService jobs_;
  AgentService agents_;
  AnalysisService analysis_;
  Reaper reaper_;
};

TEST_F(SchedulerServiceTest, SpecErrorsComeBackAsInvalidArgumentNamingTheField) {
  LoadCatalog();
  std::string bad = kSpec;
  bad.replace(bad.find("[off, strict]"), 13, "[off, stict]");
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(bad);
  auto resp = jobs_.SubmitMatrix(req, "tester");
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resp.status().message(),
            "modes[1]: unknown mode \"stict\" (expected off, passthrough, strict, lazy)");
  std::string unknown_catalog = kSpec;
  unknown_catalog.replace(unknown_catalog.find("catalog: test-iommu"), 19, "catalog: nope");
  req.set_spec_yaml(unknown_catalog);
  resp = jobs_.SubmitMatrix(req, "tester");
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(resp.status().message().find("catalog: unknown catalog \"nope\""), std::string::npos);
  // Dry run: counted, nothing created.
  req.set_spec_yaml(kSpec);
  req.set_dry_run(true);
  resp = jobs_.SubmitMatrix(req, "tester");
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->matrix().counts().total(), 3 * 2 * 2);
  EXPECT_EQ(resp->jobs_created(), 0);
  auto list = jobs_.ListMatrices(pb::ListMatricesRequest());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->matrices_size(), 0);
  EXPECT_FALSE(MetricsHave("farm_matrices_submitted_total 1"));
}

TEST_F(SchedulerServiceTest, MatrixRunsToCompletionWithResults) {
  LoadCatalog();
  pb::GetCatalogRequest gc;
  gc.set_name("test-iommu");
  gc.set_resolve(true);
  auto cat = jobs_.GetCatalog(gc);
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->commits(3).resolved().at("fq.kind"), "percpu");
  EXPECT_EQ(cat->commits(3).resolved().at("iova.allocator"), "rcache");

  pb::SubmitMatrixResponse sub = Submit(kSpec);
  ASSERT_EQ(sub.jobs_created(), 12);
  EXPECT_EQ(sub.matrix().submitted_by(), "tester");
  EXPECT_EQ(sub.matrix().state(), pb::MATRIX_STATE_RUNNING);
  const int64_t mid = sub.matrix().id();

  pb::RegisterResponse a = Register("agent-1");
  ASSERT_GT(a.agent_id(), 0);
  EXPECT_EQ(a.lease_ttl().seconds(), 2);
  EXPECT_EQ(a.heartbeat_interval().nanos(), 666666666);  // ttl / 3
  std::set<std::string> commits;
  int reported = 0;
  for (int round = 0; round < 10 && reported < 12; ++round) {
    pb::LeaseJobsResponse leases = Lease(a, 5);
    EXPECT_LE(leases.leases_size(), 5);
    for (const pb::JobLease& l : leases.leases()) {
      commits.insert(l.job().commit_id());
      EXPECT_EQ(l.job().workload().params().at("tests"), "write,read");
      pb::ReportResultRequest rr = ResultFor(a, l);
      auto resp = agents_.ReportResult(rr);
      ASSERT_TRUE(resp.ok()) << resp.status();
      EXPECT_TRUE(resp->accepted());
      EXPECT_FALSE(resp->duplicate());
      // Retrying the same report is harmless.
      resp = agents_.ReportResult(rr);
      ASSERT_TRUE(resp.ok()) << resp.status();
      EXPECT_TRUE(resp->duplicate());
      ++reported;
    }
  }
  EXPECT_EQ(reported, 12);
  EXPECT_EQ(commits, (std::set<std::string>{"aaa111", "v5.11", "v5.12"}));
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(mid);
  auto m = jobs_.GetMatrix(gm);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(m->counts().succeeded(), 12);

  // Paged like GetResults: pages of 5 until an empty one.
  std::set<int64_t> ids;
  int64_t after = 0;
  for (;;) {
    auto page = jobs_.ResultsPage(mid, after, 5, /*include_raw=*/true);
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->empty()) break;
    EXPECT_LE(page->size(), 5u);
    for (const pb::Result& r : *page) {
      ids.insert(r.job_id());
      EXPECT_EQ(r.raw_output(), "raw-" + std::to_string(r.job_id()));
      EXPECT_EQ(r.agent(), "agent-1");
      EXPECT_EQ(r.samples_size(), 1);
      EXPECT_EQ(r.job().state(), pb::JOB_STATE_SUCCEEDED);
    }
    after = page->back().job_id();
  }
  EXPECT_EQ(ids.size(), 12u);
  auto page = jobs_.ResultsPage(mid, 0, 100, /*include_raw=*/false);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((*page)[0].raw_output(), "");
  EXPECT_EQ(jobs_.ResultsPage(9999, 0, 10, false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs_.ResultsPage(0, 0, 10, false).status().code(), absl::StatusCode::kInvalidArgument);

  Beat(a, {});
  auto agents = jobs_.ListAgents(pb::ListAgentsRequest());
  ASSERT_TRUE(agents.ok());
  ASSERT_EQ(agents->agents_size(), 1);
  EXPECT_TRUE(agents->agents(0).connected());
  EXPECT_EQ(agents->agents(0).running_jobs(), 0);
  // Connected means a heartbeat within the TTL.
  clock_.Advance(absl::Seconds(3));
  agents = jobs_.ListAgents(pb::ListAgentsRequest());
  ASSERT_TRUE(agents.ok());
  EXPECT_FALSE(agents->agents(0).connected());

  EXPECT_TRUE(MetricsHave("farm_results_ingested_total 12")) << registry_.Serialize();
  EXPECT_TRUE(MetricsHave("farm_leases_granted_total 12")) << registry_.Serialize();
  EXPECT_TRUE(MetricsHave("farm_matrices_submitted_total 1")) << registry_.Serialize();
}

// SubmitMatrix takes the typed message as it takes YAML: the same checks,
// the same jobs, and the matrix records the spec as YAML.
TEST_F(SchedulerServiceTest, TypedSpecSubmitsLikeItsYaml) {
  LoadCatalog();
  absl::StatusOr<pb::MatrixSpec> typed = spec::MatrixSpecFromYaml(kSpec, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  (*typed->mutable_set())["fq.kind"] = "single";
  pb::SubmitMatrixRequest req;
  *req.mutable_spec() = *typed;
  auto resp = jobs_.SubmitMatrix(req, "tester");
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->jobs_created(), 12);
  auto m = jobs_.GetMatrix([&] {
    pb::GetMatrixRequest g;
    g.set_matrix_id(resp->matrix().id());
    return g;
  }());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec_yaml(), spec::MatrixSpecToYaml(*typed));
  // Every job carries the spec's `set:` over its commit's settings.
  pb::RegisterResponse a = Register("a1", 20);
  pb::LeaseJobsResponse leased = Lease(a, 20);
  ASSERT_EQ(leased.leases_size(), 12);
  for (const pb::JobLease& l : leased.leases()) {
    EXPECT_EQ(l.job().model_set().at("fq.kind"), "single") << l.job().commit_id();
    EXPECT_EQ(l.job().model_set().at("iova.allocator"), "rcache");
  }

  // A typed error names the field; both forms at once is an error.
  pb::MatrixSpec bad = *typed;
  bad.add_modes(static_cast<pb::IommuMode>(42));
  (*bad.mutable_workloads(0)->mutable_params())["threadz"] = "2";
  *req.mutable_spec() = bad;
  auto refused = jobs_.SubmitMatrix(req, "tester");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("modes[2]: unknown mode 42"), std::string::npos)
      << refused.status();
  req.set_spec_yaml(kSpec);
  *req.mutable_spec() = *typed;
  refused = jobs_.SubmitMatrix(req, "tester");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "spec, spec_yaml: set one of them, not both");
  // spec_yaml is bytes on the wire: text that is not UTF-8 reaches the check
  // and is refused by name, never stored.
  pb::SubmitMatrixRequest utf16;
  utf16.set_spec_yaml(std::string("\xff\xfen\0a\0", 6));
  refused = jobs_.SubmitMatrix(utf16, "tester");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "spec: the text is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8");
}

TEST_F(SchedulerServiceTest, ListAgentsPagesByName) {
  for (const char* name : {"delta", "alpha", "echo", "charlie", "bravo"}) Register(name);
  pb::ListAgentsRequest req;
  req.set_page_size(2);
  std::vector<std::string> names;
  std::vector<int> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = jobs_.ListAgents(req);
    ASSERT_TRUE(page.ok()) << page.status();
    sizes.push_back(page->agents_size());
    for (const pb::Agent& ag : page->agents()) names.push_back(ag.name());
    if (page->next_page_token().empty()) break;
    req.set_page_token(page->next_page_token());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"alpha", "bravo", "charlie", "delta", "echo"}));
  EXPECT_EQ(sizes, (std::vector<int>{2, 2, 1}));
  auto all = jobs_.ListAgents(pb::ListAgentsRequest());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->agents_size(), 5);
  EXPECT_TRUE(all->next_page_token().empty());
}

TEST_F(SchedulerServiceTest, ListRegressionsPagesWithATokenAndRefusesAForgedOne) {
  store_.db().Write([](storage::MemoryDatabase::Tables& t, storage::MemoryDatabase::Changes&) {
    for (int64_t id = 1; id <= 5; ++id) {
      pb::Regression& g = t.regressions[id].regression;
      g.set_id(id);
      g.set_state(pb::REGRESSION_STATE_CONFIRMED);
      g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
    }
    return 0;
  });
  pb::ListRegressionsRequest req;
  req.set_page_size(3);
  auto first = analysis_.ListRegressions(req);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->regressions_size(), 3);
  EXPECT_EQ(first->next_page_token(), "3");
  req.set_page_token(first->next_page_token());
  auto second = analysis_.ListRegressions(req);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->regressions_size(), 2);
  EXPECT_EQ(second->regressions(0).id(), 4);
  EXPECT_TRUE(second->next_page_token().empty());
  req.set_page_token("x7");
  EXPECT_EQ(analysis_.ListRegressions(req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerServiceTest, StaleResultRejectedAfterLeaseExpiresAndIsRegranted) {
  LoadCatalog();
  ASSERT_EQ(Submit(OneJobSpec()).jobs_created(), 1);
  pb::RegisterResponse slow = Register("slow");
  pb::RegisterResponse fast = Register("fast");
  pb::LeaseJobsResponse first = Lease(slow, 1);
  ASSERT_EQ(first.leases_size(), 1);
  EXPECT_EQ(first.leases(0).lease().attempt(), 1);

  // "slow" stops heartbeating: after the TTL the reaper requeues the job
  // and, after the retry backoff, "fast" gets it.
  auto reaped = reaper_.RunOnce();
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued, 0);
  clock_.Advance(absl::Seconds(2) + absl::Microseconds(1));
  reaped = reaper_.RunOnce();
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  EXPECT_EQ(Lease(fast, 1).leases_size(), 0);  // still in backoff
  clock_.Advance(absl::Milliseconds(10));
  pb::LeaseJobsResponse second = Lease(fast, 1);
  ASSERT_EQ(second.leases_size(), 1);
  EXPECT_EQ(second.leases(0).lease().attempt(), 2);
  EXPECT_EQ(second.leases(0).job().failure_reason(), "attempt 1 of 3: lease expired (agent slow)");

  // The slow agent wakes up: heartbeat says revoked, result is rejected.
  pb::HeartbeatResponse hbr = Beat(slow, {first.leases(0).lease()});
  ASSERT_EQ(hbr.revoked_size(), 1);
  EXPECT_EQ(hbr.extended_size(), 0);
  auto late = agents_.ReportResult(ResultFor(slow, first.leases(0)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  auto ok = agents_.ReportResult(ResultFor(fast, second.leases(0)));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->accepted());
  EXPECT_TRUE(MetricsHave("farm_stale_results_rejected_total 1")) << registry_.Serialize();
  EXPECT_TRUE(MetricsHave("farm_leases_expired_total 1")) << registry_.Serialize();

  // Unknown session: NOT_FOUND (the agent re-registers).
  pb::HeartbeatRequest hb;
  hb.set_agent_id(slow.agent_id());
  hb.set_session("bogus");
  EXPECT_EQ(agents_.Heartbeat(hb).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SchedulerServiceTest, HeartbeatsKeepALeaseAlivePastItsTtl) {
  LoadCatalog();
  Submit(OneJobSpec());
  pb::RegisterResponse a = Register("a");
  pb::LeaseJobsResponse l = Lease(a, 1);
  ASSERT_EQ(l.leases_size(), 1);
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    pb::HeartbeatResponse hbr = Beat(a, {l.leases(0).lease()});
    ASSERT_EQ(hbr.extended_size(), 1) << "beat " << i;
    auto reaped = reaper_.RunOnce();
    ASSERT_TRUE(reaped.ok());
    EXPECT_EQ(reaped->requeued, 0);
  }
  ASSERT_TRUE(agents_.ReportResult(ResultFor(a, l.leases(0))).ok());
}

TEST_F(SchedulerServiceTest, CancelRevokesLeases) {
  LoadCatalog();
  pb::SubmitMatrixResponse sub = Submit(kSpec);
  pb::RegisterResponse a = Register("a");
  pb::LeaseJobsResponse leases = Lease(a, 3);
  ASSERT_EQ(leases.leases_size(), 3);
  pb::CancelMatrixRequest cr;
  cr.set_matrix_id(sub.matrix().id());
  cr.set_reason("changed my mind");
  auto cresp = jobs_.CancelMatrix(cr, kOwner);
  ASSERT_TRUE(cresp.ok()) << cresp.status();
  EXPECT_EQ(cresp->jobs_cancelled(), 12);
  EXPECT_EQ(cresp->matrix().state(), pb::MATRIX_STATE_CANCELLED);
  std::vector<pb::LeaseRef> refs;
  for (const auto& l : leases.leases()) refs.push_back(l.lease());
  pb::HeartbeatResponse hbr = Beat(a, refs);
  EXPECT_EQ(hbr.revoked_size(), 3);
  EXPECT_EQ(agents_.ReportResult(ResultFor(a, leases.leases(0))).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Lease(a, 10).leases_size(), 0);
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(9999);
  EXPECT_EQ(jobs_.GetMatrix(gm).status().code(), absl::StatusCode::kNotFound);
  cr.set_matrix_id(9999);
  EXPECT_EQ(jobs_.CancelMatrix(cr, kOwner).status().code(), absl::StatusCode::kNotFound);
  pb::GetRegressionRequest gr;
  gr.set_regression_id(1);
  EXPECT_EQ(analysis_.GetRegression(gr).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SchedulerServiceTest, TableChecksRefuseTheSubmitAndTheDryRunBeforeAnyJob) {
  LoadCatalog();
  std::string threadz = kSpec;
  threadz.replace(threadz.find("{threads: 2,"), 12, "{threadz: 2,");
  std::string bogus = std::string(kSpec) + "set: {bogus.key: 1}\n";
  std::string evil = kSpec;
  evil.replace(evil.find("executor: emulator"), 18, "executor: fio");
  evil.replace(evil.find("{threads: 2, tests: [write, read]}"), 34,
               "{size: 1m, exec_prerun: \"touch /tmp/x\"}");
  std::string short_commit = kSpec;
  short_commit.replace(short_commit.find("aaa111..v5.12"), 13, "[aaa111, v5.1]");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {threadz, "workloads[0].params.threadz: unknown parameter of iozone-nfsrdma (known: "},
      {bogus, "set.bogus.key: "},
      {evil, "workloads[0].params: fio param 'exec_prerun' refused: it runs a shell command"},
      {short_commit, "commits[1]: unknown commit \"v5.1\" in catalog \"test-iommu\""},
  };
  for (bool dry_run : {true, false}) {
    for (const auto& [spec, want] : cases) {
      pb::SubmitMatrixRequest req;
      req.set_spec_yaml(spec);
      req.set_dry_run(dry_run);
      auto resp = jobs_.SubmitMatrix(req, "tester");
      EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument) << want;
      EXPECT_EQ(resp.status().message().rfind(want, 0), 0u) << resp.status();
    }
  }
  auto list = jobs_.ListMatrices(pb::ListMatricesRequest());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->matrices_size(), 0);
  // The valid spec still makes its 12 jobs.
  EXPECT_EQ(Submit(kSpec).jobs_created(), 3 * 2 * 2);
}

TEST_F(SchedulerServiceTest, IdempotencyKeyCreatesOneMatrix) {
  LoadCatalog();
  pb::SubmitMatrixResponse a = Submit(kSpec, "k1");
  pb::SubmitMatrixResponse b = Submit(kSpec, "k1");
  EXPECT_EQ(a.matrix().id(), b.matrix().id());
  EXPECT_EQ(b.jobs_created(), 0);
  ASSERT_EQ(b.warnings_size(), 1);
  EXPECT_NE(b.warnings(0).find("idempotency key matched matrix"), std::string::npos);
  EXPECT_TRUE(MetricsHave("farm_matrices_submitted_total 1")) << registry_.Serialize();
  Submit(kSpec, "k2");
  auto list = jobs_.ListMatrices(pb::ListMatricesRequest());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->matrices_size(), 2);
  EXPECT_EQ(list->matrices(0).spec_yaml(), "");  // listings stay small
  pb::ListMatricesRequest older;
  older.set_before_id(list->matrices(0).id());
  list = jobs_.ListMatrices(older);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->matrices_size(), 1);
  EXPECT_EQ(list->matrices(0).id(), a.matrix().id());
}

TEST_F(SchedulerServiceTest, FailuresRetryThenFailAndReleaseGivesTheJobBack) {
  LoadCatalog();
  Submit(kSpec);
  pb::RegisterResponse a = Register("a", /*slots=*/20);
  pb::LeaseJobsResponse l = Lease(a, 3);
  ASSERT_EQ(l.leases_size(), 3);
  pb::ReportFailureRequest f;
  f.set_agent_id(a.agent_id());
  *f.mutable_lease() = l.leases(0).lease();
  f.set_reason("emulator crashed");
  f.set_retryable(true);
  auto fr = agents_.ReportFailure(f);
  ASSERT_TRUE(fr.ok()) << fr.status();
  EXPECT_EQ(fr->job_state(), pb::JOB_STATE_QUEUED);
  *f.mutable_lease() = l.leases(1).lease();
  f.set_retryable(false);
  fr = agents_.ReportFailure(f);
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->job_state(), pb::JOB_STATE_FAILED);
  EXPECT_TRUE(MetricsHave("farm_jobs_failed_total 1")) << registry_.Serialize();
  // The matrix says why its job failed.
  pb::GetMatrixRequest failed_matrix;
  failed_matrix.set_matrix_id(l.leases(1).job().matrix_id());
  auto with_failures = jobs_.GetMatrix(failed_matrix);
  ASSERT_TRUE(with_failures.ok()) << with_failures.status();
  ASSERT_EQ(with_failures->failures_size(), 1);
  EXPECT_EQ(with_failures->failures(0).reason(), "attempt 1 of 3: emulator crashed");
  EXPECT_EQ(with_failures->failures(0).first_job_id(), l.leases(1).job().id());
  EXPECT_EQ(agents_.ReportFailure(f).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MetricsHave("farm_stale_results_rejected_total 1")) << registry_.Serialize();

  pb::ReleaseLeasesRequest rel;
  rel.set_agent_id(a.agent_id());
  rel.set_session(a.session());
  *rel.add_leases() = l.leases(2).lease();
  auto released = agents_.ReleaseLeases(rel);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(released->released(), 1);
  clock_.Advance(absl::Seconds(1));  // past the failed job's backoff
  pb::LeaseJobsResponse again = Lease(a, 20);
  // Every job but the failed one is queued again: the released one without
  // spending its attempt, the retried one on its second.
  EXPECT_EQ(again.leases_size(), 11);
  for (const auto& x : again.leases()) {
    if (x.job().id() == l.leases(2).job().id()) {
      EXPECT_EQ(x.lease().attempt(), 1);
    }
    if (x.job().id() == l.leases(0).job().id()) {
      EXPECT_EQ(x.lease().attempt(), 2);
    }
  }
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(l.leases(0).job().matrix_id());
  auto m = jobs_.GetMatrix(gm);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->counts().failed(), 1);
  EXPECT_EQ(m->counts().leased(), 11);
}

TEST_F(SchedulerServiceTest, RequestsAreCheckedBeforeTheStore) {
  pb::RegisterRequest reg;
  EXPECT_EQ(agents_.Register(reg).status().code(), absl::StatusCode::kInvalidArgument);
  reg.set_name(std::string(201, 'x'));
  EXPECT_EQ(agents_.Register(reg).status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"lab\x1b[2J", "two words", "tab\tname", "caf\xc3\xa9", "a/b"}) {
    reg.set_name(bad);
    EXPECT_EQ(agents_.Register(reg).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  reg.set_name("ok");
  reg.set_slots(-1);
  EXPECT_EQ(agents_.Register(reg).status().code(), absl::StatusCode::kInvalidArgument);
  pb::LeaseJobsRequest lr;
  EXPECT_EQ(agents_.LeaseJobs(lr).status().code(), absl::StatusCode::kInvalidArgument);
  lr.set_agent_id(1);
  EXPECT_EQ(agents_.LeaseJobs(lr).status().code(), absl::StatusCode::kInvalidArgument);
  lr.set_session("s");
  EXPECT_EQ(agents_.LeaseJobs(lr).status().code(), absl::StatusCode::kNotFound);
  pb::ReportResultRequest rr;
  rr.mutable_lease()->set_job_id(1);
  rr.mutable_lease()->set_attempt(1);
  auto r = agents_.ReportResult(rr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "lease.lease_token: required");
  pb::GetMatrixRequest gm;
  EXPECT_EQ(jobs_.GetMatrix(gm).status().code(), absl::StatusCode::kInvalidArgument);
  pb::GetBisectRequest gb;
  EXPECT_EQ(analysis_.GetBisect(gb).status().code(), absl::StatusCode::kInvalidArgument);
  pb::UpdateRegressionRequest ur;
  ur.set_regression_id(1);
  ur.set_state(pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(analysis_.UpdateRegression(ur, kAdmin).status().code(),
            absl::StatusCode::kInvalidArgument);
  pb::ImportGitCatalogRequest ig;
  ig.set_catalog("c");
  EXPECT_EQ(jobs_.ImportGitCatalog(ig).status().code(), absl::StatusCode::kInvalidArgument);
  ig.add_commits();
  EXPECT_EQ(jobs_.ImportGitCatalog(ig).status().message(), "commits[0].id: required");
}

TEST_F(SchedulerServiceTest, ReportResultsAnswersEachItemAndCountsTheFreshOnes) {
  LoadCatalog();
  Submit(kSpec);
  pb::RegisterResponse a = Register("a");
  pb::LeaseJobsResponse l = Lease(a, 3);
  ASSERT_EQ(l.leases_size(), 3);
  pb::ReportResultsRequest req;
  for (int i = 0; i < 3; ++i) {
    pb::ReportResultRequest* r = req.add_results();
    r->set_agent_id(a.agent_id());
    *r->mutable_lease() = l.leases(i).lease();
    r->add_samples()->set_metric("throughput");
  }
  *req.add_results() = req.results(0);            // a copy: duplicate
  req.add_results()->set_agent_id(a.agent_id());  // no lease: refused alone
  auto resp = agents_.ReportResults(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->results_size(), 5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(resp->results(i).accepted()) << resp->results(i).error_message();
    EXPECT_FALSE(resp->results(i).duplicate());
    EXPECT_EQ(resp->results(i).error_code(), 0);
  }
  EXPECT_TRUE(resp->results(3).duplicate());
  EXPECT_FALSE(resp->results(4).accepted());
  EXPECT_EQ(resp->results(4).error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(resp->results(4).error_message(), "results[4].lease.job_id: required");
  EXPECT_TRUE(MetricsHave("farm_results_ingested_total 3")) << registry_.Serialize();
  pb::ReportResultsRequest big;
  for (int i = 0; i <= AgentService::kMaxReportBatch; ++i) *big.add_results() = req.results(0);
  EXPECT_EQ(agents_.ReportResults(big).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerServiceTest, ReportResultsRefusesTextPostgresCannotStoreInItsItemOnly) {
  LoadCatalog();
  Submit(kSpec);
  pb::RegisterResponse a = Register("a");
  pb::LeaseJobsResponse l = Lease(a, 2);
  ASSERT_EQ(l.leases_size(), 2);
  pb::ReportResultsRequest req;
  for (int i = 0; i < 2; ++i) {
    pb::ReportResultRequest* r = req.add_results();
    r->set_agent_id(a.agent_id());
    *r->mutable_lease() = l.leases(i).lease();
    r->add_samples()->set_metric(i == 0 ? std::string("through\0put", 11) : "throughput");
  }
  auto resp = agents_.ReportResults(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  ASSERT_EQ(resp->results_size(), 2);
  EXPECT_EQ(resp->results(0).error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_FALSE(resp->results(0).accepted());
  EXPECT_NE(resp->results(0).error_message().find("results[0].samples[0].metric"),
            std::string::npos)
      << resp->results(0).error_message();
  EXPECT_TRUE(resp->results(1).accepted()) << resp->results(1).error_message();
  EXPECT_EQ(resp->results(1).error_code(), 0);
}

// A result's figures must be usable: a NaN or infinite sample, a negative
// wall time or one past any job's length is refused in its own item; the
// job stays leased for a report that is.
TEST_F(SchedulerServiceTest, NonFiniteSamplesAndImpossibleWallTimesAreRefused) {
  LoadCatalog();
  Submit(kSpec);
  pb::RegisterResponse a = Register("a", 8);
  pb::LeaseJobsResponse l = Lease(a, 6);
  ASSERT_EQ(l.leases_size(), 6);
  pb::ReportResultsRequest req;
  for (int i = 0; i < 6; ++i) *req.add_results() = ResultFor(a, l.leases(i));
  req.mutable_results(0)->mutable_samples(0)->set_value(std::nan(""));
  req.mutable_results(1)->mutable_samples(0)->set_value(-INFINITY);
  req.mutable_results(2)->mutable_wall_time()->set_seconds(-5);
  req.mutable_results(3)->mutable_wall_time()->set_seconds(1000000000000);
  req.mutable_results(4)->mutable_wall_time()->set_nanos(-1);
  req.mutable_results(5)->mutable_wall_time()->set_seconds(3600);
  auto resp = agents_.ReportResults(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  const char* want[] = {"results[0].samples[0].value: nan is not a finite number",
                        "results[1].samples[0].value: -inf is not a finite number",
                        "results[2].wall_time: -5 s 0 ns is not a duration",
                        "results[3].wall_time: 1000000000000 s is longer than any job",
                        "results[4].wall_time: 0 s -1 ns is not a duration"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(resp->results(i).error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(resp->results(i).error_message().rfind(want[i], 0), 0u)
        << resp->results(i).error_message();
    EXPECT_FALSE(resp->results(i).accepted());
  }
  EXPECT_TRUE(resp->results(5).accepted()) << resp->results(5).error_message();
  // The single-result call refuses the same, and a good report still lands.
  pb::ReportResultRequest nan = ResultFor(a, l.leases(0));
  nan.mutable_samples(0)->set_value(std::nan(""));
  EXPECT_EQ(agents_.ReportResult(nan).status().code(), absl::StatusCode::kInvalidArgument);
  auto fine = agents_.ReportResult(ResultFor(a, l.leases(0)));
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_TRUE(fine->accepted());
}

TEST_F(SchedulerServiceTest, LeaseBatchIsClampedAndTheHostPredicateApplies) {
  LoadCatalog();
  Submit(kSpec);
  // Slots beyond the batch limit, so the clamp is what limits the lease.
  pb::RegisterResponse a = Register("a", AgentService::kMaxLeaseBatch + 5);
  EXPECT_EQ(Lease(a, 0).leases_size(), 1);  // at least one
  // An agent service whose hook refuses every job leases nothing.
  AgentService picky(&store_, &metrics_, config_,
                     [](const pb::Job&, const storage::AgentView& v) { return v.name == "b"; });
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(a.agent_id());
  lr.set_session(a.session());
  lr.set_max_jobs(AgentService::kMaxLeaseBatch + 5);
  auto none = picky.LeaseJobs(lr);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->leases_size(), 0);
  auto rest = agents_.LeaseJobs(lr);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->leases_size(), 11);
}

TEST_F(SchedulerServiceTest, CatalogsLoadImportAndLoadFromADirectoryOnce) {
  LoadCatalog();
  pb::LoadCatalogRequest again;
  again.set_yaml(kCatalog);
  EXPECT_EQ(jobs_.LoadCatalog(again).status().code(), absl::StatusCode::kAlreadyExists);
  again.set_replace(true);
  ASSERT_TRUE(jobs_.LoadCatalog(again).ok());
  pb::ImportGitCatalogRequest ig;
  ig.set_catalog("test-iommu");
  ig.set_range("v5.12..v5.13");
  ig.add_commits()->set_id("v5.12");
  ig.add_commits()->set_id("v5.13");
  auto imp = jobs_.ImportGitCatalog(ig);
  ASSERT_TRUE(imp.ok()) << imp.status();
  EXPECT_EQ(imp->added(), 1);
  pb::GetCatalogRequest gc;
  gc.set_name("test-iommu");
  auto cat = jobs_.GetCatalog(gc);
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(cat->commits_size(), 5);
  EXPECT_EQ(cat->commits(4).index(), 4);

  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "scheduler_service_test_catalogs";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string other = kCatalog;
  other.replace(other.find("test-iommu"), 10, "other-iommu");
  std::ofstream(dir / "a.yaml") << kCatalog;  // already loaded: skipped
  std::ofstream(dir / "b.yaml") << other;
  std::ofstream(dir / "notes.txt") << "not a catalog";
  auto loaded = jobs_.LoadCatalogDir(dir.string(), "builtin");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, std::vector<std::string>{"other-iommu"});
  loaded = jobs_.LoadCatalogDir(dir.string(), "builtin");
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->empty());
  auto list = jobs_.ListCatalogs(pb::ListCatalogsRequest());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->catalogs_size(), 2);
  EXPECT_EQ(list->catalogs(0).name(), "other-iommu");
  EXPECT_EQ(list->catalogs(0).source(), "builtin");
  EXPECT_EQ(jobs_.LoadCatalogDir((dir / "missing").string(), "").status().code(),
            absl::StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

TEST_F(SchedulerServiceTest, RegressionsAreListedTriagedAndTheirBisectRead) {
  store_.db().Write([&](storage::MemoryDatabase::Tables& t, storage::MemoryDatabase::Changes&) {
    pb::Regression& g = t.regressions[5].regression;
    g.set_id(5);
    g.set_state(pb::REGRESSION_STATE_CONFIRMED);
    g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
    g.set_metric("throughput");
    g.set_metric_rank("primary");
    g.set_bisect_id(9);
    pb::Bisect& b = t.bisects[9];
    b.set_id(9);
    b.set_regression_id(5);
    b.set_culprit_id("abc123");
    return 0;
  });
  auto list = analysis_.ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->regressions_size(), 1);
  pb::GetBisectRequest gb;
  gb.set_regression_id(5);
  auto b = analysis_.GetBisect(gb);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->culprit_id(), "abc123");
  pb::UpdateRegressionRequest ur;
  ur.set_regression_id(5);
  ur.set_state(pb::REGRESSION_STATE_FALSE_POSITIVE);
  ur.set_note("noise");
  auto u = analysis_.UpdateRegression(ur, kAdmin);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->state(), pb::REGRESSION_STATE_FALSE_POSITIVE);
  list = analysis_.ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->regressions_size(), 0);  // closed
  pb::GetRegressionRequest gr;
  gr.set_regression_id(5);
  auto g = analysis_.GetRegression(gr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->note(), "noise");

  // Triage goes back: a false positive reopens as confirmed, is ignored
  // (closed, listed only with include_closed) and reopens again; reopening
  // a confirmed one, or reopen together with a state, is refused.
  pb::UpdateRegressionRequest reopen;
  reopen.set_regression_id(5);
  reopen.set_reopen(true);
  auto r = analysis_.UpdateRegression(reopen, kAdmin);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state(), pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(analysis_.UpdateRegression(reopen, kAdmin).status().code(),
            absl::StatusCode::kFailedPrecondition);
  pb::UpdateRegressionRequest ignore;
  ignore.set_regression_id(5);
  ignore.set_state(pb::REGRESSION_STATE_IGNORED);
  auto i = analysis_.UpdateRegression(ignore, kAdmin);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->state(), pb::REGRESSION_STATE_IGNORED);
  list = analysis_.ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->regressions_size(), 0);
  pb::ListRegressionsRequest closed;
  closed.set_include_closed(true);
  list = analysis_.ListRegressions(closed);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->regressions_size(), 1);
  pb::UpdateRegressionRequest both = ignore;
  both.set_reopen(true);
  EXPECT_EQ(analysis_.UpdateRegression(both, kAdmin).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(analysis_.UpdateRegression(reopen, kAdmin).ok());
  EXPECT_EQ(analysis_.GetRegression(gr)->state(), pb::REGRESSION_STATE_CONFIRMED);
}

// Cancel and triage change one principal's work: another submitter is
// refused, naming itself and the owner; the owner and an admin are not. A
// regression whose matrix is unknown has no owner but the admins.
TEST_F(SchedulerServiceTest, OnlyTheOwnerOrAnAdminCancelsAMatrixOrTriagesItsRegressions) {
  LoadCatalog();
  const int64_t mine = Submit(kSpec).matrix().id();
  const int64_t theirs = Submit(OneJobSpec(), "k2").matrix().id();
  const Principal other{"mallory", Role::kSubmitter};
  pb::CancelMatrixRequest cr;
  cr.set_matrix_id(mine);
  absl::StatusOr<pb::CancelMatrixResponse> refused = jobs_.CancelMatrix(cr, other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message(),
            absl::StrCat("principal \"mallory\" (submitter): may not cancel matrix ", mine,
                         ": it belongs to \"tester\" (only its owner or an admin may)"));
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(mine);
  EXPECT_EQ(jobs_.GetMatrix(gm)->counts().cancelled(), 0);
  EXPECT_TRUE(jobs_.CancelMatrix(cr, kOwner).ok());
  cr.set_matrix_id(theirs);
  EXPECT_TRUE(jobs_.CancelMatrix(cr, kAdmin).ok());

  store_.db().Write([&](storage::MemoryDatabase::Tables& t, storage::MemoryDatabase::Changes&) {
    for (int64_t id : {1, 2}) {
      pb::Regression& g = t.regressions[id].regression;
      g.set_id(id);
      g.set_state(pb::REGRESSION_STATE_CONFIRMED);
      g.set_matrix_id(id == 1 ? mine : 999);
    }
    return 0;
  });
  pb::UpdateRegressionRequest ur;
  ur.set_regression_id(1);
  ur.set_state(pb::REGRESSION_STATE_ACKNOWLEDGED);
  absl::StatusOr<pb::Regression> triaged = analysis_.UpdateRegression(ur, other);
  EXPECT_EQ(triaged.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(triaged.status().message().find("belongs to \"tester\""), std::string::npos)
      << triaged.status();
  EXPECT_TRUE(analysis_.UpdateRegression(ur, kOwner).ok());
  ur.set_regression_id(2);
  EXPECT_EQ(analysis_.UpdateRegression(ur, kOwner).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(analysis_.UpdateRegression(ur, kAdmin).ok());
}

TEST_F(SchedulerServiceTest, EveryCulpritOfASplitBisectIsServed) {
  store_.db().Write([&](storage::MemoryDatabase::Tables& t, storage::MemoryDatabase::Changes&) {
    pb::Regression& g = t.regressions[6].regression;
    g.set_id(6);
    g.set_state(pb::REGRESSION_STATE_CONFIRMED);
    g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
    g.set_bisect_id(11);
    g.set_culprit_id("c588072bba6b");
    pb::Bisect& b = t.bisects[11];
    b.set_id(11);
    b.set_regression_id(6);
    b.set_state("done");
    b.set_culprit_id("c588072bba6b");
    for (const auto& [id, share] : std::vector<std::pair<std::string, double>>{
             {"c062db039f40", 0.43}, {"c588072bba6b", 0.57}}) {
      pb::Culprit* c = b.add_culprits();
      c->set_commit_id(id);
      c->set_share(share);
    }
    return 0;
  });
  auto ids = [](const google::protobuf::RepeatedPtrField<pb::Culprit>& cs) {
    std::vector<std::string> out;
    for (const pb::Culprit& c : cs) out.push_back(absl::StrCat(c.commit_id(), " ", c.share()));
    return out;
  };
  const std::vector<std::string> want = {"c062db039f40 0.43", "c588072bba6b 0.57"};
  auto list = analysis_.ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->regressions_size(), 1);
  EXPECT_EQ(ids(list->regressions(0).culprits()), want);
  pb::GetRegressionRequest gr;
  gr.set_regression_id(6);
  auto g = analysis_.GetRegression(gr);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(ids(g->culprits()), want);
  pb::GetBisectRequest gb;
  gb.set_regression_id(6);
  auto b = analysis_.GetBisect(gb);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ids(b->culprits()), want);
  EXPECT_EQ(b->culprit_id(), "c588072bba6b");
}

// Kernel builds at submit (kernel_builds.h): real jobs whose kernel no agent
// offers wait for one shared build job per (commit, architecture); what
// nothing can run is named at submit and fails after the wait.
class KernelBuildsTest : public SchedulerServiceTest {
 protected:
  static std::string FioSpec(const std::string& name, const std::string& platform) {
    return absl::StrCat("name: ", name, "\ncatalog: test-iommu\nplatform: ", platform,
                        "\ncommits: [v5.10, v5.11]\nmodes: [strict]\n",
                        "workloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k}\n",
                        "repeats: 1\nexecutor: fio\n");
  }
  // A vm agent booting the kernels of `commits` under q35 + intel-iommu.
  static pb::Capability VmFio(const std::vector<std::string>& commits) {
    pb::Capability c;
    c.set_name("fio");
    for (const std::string& commit : commits) {
      pb::KernelOffer* o = c.add_kernels();
      o->set_provider("vm");
      o->set_commit(commit);
      o->set_release("6.1.0-g" + commit);
      o->set_machine_model("q35+intel-iommu");
      o->set_architecture("x86_64");
      o->add_modes(pb::IOMMU_MODE_STRICT);
    }
    return c;
  }
  pb::RegisterResponse RegisterWith(const std::string& name, const pb::Capability& cap) {
    pb::RegisterRequest req;
    req.set_name(name);
    *req.add_capabilities() = cap;
    req.set_slots(4);
    auto resp = agents_.Register(req);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : pb::RegisterResponse();
  }
  pb::RegisterResponse RegisterBuilder() {
    pb::Capability c;
    c.set_name("kbuild");
    pb::BuildOffer* b = c.add_builds();
    b->set_catalog("test-iommu");
    b->set_tree("/src/linux");
    b->add_architectures("x86_64");
    return RegisterWith("builder", c);
  }
  // The vm agent's next lease, its offers now the kernels of `commits` (as
  // after a build landed in its store).
  absl::StatusOr<pb::LeaseJobsResponse> LeaseOffering(const pb::RegisterResponse& vm,
                                                      const std::vector<std::string>& commits) {
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(vm.agent_id());
    lr.set_session(vm.session());
    lr.set_max_jobs(10);
    *lr.add_capabilities() = VmFio(commits);
    return agents_.LeaseJobs(lr);
  }
  std::set<std::string> LeasedCommits(const pb::LeaseJobsResponse& r) {
    std::set<std::string> out;
    for (const pb::JobLease& l : r.leases()) out.insert(l.job().commit_id());
    return out;
  }
};

// A try job's `patch:`: the base and its try commit at the base's place;
// the try commit's build job carries the patch, and its jobs run on the
// build stored under the try id.
TEST_F(KernelBuildsTest, APatchIsBuiltOnItsBaseAsTheTryCommit) {
  LoadCatalog();
  pb::RegisterResponse vm = RegisterWith("vm", VmFio({"v5.10"}));
  pb::RegisterResponse builder = RegisterBuilder();
  const std::string patch = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
  std::string spec = FioSpec("patched", "q35-intel-iommu");
  spec.replace(spec.find("[v5.10, v5.11]"), 14, "[v5.10]");
  spec += "patch: |\n  --- a/f\n  +++ b/f\n  @@ -1 +1 @@\n  -a\n  +b\n";
  const pb::SubmitMatrixResponse submitted = Submit(spec);
  EXPECT_EQ(submitted.jobs_created(), 2);
  ASSERT_EQ(submitted.build_job_ids_size(), 1);
  const std::string try_id = proto::TryCommitId("v5.10", patch);

  const pb::LeaseJobsResponse base = Lease(vm, 10);
  ASSERT_EQ(LeasedCommits(base), (std::set<std::string>{"v5.10"}));
  pb::LeaseJobsResponse build = Lease(builder, 10);
  ASSERT_EQ(build.leases_size(), 1);
  const pb::Job& job = build.leases(0).job();
  EXPECT_EQ(job.commit_id(), try_id);
  EXPECT_EQ(job.commit_index(), base.leases(0).job().commit_index()) << "the base's place";
  ASSERT_EQ(job.workload().params().count(proto::kPatchParam), 1u);
  EXPECT_EQ(job.workload().params().at(proto::kPatchParam), patch);
  ASSERT_TRUE(agents_.ReportResult(ResultFor(builder, build.leases(0))).ok());

  auto after = LeaseOffering(vm, {"v5.10", try_id});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(LeasedCommits(*after), (std::set<std::string>{try_id}));
  // The patch is the build's: the measured job's params are the base's.
  ASSERT_EQ(after->leases_size(), 1);
  EXPECT_EQ(after->leases(0).job().workload().params().count(proto::kPatchParam), 0u);
}

TEST_F(KernelBuildsTest, UnofferedKernelsAreBuiltOnceAndTheirJobsRunAfter) {
  LoadCatalog();
  pb::RegisterResponse vm = RegisterWith("vm", VmFio({"v5.10"}));
  pb::RegisterResponse builder = RegisterBuilder();

  pb::SubmitMatrixRequest dry;
  dry.set_spec_yaml(FioSpec("try", "q35-intel-iommu"));
  dry.set_dry_run(true);
  auto planned = jobs_.SubmitMatrix(dry, "tester");
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_EQ(planned->warnings_size(), 1);
  EXPECT_EQ(planned->warnings(0), "kernels to build first: 1 new, 0 already built or queued");

  const pb::SubmitMatrixResponse first = Submit(FioSpec("first", "q35-intel-iommu"));
  ASSERT_EQ(first.build_job_ids_size(), 1);
  EXPECT_NE(first.build_matrix_id(), 0);
  const pb::SubmitMatrixResponse second = Submit(FioSpec("second", "q35-intel-iommu"));
  ASSERT_EQ(second.build_job_ids_size(), 1);
  EXPECT_EQ(second.build_job_ids(0), first.build_job_ids(0)) << "one build per commit";
  EXPECT_EQ(second.build_matrix_id(), 0);

  // v5.10 runs at once; v5.11 waits for its build.
  EXPECT_EQ(LeasedCommits(Lease(vm, 10)), (std::set<std::string>{"v5.10"}));
  auto waiting = store_.GetMatrix(first.matrix().id());
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->counts().waiting_for_build(), 1);

  pb::LeaseJobsResponse build = Lease(builder, 10);
  ASSERT_EQ(build.leases_size(), 1);
  EXPECT_EQ(build.leases(0).job().id(), first.build_job_ids(0));
  EXPECT_EQ(build.leases(0).job().commit_id(), "v5.11");
  EXPECT_EQ(build.leases(0).job().platform(), "x86_64");
  ASSERT_TRUE(agents_.ReportResult(ResultFor(builder, build.leases(0))).ok());

  // The vm agent's store now holds v5.11: its next lease says so.
  auto after = LeaseOffering(vm, {"v5.10", "v5.11"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(LeasedCommits(*after), (std::set<std::string>{"v5.11"}));
  EXPECT_EQ(after->leases_size(), 2) << "both matrices' v5.11 jobs";
  for (const pb::JobLease& l : after->leases()) {
    EXPECT_EQ(l.job().waits_for_job(), first.build_job_ids(0));
  }
}

// The matrix store as a second submit racing this one sees it: right after
// this submit's first read of the live builds, the other submit makes the
// build this one found missing.
class RacingMatrixStore final : public storage::MatrixStore {
 public:
  RacingMatrixStore(storage::MatrixStore* real, std::function<void()> race)
      : real_(real), race_(std::move(race)) {}
  absl::StatusOr<storage::CreatedMatrix> CreateMatrix(const storage::NewMatrix& m) override {
    return real_->CreateMatrix(m);
  }
  absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) override { return real_->GetMatrix(id); }
  absl::StatusOr<std::vector<pb::JobFailure>> ListFailures(int64_t id, int limit) override {
    return real_->ListFailures(id, limit);
  }
  absl::StatusOr<std::vector<pb::Matrix>> ListMatrices(int limit, int64_t before_id) override {
    return real_->ListMatrices(limit, before_id);
  }
  absl::StatusOr<std::pair<pb::Matrix, int64_t>> CancelMatrix(int64_t id,
                                                              const std::string& reason) override {
    return real_->CancelMatrix(id, reason);
  }
  absl::StatusOr<std::vector<pb::Result>> ListResults(int64_t matrix_id, int64_t after_job_id,
                                                      int limit, bool include_raw,
                                                      int64_t max_raw_bytes) override {
    return real_->ListResults(matrix_id, after_job_id, limit, include_raw, max_raw_bytes);
  }
  absl::StatusOr<storage::RawOutputSlice> ReadRawOutput(int64_t job_id, int attempt,
                                                        int64_t from_char,
                                                        int64_t max_chars) override {
    return real_->ReadRawOutput(job_id, attempt, from_char, max_chars);
  }
  absl::StatusOr<std::vector<pb::Job>> LiveBuildJobs(
      const std::string& catalog, const std::vector<std::string>& commits) override {
    absl::StatusOr<std::vector<pb::Job>> live = real_->LiveBuildJobs(catalog, commits);
    if (race_) std::exchange(race_, nullptr)();
    return live;
  }
  absl::StatusOr<std::vector<pb::JobProgress>> ListBuilding(int64_t matrix_id) override {
    return real_->ListBuilding(matrix_id);
  }

 private:
  storage::MatrixStore* real_;
  std::function<void()> race_;
};

// A kernel config names its builds and its jobs' kernels: a job runs only
// on an offer of its config; a dma-map-bench job's kernel is another build
// (the dma-map-bench fragment), fio's default build keeps its key.
TEST_F(KernelBuildsTest, KernelConfigsAndDmaMapBenchGetTheirOwnBuilds) {
  LoadCatalog();
  pb::RegisterResponse vm = RegisterWith("vm", VmFio({"v5.10"}));
  pb::RegisterResponse builder = RegisterBuilder();
  std::string lazy_spec = FioSpec("lazy", "q35-intel-iommu");
  lazy_spec.replace(lazy_spec.find("[v5.10, v5.11]"), 14, "[v5.10]");
  lazy_spec +=
      "kernel_config: {base: defconfig, fragments: [{name: l.config, text: "
      "\"CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\\n\"}]}\n";
  std::string dma_spec = FioSpec("dma", "q35-intel-iommu");
  dma_spec.replace(dma_spec.find("[v5.10, v5.11]"), 14, "[v5.10]");
  dma_spec.replace(dma_spec.find("executor: fio"), 13, "executor: dma-map-bench");
  dma_spec.replace(dma_spec.find("fio-nvme\n    params: {rw: randread, bs: 4k}"), 41,
                   "dma-map-bench");
  const pb::SubmitMatrixResponse lazy = Submit(lazy_spec);
  const pb::SubmitMatrixResponse dma = Submit(dma_spec);
  // v5.10's default fio kernel is offered; the others are built.
  ASSERT_EQ(lazy.build_job_ids_size(), 1);
  ASSERT_EQ(dma.build_job_ids_size(), 1);
  EXPECT_NE(lazy.build_job_ids(0), dma.build_job_ids(0));
  pb::LeaseJobsResponse builds = Lease(builder, 10);
  ASSERT_EQ(builds.leases_size(), 2);
  std::set<std::string> configs;
  for (const pb::JobLease& l : builds.leases()) {
    configs.insert(l.job().workload().params().at(proto::kKernelConfigParam));
    ASSERT_TRUE(agents_.ReportResult(ResultFor(builder, l)).ok());
  }
  const std::string lazy_id = configs.begin()->size() == 16 ? *configs.begin() : *configs.rbegin();
  EXPECT_EQ(configs, (std::set<std::string>{lazy_id, "dma-map-bench"}));
  // The default v5.10 offer runs neither matrix's jobs.
  EXPECT_EQ(Lease(vm, 10).leases_size(), 0);
  // An offer of v5.10 built with the lazy config runs the lazy job.
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(vm.agent_id());
  lr.set_session(vm.session());
  lr.set_max_jobs(10);
  pb::Capability cap = VmFio({"v5.10"});
  cap.mutable_kernels(0)->set_kernel_config(lazy_id);
  *lr.add_capabilities() = cap;
  auto leased = agents_.LeaseJobs(lr);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->leases_size(), 1);
  EXPECT_EQ(leased->leases(0).job().matrix_id(), lazy.matrix().id());
  EXPECT_EQ(leased->leases(0).job().workload().params().at(proto::kKernelConfigParam), lazy_id);
}

TEST_F(KernelBuildsTest, ABadKernelConfigIsRefusedAtSubmitNamingTheField) {
  LoadCatalog();
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(FioSpec("bad", "q35-intel-iommu") +
                    "kernel_config: {base: bigconfig, fragments: [{name: f.config, text: "
                    "\"CONFIG_A=y\\nnot a line\\n\"}, missing.config]}\n");
  auto resp = jobs_.SubmitMatrix(req, "tester");
  ASSERT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument) << resp.status();
  const std::string why(resp.status().message());
  EXPECT_NE(why.find("kernel_config.base: unknown base \"bigconfig\""), std::string::npos) << why;
  EXPECT_NE(why.find("kernel_config.fragments[0]: line 2 is not CONFIG_X=value"), std::string::npos)
      << why;
  EXPECT_NE(why.find("kernel_config.fragments[1]: \"missing.config\" was not read"),
            std::string::npos)
      << why;
}

TEST_F(KernelBuildsTest, ConcurrentSubmitsShareOneBuild) {
  LoadCatalog();
  RegisterWith("vm", VmFio({"v5.10"}));
  RegisterBuilder();
  pb::SubmitMatrixResponse other;
  RacingMatrixStore racing(&store_, [&] { other = Submit(FioSpec("other", "q35-intel-iommu")); });
  JobService racing_jobs(&store_, &racing, &store_, &metrics_, config_);
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(FioSpec("mine", "q35-intel-iommu"));
  auto mine = racing_jobs.SubmitMatrix(req, "tester");
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(other.build_job_ids_size(), 1);
  ASSERT_EQ(mine->build_job_ids_size(), 1);
  EXPECT_EQ(mine->build_job_ids(0), other.build_job_ids(0)) << "one build per commit";
  EXPECT_EQ(mine->build_matrix_id(), 0) << "this submit made no build matrix";
  auto live = store_.LiveBuildJobs("test-iommu", {"v5.11"});
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(live->size(), 1u);
  auto waiting = store_.GetMatrix(mine->matrix().id());
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->counts().waiting_for_build(), 1);
}

TEST_F(KernelBuildsTest, AFailedBuildFailsTheJobsWaitingForIt) {
  LoadCatalog();
  RegisterWith("vm", VmFio({"v5.10"}));
  pb::RegisterResponse builder = RegisterBuilder();
  const pb::SubmitMatrixResponse m = Submit(FioSpec("broken", "q35-intel-iommu"));
  ASSERT_EQ(m.build_job_ids_size(), 1);
  pb::LeaseJobsResponse build = Lease(builder, 1);
  ASSERT_EQ(build.leases_size(), 1);
  pb::ReportFailureRequest f;
  f.set_agent_id(builder.agent_id());
  *f.mutable_lease() = build.leases(0).lease();
  f.set_reason("build failed at 0123456789ab: drivers/iommu/iova.c:9: error: oops");
  f.set_retryable(false);
  ASSERT_TRUE(agents_.ReportFailure(f).ok());
  ASSERT_TRUE(reaper_.RunOnce().ok());
  auto counts = store_.GetMatrix(m.matrix().id());
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->counts().failed(), 1);
  EXPECT_EQ(counts->counts().waiting_for_build(), 0);
  // A later matrix builds the commit again rather than sharing a failed build.
  const pb::SubmitMatrixResponse again = Submit(FioSpec("again", "q35-intel-iommu"));
  ASSERT_EQ(again.build_job_ids_size(), 1);
  EXPECT_NE(again.build_job_ids(0), m.build_job_ids(0));
}

// A lab host: platform label "lab", x86_64, its fio capability the kexec
// provider's offers of `commits` built with `kernel_config` (none: the
// host's own kernel, 6.1.0-lab, which runs none of the catalog's commits).
pb::RegisterRequest LabAgent(const std::string& name, const std::string& arch,
                             const std::vector<std::string>& commits = {},
                             const std::string& kernel_config = "") {
  pb::RegisterRequest req;
  req.set_name(name);
  req.set_slots(1);
  pb::HostFacts* host = req.mutable_host();
  host->set_kernel_release("6.1.0-lab");
  host->set_architecture(arch);
  host->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  (*host->mutable_labels())[proto::kPlatformLabel] = "lab";
  pb::Capability* fio = req.add_capabilities();
  fio->set_name("fio");
  for (const std::string& commit : commits) {
    pb::KernelOffer* o = fio->add_kernels();
    o->set_provider("kexec");
    o->set_commit(commit);
    o->set_release("6.1.192-g" + commit);
    o->set_architecture(arch);
    o->set_kernel_config(kernel_config);
    o->add_modes(pb::IOMMU_MODE_STRICT);
  }
  return req;
}

pb::KernelConfig LabConfigText(const std::string& text) {
  pb::KernelConfig c;
  c.set_base("lab-1.config");
  c.set_base_text(text);
  return c;
}

// A host platform's kernel is built, by a build agent, with the config the
// lab hosts file names for its host (the matrix names none), for the
// architecture its agents run, as a host build; the host's kexec offer of
// that build runs the job, an offer of the same config built for guests
// does not.
TEST_F(KernelBuildsTest, AHostPlatformsKernelIsBuiltWithItsLabConfigForItsArchitecture) {
  SchedulerConfig cfg = config_;
  const pb::KernelConfig lab = LabConfigText("CONFIG_BLK_DEV_NVME=y\nCONFIG_EXT4_FS=y\n");
  const std::string id = proto::KernelConfigId(lab);
  cfg.lab_kernel_configs = {{"lab-1", lab}};
  JobService jobs(&store_, &store_, &store_, &metrics_, cfg);
  LoadCatalog();
  auto host = agents_.Register(LabAgent("lab-1", "x86_64"));
  ASSERT_TRUE(host.ok()) << host.status();
  pb::RegisterResponse builder = RegisterBuilder();
  std::string spec = FioSpec("lab-run", "lab");
  spec.replace(spec.find("[v5.10, v5.11]"), 14, "[v5.10]");
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(spec);
  auto m = jobs.SubmitMatrix(req, "tester");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->build_job_ids_size(), 1);
  ASSERT_EQ(m->warnings_size(), 1);
  EXPECT_EQ(m->warnings(0), absl::StrCat("kernel_config: lab's hosts' config ", id,
                                         " (lab-1.config, agent lab-1 in farm-scheduler "
                                         "--lab-hosts)"));

  pb::LeaseJobsResponse build = Lease(builder, 10);
  ASSERT_EQ(build.leases_size(), 1);
  const pb::Job& b = build.leases(0).job();
  EXPECT_EQ(b.platform(), "x86_64");
  EXPECT_EQ(b.workload().params().at(proto::kKernelConfigParam), id + "+host");
  auto text = proto::DecodeKernelConfig(b.workload().params().at(proto::kKernelConfigTextParam));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->base_text(), lab.base_text());
  ASSERT_TRUE(agents_.ReportResult(ResultFor(builder, build.leases(0))).ok());

  // The job carries the lab's config; the host's offer of a guest build of
  // it does not run it, its host build does.
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(host->agent_id());
  lr.set_session(host->session());
  lr.set_max_jobs(1);
  *lr.add_capabilities() = LabAgent("lab-1", "x86_64", {"v5.10"}, id).capabilities(0);
  auto guest_build = agents_.LeaseJobs(lr);
  ASSERT_TRUE(guest_build.ok()) << guest_build.status();
  EXPECT_EQ(guest_build->leases_size(), 0);
  *lr.mutable_capabilities(0) =
      LabAgent("lab-1", "x86_64", {"v5.10"}, id + "+host").capabilities(0);
  auto leased = agents_.LeaseJobs(lr);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->leases_size(), 1);
  EXPECT_EQ(leased->leases(0).job().matrix_id(), m->matrix().id());
  EXPECT_EQ(leased->leases(0).job().workload().params().at(proto::kKernelConfigParam), id);
}

// What stops a host platform's kernel from being built is said at submit:
// no config, no registered agent to say the architecture, no builder of
// it; two hosts of one matrix naming two configs, or a vm platform beside
// the lab's, are refused.
TEST_F(KernelBuildsTest, AHostPlatformsKernelThatCannotBeBuiltSaysWhy) {
  LoadCatalog();
  RegisterBuilder();  // x86_64 only
  std::string spec = FioSpec("lab-run", "lab");
  spec.replace(spec.find("[v5.10, v5.11]"), 14, "[v5.10]");
  const std::string with_config =
      spec +
      "kernel_config: {base: defconfig, fragments: [{name: l.config, text: "
      "\"CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\\n\"}]}\n";
  const std::string cell = "v5.10 on lab in mode strict under fio: no agent offers this kernel, ";
  pb::SubmitMatrixResponse m = Submit(with_config);
  EXPECT_THAT(absl::StrJoin(m.warnings(), "\n"),
              ::testing::HasSubstr(cell + "and no agent of platform lab is registered to say its "
                                          "architecture; its jobs fail after 1h"));
  ASSERT_TRUE(agents_.Register(LabAgent("lab-1", "x86_64")).ok());
  m = Submit(spec);
  EXPECT_THAT(absl::StrJoin(m.warnings(), "\n"),
              ::testing::HasSubstr(
                  cell + "and a host platform's kernel is built only with a kernel config"));
  EXPECT_EQ(m.build_job_ids_size(), 0);
  ASSERT_TRUE(agents_.Register(LabAgent("lab-2", "aarch64")).ok());
  m = Submit(with_config);
  EXPECT_THAT(absl::StrJoin(m.warnings(), "\n"),
              ::testing::HasSubstr(cell + "and the agents of platform lab run aarch64 and "
                                          "x86_64: a platform's kernel is built for one"));
  pb::RegisterRequest arm = LabAgent("lab-2", "aarch64");
  (*arm.mutable_host()->mutable_labels())[proto::kPlatformLabel] = "lab-arm";
  ASSERT_TRUE(agents_.Register(arm).ok());
  std::string arm_spec = with_config;
  arm_spec.replace(arm_spec.find("platform: lab"), 13, "platform: lab-arm");
  m = Submit(arm_spec);
  EXPECT_THAT(absl::StrJoin(m.warnings(), "\n"),
              ::testing::HasSubstr("no agent offers this kernel, and none builds catalog "
                                   "test-iommu for aarch64"));

  SchedulerConfig cfg = config_;
  cfg.lab_kernel_configs = {{"lab-1", LabConfigText("CONFIG_EXT4_FS=y\n")},
                            {"lab-2", LabConfigText("CONFIG_XFS_FS=y\n")}};
  JobService jobs(&store_, &store_, &store_, &metrics_, cfg);
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(absl::StrReplaceAll(spec, {{"platform: lab", "platform: [lab, lab-arm]"}}));
  auto two = jobs.SubmitMatrix(req, "tester");
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(two.status().message()),
              ::testing::HasSubstr("names two kernel configs for this matrix's hosts"));
  req.set_spec_yaml(absl::StrReplaceAll(spec, {{"platform: lab", "platform: [lab, q35-vtd]"}}));
  auto mixed = jobs.SubmitMatrix(req, "tester");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mixed.status().message()),
              ::testing::HasSubstr("would be built for vm platform q35-vtd too"));
  // The spec's own config wins over the lab's.
  req.set_spec_yaml(with_config);
  auto own = jobs.SubmitMatrix(req, "tester");
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->build_job_ids_size(), 1);
}

TEST_F(KernelBuildsTest, JobsNothingCanRunAreNamedAtSubmitAndFailAfterTheWait) {
  LoadCatalog();
  RegisterWith("vm", VmFio({"v5.10"}));
  RegisterBuilder();  // x86_64 only
  const pb::SubmitMatrixResponse m = Submit(FioSpec("arm", "virt-smmuv3"));
  EXPECT_EQ(m.build_job_ids_size(), 0);
  ASSERT_EQ(m.warnings_size(), 2);
  EXPECT_EQ(m.warnings(0),
            "v5.10 on virt-smmuv3 in mode strict under fio: no agent offers this kernel, and "
            "none builds catalog test-iommu for aarch64; its jobs fail after 1h unless an agent "
            "that can run them registers");
  ASSERT_TRUE(reaper_.RunOnce().ok());
  auto before = store_.GetMatrix(m.matrix().id());
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->counts().failed(), 0);
  clock_.Advance(config_.unrunnable_wait);
  ASSERT_TRUE(reaper_.RunOnce().ok());
  auto after = store_.GetMatrix(m.matrix().id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->counts().failed(), 2);
  EXPECT_EQ(after->state(), pb::MATRIX_STATE_FAILED);
}

}  // namespace
}  // namespace farm::scheduler
