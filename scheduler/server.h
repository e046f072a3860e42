// SchedulerServer: wires farm-scheduler together -- PostgreSQL pool,
// migrations, stores, services, reaper, worker pool and the gRPC server
// (JobService, AgentService, AnalysisService, health, reflection). Used by
// main.cc, the in-process tests and the benchmark.
//
// Contract: Start() returns a running server or an error (bad address,
// database unreachable for longer than db_wait, failed migration, bad
// catalog dir). Shutdown() is idempotent: it stops accepting calls, lets
// running calls finish (until the deadline, then cancels them), stops the
// reaper and joins every thread. Thread-safe accessors. The standard health
// service answers SERVING only while PostgreSQL is reachable.
#ifndef SCHEDULER_SERVER_H_
#define SCHEDULER_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/base/background_loop.h"
#include "lib/metrics/metrics.h"
#include "lib/service/tls.h"
#include "lib/storage/pg/pg_access_store.h"
#include "lib/storage/pg/pg_listener.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_retention_store.h"
#include "lib/storage/pg/pg_store.h"
#include "scheduler/authz.h"
#include "scheduler/grpc_services.h"
#include "scheduler/lab_recovery.h"
#include "scheduler/scheduler_service.h"
#include "scheduler/worker_pool.h"

namespace farm::scheduler {

struct ServerOptions {
  std::string listen = "127.0.0.1:7070";  // host:port, port 0 = any free port
  std::string db_uri;
  // Bootstrap admin bearer token (from a file or the environment, never
  // argv). Empty and no tls.root_certs: callers are not authenticated, which
  // only a loopback (or --insecure) listener allows.
  std::string token;
  // Empty: plaintext. cert_chain+private_key: TLS; root_certs too: client
  // certificates required and verified (mTLS).
  service::TlsPem tls;
  // Plaintext or unauthenticated on a non-loopback --listen (logged as a warning).
  bool insecure = false;
  SchedulerConfig config;
  std::string catalog_dir;                 // empty: load none
  std::string catalog_source = "builtin";  // source recorded for catalog_dir files
  int db_connections = 8;
  // PostgreSQL statement_timeout on the pool's connections (0: none).
  int db_statement_timeout_ms = 120000;
  int worker_threads = 8;
  // Expensive calls (SubmitMatrix, LoadCatalog, ImportGitCatalog,
  // GetResults) run on their own threads; beyond heavy_queue waiting calls
  // they are shed with RESOURCE_EXHAUSTED.
  int heavy_threads = 2;
  int heavy_queue = 8;
  // Heartbeat and ReleaseLeases: own threads and own database connections.
  int lease_threads = 2;
  int lease_db_connections = 2;
  // gRPC limits: concurrent streams per connection and the memory gRPC may
  // use for all calls together (the resource quota).
  int max_concurrent_streams = 100;
  int64_t grpc_memory_bytes = int64_t{1} << 30;
  // Largest request gRPC accepts, for every caller alike (gRPC 1.51 cannot
  // set it per method or per peer): a result with the agent's 12 MiB of raw
  // output fits, and a viewer's concurrent calls cost at most this each.
  int64_t max_receive_message_bytes = int64_t{16} << 20;
  // How long a looked-up API token is trusted before it is looked up again
  // (revocation through this server drops it at once).
  absl::Duration token_cache_ttl = absl::Seconds(10);
  // A connection that has not finished its TLS (or HTTP/2) handshake this
  // long after accept is closed (gRPC's default: 120 s), and one with no
  // call for connection_idle is closed with a GOAWAY, so neither a peer
  // that never starts TLS nor an idle client holds a descriptor for long.
  absl::Duration handshake_timeout = absl::Seconds(10);
  absl::Duration connection_idle = absl::Minutes(2);
  // How long Start() keeps retrying when the database is not up yet.
  absl::Duration db_wait = absl::Seconds(30);
  bool run_reaper = true;
  // Lab hosts whose power and console the scheduler drives when one does
  // not come back from a job's kernel (lab_recovery.h); empty: none.
  LabHosts lab_hosts;
  // WatchMatrix: LISTEN/NOTIFY wake-ups on one extra connection (off: the
  // fallback poll only) and the pacing of reads.
  bool watch_events = true;
  WatchOptions watch;
};

class SchedulerServer final {
 public:
  // `registry` (not owned) receives the scheduler's metric families.
  static absl::StatusOr<std::unique_ptr<SchedulerServer>> Start(const ServerOptions& options,
                                                                metrics::MetricsRegistry* registry);
  SchedulerServer(const SchedulerServer&) = delete;
  SchedulerServer& operator=(const SchedulerServer&) = delete;
  ~SchedulerServer();

  int port() const { return port_; }
  // host:port actually bound.
  std::string address() const { return address_; }
  void Shutdown(absl::Duration deadline = absl::Seconds(5)) ABSL_LOCKS_EXCLUDED(shutdown_mu_);

  JobService& jobs() { return *job_service_; }
  AgentService& agents() { return *agent_service_; }
  Reaper& reaper() { return *reaper_; }
  storage::PgStore& store() { return *store_; }
  metrics::SchedulerMetrics& metrics() { return *metrics_; }
  // Calls that reached an adapter (past TLS) and those refused by authorization.
  const Authorizer& authorizer() const { return *authz_; }
  storage::AccessStore& access() { return *access_; }
  // Null when ServerOptions::watch_events is off.
  storage::PgMatrixListener* matrix_listener() { return listener_.get(); }
  const JobServiceGrpc::WatchStats& watch_stats() const { return job_grpc_->watch_stats(); }

 private:
  SchedulerServer() = default;

  // Start's steps, in order, each on the members the ones before made.
  // The stores, metrics and services (the catalog loaded, the matrix
  // listener started) over pool_, and the lease path's own pool.
  absl::Status MakeServices(const ServerOptions& options, metrics::MetricsRegistry* registry);
  // The worker pools, the authorizer and the gRPC adapters.
  void MakeAdapters(const ServerOptions& options);
  // The gRPC server on options.listen: port_ and address_; on failure the
  // worker pools are stopped.
  absl::Status Listen(const ServerOptions& options);
  // The health loop and the reaper (when options.run_reaper).
  void StartBackground(const ServerOptions& options);

  std::unique_ptr<storage::PgPool> pool_;
  std::unique_ptr<storage::PgStore> store_;
  std::unique_ptr<metrics::SchedulerMetrics> metrics_;
  std::unique_ptr<JobService> job_service_;
  std::unique_ptr<AgentService> agent_service_;
  std::unique_ptr<AnalysisService> analysis_service_;
  std::unique_ptr<storage::PgAccessStore> access_;
  std::unique_ptr<storage::PgRetentionStore> retention_store_;
  std::unique_ptr<RetentionService> retention_service_;
  std::unique_ptr<Authorizer> authz_;
  std::unique_ptr<LabRecovery> lab_recovery_;  // before reaper_, which calls it
  std::unique_ptr<Reaper> reaper_;
  // Outlives the gRPC adapters: streams unsubscribe when gRPC is done.
  std::unique_ptr<storage::PgMatrixListener> listener_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<WorkerPool> heavy_workers_;
  // Lease renewals: their own connections, store, service and threads.
  std::unique_ptr<storage::PgPool> lease_db_;
  std::unique_ptr<storage::PgStore> lease_store_;
  std::unique_ptr<storage::PgAccessStore> lease_access_;
  std::unique_ptr<AgentService> lease_service_;
  std::unique_ptr<WorkerPool> lease_workers_;
  std::unique_ptr<JobServiceGrpc> job_grpc_;
  std::unique_ptr<AgentServiceGrpc> agent_grpc_;
  std::unique_ptr<AnalysisServiceGrpc> analysis_grpc_;
  std::unique_ptr<AccessServiceGrpc> access_grpc_;
  std::unique_ptr<RetentionServiceGrpc> retention_grpc_;
  std::unique_ptr<grpc::Server> server_;
  // Health: SERVING only while PostgreSQL answers (checked every second
  // over the lease connections). Stopped before server_ goes.
  std::unique_ptr<base::BackgroundLoop> health_loop_;
  int port_ = 0;
  std::string address_;
  // Held for the whole of Shutdown(): a second caller waits for the first.
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

// The exposure rule for `options.listen`: a non-loopback address needs TLS
// and authentication (a client CA or an admin token) unless
// options.insecure. FailedPrecondition saying how to fix it.
absl::Status CheckExposure(const ServerOptions& options);

// Splits "host:port" ("[v6]:port" too). kInvalidArgument naming `flag`.
absl::Status CheckHostPort(const std::string& value, const std::string& flag);

}  // namespace farm::scheduler

#endif  // SCHEDULER_SERVER_H_
