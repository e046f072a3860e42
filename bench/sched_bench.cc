// sched_bench: jobs leased and reported per second end to end through gRPC
// (in-process farm-scheduler + real gRPC clients acting as agents), and the
// same claim-and-complete loop as raw SQL on the same PostgreSQL in the same
// run. Prints every rate and the ratios gRPC / SQL. Then the same gRPC
// loop with one channel per agent, plaintext and mTLS (each agent presents
// its own certificate from scripts/farm-certs, so the agent-identity checks
// run too: the agent id is resolved once and cached, the lease holder is
// checked inside the report statement), and TLS vs plaintext connections
// set up per second (handshakes); plaintext and TLS alternate in rounds so
// a shared machine's drifting load weighs on both alike.
//
//   build/bin/sched_bench [--jobs N] [--agents K] [--batch B] [--statements]
//
// --statements loads pg_stat_statements into the bench's PostgreSQL and
// prints, after each of the four claim/report paths, the statements it ran
// per job (calls and PostgreSQL execution + planning time), which shows what
// the scheduler's path costs the database beyond the raw-SQL loop.
//
// Each path gets a fresh database on one PostgreSQL instance (farm_testing,
// fsync off) and a matrix of N emulator jobs; K concurrent workers each
// claim B jobs at a time (one statement) and complete them either one by
// one (one statement per result: ReportResult) or all B in one statement
// (ReportResults). Three paths, each unbatched and batched:
//   - raw SQL: plain libpqxx, the minimal claim (ids only) and a complete
//     statement that stores one shared result document for every job;
//   - queue statements: PgJobQueue (lib/storage) called directly, i.e. the
//     scheduler's own SQL, parameters and row decoding without gRPC;
//   - gRPC: the in-process scheduler behind real gRPC stubs.
// The batched three also run alternating in rounds (BM_BatchedRounds), so a
// shared machine's drifting load weighs on them alike.
//
// Every path also prints its CPU per job: this process (the in-process
// scheduler and its gRPC clients, or the SQL clients) and the bench's
// PostgreSQL (postmaster and backends, /proc). Both share the machine's
// cores, so where each path keeps them busy the ratio of two paths' rates
// is the inverse ratio of their CPU per job ("rounds SQL/gRPC CPU per job").
// That tells how much of a gap is work the path does (CPU) rather than
// waiting, and which side does it.
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "absl/strings/str_format.h"
#include "bench/proc_cpu.h"
#include "bench/sim_fleet.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/base/file.h"
#include "lib/client/client.h"
#include "lib/metrics/metrics.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_job_queue.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_store.h"
#include "scheduler/server.h"
#include "testing/service_harness.h"

namespace {

namespace pb = ::iommufarm::v1;

int g_jobs = 4000;
int g_agents = 8;
int g_batch = 50;
bool g_statements = false;  // --statements: per-path SQL statement profile (pg_stat_statements)
farm::testing::PostgresInstance* g_pg = nullptr;
double g_rate_sql = 0, g_rate_grpc = 0, g_rate_sql_batch = 0, g_rate_grpc_batch = 0;
double g_rate_queue = 0, g_rate_queue_batch = 0;
double g_rate_plain_per_agent = 0, g_rate_mtls_per_agent = 0;
double g_connects_plain = 0, g_connects_tls = 0;
std::string g_certs;  // scripts/farm-certs output: ca, server, bench-0..K-1 (agents)

farm::service::TlsPem Pem(const std::string& name, bool with_root) {
  farm::service::TlsPem p;
  p.cert_chain = farm::base::ReadFileOrEmpty(g_certs + "/" + name + ".pem");
  p.private_key = farm::base::ReadFileOrEmpty(g_certs + "/" + name + ".key");
  if (with_root) p.root_certs = farm::base::ReadFileOrEmpty(g_certs + "/ca.pem");
  return p;
}

std::string NewDatabase() {
  static int n = 0;
  auto uri = g_pg->CreateDatabase("bench" + std::to_string(n++));
  if (!uri.ok()) {
    std::fprintf(stderr, "%s\n", uri.status().ToString().c_str());
    std::exit(1);
  }
  return *uri;
}

// CPU seconds so far of this process (every thread: the in-process
// scheduler and the clients) and of the bench's PostgreSQL: the postmaster
// with the children it reaped (backends of closed sessions) plus its live
// children (backends, WAL writer, checkpointer, autovacuum).
struct CpuSample {
  double self = 0, pg = 0;
};
CpuSample SampleCpu() {
  return {farm::bench::SelfCpuSeconds(), farm::bench::PostgresCpuSeconds(g_pg->pid())};
}

// Schema + one matrix of g_jobs emulator jobs.
void Populate(const std::string& uri, int jobs = g_jobs) {
  farm::storage::PgPool pool({uri, 2, 3});
  if (!farm::storage::ApplyMigrations(pool).ok()) std::exit(1);
  farm::storage::PgStore store(&pool);
  farm::storage::NewMatrix m;
  m.matrix.set_name("bench");
  m.matrix.set_spec_yaml("name: bench");
  for (int i = 0; i < jobs; ++i) {
    pb::Job j;
    j.set_catalog("linux-iommu");
    j.set_commit_id("v5.10");
    j.set_platform("intel-vtd-2s12c");
    j.mutable_workload()->set_name("dma-map-bench");
    (*j.mutable_workload()->mutable_params())["threads"] = "1";
    j.set_mode(pb::IOMMU_MODE_STRICT);
    j.set_repeat(i);
    j.set_executor(pb::EXECUTOR_EMULATOR);
    j.set_kind(pb::JOB_KIND_BULK);
    j.set_max_attempts(3);
    m.jobs.push_back(j);
  }
  if (!store.CreateMatrix(m).ok()) std::exit(1);
}

// With --statements: forget what PostgreSQL counted so far (the populate
// step), so StatementProfile sees only the timed loop.
void ResetStatements(const std::string& uri) {
  if (!g_statements) return;
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  n.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
  n.exec("SELECT pg_stat_statements_reset()");
}

// With --statements: the statements the loop ran on `uri`'s database, per
// job: calls, rows and PostgreSQL execution time (the server's CPU side of
// the path; the difference between paths is what the scheduler adds).
void StatementProfile(const std::string& uri, const char* path, int64_t jobs) {
  if (!g_statements || jobs <= 0) return;
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  pqxx::result r = n.exec(
      "SELECT calls, rows, total_exec_time, total_plan_time, shared_blks_hit + shared_blks_read, "
      "left(regexp_replace(query, "
      "'\\s+', ' ', 'g'), 110) FROM pg_stat_statements "
      "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
      "AND query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 12");
  double calls = 0, ms = 0;
  for (const pqxx::row& row : r) {
    calls += row[0].as<double>();
    ms += row[2].as<double>() + row[3].as<double>();
  }
  std::printf("statements of %s: %.2f calls/job, %.1f us exec+plan/job\n", path,
              calls / static_cast<double>(jobs), 1000.0 * ms / static_cast<double>(jobs));
  for (const pqxx::row& row : r) {
    const double n_calls = std::max(1.0, row[0].as<double>());
    std::printf(
        "  %8.3f calls/job %8.1f us/job (plan %6.1f) %7.1f rows/call %8.1f blocks/call  %s\n",
        row[0].as<double>() / static_cast<double>(jobs),
        1000.0 * (row[2].as<double>() + row[3].as<double>()) / static_cast<double>(jobs),
        1000.0 * row[3].as<double>() / static_cast<double>(jobs), row[1].as<double>() / n_calls,
        row[4].as<double>() / n_calls, row[5].c_str());
  }
}

const char* const kRaw = farm::bench::kEmulatorRawOutput;
const char* const kSamples =
    "[{\"metric\":\"throughput\",\"value\":123.4,\"unit\":\"Mops\",\"phase\":\"\"},"
    "{\"metric\":\"map_latency_mean\",\"value\":512,\"unit\":\"ns\",\"phase\":\"\"},"
    "{\"metric\":\"unmap_latency_mean\",\"value\":733,\"unit\":\"ns\",\"phase\":\"\"}]";

// The raw-SQL worker: the queue's claim and complete statements, nothing else,
// on a session set up as the farm's pool sets up its own (no JIT: with it, a
// queue of 300,000 jobs made this loop 6x slower than the farm's).
void SqlWorker(const std::string& uri, int64_t agent_id, bool batched, std::atomic<int64_t>* done) {
  pqxx::connection c(farm::storage::WithSessionOptions(uri, 0));
  for (;;) {
    pqxx::work w(c);
    pqxx::result claimed = w.exec_params(
        "WITH cand AS (SELECT id FROM jobs WHERE state = 1 AND not_before <= now() "
        "AND executor = ANY('{1}'::smallint[]) ORDER BY priority DESC, fair_rank, id LIMIT $1 "
        "FOR UPDATE SKIP LOCKED) "
        "UPDATE jobs j SET state = 2, attempt = j.attempt + 1, "
        "lease_token = gen_random_uuid()::text, lease_agent = $2, "
        "lease_expires_at = now() + interval '30 seconds', started_at = now() "
        "FROM cand WHERE j.id = cand.id RETURNING j.id, j.attempt, j.lease_token",
        g_batch, agent_id);
    w.commit();
    if (claimed.empty()) return;
    if (batched) {
      std::string ids = "{", attempts = "{", tokens = "{";
      for (const pqxx::row& r : claimed) {
        const char* sep = ids.size() > 1 ? "," : "";
        ids += sep + r[0].as<std::string>();
        attempts += sep + r[1].as<std::string>();
        tokens += sep + r[2].as<std::string>();
      }
      ids += "}";
      attempts += "}";
      tokens += "}";
      pqxx::nontransaction t(c);
      pqxx::row n = t.exec_params1(
          "WITH i AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[]) "
          "  AS x(job_id, attempt, token)), "
          "up AS (UPDATE jobs j SET state = 3, finished_at = now(), lease_expires_at = NULL "
          "  FROM i WHERE j.id = i.job_id AND j.attempt = i.attempt AND j.lease_token = i.token "
          "  AND j.state = 2 AND j.lease_agent = $4 RETURNING j.id, j.attempt, j.matrix_id), "
          "ins AS (INSERT INTO results (job_id, attempt, matrix_id, agent_id, samples, raw_output, "
          "  raw_format) SELECT id, attempt, matrix_id, $4, $5::jsonb, $6, 'emu-json' FROM up "
          "  ON CONFLICT (job_id, attempt) DO NOTHING RETURNING job_id) "
          "SELECT count(*) FROM ins",
          ids, attempts, tokens, agent_id, kSamples, kRaw);
      done->fetch_add(n[0].as<int64_t>());
      continue;
    }
    for (const pqxx::row& r : claimed) {
      // The same single fenced statement PgStore::ReportResult runs.
      pqxx::nontransaction t(c);
      t.exec_params(
          "WITH up AS (UPDATE jobs SET state = 3, finished_at = now(), lease_expires_at = NULL "
          "  WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 2 "
          "  AND lease_agent = $4 RETURNING id, attempt, matrix_id), "
          "ins AS (INSERT INTO results (job_id, attempt, matrix_id, agent_id, samples, raw_output, "
          "  raw_format) SELECT id, attempt, matrix_id, $4, $5::jsonb, $6, 'emu-json' FROM up "
          "  ON CONFLICT (job_id, attempt) DO NOTHING RETURNING job_id) "
          "SELECT count(*) FROM ins",
          r[0].as<int64_t>(), r[1].as<int>(), r[2].as<std::string>(), agent_id, kSamples, kRaw);
      done->fetch_add(1);
    }
  }
}

// The queue's own statements without gRPC or the scheduler: PgJobQueue
// (lib/storage) called directly, one pool connection per worker, with the
// scheduler's claim rules. The same SQL, parameters and row decoding as
// the gRPC path, so the difference between the two is what gRPC and the
// scheduler's handlers add.
void QueueWorker(farm::storage::PgJobQueue* queue, int index, bool batched,
                 std::atomic<int64_t>* done) {
  pb::RegisterRequest reg;
  reg.set_name("bench-" + std::to_string(index));
  reg.add_capabilities()->set_name("emulator");
  reg.set_slots(g_batch);
  absl::StatusOr<pb::RegisterResponse> a = queue->RegisterAgent(reg, {});
  if (!a.ok()) std::exit(1);
  const farm::storage::ClaimRules rules{.match_real_run_hosts = true, .within_free_slots = true};
  for (;;) {
    absl::StatusOr<std::vector<pb::JobLease>> leases =
        queue->LeaseJobs(a->agent_id(), a->session(), g_batch, absl::Seconds(30), {}, rules);
    if (!leases.ok()) {
      std::fprintf(stderr, "LeaseJobs: %s\n", leases.status().ToString().c_str());
      std::exit(1);
    }
    if (leases->empty()) return;
    std::vector<pb::ReportResultRequest> batch;
    for (const pb::JobLease& l : *leases)
      batch.push_back(farm::bench::EmulatorResultFor(a->agent_id(), l.lease()));
    if (batched) {
      auto outs = queue->ReportResults(batch);
      if (!outs.ok()) std::exit(1);
      for (const auto& o : *outs) {
        if (!o.ok() || !o->accepted || o->duplicate) std::exit(1);
        done->fetch_add(1);
      }
      continue;
    }
    for (const pb::ReportResultRequest& rr : batch) {
      auto o = queue->ReportResult(rr);
      if (!o.ok() || !o->accepted) std::exit(1);
      done->fetch_add(1);
    }
  }
}

// CPU nanoseconds of the gRPC agents' own threads (GrpcWorker), summed as
// each ends: the agents' side of this process's CPU, except what gRPC's
// shared polling threads do for them.
std::atomic<int64_t> g_client_thread_ns{0};

void GrpcWorker(pb::AgentService::Stub* stub, int index, bool batched, std::atomic<int64_t>* done) {
  struct AddThreadCpu {
    ~AddThreadCpu() {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      g_client_thread_ns.fetch_add(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec);
    }
  } add_thread_cpu;
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  pb::RegisterRequest reg;
  reg.set_name("bench-" + std::to_string(index));
  reg.add_capabilities()->set_name("emulator");
  reg.set_slots(g_batch);
  pb::RegisterResponse a;
  if (!stub->Register(ctx().get(), reg, &a).ok()) std::exit(1);
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(a.agent_id());
  lr.set_session(a.session());
  lr.set_max_jobs(g_batch);
  for (;;) {
    pb::LeaseJobsResponse leases;
    grpc::Status st = stub->LeaseJobs(ctx().get(), lr, &leases);
    if (!st.ok()) {
      std::fprintf(stderr, "LeaseJobs: %s\n", st.error_message().c_str());
      std::exit(1);
    }
    if (leases.leases_size() == 0) return;
    pb::ReportResultsRequest batch;
    for (const pb::JobLease& l : leases.leases()) {
      pb::ReportResultRequest rr = farm::bench::EmulatorResultFor(a.agent_id(), l.lease());
      if (batched) {
        *batch.add_results() = std::move(rr);
        continue;
      }
      pb::ReportResultResponse resp;
      st = stub->ReportResult(ctx().get(), rr, &resp);
      if (!st.ok() || !resp.accepted()) {
        std::fprintf(stderr, "ReportResult: %s\n", st.error_message().c_str());
        std::exit(1);
      }
      done->fetch_add(1);
    }
    if (!batched) continue;
    pb::ReportResultsResponse resp;
    st = stub->ReportResults(ctx().get(), batch, &resp);
    if (!st.ok() || resp.results_size() != batch.results_size()) {
      std::fprintf(stderr, "ReportResults: %s\n", st.error_message().c_str());
      std::exit(1);
    }
    for (const pb::ReportResultResponse& r : resp.results()) {
      if (!r.accepted() || r.duplicate()) {
        std::fprintf(stderr, "ReportResults item: %s\n", r.error_message().c_str());
        std::exit(1);
      }
      done->fetch_add(1);
    }
  }
}

// One scheduler on a fresh database; mTLS (client certificates required) when `tls`.
std::unique_ptr<farm::scheduler::SchedulerServer> StartScheduler(
    const std::string& uri, bool tls, farm::metrics::MetricsRegistry* registry) {
  farm::scheduler::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_uri = uri;
  o.db_connections = g_agents;
  o.worker_threads = g_agents;
  if (tls) o.tls = Pem("server", /*with_root=*/true);
  auto server = farm::scheduler::SchedulerServer::Start(o, registry);
  if (!server.ok()) {
    std::fprintf(stderr, "scheduler: %s\n", server.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(server);
}

farm::client::ClientOptions AgentClient(const std::string& address, int index, bool tls) {
  farm::client::ClientOptions c;
  c.server = address;
  if (tls) {
    c.tls = Pem("bench-" + std::to_string(index), false);
    c.tls.root_certs = farm::base::ReadFileOrEmpty(g_certs + "/ca.pem");
  }
  return c;
}

// Jobs done and seconds taken, summed over rounds.
struct Tally {
  double jobs = 0, secs = 0;
  double cpu_self = 0, cpu_pg = 0;  // CPU seconds: this process, the bench's PostgreSQL
  double cpu_clients = 0;           // of cpu_self: the gRPC agents' threads
  double rate() const { return secs > 0 ? jobs / secs : 0; }
  void Add(const Tally& t) {
    jobs += t.jobs;
    secs += t.secs;
    cpu_self += t.cpu_self;
    cpu_pg += t.cpu_pg;
    cpu_clients += t.cpu_clients;
  }
  double cpu_per_job() const { return jobs > 0 ? 1e6 * (cpu_self + cpu_pg) / jobs : 0; }
};
Tally g_rounds[3];  // BM_BatchedRounds: raw SQL, queue statements, gRPC

// The gRPC loop with one channel (one connection) per agent over `jobs`
// jobs; adds to *tally.
void RunPerAgent(bool tls, int jobs, Tally* tally) {
  const std::string uri = NewDatabase();
  Populate(uri, jobs);
  farm::metrics::MetricsRegistry registry;
  auto server = StartScheduler(uri, tls, &registry);
  std::vector<std::unique_ptr<pb::AgentService::Stub>> stubs;
  for (int i = 0; i < g_agents; ++i) {
    stubs.push_back(pb::AgentService::NewStub(
        farm::client::MakeChannel(AgentClient(server->address(), i, tls))));
  }
  std::atomic<int64_t> done{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int i = 0; i < g_agents; ++i)
    ts.emplace_back(GrpcWorker, stubs[i].get(), i, /*batched=*/false, &done);
  for (auto& t : ts) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  server->Shutdown(absl::Seconds(2));
  if (done.load() != jobs) {
    std::fprintf(stderr, "not every job completed\n");
    std::exit(1);
  }
  tally->jobs += static_cast<double>(done.load());
  tally->secs += secs;
}

// New connections (channel + handshake + one ListAgents); adds to *tally.
void RunConnects(bool tls, int n, Tally* tally) {
  const std::string uri = NewDatabase();
  Populate(uri);
  farm::metrics::MetricsRegistry registry;
  auto server = StartScheduler(uri, tls, &registry);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    farm::client::ClientOptions c = AgentClient(server->address(), i % g_agents, tls);
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // a fresh connection every time
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (tls) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = c.tls.root_certs;
      ssl.pem_cert_chain = c.tls.cert_chain;
      ssl.pem_private_key = c.tls.private_key;
      creds = grpc::SslCredentials(ssl);
    }
    auto stub = pb::JobService::NewStub(grpc::CreateCustomChannel(c.server, creds, args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::ListAgentsResponse resp;
    // The agent certificates' role allows ListAgents (viewer).
    grpc::Status st = stub->ListAgents(&ctx, {}, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "ListAgents: %s\n", st.error_message().c_str());
      std::exit(1);
    }
  }
  tally->secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  tally->jobs += n;
  server->Shutdown(absl::Seconds(2));
}

// Plaintext and mTLS alternate in rounds (plain, mTLS, mTLS, plain, ...),
// so load that drifts during the run (a shared machine) weighs on both
// alike; each side's rate is its jobs over its summed time.
constexpr int kRounds = 4;

void BM_GrpcPerAgentPlaintextVsMtls(benchmark::State& state) {
  for (auto _ : state) {
    Tally plain, mtls;
    const int per_round = std::max(g_jobs / kRounds, 1);
    for (int r = 0; r < kRounds; ++r) {
      const bool tls_first = r % 2 == 1;
      RunPerAgent(tls_first, per_round, tls_first ? &mtls : &plain);
      RunPerAgent(!tls_first, per_round, tls_first ? &plain : &mtls);
    }
    g_rate_plain_per_agent = plain.rate();
    g_rate_mtls_per_agent = mtls.rate();
  }
  state.counters["plaintext_jobs_per_s"] = g_rate_plain_per_agent;
  state.counters["mtls_jobs_per_s"] = g_rate_mtls_per_agent;
}
void BM_ConnectsPlaintextVsTls(benchmark::State& state) {
  for (auto _ : state) {
    Tally plain, tls;
    for (int r = 0; r < kRounds; ++r) {
      const bool tls_first = r % 2 == 1;
      RunConnects(tls_first, 50, tls_first ? &tls : &plain);
      RunConnects(!tls_first, 50, tls_first ? &plain : &tls);
    }
    g_connects_plain = plain.rate();
    g_connects_tls = tls.rate();
  }
  state.counters["plaintext_connects_per_s"] = g_connects_plain;
  state.counters["tls_handshakes_per_s"] = g_connects_tls;
}

// CPU per job of a path: what each job cost this process and PostgreSQL,
// and how many cores the two kept busy. They share the machine's cores, so
// where two paths keep them equally busy their rates are in the inverse
// ratio of their CPU per job.
void PrintCpu(const char* name, const Tally& t) {
  if (t.jobs <= 0) return;
  const double self = 1e6 * t.cpu_self / t.jobs, pg = 1e6 * t.cpu_pg / t.jobs;
  const std::string clients = t.cpu_clients > 0 ? absl::StrFormat(" of which agents' threads %.1f",
                                                                  1e6 * t.cpu_clients / t.jobs)
                                                : "";
  std::printf("cpu of %s: %.1f us/job (PostgreSQL %.1f, this process %.1f%s), %.2f cores busy\n",
              name, self + pg, pg, self, clients.c_str(),
              t.secs > 0 ? (t.cpu_self + t.cpu_pg) / t.secs : 0.0);
}

// One claim/report path over a fresh database of `jobs` jobs; the time
// counts the loop only (not the populate step or server start/stop).
enum class Path { kRawSql, kQueue, kGrpc };

Tally RunPath(Path path, bool batched, int jobs) {
  const std::string uri = NewDatabase();
  Populate(uri, jobs);
  std::atomic<int64_t> done{0};
  std::vector<std::thread> ts;
  double secs = 0;
  CpuSample cpu0, cpu1;
  auto timed = [&](auto spawn) {
    ResetStatements(uri);
    cpu0 = SampleCpu();
    g_client_thread_ns = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < g_agents; ++i) spawn(i);
    for (auto& t : ts) t.join();
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu1 = SampleCpu();
  };
  const char* name = "";
  if (path == Path::kRawSql) {
    name = batched ? "raw SQL per batch" : "raw SQL per result";
    timed([&](int i) { ts.emplace_back(SqlWorker, uri, i + 1, batched, &done); });
  } else if (path == Path::kQueue) {
    name = batched ? "queue per batch" : "queue per result";
    farm::storage::PgPool pool({uri, g_agents, 3});
    farm::storage::PgJobQueue queue(&pool);
    timed([&](int i) { ts.emplace_back(QueueWorker, &queue, i, batched, &done); });
  } else {
    name = batched ? "gRPC ReportResults" : "gRPC ReportResult";
    farm::metrics::MetricsRegistry registry;
    auto server = StartScheduler(uri, /*tls=*/false, &registry);
    // One channel shared by every agent thread (per-agent channels: below).
    auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    auto stub = pb::AgentService::NewStub(channel);
    timed([&](int i) { ts.emplace_back(GrpcWorker, stub.get(), i, batched, &done); });
    server->Shutdown(absl::Seconds(2));
  }
  StatementProfile(uri, name, done.load());
  if (done.load() != jobs) {
    std::fprintf(stderr, "%s: %lld of %d jobs completed\n", name,
                 static_cast<long long>(done.load()), jobs);
    std::exit(1);
  }
  const Tally t{static_cast<double>(jobs), secs, cpu1.self - cpu0.self, cpu1.pg - cpu0.pg,
                1e-9 * static_cast<double>(g_client_thread_ns.load())};
  PrintCpu(name, t);
  return t;
}

void OnePath(benchmark::State& state, Path path, bool batched, double* rate) {
  for (auto _ : state) *rate = RunPath(path, batched, g_jobs).rate();
  state.counters["jobs_per_s"] = *rate;
}

// The three batched paths alternating in rounds (order rotated each round,
// 1/kRounds of the jobs each), each rate its jobs over its summed time: on
// a shared machine the load that drifts during the run weighs on all
// three alike, which the one-path-after-another figures above cannot say.
void BM_BatchedRounds(benchmark::State& state) {
  for (auto _ : state) {
    Tally t[3];
    const int per_round = std::max(g_jobs / kRounds, 1);
    const Path order[3] = {Path::kRawSql, Path::kQueue, Path::kGrpc};
    for (int r = 0; r < kRounds; ++r) {
      for (int k = 0; k < 3; ++k) {
        const int p = (r + k) % 3;
        t[p].Add(RunPath(order[p], /*batched=*/true, per_round));
      }
    }
    for (int p = 0; p < 3; ++p) g_rounds[p] = t[p];
  }
  state.counters["grpc_over_sql"] =
      g_rounds[0].rate() > 0 ? g_rounds[2].rate() / g_rounds[0].rate() : 0;
}

void BM_RawSqlClaimComplete(benchmark::State& state) {
  OnePath(state, Path::kRawSql, false, &g_rate_sql);
}
void BM_QueueLeaseReport(benchmark::State& state) {
  OnePath(state, Path::kQueue, false, &g_rate_queue);
}
void BM_GrpcLeaseReport(benchmark::State& state) {
  OnePath(state, Path::kGrpc, false, &g_rate_grpc);
}
void BM_RawSqlClaimCompleteBatched(benchmark::State& state) {
  OnePath(state, Path::kRawSql, true, &g_rate_sql_batch);
}
void BM_QueueLeaseReportBatched(benchmark::State& state) {
  OnePath(state, Path::kQueue, true, &g_rate_queue_batch);
}
void BM_GrpcLeaseReportBatched(benchmark::State& state) {
  OnePath(state, Path::kGrpc, true, &g_rate_grpc_batch);
}

BENCHMARK(BM_RawSqlClaimComplete)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueueLeaseReport)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrpcLeaseReport)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RawSqlClaimCompleteBatched)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueueLeaseReportBatched)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrpcLeaseReportBatched)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BatchedRounds)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrpcPerAgentPlaintextVsMtls)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConnectsPlaintextVsTls)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The bench's own flags into the globals; the rest (argv[0] and google
// benchmark's flags) into `rest`. --help prints both usages and asks for
// exit 0.
std::optional<int> ParseFlags(int argc, char** argv, std::vector<char*>* rest) {
  for (int i = 0; i < argc; ++i) {
    auto take = [&](const char* flag, int* out) {
      if (std::strcmp(argv[i], flag) == 0 && i + 1 < argc) {
        *out = std::atoi(argv[++i]);
        return true;
      }
      return false;
    };
    if (std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: sched_bench [--jobs N] [--agents K] [--batch B] [--statements] "
          "[google benchmark flags]\n"
          "  --jobs N      jobs per path (default 4000)\n"
          "  --agents K    concurrent workers / agents (default 8)\n"
          "  --batch B     jobs claimed per lease call, reported per batch (default 50)\n"
          "  --statements  load pg_stat_statements and print each path's SQL per job\n"
          "google benchmark flags (e.g. --benchmark_filter=BatchedRounds):\n");
      std::fflush(stdout);
      // Before PostgreSQL starts: google benchmark prints its flags and exits.
      int help_argc = 2;
      char* help_argv[] = {argv[0], argv[i], nullptr};
      benchmark::Initialize(&help_argc, help_argv);
      return 0;
    }
    if (std::strcmp(argv[i], "--statements") == 0) {
      g_statements = true;
      continue;
    }
    if (take("--jobs", &g_jobs) || take("--agents", &g_agents) || take("--batch", &g_batch)) {
      continue;
    }
    rest->push_back(argv[i]);
  }
  return std::nullopt;
}

// The private PostgreSQL every path runs against (with pg_stat_statements
// under --statements).
absl::StatusOr<std::unique_ptr<farm::testing::PostgresInstance>> StartPostgres() {
  farm::testing::PostgresOptions pg_options;
  if (g_statements) {
    pg_options.extra_config = {"shared_preload_libraries = 'pg_stat_statements'",
                               "pg_stat_statements.track_planning = on"};
  }
  return farm::testing::PostgresInstance::Start(pg_options);
}

// A CA, the server's certificate and one client certificate per agent in
// g_certs (scripts/farm-certs).
bool MakeCerts() {
  g_certs = farm::testing::HarnessTempBase() + "/farm-bench-certs-" + std::to_string(getpid());
  const std::string certs = std::string(FARM_SOURCE_DIR) + "/scripts/farm-certs";
  std::string make = certs + " init " + g_certs + " 2>/dev/null";
  for (int i = 0; i < g_agents; ++i) {
    make += " && " + certs + " client " + g_certs + " bench-" + std::to_string(i) +
            " agent 2>/dev/null";
  }
  return std::system(make.c_str()) == 0;
}

void PrintRatio(const char* what, double num, double den) {
  if (den > 0 && num > 0) std::printf("ratio %s: %.2f\n", what, num / den);
}

// The rates the benchmarks recorded, and their ratios.
void PrintSummary() {
  std::printf("jobs=%d agents=%d batch=%d\n", g_jobs, g_agents, g_batch);
  std::printf("raw SQL claim+complete, one statement per result: %.0f jobs/s\n", g_rate_sql);
  std::printf("queue statements (PgJobQueue, no gRPC), ReportResult: %.0f jobs/s\n", g_rate_queue);
  std::printf("gRPC lease+ReportResult end to end: %.0f jobs/s\n", g_rate_grpc);
  std::printf("raw SQL claim+complete, one statement per batch: %.0f jobs/s\n", g_rate_sql_batch);
  std::printf("queue statements (PgJobQueue, no gRPC), ReportResults: %.0f jobs/s\n",
              g_rate_queue_batch);
  std::printf("gRPC lease+ReportResults end to end: %.0f jobs/s\n", g_rate_grpc_batch);
  PrintRatio("gRPC/SQL unbatched", g_rate_grpc, g_rate_sql);
  PrintRatio("gRPC/queue unbatched", g_rate_grpc, g_rate_queue);
  PrintRatio("gRPC batched / SQL unbatched", g_rate_grpc_batch, g_rate_sql);
  PrintRatio("gRPC/SQL batched", g_rate_grpc_batch, g_rate_sql_batch);
  PrintRatio("gRPC/queue batched", g_rate_grpc_batch, g_rate_queue_batch);
  PrintRatio("queue/SQL batched", g_rate_queue_batch, g_rate_sql_batch);
  std::printf(
      "batched, alternating rounds: raw SQL %.0f, queue statements %.0f, gRPC %.0f jobs/s\n",
      g_rounds[0].rate(), g_rounds[1].rate(), g_rounds[2].rate());
  PrintCpu("rounds raw SQL", g_rounds[0]);
  PrintCpu("rounds queue statements", g_rounds[1]);
  PrintCpu("rounds gRPC", g_rounds[2]);
  PrintRatio("rounds gRPC/SQL batched", g_rounds[2].rate(), g_rounds[0].rate());
  PrintRatio("rounds gRPC/queue batched", g_rounds[2].rate(), g_rounds[1].rate());
  // Where the paths keep the cores equally busy, this is the rate ratio.
  PrintRatio("rounds SQL/gRPC CPU per job", g_rounds[0].cpu_per_job(), g_rounds[2].cpu_per_job());
  PrintRatio("rounds queue/SQL batched", g_rounds[1].rate(), g_rounds[0].rate());
  std::printf("gRPC per-agent channels, plaintext: %.0f jobs/s\n", g_rate_plain_per_agent);
  std::printf("gRPC per-agent channels, mTLS + agent identity: %.0f jobs/s\n",
              g_rate_mtls_per_agent);
  if (g_rate_plain_per_agent > 0) {
    std::printf("ratio mTLS/plaintext jobs/s: %.2f\n",
                g_rate_mtls_per_agent / g_rate_plain_per_agent);
  }
  std::printf("new connections + 1 call: plaintext %.0f/s, TLS handshakes %.0f/s (ratio %.2f)\n",
              g_connects_plain, g_connects_tls,
              g_connects_plain > 0 ? g_connects_tls / g_connects_plain : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  if (std::optional<int> exit = ParseFlags(argc, argv, &rest)) return *exit;
  int rest_argc = static_cast<int>(rest.size());
  spdlog::set_level(spdlog::level::warn);
  auto pg = StartPostgres();
  if (!pg.ok()) {
    std::fprintf(stderr, "postgres: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  g_pg = pg->get();
  if (!MakeCerts()) {
    std::fprintf(stderr, "scripts/farm-certs failed\n");
    return 1;
  }
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  PrintSummary();
  std::system(("rm -rf " + g_certs).c_str());
  g_pg = nullptr;
  return 0;
}
