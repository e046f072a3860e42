// farm-scheduler: parse flags, start SchedulerServer and the /metrics
// exposer, wait for SIGTERM/SIGINT, shut down cleanly.
#include <sys/resource.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "lib/metrics/metrics.h"
#include "lib/metrics/metrics_flags.h"
#include "lib/service/accept_limit.h"
#include "lib/service/flags.h"
#include "lib/service/listener_probe.h"
#include "lib/service/shutdown.h"
#include "lib/service/tls.h"
#include "scheduler/server.h"

#ifndef FARM_DEFAULT_CATALOG_DIR
#define FARM_DEFAULT_CATALOG_DIR ""
#endif

namespace {

// A usage error whose message is printed as it is.
absl::Status Usage(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// The command line as parsed; ResolveOptions turns it into ServerOptions.
struct Flags {
  farm::scheduler::ServerOptions opts;
  std::string listen = "127.0.0.1:7070";
  std::string metrics_addr = "127.0.0.1:9464";
  int max_attempts = 3;
  int64_t max_jobs = 100000;
  size_t max_spec_bytes = 1 << 20;
  std::string catalog_dir = FARM_DEFAULT_CATALOG_DIR;
  std::string lab_hosts;
  std::string log_level = "info";
  int db_connections = 8;
  farm::metrics::MetricsTls metrics_tls;
  std::string admin_token_file;
  farm::service::TlsFlags tls_flags;
  absl::Duration listener_probe_interval = absl::Seconds(10);
  int max_connections_per_peer = 128;
};

void AddFlags(CLI::App& app, Flags* f) {
  app.add_option("--listen", f->listen,
                 "gRPC address host:port; port 0 picks a free port (printed as `listening on "
                 "HOST:PORT` on stdout)")
      ->capture_default_str();
  app.add_option("--db", f->opts.db_uri,
                 "PostgreSQL URI, e.g. postgresql://user@127.0.0.1:5432/farm")
      ->envname("FARM_DB");
  app.add_option("--metrics", f->metrics_addr,
                 "Prometheus /metrics address host:port; port 0 picks a free port (printed as "
                 "`metrics on HOST:PORT`)")
      ->capture_default_str();
  farm::metrics::AddMetricsTlsOptions(app, &f->metrics_tls);
  app.add_option("--admin-token-file", f->admin_token_file,
                 "file whose first line is the bootstrap admin bearer token (or set "
                 "FARM_ADMIN_TOKEN). No token and no --tls-ca: calls are not authenticated, "
                 "which only a loopback --listen (or --insecure) allows")
      ->envname("FARM_ADMIN_TOKEN_FILE");
  farm::service::AddTlsOptions(app, &f->tls_flags, /*server=*/true);
  farm::service::AddDurationOption(
      app, "--lease-ttl", &f->opts.config.lease_ttl, "30s",
      "lease lifetime without a heartbeat (e.g. 30s, 2s, 500ms); agents heartbeat every "
      "ttl/3, the reaper runs every ttl/4");
  farm::service::AddDurationOption(
      app, "--max-boot-timeout", &f->opts.config.max_boot_timeout, "15m",
      "longest an agent's lease is held while its host reboots into a job's kernel (kexec "
      "agents ask for their --kexec-boot-timeout plus 60s; 0: leases are never held through a "
      "reboot)",
      farm::service::DurationRange::kNonNegative);
  farm::service::AddDurationOption(
      app, "--unrunnable-wait", &f->opts.config.unrunnable_wait, "1h",
      "a real or kernel build job that no registered agent can run fails after this long "
      "(its reason names the kernel, platform and mode it needs); submit warns at once");
  farm::service::AddDurationOption(app, "--retry-backoff", &f->opts.config.retry.base_backoff, "1s",
                                   "delay before a failed or expired job is leased again; "
                                   "doubles per attempt (capped at 5m)");
  app.add_option("--max-attempts", f->max_attempts, "attempts per job before it fails")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--boot-attempts", f->opts.config.retry.boot_attempts,
                 "boots of a job's kernel on a lab host that do not come back (its lease held "
                 "through the kexec expires; the host is power-cycled each time) before the job "
                 "fails as not booting on that host, a bisect skip; each spends an attempt")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--max-jobs-per-matrix", f->max_jobs, "cap on the jobs one matrix expands to")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  app.add_option("--max-spec-bytes", f->max_spec_bytes, "cap on the size of a matrix spec")
      ->capture_default_str()
      ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  app.add_option("--max-message-bytes", f->opts.max_receive_message_bytes,
                 "largest request accepted from any caller, in bytes (a result carries at most "
                 "12 MiB of raw output; a catalog YAML must fit too)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{4} << 20, int64_t{1} << 30));
  app.add_option("--grpc-memory-bytes", f->opts.grpc_memory_bytes,
                 "memory gRPC may use for all calls together (its resource quota); beyond, "
                 "calls wait or fail RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{64} << 20, int64_t{64} << 30));
  app.add_option("--lab-hosts", f->lab_hosts,
                 "YAML file of lab hosts' power-cycle and console commands by agent name: run "
                 "when a host does not come back from a reboot into a job's kernel "
                 "(docs/kernels.md \"Power, console and recovery\"), and the kernel config "
                 "the farm builds each host's kernels with (\"Kernels for a host platform\"; "
                 "empty: none)")
      ->envname("FARM_LAB_HOSTS");
  app.add_option("--catalog-dir", f->catalog_dir,
                 "load every *.yaml catalog in DIR that is not in the database yet (empty: none)")
      ->capture_default_str();
  app.add_option("--db-connections", f->db_connections, "PostgreSQL connections in the pool")
      ->capture_default_str()
      ->check(CLI::Range(1, 200));
  app.add_option("--max-watch-streams", f->opts.watch.max_streams,
                 "WatchMatrix streams served at once; beyond, RESOURCE_EXHAUSTED (0: no cap)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--max-watch-streams-per-principal", f->opts.watch.max_streams_per_principal,
                 "WatchMatrix streams one principal (token or certificate name) may hold open; "
                 "beyond, RESOURCE_EXHAUSTED (0: no cap)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--max-connections-per-peer", f->max_connections_per_peer,
                 "open connections one peer address may hold; its next is closed at accept, so "
                 "one host (even with a certificate of the farm) cannot take every slot; each "
                 "agent and farmctl needs one (0: no cap)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  farm::service::AddDurationOption(
      app, "--connection-idle", &f->opts.connection_idle, "2m",
      "a connection with no call for this long is closed (clients reconnect on their next call; "
      "streams count as calls), so a peer that holds connections without calling gives them "
      "back");
  farm::service::AddDurationOption(
      app, "--listener-probe-interval", &f->listener_probe_interval, "10s",
      "how often the scheduler probes its own gRPC port as a client would (HTTP/2 preface or "
      "TLS hello); with no answer 3 times in a row it exits with status 70, so that systemd or "
      "the container runtime restarts it (0: no probe)",
      farm::service::DurationRange::kNonNegative);
  app.add_option("--log-level", f->log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
}

// The server's options from the flags: TLS material, the admin token, the
// exposure rule, the catalog directory. An error is a usage error (exit 2),
// its message the line to print.
absl::StatusOr<farm::scheduler::ServerOptions> ResolveOptions(const Flags& f) {
  farm::scheduler::ServerOptions opts = f.opts;
  opts.listen = f.listen;
  absl::StatusOr<farm::service::TlsPem> tls = farm::service::LoadTls(f.tls_flags, /*server=*/true);
  if (!tls.ok()) return Usage(absl::StrCat("farm-scheduler: ", tls.status().message()));
  opts.tls = *std::move(tls);
  opts.insecure = f.tls_flags.insecure;
  if (!f.admin_token_file.empty()) {
    absl::StatusOr<std::string> token =
        farm::service::ReadSecretFile(f.admin_token_file, "--admin-token-file");
    if (!token.ok()) return Usage(absl::StrCat("farm-scheduler: ", token.status().message()));
    opts.token = *std::move(token);
  } else if (const char* env = std::getenv("FARM_ADMIN_TOKEN"); env != nullptr && *env != '\0') {
    opts.token = env;
  }
  if (absl::Status exposure = farm::scheduler::CheckExposure(opts); !exposure.ok()) {
    return Usage(absl::StrCat("farm-scheduler: ", exposure.message()));
  }
  opts.config.max_attempts = f.max_attempts;
  opts.config.limits.max_jobs_per_matrix = f.max_jobs;
  opts.config.limits.max_spec_bytes = f.max_spec_bytes;
  opts.db_connections = f.db_connections;
  opts.worker_threads = f.db_connections;
  std::string catalog_dir = f.catalog_dir;
  std::error_code ec;
  if (!catalog_dir.empty() && !std::filesystem::is_directory(catalog_dir, ec)) {
    if (catalog_dir == FARM_DEFAULT_CATALOG_DIR) {
      catalog_dir.clear();  // the built-in catalog is not there yet: nothing to load
    } else {
      return Usage(absl::StrCat("--catalog-dir \"", catalog_dir, "\": not a directory"));
    }
  }
  opts.catalog_dir = catalog_dir;
  if (!f.lab_hosts.empty()) {
    absl::StatusOr<farm::scheduler::LabHosts> hosts = farm::scheduler::LoadLabHosts(f.lab_hosts);
    if (!hosts.ok()) return Usage(absl::StrCat("--lab-hosts ", hosts.status().message()));
    opts.config.lab_kernel_configs = farm::scheduler::LabKernelConfigs(*hosts);
    opts.lab_hosts = *std::move(hosts);
  }
  opts.catalog_source = catalog_dir == FARM_DEFAULT_CATALOG_DIR ? "builtin" : "";
  absl::Status hp = farm::scheduler::CheckHostPort(f.metrics_addr, "--metrics");
  if (!hp.ok()) return Usage(std::string(hp.message()));
  return opts;
}

// Every connection costs a descriptor, and gRPC stops accepting for good at
// the first "Too many open files": take the whole hard limit (systemd's
// LimitNOFILE, deploy/systemd) instead of the 1024 soft default. Returns
// the soft limit in force (0 if unknown).
int64_t RaiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      spdlog::warn("open-file limit: cannot raise soft {} to hard {}: {}", before, lim.rlim_max,
                   std::strerror(errno));
      return static_cast<int64_t>(before);
    }
  }
  spdlog::info("open-file limit: soft {} (was {}), hard {}", lim.rlim_cur, before, lim.rlim_max);
  if (lim.rlim_cur < 4096) {
    spdlog::warn("open-file limit {} allows few connections; set LimitNOFILE=65536 (the unit does)",
                 lim.rlim_cur);
  }
  return static_cast<int64_t>(lim.rlim_cur);
}

// Keeps incoming connections below the open-file limit, so that gRPC's
// listener never meets EMFILE (lib/service/accept_limit.h).
void LimitAcceptedConnections(int64_t open_file_limit, int per_peer) {
  farm::service::SetAcceptPeerLimit(per_peer);
  if (open_file_limit <= 0) return;
  const int limit = farm::service::AcceptFdLimitFor(open_file_limit);
  farm::service::SetAcceptFdLimit(limit);
  spdlog::info(
      "connections: accepted only below descriptor {} (the rest of the {} are kept) and at most "
      "{} per peer address",
      limit, open_file_limit, per_peer);
}

// A listener that stops accepting leaves a process that is up and serves no
// one, which no service manager restarts: probe the port as a client would
// and exit when it does not answer (lib/service/listener_probe.h).
std::unique_ptr<farm::service::ListenerWatchdog> WatchListener(
    const farm::scheduler::ServerOptions& opts, int port, absl::Duration interval) {
  if (interval == absl::ZeroDuration()) return nullptr;
  farm::service::ListenerWatchdogOptions o;
  o.host = opts.listen.substr(0, opts.listen.rfind(':'));
  o.port = port;
  o.tls = opts.tls.enabled();
  o.interval = interval;
  o.refusals = [] { return farm::service::AcceptRefusals(); };
  auto dog = std::make_unique<farm::service::ListenerWatchdog>(o, [o](const absl::Status& st) {
    spdlog::critical(
        "listener probe: no answer {} times in a row ({}); exiting with status 70 "
        "so that the service manager starts a new scheduler",
        o.failures, std::string(st.message()));
    spdlog::shutdown();
    std::_Exit(70);
  });
  dog->Start();
  return dog;
}

// Starts /metrics and the server, waits for SIGTERM/SIGINT, shuts down.
// `signals` is constructed before any thread starts.
int Serve(const farm::scheduler::ServerOptions& opts, const Flags& f,
          farm::service::ShutdownSignals& signals) {
  farm::metrics::MetricsRegistry registry;
  absl::StatusOr<std::unique_ptr<farm::metrics::MetricsExposer>> exposer =
      farm::metrics::MetricsExposer::Start(f.metrics_addr, registry, f.metrics_tls);
  if (!exposer.ok()) {
    spdlog::error("{}", std::string(exposer.status().message()));
    return 1;
  }
  absl::StatusOr<std::unique_ptr<farm::scheduler::SchedulerServer>> server =
      farm::scheduler::SchedulerServer::Start(opts, &registry);
  if (!server.ok()) {
    spdlog::error("{}", std::string(server.status().message()));
    return 1;
  }
  if (opts.insecure && !farm::service::IsLoopbackAddress(opts.listen) &&
      (!opts.tls.enabled() || (opts.token.empty() && opts.tls.root_certs.empty()))) {
    spdlog::warn("--insecure: {} serves {} off loopback; anyone on the network can call it",
                 (*server)->address(),
                 opts.tls.enabled() ? "unauthenticated calls" : "plaintext gRPC");
  }
  std::cout << "listening on " << (*server)->address() << "\n"
            << "metrics on " << (*exposer)->address() << std::endl;
  spdlog::info("farm-scheduler up: grpc {} metrics {} lease-ttl {}", (*server)->address(),
               (*exposer)->address(), absl::FormatDuration(opts.config.lease_ttl));

  std::unique_ptr<farm::service::ListenerWatchdog> watchdog =
      WatchListener(opts, (*server)->port(), f.listener_probe_interval);

  const int sig = signals.Wait();
  spdlog::info("signal {}: shutting down", sig);
  if (watchdog != nullptr) watchdog->Stop();  // a draining listener is not a wedged one
  (*server)->Shutdown(absl::Seconds(5));
  server->reset();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-scheduler: serves JobService, AgentService and AnalysisService (gRPC) over a "
      "PostgreSQL job queue; applies schema migrations at start. Several schedulers may share "
      "one database."};
  Flags flags;
  AddFlags(app, &flags);
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;

  auto logger = spdlog::stderr_color_mt("farm-scheduler");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(flags.log_level));

  absl::StatusOr<farm::scheduler::ServerOptions> opts = ResolveOptions(flags);
  if (!opts.ok()) {
    std::cerr << opts.status().message() << "\n";
    return 2;
  }
  LimitAcceptedConnections(RaiseOpenFileLimit(), flags.max_connections_per_peer);
  // Before any thread starts, so that no gRPC or pool thread takes a signal.
  farm::service::ShutdownSignals signals;
  return Serve(*opts, flags, signals);
}
