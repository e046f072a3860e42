// farm-scheduler in-process over real gRPC and a real PostgreSQL: the
// server is started on port 0 and called through the generated stubs.
#include <future>
#include <map>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/auth/auth.h"
#include "lib/metrics/metrics.h"
#include "proto/kernel_config.h"
#include "scheduler/server.h"
#include "testing/service_harness.h"

namespace farm::scheduler {
namespace {

using ::farm::testing::PostgresInstance;

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

const char* const kSpec = R"(
name: grpc-test
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

class SchedulerGrpcPgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.db_uri = pg_->Uri("farm");
    o.token = "s3cret";
    o.config.lease_ttl = absl::Seconds(2);
    o.config.retry.base_backoff = absl::Milliseconds(10);
    o.db_connections = 4;
    o.worker_threads = 4;
    o.watch.fallback_poll = watch_fallback_;
    o.config.lab_kernel_configs = lab_kernel_configs_;
    auto s = SchedulerServer::Start(o, &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    jobs_ = pb::JobService::NewStub(channel_);
    agents_ = pb::AgentService::NewStub(channel_);
    analysis_ = pb::AnalysisService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(2));
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "s3cret") {
    auto c = std::make_unique<grpc::ClientContext>();
    auth::AttachBearer(c.get(), token);
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return c;
  }

  void LoadCatalog() {
    pb::LoadCatalogRequest req;
    req.set_yaml(kCatalog);
    req.set_source_name("test.yaml");
    pb::LoadCatalogResponse resp;
    grpc::Status st = jobs_->LoadCatalog(Ctx().get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.catalog().commits_size(), 4);
  }

  // An agent named "builder" that builds catalog test-iommu for x86_64.
  pb::RegisterResponse RegisterBuilder() {
    pb::RegisterRequest reg;
    reg.set_name("builder");
    pb::Capability* kbuild = reg.add_capabilities();
    kbuild->set_name("kbuild");
    pb::BuildOffer* offer = kbuild->add_builds();
    offer->set_catalog("test-iommu");
    offer->set_tree("/src/linux");
    offer->add_architectures("x86_64");
    reg.set_slots(4);
    pb::RegisterResponse builder;
    const grpc::Status st = agents_->Register(Ctx().get(), reg, &builder);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return builder;
  }

  pb::RegisterResponse Register(const std::string& name) {
    pb::RegisterRequest req;
    req.set_name(name);
    req.add_capabilities()->set_name("emulator");
    req.set_slots(4);
    pb::RegisterResponse resp;
    grpc::Status st = agents_->Register(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  pb::LeaseJobsResponse LeaseVia(const pb::RegisterResponse& a, int max_jobs) {
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(a.agent_id());
    lr.set_session(a.session());
    lr.set_max_jobs(max_jobs);
    pb::LeaseJobsResponse leases;
    grpc::Status st = agents_->LeaseJobs(Ctx().get(), lr, &leases);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return leases;
  }

  absl::Duration watch_fallback_ = absl::Seconds(2);
  // farm-scheduler --lab-hosts' kernel configs, by agent name.
  std::map<std::string, pb::KernelConfig> lab_kernel_configs_;
  std::unique_ptr<PostgresInstance> pg_;
  metrics::MetricsRegistry registry_;
  std::unique_ptr<SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AgentService::Stub> agents_;
  std::unique_ptr<pb::AnalysisService::Stub> analysis_;
};

TEST_F(SchedulerGrpcPgTest, RejectsMissingOrWrongToken) {
  pb::ListCatalogsRequest req;
  pb::ListCatalogsResponse resp;
  grpc::ClientContext bare;
  EXPECT_EQ(jobs_->ListCatalogs(&bare, req, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(jobs_->ListCatalogs(Ctx("wrong").get(), req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(jobs_->ListCatalogs(Ctx().get(), req, &resp).ok());
}

TEST_F(SchedulerGrpcPgTest, HealthServiceServes) {
  // grpc.health.v1.Health/Check with an empty request; SERVING = field 1 value 1.
  grpc::GenericStub generic(channel_);
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1);  // empty HealthCheckRequest
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  auto ctx = Ctx();
  generic.UnaryCall(ctx.get(), "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done.set_value(s); });
  grpc::Status st = done.get_future().get();
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

TEST_F(SchedulerGrpcPgTest, SpecErrorsComeBackAsInvalidArgumentNamingTheField) {
  LoadCatalog();
  std::string bad = kSpec;
  bad.replace(bad.find("[off, strict]"), 13, "[off, stict]");
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(bad);
  pb::SubmitMatrixResponse resp;
  grpc::Status st = jobs_->SubmitMatrix(Ctx().get(), req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "modes[1]: unknown mode \"stict\" (expected off, passthrough, strict, lazy)");
  std::string unknown_catalog = kSpec;
  unknown_catalog.replace(unknown_catalog.find("catalog: test-iommu"), 19, "catalog: nope");
  req.set_spec_yaml(unknown_catalog);
  st = jobs_->SubmitMatrix(Ctx().get(), req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("catalog: unknown catalog \"nope\""), std::string::npos);
  // Dry run: counted, nothing created.
  req.set_spec_yaml(kSpec);
  req.set_dry_run(true);
  st = jobs_->SubmitMatrix(Ctx().get(), req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.matrix().counts().total(), 3 * 2 * 2);
  EXPECT_EQ(resp.jobs_created(), 0);
  pb::ListMatricesResponse list;
  ASSERT_TRUE(jobs_->ListMatrices(Ctx().get(), pb::ListMatricesRequest(), &list).ok());
  EXPECT_EQ(list.matrices_size(), 0);
}

TEST_F(SchedulerGrpcPgTest, MatrixRunsToCompletionWithWatchAndResults) {
  LoadCatalog();
  pb::GetCatalogRequest gc;
  gc.set_name("test-iommu");
  gc.set_resolve(true);
  pb::Catalog cat;
  ASSERT_TRUE(jobs_->GetCatalog(Ctx().get(), gc, &cat).ok());
  EXPECT_EQ(cat.commits(3).resolved().at("fq.kind"), "percpu");
  EXPECT_EQ(cat.commits(3).resolved().at("iova.allocator"), "rcache");

  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(kSpec);
  pb::SubmitMatrixResponse sub;
  grpc::Status st = jobs_->SubmitMatrix(Ctx().get(), req, &sub);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(sub.jobs_created(), 12);
  const int64_t mid = sub.matrix().id();

  // Watch in the background from the start.
  std::vector<pb::MatrixProgress> progress;
  grpc::Status watch_status;
  std::thread watcher([&] {
    pb::WatchMatrixRequest w;
    w.set_matrix_id(mid);
    auto ctx = Ctx();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto reader = jobs_->WatchMatrix(ctx.get(), w);
    pb::MatrixProgress p;
    while (reader->Read(&p)) progress.push_back(p);
    watch_status = reader->Finish();
  });

  pb::RegisterResponse a = Register("agent-1");
  ASSERT_GT(a.agent_id(), 0);
  EXPECT_EQ(a.lease_ttl().seconds(), 2);
  std::set<std::string> commits;
  int reported = 0;
  for (int round = 0; round < 10 && reported < 12; ++round) {
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(a.agent_id());
    lr.set_session(a.session());
    lr.set_max_jobs(5);
    pb::LeaseJobsResponse leases;
    ASSERT_TRUE(agents_->LeaseJobs(Ctx().get(), lr, &leases).ok());
    EXPECT_LE(leases.leases_size(), 5);
    for (const pb::JobLease& l : leases.leases()) {
      commits.insert(l.job().commit_id());
      EXPECT_EQ(l.job().workload().params().at("tests"), "write,read");
      pb::ReportResultRequest rr;
      rr.set_agent_id(a.agent_id());
      *rr.mutable_lease() = l.lease();
      auto* s = rr.add_samples();
      s->set_metric("throughput");
      s->set_value(100 + l.job().repeat());
      rr.set_raw_output("raw-" + std::to_string(l.job().id()));
      rr.set_raw_format("emu-json");
      pb::ReportResultResponse resp;
      ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &resp).ok());
      EXPECT_TRUE(resp.accepted());
      // Retrying the same report is harmless.
      ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &resp).ok());
      EXPECT_TRUE(resp.duplicate());
      ++reported;
    }
  }
  EXPECT_EQ(reported, 12);
  EXPECT_EQ(commits, (std::set<std::string>{"aaa111", "v5.11", "v5.12"}));
  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status.error_message();
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(progress.back().done());
  EXPECT_EQ(progress.back().state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(progress.back().counts().succeeded(), 12);
  for (size_t i = 0; i + 1 < progress.size(); ++i) EXPECT_FALSE(progress[i].done());

  pb::GetResultsRequest gr;
  gr.set_matrix_id(mid);
  gr.set_include_raw_output(true);
  auto ctx = Ctx();
  auto reader = jobs_->GetResults(ctx.get(), gr);
  pb::Result r;
  std::set<int64_t> ids;
  while (reader->Read(&r)) {
    ids.insert(r.job_id());
    EXPECT_EQ(r.raw_output(), "raw-" + std::to_string(r.job_id()));
    EXPECT_EQ(r.agent(), "agent-1");
    EXPECT_EQ(r.samples_size(), 1);
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(ids.size(), 12u);

  // "connected" means a heartbeat within the TTL (2 s here); on a loaded
  // machine the steps above can take longer than that, so beat first.
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  pb::HeartbeatResponse hbr;
  ASSERT_TRUE(agents_->Heartbeat(Ctx().get(), hb, &hbr).ok());
  pb::ListAgentsResponse agents;
  ASSERT_TRUE(jobs_->ListAgents(Ctx().get(), pb::ListAgentsRequest(), &agents).ok());
  ASSERT_EQ(agents.agents_size(), 1);
  EXPECT_TRUE(agents.agents(0).connected());
  const std::string m = registry_.Serialize();
  EXPECT_NE(m.find("farm_results_ingested_total 12"), std::string::npos) << m;
  EXPECT_NE(m.find("farm_leases_granted_total 12"), std::string::npos) << m;
  EXPECT_NE(m.find("farm_matrices_submitted_total 1"), std::string::npos) << m;
}

TEST_F(SchedulerGrpcPgTest, StaleResultRejectedAfterLeaseExpiresAndIsRegranted) {
  LoadCatalog();
  std::string one = kSpec;
  one.replace(one.find("aaa111..v5.12"), 13, "[v5.12]");
  one.replace(one.find("[off, strict]"), 13, "[off]");
  one.replace(one.find("repeats: 2"), 10, "repeats: 1");
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(one);
  pb::SubmitMatrixResponse sub;
  ASSERT_TRUE(jobs_->SubmitMatrix(Ctx().get(), req, &sub).ok());
  ASSERT_EQ(sub.jobs_created(), 1);

  pb::RegisterResponse slow = Register("slow");
  pb::RegisterResponse fast = Register("fast");
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(slow.agent_id());
  lr.set_session(slow.session());
  lr.set_max_jobs(1);
  pb::LeaseJobsResponse first;
  ASSERT_TRUE(agents_->LeaseJobs(Ctx().get(), lr, &first).ok());
  ASSERT_EQ(first.leases_size(), 1);

  // "slow" stops heartbeating; the in-process reaper requeues after the
  // 2 s TTL and "fast" gets the job.
  lr.set_agent_id(fast.agent_id());
  lr.set_session(fast.session());
  pb::LeaseJobsResponse second;
  auto st = ::farm::testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        grpc::Status s = agents_->LeaseJobs(Ctx().get(), lr, &second);
        if (!s.ok()) return absl::InternalError(s.error_message());
        return second.leases_size() == 1;
      },
      absl::Seconds(30), "job re-leased after TTL");
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(second.leases(0).lease().attempt(), 2);

  // The slow agent wakes up: heartbeat says revoked, result is rejected.
  pb::HeartbeatRequest hb;
  hb.set_agent_id(slow.agent_id());
  hb.set_session(slow.session());
  *hb.add_leases() = first.leases(0).lease();
  pb::HeartbeatResponse hbr;
  ASSERT_TRUE(agents_->Heartbeat(Ctx().get(), hb, &hbr).ok());
  ASSERT_EQ(hbr.revoked_size(), 1);
  EXPECT_EQ(hbr.extended_size(), 0);
  pb::ReportResultRequest rr;
  rr.set_agent_id(slow.agent_id());
  *rr.mutable_lease() = first.leases(0).lease();
  pb::ReportResultResponse resp;
  EXPECT_EQ(agents_->ReportResult(Ctx().get(), rr, &resp).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  rr.set_agent_id(fast.agent_id());
  *rr.mutable_lease() = second.leases(0).lease();
  ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &resp).ok());
  EXPECT_TRUE(resp.accepted());
  const std::string m = registry_.Serialize();
  EXPECT_NE(m.find("farm_stale_results_rejected_total 1"), std::string::npos) << m;
  EXPECT_NE(m.find("farm_leases_expired_total 1"), std::string::npos) << m;

  // Unknown session: NOT_FOUND (the agent re-registers).
  hb.set_session("bogus");
  EXPECT_EQ(agents_->Heartbeat(Ctx().get(), hb, &hbr).error_code(), grpc::StatusCode::NOT_FOUND);
}

// A matrix's kernel config is part of its kernels' build key: two matrices
// of one commit with other configs get two build jobs (the unique index
// jobs_live_build_key_idx takes the config), the same config shares one, and
// the build job carries the config to the builder.
TEST_F(SchedulerGrpcPgTest, MatricesOfOtherKernelConfigsGetOtherBuildJobs) {
  LoadCatalog();
  const pb::RegisterResponse builder = RegisterBuilder();
  ASSERT_FALSE(HasFailure());

  auto submit = [&](const std::string& name, const std::string& kernel_config) {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(absl::StrCat(
        "name: ", name, "\ncatalog: test-iommu\nplatform: q35-intel-iommu\ncommits: [v5.11]\n",
        "modes: [strict]\nworkloads:\n  - name: fio-nvme\n    params: {rw: randread}\n",
        "executor: fio\n", kernel_config));
    pb::SubmitMatrixResponse sub;
    grpc::Status st = jobs_->SubmitMatrix(Ctx().get(), req, &sub);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return sub;
  };
  const pb::SubmitMatrixResponse plain = submit("plain", "");
  const pb::SubmitMatrixResponse lazy =
      submit("lazy",
             "kernel_config:\n  base: tinyconfig\n  fragments:\n    - name: lazy.config\n"
             "      text: \"CONFIG_IOMMU_DEFAULT_DMA_LAZY=y\\n\"\n");
  const pb::SubmitMatrixResponse lazy_again =
      submit("lazy-again",
             "kernel_config:\n  base: tinyconfig\n  fragments:\n    - name: renamed.config\n"
             "      text: \"# the same option\\nCONFIG_IOMMU_DEFAULT_DMA_LAZY=y\\n\"\n");
  ASSERT_EQ(plain.build_job_ids_size(), 1);
  ASSERT_EQ(lazy.build_job_ids_size(), 1);
  ASSERT_EQ(lazy_again.build_job_ids_size(), 1);
  EXPECT_NE(plain.build_job_ids(0), lazy.build_job_ids(0)) << "another config, another build";
  EXPECT_EQ(lazy_again.build_job_ids(0), lazy.build_job_ids(0)) << "the same options: one build";

  pb::LeaseJobsResponse builds = LeaseVia(builder, 10);
  ASSERT_EQ(builds.leases_size(), 2);
  std::map<std::string, pb::Job> by_config;
  for (const pb::JobLease& l : builds.leases()) {
    const auto& params = l.job().workload().params();
    auto id = params.find("kernel_config");
    by_config[id == params.end() ? "" : id->second] = l.job();
  }
  ASSERT_EQ(by_config.size(), 2u) << "two keys";
  ASSERT_EQ(by_config.count(""), 1u) << "the default keeps its key";
  EXPECT_EQ(by_config[""].workload().params().count("kernel_config_text"), 0u);
  for (const auto& [config, job] : by_config) {
    EXPECT_EQ(job.commit_id(), "v5.11");
    EXPECT_EQ(job.platform(), "x86_64");
    if (config.empty()) continue;
    EXPECT_EQ(config.size(), 16u) << config;
    EXPECT_NE(job.workload().params().at("kernel_config_text").find("DMA_LAZY=y"),
              std::string::npos);
  }
  // The measured jobs of a config name it, so their series are the config's.
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(lazy.matrix().id());
  pb::Matrix m;
  ASSERT_TRUE(jobs_->GetMatrix(Ctx().get(), gm, &m).ok());
  EXPECT_NE(m.spec_yaml().find("CONFIG_IOMMU_DEFAULT_DMA_LAZY=y"), std::string::npos)
      << m.spec_yaml();
}

// A lab host's platform on PostgreSQL: the matrix takes the config the lab
// hosts file names for the host, its kernel is one build job of the host
// build's key for the host's architecture, and the claim's SQL leases the
// job to the host's kexec offer of that build only, not to one of the same
// config built for guests.
class LabHostBuildPgTest : public SchedulerGrpcPgTest {
 protected:
  LabHostBuildPgTest() {
    pb::KernelConfig lab;
    lab.set_base("lab-1.config");
    lab.set_base_text("CONFIG_BLK_DEV_NVME=y\nCONFIG_EXT4_FS=y\n");
    lab_kernel_configs_ = {{"lab-1", lab}};
    id_ = proto::KernelConfigId(lab);
  }
  pb::RegisterRequest LabHost(const std::string& kernel_config) const {
    pb::RegisterRequest req;
    req.set_name("lab-1");
    req.set_slots(1);
    req.mutable_host()->set_kernel_release("6.1.0-lab");
    req.mutable_host()->set_architecture("x86_64");
    req.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
    (*req.mutable_host()->mutable_labels())["platform"] = "lab";
    pb::Capability* fio = req.add_capabilities();
    fio->set_name("fio");
    if (!kernel_config.empty()) {
      pb::KernelOffer* o = fio->add_kernels();
      o->set_provider("kexec");
      o->set_commit("v5.11");
      o->set_release("6.1.192-gv511");
      o->set_architecture("x86_64");
      o->set_kernel_config(kernel_config);
      o->add_modes(pb::IOMMU_MODE_STRICT);
    }
    return req;
  }
  std::string id_;
};

TEST_F(LabHostBuildPgTest, AHostPlatformsJobRunsOnlyOnItsHostBuild) {
  LoadCatalog();
  const pb::RegisterResponse builder = RegisterBuilder();
  ASSERT_FALSE(HasFailure());
  pb::RegisterResponse host;
  ASSERT_TRUE(agents_->Register(Ctx().get(), LabHost(""), &host).ok());

  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(
      "name: lab-run\ncatalog: test-iommu\nplatform: lab\ncommits: [v5.11]\nmodes: [strict]\n"
      "workloads:\n  - name: fio-nvme\n    params: {rw: randread}\nexecutor: fio\n");
  pb::SubmitMatrixResponse sub;
  grpc::Status st = jobs_->SubmitMatrix(Ctx().get(), req, &sub);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(sub.build_job_ids_size(), 1);

  pb::LeaseJobsResponse builds = LeaseVia(builder, 10);
  ASSERT_EQ(builds.leases_size(), 1);
  EXPECT_EQ(builds.leases(0).job().platform(), "x86_64");
  EXPECT_EQ(builds.leases(0).job().workload().params().at("kernel_config"), id_ + "+host");
  pb::ReportResultRequest rr;
  rr.set_agent_id(builder.agent_id());
  *rr.mutable_lease() = builds.leases(0).lease();
  pb::Sample* sample = rr.add_samples();
  sample->set_metric("build_seconds");
  sample->set_value(1);
  pb::ReportResultResponse rresp;
  ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &rresp).ok());

  const auto lease_offering = [&](const std::string& kernel_config) {
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(host.agent_id());
    lr.set_session(host.session());
    lr.set_max_jobs(1);
    *lr.add_capabilities() = LabHost(kernel_config).capabilities(0);
    pb::LeaseJobsResponse resp;
    grpc::Status s = agents_->LeaseJobs(Ctx().get(), lr, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  };
  EXPECT_EQ(lease_offering(id_).leases_size(), 0) << "a guest build of the config";
  pb::LeaseJobsResponse leased = lease_offering(id_ + "+host");
  ASSERT_EQ(leased.leases_size(), 1);
  EXPECT_EQ(leased.leases(0).job().matrix_id(), sub.matrix().id());
  EXPECT_EQ(leased.leases(0).job().workload().params().at("kernel_config"), id_);
}

TEST_F(SchedulerGrpcPgTest, CancelRevokesLeases) {
  LoadCatalog();
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(kSpec);
  pb::SubmitMatrixResponse sub;
  ASSERT_TRUE(jobs_->SubmitMatrix(Ctx().get(), req, &sub).ok());
  pb::RegisterResponse a = Register("a");
  pb::LeaseJobsResponse leases = LeaseVia(a, 3);
  ASSERT_EQ(leases.leases_size(), 3);
  pb::CancelMatrixRequest cr;
  cr.set_matrix_id(sub.matrix().id());
  cr.set_reason("changed my mind");
  pb::CancelMatrixResponse cresp;
  ASSERT_TRUE(jobs_->CancelMatrix(Ctx().get(), cr, &cresp).ok());
  EXPECT_EQ(cresp.jobs_cancelled(), 12);
  EXPECT_EQ(cresp.matrix().state(), pb::MATRIX_STATE_CANCELLED);
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  for (const auto& l : leases.leases()) *hb.add_leases() = l.lease();
  pb::HeartbeatResponse hbr;
  ASSERT_TRUE(agents_->Heartbeat(Ctx().get(), hb, &hbr).ok());
  EXPECT_EQ(hbr.revoked_size(), 3);
  pb::GetMatrixRequest gm;
  gm.set_matrix_id(9999);
  pb::Matrix m;
  EXPECT_EQ(jobs_->GetMatrix(Ctx().get(), gm, &m).error_code(), grpc::StatusCode::NOT_FOUND);
  pb::GetRegressionRequest gr;
  gr.set_regression_id(1);
  pb::Regression reg;
  EXPECT_EQ(analysis_->GetRegression(Ctx().get(), gr, &reg).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

// A WatchMatrix stream whose fallback poll would only fire after an hour:
// every message after the first must come from a change notification.
class SchedulerWatchPgTest : public SchedulerGrpcPgTest {
 protected:
  SchedulerWatchPgTest() { watch_fallback_ = absl::Hours(1); }
};

TEST_F(SchedulerWatchPgTest, WatchIsWokenByJobChangesNotByTheFallbackPoll) {
  LoadCatalog();
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(kSpec);
  pb::SubmitMatrixResponse sub;
  ASSERT_TRUE(jobs_->SubmitMatrix(Ctx().get(), req, &sub).ok());
  const int64_t mid = sub.matrix().id();
  storage::PgMatrixListener* listener = server_->matrix_listener();
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(
      ::farm::testing::PollUntil([&]() -> absl::StatusOr<bool> { return listener->listening(); },
                                 absl::Seconds(20), "scheduler LISTENing")
          .ok());

  // The deadline bounds a broken test; it is far below the fallback (1 h),
  // so a message after the first can only come from a notification.
  pb::WatchMatrixRequest w;
  w.set_matrix_id(mid);
  auto ctx = Ctx();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = jobs_->WatchMatrix(ctx.get(), w);
  pb::MatrixProgress p;
  ASSERT_TRUE(reader->Read(&p));
  EXPECT_EQ(p.counts().queued(), 12);
  EXPECT_FALSE(p.done());

  pb::RegisterResponse a = Register("watch-agent");
  pb::LeaseJobsResponse leases = LeaseVia(a, 1);
  ASSERT_EQ(leases.leases_size(), 1);
  pb::ReportResultRequest rr;
  rr.set_agent_id(a.agent_id());
  *rr.mutable_lease() = leases.leases(0).lease();
  rr.add_samples()->set_metric("throughput");
  pb::ReportResultResponse resp;
  ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &resp).ok());

  // The lease and the report each notify; reads are coalesced, so the
  // stream shows leased = 1 and/or succeeded = 1, ending at succeeded = 1.
  int after_first = 0;
  do {
    ASSERT_TRUE(reader->Read(&p)) << "stream ended before the change was seen: "
                                  << reader->Finish().error_message();
    ++after_first;
  } while (p.counts().succeeded() < 1);
  EXPECT_EQ(p.counts().succeeded(), 1);
  EXPECT_FALSE(p.done());

  pb::CancelMatrixRequest cr;
  cr.set_matrix_id(mid);
  pb::CancelMatrixResponse cresp;
  ASSERT_TRUE(jobs_->CancelMatrix(Ctx().get(), cr, &cresp).ok());
  while (!p.done()) {
    ASSERT_TRUE(reader->Read(&p)) << reader->Finish().error_message();
    ++after_first;
  }
  EXPECT_EQ(p.state(), pb::MATRIX_STATE_CANCELLED);
  EXPECT_FALSE(reader->Read(&p));
  grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << st.error_message();

  // Order and counts, not time: at least two messages after the first, all
  // produced by wake-up reads; the fallback timer never fired.
  EXPECT_GE(after_first, 2);
  EXPECT_EQ(server_->watch_stats().fallback_reads.load(), 0);
  EXPECT_GE(server_->watch_stats().wake_reads.load(), 3);
  EXPECT_GE(listener->notifications(), 3);  // lease, report, cancel
}

}  // namespace
}  // namespace farm::scheduler
