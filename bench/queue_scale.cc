// queue_scale: the queue with many agents at once. Starts a private
// PostgreSQL (farm_testing), queues --jobs emulator jobs in one matrix
// through the store, spawns the real farm-scheduler binary over it (its
// defaults, plaintext on loopback) and runs simulated agents against its
// AgentService over gRPC: each registers, heartbeats at the interval the
// scheduler hands out (lease TTL / 3) with the leases it holds, leases when
// a slot is free (max_jobs = free slots; 200 ms later again when none was
// granted), "runs" a leased job for --job-ms (jittered 0.5x-1.5x) and
// reports it with ReportResults, as a real agent's report batcher sends a
// lone result. Two fleets run one after the other on the same scheduler and
// queue: a small baseline (--baseline agents) and the big one (--agents).
//
//   build/bin/queue_scale [--agents N] [--baseline B] [--jobs J] [--seconds S]
//       [--warmup W] [--job-ms MS] [--slots K] [--lease-ttl 30s]
//
// Each fleet starts its agents' first lease and first heartbeat at random
// points within one job length and one heartbeat interval, runs for
// --warmup seconds (default: one heartbeat interval, so every agent is in
// its rhythm), then counts calls started in the next --seconds: lease,
// heartbeat and report latency p50/p99 (call issued to callback run, so the
// bench's own scheduling delays are in them), reports per second, and the
// CPU seconds per wall second of farm-scheduler (/proc/PID/stat) and of
// PostgreSQL (postmaster and children). Then the agents stop leasing,
// finish and report what they hold. Prints each figure for both fleets and
// the ratio big / baseline.
//
// Every agent has its own channel and TCP connection (a local subchannel
// pool), so the scheduler serves as many connections as agents. The calls
// are asynchronous (gRPC callback API) from one event thread, so the
// bench's CPU stays small next to the scheduler's.
//
// Exits non-zero when any RPC fails, a report is not accepted, a heartbeat
// revokes a lease, or a fleet leased, reported or heartbeated nothing in its
// window, so a tiny run is a test (queue_scale.tiny).
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "bench/proc_cpu.h"
#include "bench/sim_fleet.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_store.h"
#include "testing/binaries.h"
#include "testing/service_harness.h"

namespace {

namespace pb = ::iommufarm::v1;
using farm::bench::FleetOptions;
using farm::bench::FleetStats;
using farm::bench::SimFleet;

struct Options {
  int agents = 1000;
  int baseline = 10;
  int jobs = 100000;
  int seconds = 60;
  int warmup = -1;  // seconds; -1: one heartbeat interval
  int job_ms = 10000;
  int slots = 1;
  std::string lease_ttl = "30s";
  std::string scheduler_bin = farm::testing::BinaryPath("FARM_SCHEDULER_BIN", FARM_SCHEDULER_BIN);
};

template <typename T>
T Check(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

// Schema and one matrix of `jobs` queued emulator jobs.
void Populate(const std::string& uri, int jobs) {
  const auto t0 = std::chrono::steady_clock::now();
  farm::storage::PgPool pool({uri, 2, 3});
  Check(farm::storage::ApplyMigrations(pool), "migrations");
  farm::storage::PgStore store(&pool);
  farm::storage::NewMatrix m;
  m.matrix.set_name("queue-scale");
  m.matrix.set_spec_yaml("name: queue-scale");
  for (int i = 0; i < jobs; ++i) {
    pb::Job j;
    j.set_catalog("linux-iommu");
    j.set_commit_id("v5.10");
    j.set_platform("intel-vtd-2s12c");
    j.mutable_workload()->set_name("dma-map-bench");
    (*j.mutable_workload()->mutable_params())["threads"] = std::to_string(1 + i % 4);
    j.set_mode(static_cast<pb::IommuMode>(1 + i % 4));
    j.set_repeat(i);
    j.set_executor(pb::EXECUTOR_EMULATOR);
    j.set_kind(pb::JOB_KIND_BULK);
    j.set_max_attempts(3);
    m.jobs.push_back(std::move(j));
  }
  Check(store.CreateMatrix(m), "create matrix");
  std::printf("queued %d emulator jobs in %.1f s\n", jobs,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// farm-scheduler as a child on free loopback ports; its gRPC address in
// *address. Room for one connection per agent from the one loopback peer.
std::unique_ptr<farm::testing::ChildProcess> StartScheduler(const Options& o,
                                                            const std::string& uri,
                                                            const std::string& log_prefix,
                                                            std::string* address) {
  auto child = farm::testing::SpawnLogged(
      {o.scheduler_bin, "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--db", uri,
       "--lease-ttl", o.lease_ttl, "--max-connections-per-peer",
       std::to_string(std::max(o.agents, o.baseline) + 64), "--log-level", "warn"},
      log_prefix);
  absl::Status st = child->WaitFor("metrics on", /*in_stderr=*/false, absl::Seconds(120));
  if (!st.ok()) {
    std::fprintf(stderr, "farm-scheduler: %s\n%s\n", st.ToString().c_str(), child->Err().c_str());
    std::exit(1);
  }
  const std::string out = child->Out();
  const size_t at = out.find("listening on ") + 13;
  *address = out.substr(at, out.find('\n', at) - at);
  std::printf("farm-scheduler pid %d on %s (lease TTL %s)\n", static_cast<int>(child->pid()),
              address->c_str(), o.lease_ttl.c_str());
  return child;
}

// One connection per simulated agent needs a descriptor each.
void RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

// One fleet of `agents` from registration to drained, its window's CPU
// sampled around it.
FleetStats RunFleet(const Options& o, const std::string& address, pid_t scheduler, pid_t postmaster,
                    int agents, const std::string& name) {
  FleetOptions f;
  f.address = address;
  f.name_prefix = name;
  f.agents = agents;
  f.slots = o.slots;
  f.job = absl::Milliseconds(o.job_ms);
  SimFleet fleet(f);
  if (absl::Status st = fleet.RegisterAll(); !st.ok()) {
    std::fprintf(stderr, "%s: register: %s\n", name.c_str(), st.ToString().c_str());
    std::exit(1);
  }
  const absl::Duration warmup =
      o.warmup >= 0 ? absl::Seconds(o.warmup) : fleet.heartbeat_interval();
  auto cpu = [&] {
    return std::pair{farm::bench::ProcessCpuSeconds(scheduler, /*reaped=*/false),
                     farm::bench::PostgresCpuSeconds(postmaster)};
  };
  std::pair<double, double> cpu0, cpu1;
  FleetStats out = fleet.Run(warmup, absl::Seconds(o.seconds),
                             [&](bool start) { (start ? cpu0 : cpu1) = cpu(); });
  out.scheduler_cpu = (cpu1.first - cpu0.first) / o.seconds;
  out.postgres_cpu = (cpu1.second - cpu0.second) / o.seconds;
  farm::bench::PrintFleet(name, out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"queue_scale: the queue with many simulated agents against a small baseline"};
  app.add_option("--agents", o.agents, "agents of the big fleet")->capture_default_str();
  app.add_option("--baseline", o.baseline, "agents of the baseline fleet")->capture_default_str();
  app.add_option("--jobs", o.jobs, "emulator jobs queued before the fleets run")
      ->capture_default_str();
  app.add_option("--seconds", o.seconds, "measured window of each fleet")->capture_default_str();
  app.add_option("--warmup", o.warmup, "seconds before the window (-1: one heartbeat interval)")
      ->capture_default_str();
  app.add_option("--job-ms", o.job_ms, "mean time an agent holds a job before reporting it")
      ->capture_default_str();
  app.add_option("--slots", o.slots, "job slots per agent")->capture_default_str();
  app.add_option("--lease-ttl", o.lease_ttl, "farm-scheduler --lease-ttl (heartbeats every ttl/3)")
      ->capture_default_str();
  app.add_option("--scheduler-bin", o.scheduler_bin, "the farm-scheduler binary")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  signal(SIGPIPE, SIG_IGN);
  RaiseOpenFileLimit();

  farm::testing::PostgresOptions pg_options;
  pg_options.extra_config = {"max_connections = 200"};
  auto pg = Check(farm::testing::PostgresInstance::Start(pg_options), "postgres");
  const std::string uri = Check(pg->CreateDatabase("queue"), "create database");
  Populate(uri, o.jobs);
  std::string address;
  auto scheduler = StartScheduler(o, uri, pg->dir() + "/farm-scheduler", &address);

  const FleetStats small =
      RunFleet(o, address, scheduler->pid(), pg->pid(), o.baseline, "baseline");
  const FleetStats big = RunFleet(o, address, scheduler->pid(), pg->pid(), o.agents, "fleet");
  farm::bench::PrintRatios(small, big);
  if (scheduler->Terminate() != 0) {
    std::fprintf(stderr, "farm-scheduler did not stop cleanly:\n%s\n", scheduler->Err().c_str());
    return 1;
  }
  const bool ok = small.Healthy() && big.Healthy();
  std::printf("%s\n", ok ? "queue_scale: every RPC succeeded" : "queue_scale: FAILED");
  return ok ? 0 : 1;
}
