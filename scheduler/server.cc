#include "scheduler/server.h"

#include <algorithm>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/storage/pg/migrations.h"

namespace farm::scheduler {
namespace {

// Reflection on this builder or not. Linking grpc++_reflection registers its
// plugin for every server of the process; this option removes it and adds it
// back only when `on`.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool on) : on_(on) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
      return p->name() == "proto_server_reflection";
    });
    if (on_) plugins->push_back(std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>());
  }

 private:
  const bool on_;
};

}  // namespace

absl::Status CheckHostPort(const std::string& value, const std::string& flag) {
  const auto colon = value.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", value,
                                                   "\": expected host:port (port 0 picks a "
                                                   "free port)"));
  }
  return absl::OkStatus();
}

absl::Status CheckExposure(const ServerOptions& options) {
  absl::Status st =
      service::CheckPlaintextAllowed(options.listen, options.tls, options.insecure, "--listen");
  if (!st.ok()) return st;
  const bool authenticated = !options.token.empty() || !options.tls.root_certs.empty();
  if (!authenticated && !options.insecure && !service::IsLoopbackAddress(options.listen)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--listen ", options.listen,
        ": unauthenticated calls off loopback are refused. Give --tls-ca (client certificates) "
        "or an admin token (--admin-token-file or FARM_ADMIN_TOKEN), or pass --insecure"));
  }
  return absl::OkStatus();
}

namespace {

// What can be checked before anything starts: the address, its exposure,
// the TLS pair (a bad pair would only show as a failed listen; say what is
// wrong instead) and the database URI.
absl::Status CheckOptions(const ServerOptions& options) {
  absl::Status st = CheckHostPort(options.listen, "--listen");
  if (!st.ok()) return st;
  st = CheckExposure(options);
  if (!st.ok()) return st;
  st = service::CheckPair(options.tls);
  if (st.ok()) st = service::CheckValidity(options.tls, absl::Now());
  if (!st.ok()) return st;
  if (options.db_uri.empty()) {
    return absl::InvalidArgumentError("--db: required (a PostgreSQL URI; or set FARM_DB)");
  }
  return absl::OkStatus();
}

// The schema brought up to date. The database may still be starting
// (farm-local, systemd): retried until `wait` passed.
absl::Status Migrate(storage::PgPool& pool, absl::Duration wait) {
  const absl::Time give_up = absl::Now() + wait;
  for (;;) {
    absl::StatusOr<int> v = storage::ApplyMigrations(pool);
    if (v.ok()) {
      spdlog::info("database schema at version {}", *v);
      return absl::OkStatus();
    }
    if (!absl::IsUnavailable(v.status()) || absl::Now() > give_up) {
      return absl::Status(v.status().code(), absl::StrCat("database: ", v.status().message()));
    }
    spdlog::warn("database not reachable yet ({}); retrying", std::string(v.status().message()));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

AuthzOptions AuthzOptionsOf(const ServerOptions& options) {
  AuthzOptions authz;
  authz.admin_token = options.token;
  authz.client_certificates = !options.tls.root_certs.empty();
  authz.agent_liveness = options.config.liveness();
  authz.token_cache_ttl = options.token_cache_ttl;
  return authz;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const ServerOptions& options, metrics::MetricsRegistry* registry) {
  if (absl::Status st = CheckOptions(options); !st.ok()) return st;
  std::unique_ptr<SchedulerServer> s(new SchedulerServer());
  s->pool_ = std::make_unique<storage::PgPool>(storage::PgPoolOptions{
      options.db_uri, options.db_connections, 3, options.db_statement_timeout_ms});
  if (absl::Status st = Migrate(*s->pool_, options.db_wait); !st.ok()) return st;
  if (absl::Status st = s->MakeServices(options, registry); !st.ok()) return st;
  s->MakeAdapters(options);
  if (absl::Status st = s->Listen(options); !st.ok()) return st;
  s->StartBackground(options);
  return s;
}

absl::Status SchedulerServer::MakeServices(const ServerOptions& options,
                                           metrics::MetricsRegistry* registry) {
  store_ = std::make_unique<storage::PgStore>(pool_.get());
  metrics_ = std::make_unique<metrics::SchedulerMetrics>(registry->registry());
  job_service_ = std::make_unique<JobService>(store_.get(), store_.get(), store_.get(),
                                              metrics_.get(), options.config);
  // fio/iozone jobs only go to hosts whose kernel and IOMMU mode match:
  // options.config.claim, applied inside the claim.
  agent_service_ = std::make_unique<AgentService>(store_.get(), metrics_.get(), options.config);
  analysis_service_ = std::make_unique<AnalysisService>(store_.get(), store_.get());

  if (!options.catalog_dir.empty()) {
    absl::StatusOr<std::vector<std::string>> loaded =
        job_service_->LoadCatalogDir(options.catalog_dir, options.catalog_source);
    if (!loaded.ok()) return loaded.status();
  }

  if (options.watch_events) {
    listener_ = std::make_unique<storage::PgMatrixListener>(options.db_uri);
    listener_->Start();
  }
  lease_db_ = std::make_unique<storage::PgPool>(
      storage::PgPoolOptions{options.db_uri, std::max(1, options.lease_db_connections), 3,
                             options.db_statement_timeout_ms});
  lease_store_ = std::make_unique<storage::PgStore>(lease_db_.get());
  lease_service_ =
      std::make_unique<AgentService>(lease_store_.get(), metrics_.get(), options.config);
  return absl::OkStatus();
}

void SchedulerServer::MakeAdapters(const ServerOptions& options) {
  workers_ = std::make_unique<WorkerPool>(options.worker_threads);
  // Expensive calls never hold every database connection: one at least is
  // left for the cheap ones.
  const int heavy_threads =
      std::clamp(options.heavy_threads, 1, std::max(1, options.db_connections - 1));
  heavy_workers_ = std::make_unique<WorkerPool>(
      heavy_threads, static_cast<size_t>(std::max(1, options.heavy_queue)));
  lease_workers_ = std::make_unique<WorkerPool>(std::max(1, options.lease_threads));
  access_ = std::make_unique<storage::PgAccessStore>(pool_.get());
  authz_ = std::make_unique<Authorizer>(AuthzOptionsOf(options), access_.get(), store_.get());
  // Heartbeats authenticate through the lease connections too.
  lease_access_ = std::make_unique<storage::PgAccessStore>(lease_db_.get());
  authz_->SetLeasePath(lease_access_.get(), lease_store_.get());
  job_grpc_ =
      std::make_unique<JobServiceGrpc>(job_service_.get(), workers_.get(), authz_.get(),
                                       listener_.get(), options.watch, heavy_workers_.get());
  agent_grpc_ =
      std::make_unique<AgentServiceGrpc>(agent_service_.get(), workers_.get(), authz_.get(),
                                         lease_service_.get(), lease_workers_.get());
  analysis_grpc_ =
      std::make_unique<AnalysisServiceGrpc>(analysis_service_.get(), workers_.get(), authz_.get());
  access_grpc_ = std::make_unique<AccessServiceGrpc>(access_.get(), workers_.get(), authz_.get());
  retention_store_ = std::make_unique<storage::PgRetentionStore>(pool_.get());
  retention_service_ = std::make_unique<RetentionService>(retention_store_.get());
  retention_grpc_ = std::make_unique<RetentionServiceGrpc>(retention_service_.get(),
                                                           heavy_workers_.get(), authz_.get());
}

absl::Status SchedulerServer::Listen(const ServerOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Reflection cannot check a bearer token: it is served only where every
  // caller has a principal from the transport (mTLS) or none is needed.
  const AuthzOptions authz = AuthzOptionsOf(options);
  builder.SetOption(
      std::make_unique<ReflectionOption>(!authz.authenticated() || authz.client_certificates));
  builder.AddListeningPort(options.listen, service::MakeServerCredentials(options.tls), &port_);
  // One port, one server: with SO_REUSEPORT a second scheduler would bind the
  // same port and silently take a share of the calls.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(job_grpc_.get());
  builder.RegisterService(agent_grpc_.get());
  builder.RegisterService(analysis_grpc_.get());
  builder.RegisterService(access_grpc_.get());
  builder.RegisterService(retention_grpc_.get());
  // A reply may carry a whole catalog (up to kMaxCatalogBytes) or a page of
  // raw outputs; what a caller may send is the smaller, configured bound.
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_receive_message_bytes));
  builder.SetMaxSendMessageSize(64 << 20);
  grpc::ResourceQuota quota("farm-scheduler");
  quota.Resize(static_cast<size_t>(options.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // Keepalive: a vanished client's streams end within ~30 s, and clients'
  // own pings (lib/client: every 10 s, also without calls) are welcome.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.handshake_timeout)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(options.connection_idle)));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    workers_->Stop();
    heavy_workers_->Stop();
    lease_workers_->Stop();
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen,
                     ": cannot listen (address in use by another process, or invalid)"));
  }
  address_ = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", port_);
  return absl::OkStatus();
}

void SchedulerServer::StartBackground(const ServerOptions& options) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  storage::PgPool* health_db = lease_db_.get();
  health_loop_ = std::make_unique<base::BackgroundLoop>([health, health_db] {
    const absl::Status reachable = health_db->Run([](pqxx::connection& c) {
      pqxx::nontransaction n(c);
      n.exec("SELECT 1");
      return absl::OkStatus();
    });
    if (health != nullptr) health->SetServingStatus(reachable.ok());
    return absl::Seconds(1);
  });
  health_loop_->Start();
  lab_recovery_ = std::make_unique<LabRecovery>(store_.get(), options.lab_hosts, metrics_.get());
  reaper_ = std::make_unique<Reaper>(
      store_.get(), metrics_.get(), options.config,
      [r = lab_recovery_.get()](const storage::UnbootedLease& u) { r->Recover(u); });
  if (options.run_reaper) reaper_->Start();
}

void SchedulerServer::Shutdown(absl::Duration deadline) {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (reaper_) reaper_->Stop();
  if (lab_recovery_) lab_recovery_->Stop();
  if (health_loop_) health_loop_->Stop();
  for (WorkerPool* p : {workers_.get(), heavy_workers_.get(), lease_workers_.get()}) {
    if (p != nullptr) p->BeginStopping();
  }
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(deadline));
  }
  for (WorkerPool* p : {workers_.get(), heavy_workers_.get(), lease_workers_.get()}) {
    if (p != nullptr) p->Stop();
  }
  if (server_) server_->Wait();
  if (listener_) listener_->Stop();
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

}  // namespace farm::scheduler
