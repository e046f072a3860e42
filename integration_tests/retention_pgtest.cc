// farmctl prune over real gRPC and a real PostgreSQL: farm-scheduler
// in-process, a matrix run by an agent and cloned into a year of nightlies
// with old timestamps, then a dry run and a real prune through
// RetentionService with the admin token (viewer and submitter tokens are
// refused), the counts checked against the tables before and after, and a
// raw-only prune whose results farmctl reports as pruned.
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/results.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/metrics/metrics.h"
#include "lib/storage/pg/pg_raw_outputs.h"
#include "scheduler/server.h"
#include "testing/service_harness.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;
using ::farm::testing::PostgresInstance;

const char* const kCatalog = R"(
catalog: ret
commits:
  - {id: v5.10, subject: "Linux 5.10"}
  - {id: v5.11, subject: "Linux 5.11"}
  - {id: v5.12, subject: "Linux 5.12"}
)";

const char* const kSpec = R"(
name: nightly
catalog: ret
platform: intel-vtd-2s12c
commits: v5.10..v5.12
modes: [off, strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.01}
repeats: 2
executor: emulator
)";

constexpr int kClones = 110;     // nightlies of one series, all older than 180 days
constexpr int kRawBytes = 2000;  // per result

class RetentionPgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    scheduler::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.db_uri = pg_->Uri("farm");
    o.token = "s3cret";
    o.db_connections = 4;
    o.worker_threads = 4;
    auto s = scheduler::SchedulerServer::Start(o, &registry_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    jobs_ = pb::JobService::NewStub(channel_);
    agents_ = pb::AgentService::NewStub(channel_);
    retention_ = pb::RetentionService::NewStub(channel_);
    db_ = std::make_unique<pqxx::connection>(pg_->Uri("farm"));
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(2));
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "s3cret") {
    client::ClientOptions c;
    c.server = server_->address();
    c.token = token;
    return client::NewContext(c, absl::Seconds(60));
  }
  std::string Token(const std::string& name, const std::string& role) {
    pb::CreateTokenRequest req;
    req.set_name(name);
    req.set_role(role);
    pb::CreateTokenResponse resp;
    auto access = pb::AccessService::NewStub(channel_);
    EXPECT_TRUE(access->CreateToken(Ctx().get(), req, &resp).ok());
    return resp.token();
  }
  // Loads kCatalog as the admin; ASSERTs.
  void LoadCatalog() {
    pb::LoadCatalogRequest cat;
    cat.set_yaml(kCatalog);
    pb::LoadCatalogResponse resp;
    const grpc::Status st = jobs_->LoadCatalog(Ctx().get(), cat, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  int64_t Submit() {
    pb::SubmitMatrixRequest req;
    req.set_spec_yaml(kSpec);
    pb::SubmitMatrixResponse resp;
    grpc::Status st = jobs_->SubmitMatrix(Ctx().get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.matrix().id();
  }
  // Runs every queued job as one agent: two samples and kRawBytes of raw
  // output per result.
  void RunAll() {
    pb::RegisterRequest reg;
    reg.set_name("a1");
    reg.add_capabilities()->set_name("emulator");
    reg.set_slots(64);
    pb::RegisterResponse a;
    ASSERT_TRUE(agents_->Register(Ctx().get(), reg, &a).ok());
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(a.agent_id());
    lr.set_session(a.session());
    lr.set_max_jobs(64);
    pb::LeaseJobsResponse leases;
    ASSERT_TRUE(agents_->LeaseJobs(Ctx().get(), lr, &leases).ok());
    ASSERT_GT(leases.leases_size(), 0);
    for (const pb::JobLease& l : leases.leases()) {
      pb::ReportResultRequest rr;
      rr.set_agent_id(a.agent_id());
      *rr.mutable_lease() = l.lease();
      for (const char* metric : {"throughput", "latency"}) {
        pb::Sample* s = rr.add_samples();
        s->set_metric(metric);
        s->set_value(100);
      }
      rr.set_raw_output(std::string(kRawBytes, 'r'));
      rr.set_raw_format("emu-json");
      pb::ReportResultResponse resp;
      ASSERT_TRUE(agents_->ReportResult(Ctx().get(), rr, &resp).ok());
    }
  }
  // A copy of matrix `src` (jobs, results, shared params) finished
  // `days_ago` days ago; returns its id.
  int64_t Clone(int64_t src, int days_ago) {
    pqxx::work w(*db_);
    const std::string at = absl::StrCat("now() - interval '", days_ago, " days'");
    const int64_t id =
        w.exec1(absl::StrCat("INSERT INTO matrices (name, spec_yaml, catalog, platform, executor, "
                             "submitted_by, total_jobs, model_set, labels, created_at) "
                             "SELECT name, spec_yaml, catalog, platform, executor, submitted_by, "
                             "total_jobs, model_set, labels, ",
                             at, " FROM matrices WHERE id = ", src, " RETURNING id"))[0]
            .as<int64_t>();
    w.exec(
        absl::StrCat("CREATE TEMP TABLE map ON COMMIT DROP AS SELECT id AS old_id, "
                     "nextval('jobs_id_seq') AS new_id FROM jobs WHERE matrix_id = ",
                     src));
    w.exec(absl::StrCat(
        "INSERT INTO jobs (id, matrix_id, catalog, commit_id, commit_index, platform, workload, "
        "params, mode, repeat, executor, priority, kind, state, attempt, max_attempts, model_set, "
        "seed, workload_index, fair_rank, created_at, started_at, finished_at) "
        "SELECT m.new_id, ",
        id,
        ", catalog, commit_id, commit_index, platform, workload, params, mode, repeat, executor, "
        "priority, kind, state, attempt, max_attempts, model_set, seed, workload_index, "
        "fair_rank, ",
        at, ", ", at, ", ", at, " FROM jobs j JOIN map m ON m.old_id = j.id"));
    w.exec(
        absl::StrCat("INSERT INTO results (job_id, attempt, matrix_id, agent, sample_key_ids, "
                     "sample_values, sample_series, raw_output, raw_digest, raw_format, host_id, "
                     "tool_version, wall_time_ns, finished_at) "
                     "SELECT m.new_id, attempt, ",
                     id,
                     ", agent, sample_key_ids, sample_values, sample_series, raw_output, "
                     "raw_digest, raw_format, host_id, tool_version, wall_time_ns, ",
                     at, " FROM results r JOIN map m ON m.old_id = r.job_id"));
    OwnRawOutputs(w, id);
    w.exec(absl::StrCat("INSERT INTO matrix_workloads SELECT ", id,
                        ", workload_index, params FROM matrix_workloads WHERE matrix_id = ", src));
    w.exec(absl::StrCat(
        "INSERT INTO matrix_commit_settings SELECT ", id,
        ", commit_index, settings FROM matrix_commit_settings WHERE matrix_id = ", src));
    // Inserted jobs are not counted by the jobs trigger; the totals are
    // kept true so the prune's decrement can be checked.
    w.exec(
        absl::StrCat("UPDATE job_state_totals SET jobs = jobs + (SELECT count(*) FROM jobs "
                     "WHERE matrix_id = ",
                     id, " AND state = 3) WHERE state = 3 AND shard = 0"));
    w.exec(absl::StrCat("INSERT INTO analyzer_state (key, value) VALUES ('matrix:", id,
                        "', '{}'::jsonb)"));
    w.commit();
    return id;
  }
  // Gives each result of `matrix` a raw output of its own (kRawBytes,
  // stored out of row as ReportResults stores it), named by no other result.
  static void OwnRawOutputs(pqxx::work& w, int64_t matrix) {
    for (const pqxx::row& r :
         w.exec(absl::StrCat("SELECT job_id, attempt FROM results WHERE matrix_id = ", matrix))) {
      std::string raw = absl::StrCat("job ", r[0].as<int64_t>(), " ");
      raw.resize(kRawBytes, 'r');
      const storage::PackedRaw p = storage::PackRaw(raw);
      w.exec_params(
          "INSERT INTO raw_outputs (digest, size, zstd) VALUES ($1::bytea, $2, $3::bytea)",
          p.digest_hex, p.size, p.zstd_hex);
      w.exec_params(
          "UPDATE results SET raw_output = '', raw_digest = $1::bytea "
          "WHERE job_id = $2 AND attempt = $3",
          p.digest_hex, r[0].as<int64_t>(), r[1].as<int>());
    }
  }
  // Raw outputs stored out of row that no result names (retention deletes them).
  int64_t UnnamedRawOutputs() {
    return Count(
        "SELECT count(*) FROM raw_outputs o "
        "WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.raw_digest = o.digest)");
  }
  int64_t Count(const std::string& sql) {
    pqxx::read_transaction t(*db_);
    return t.exec1(sql)[0].as<int64_t>();
  }
  grpc::Status Prune(const std::string& token, bool dry_run, bool raw_only, pb::PruneResponse* out,
                     bool keep_used = false) {
    pb::PruneRequest req;
    req.mutable_older_than()->set_seconds(180 * 86400);
    req.set_dry_run(dry_run);
    req.set_raw_only(raw_only);
    req.set_keep_used(keep_used);
    return retention_->Prune(Ctx(token).get(), req, out);
  }
  static void Print(const char* what, const pb::PruneResponse& r) {
    const pb::PruneCounts& c = r.pruned();
    std::cout << what << ": matrices " << c.matrices() << ", jobs " << c.jobs() << ", results "
              << c.results() << ", samples " << c.samples() << ", raw outputs " << c.raw_outputs()
              << ", raw bytes " << c.raw_bytes() << "; kept: regressions "
              << r.kept_for_regressions() << ", history " << r.kept_for_history() << ", unfinished "
              << r.unfinished() << "; batches " << r.batches() << "\n";
  }

  std::unique_ptr<PostgresInstance> pg_;
  metrics::MetricsRegistry registry_;
  std::unique_ptr<scheduler::SchedulerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AgentService::Stub> agents_;
  std::unique_ptr<pb::RetentionService::Stub> retention_;
  std::unique_ptr<pqxx::connection> db_;
};

TEST_F(RetentionPgTest, DryRunThenPruneKeepWhatAnswersUseAndOnlyAdminsMayPrune) {
  ASSERT_NO_FATAL_FAILURE(LoadCatalog());
  const int64_t original = Submit();
  RunAll();
  ASSERT_EQ(Count(absl::StrCat("SELECT count(*) FROM jobs WHERE matrix_id = ", original,
                               " AND state <> 3")),
            0);
  std::vector<int64_t> clones;
  for (int k = 0; k < kClones; ++k) clones.push_back(Clone(original, 400 - k));
  Submit();  // queued: unfinished
  // The oldest ten clones are outside the series' newest 100; of them, one
  // is a regression's and one a bisect step's.
  {
    pqxx::work w(*db_);
    w.exec(
        absl::StrCat("INSERT INTO regressions (matrix_id, catalog, platform, workload) "
                     "VALUES (",
                     clones[0], ", 'ret', 'intel-vtd-2s12c', 'dma-map-bench')"));
    w.exec("INSERT INTO bisects (regression_id) SELECT max(id) FROM regressions");
    w.exec(
        absl::StrCat("INSERT INTO bisect_steps (bisect_id, step, commit_id, matrix_id) "
                     "SELECT max(id), 1, 'v5.11', ",
                     clones[1], " FROM bisects"));
    w.commit();
  }
  const std::string gone = absl::StrCat("matrix_id BETWEEN ", clones[2], " AND ", clones[9]);
  const int64_t jobs_gone = Count("SELECT count(*) FROM jobs WHERE " + gone);
  const int64_t results_gone = Count("SELECT count(*) FROM results WHERE " + gone);
  const int64_t samples_gone =
      Count("SELECT sum(cardinality(sample_values)) FROM results WHERE " + gone);
  const int64_t matrices_before = Count("SELECT count(*) FROM matrices");
  ASSERT_GT(jobs_gone, 0);

  pb::PruneResponse dry;
  grpc::Status st = Prune("s3cret", true, false, &dry);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Print("dry run", dry);
  EXPECT_EQ(dry.pruned().matrices(), 8);
  EXPECT_EQ(dry.pruned().jobs(), jobs_gone);
  EXPECT_EQ(dry.pruned().results(), results_gone);
  EXPECT_EQ(dry.pruned().samples(), samples_gone);
  EXPECT_EQ(dry.pruned().raw_bytes(), results_gone * kRawBytes);
  EXPECT_EQ(dry.kept_for_regressions(), 2);
  EXPECT_EQ(dry.kept_for_history(), 100);
  EXPECT_EQ(dry.unfinished(), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM matrices"), matrices_before);

  const std::vector<std::pair<std::string, std::string>> others = {{"v", "viewer"},
                                                                   {"s", "submitter"}};
  for (const auto& [name, role] : others) {
    pb::PruneResponse refused;
    EXPECT_EQ(Prune(Token(name, role), false, false, &refused).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << role;
  }
  EXPECT_EQ(Count("SELECT count(*) FROM matrices"), matrices_before);

  // The cutoff reaches the regression's and the bisect step's matrices:
  // without keep_used nothing goes, and the refusal names them.
  pb::PruneResponse refused;
  st = Prune("s3cret", false, false, &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  std::cout << "prune without keep_used: " << st.error_message() << "\n";
  EXPECT_NE(st.error_message().find(absl::StrCat("(matrices ", clones[0], " ", clones[1], ")")),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(Count("SELECT count(*) FROM matrices"), matrices_before);

  const int64_t raw_before = Count("SELECT count(*) FROM raw_outputs");
  ASSERT_GT(raw_before, results_gone);  // the clones' own and the original's shared one
  pb::PruneResponse real;
  st = Prune("s3cret", false, false, &real, /*keep_used=*/true);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Print("prune", real);
  EXPECT_EQ(real.pruned().SerializeAsString(), dry.pruned().SerializeAsString());
  EXPECT_GE(real.batches(), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM matrices"), matrices_before - 8);
  EXPECT_EQ(Count("SELECT count(*) FROM jobs WHERE " + gone), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM results WHERE " + gone), 0);
  // The pruned results' raw outputs went with them; every other is named.
  EXPECT_EQ(Count("SELECT count(*) FROM raw_outputs"), raw_before - results_gone);
  EXPECT_EQ(UnnamedRawOutputs(), 0);
  EXPECT_EQ(Count(absl::StrCat("SELECT count(*) FROM matrices WHERE id IN (", clones[0], ", ",
                               clones[1], ")")),
            2);
  EXPECT_EQ(Count("SELECT count(*) FROM analyzer_state WHERE key LIKE 'matrix:%'"), kClones - 8);
  EXPECT_EQ(Count("SELECT sum(jobs) FROM job_state_totals WHERE state = 3"),
            Count("SELECT count(*) FROM jobs WHERE state = 3"));

  pb::PruneResponse again;
  ASSERT_TRUE(Prune("s3cret", false, false, &again, /*keep_used=*/true).ok());
  EXPECT_EQ(again.pruned().matrices(), 0);
}

TEST_F(RetentionPgTest, RawOnlyKeepsSamplesAndFarmctlSaysTheRawOutputWasPruned) {
  ASSERT_NO_FATAL_FAILURE(LoadCatalog());
  const int64_t original = Submit();
  RunAll();
  const int64_t old = Clone(original, 200);
  const int64_t samples_before = Count("SELECT sum(cardinality(sample_values)) FROM results");
  const int64_t raw_before = Count("SELECT count(*) FROM raw_outputs");

  pb::PruneResponse r;
  grpc::Status st = Prune("s3cret", false, true, &r);
  ASSERT_TRUE(st.ok()) << st.error_message();
  Print("raw-only prune", r);
  const int64_t results =
      Count(absl::StrCat("SELECT count(*) FROM results WHERE matrix_id = ", old));
  EXPECT_EQ(r.pruned().matrices(), 1);
  EXPECT_EQ(r.pruned().raw_outputs(), results);
  EXPECT_EQ(r.pruned().raw_bytes(), results * kRawBytes);
  EXPECT_EQ(Count("SELECT sum(cardinality(sample_values)) FROM results"), samples_before);
  EXPECT_EQ(Count(absl::StrCat("SELECT count(*) FROM results WHERE matrix_id = ", original,
                               " AND (raw_output <> '' OR raw_digest IS NOT NULL)")),
            Count(absl::StrCat("SELECT count(*) FROM results WHERE matrix_id = ", original)));
  // The old matrix's own raw outputs are deleted; the original's one (all
  // its results reported the same output) is kept.
  EXPECT_EQ(Count("SELECT count(*) FROM raw_outputs"), raw_before - results);
  EXPECT_EQ(Count("SELECT count(*) FROM raw_outputs"), 1);
  EXPECT_EQ(UnnamedRawOutputs(), 0);

  client::ClientOptions options;
  options.server = server_->address();
  options.token = "s3cret";
  std::ostringstream out, err;
  cli::Commands commands(options, out, err);
  EXPECT_EQ(cli::RunResults(commands, old, cli::OutputFormat::kJson, /*raw=*/true), 0) << err.str();
  EXPECT_NE(out.str().find("\"raw_output_pruned\": \"raw output pruned by retention at"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find("\"raw_output\""), std::string::npos) << out.str();
  EXPECT_NE(err.str().find(absl::StrCat("the raw output of ", results, " results was pruned")),
            std::string::npos)
      << err.str();
  std::cout << "farmctl results --raw, stderr: " << err.str();

  const int64_t job =
      Count(absl::StrCat("SELECT min(job_id) FROM results WHERE matrix_id = ", old));
  std::ostringstream raw_out, raw_err;
  cli::Commands raw_commands(options, raw_out, raw_err);
  EXPECT_EQ(cli::RunRawOutput(raw_commands, job, 0), 1);
  EXPECT_EQ(raw_out.str(), "");
  EXPECT_NE(raw_err.str().find("raw output pruned by retention"), std::string::npos)
      << raw_err.str();
  std::cout << "farmctl raw-output, stderr: " << raw_err.str();
}

}  // namespace
}  // namespace farm
