#include "scheduler/server.h"

#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/storage/migrations.h"
#include "scheduler/real_match.h"

namespace farm::scheduler {

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

absl::StatusOr<std::unique_ptr<SchedulerServer>> SchedulerServer::Start(
    const ServerOptions& options, metrics::MetricsRegistry* registry) {
  absl::Status st = CheckHostPort(options.listen, "--listen");
  if (!st.ok()) return st;
  if (options.db_uri.empty()) {
    return absl::InvalidArgumentError("--db: required (a PostgreSQL URI; or set FARM_DB)");
  }
  std::unique_ptr<SchedulerServer> s(new SchedulerServer());
  s->pool_ = std::make_unique<storage::PgPool>(
      storage::PgPoolOptions{options.db_uri, options.db_connections, 3});

  // The database may still be starting (farm-local, systemd): retry.
  const absl::Time give_up = absl::Now() + options.db_wait;
  for (;;) {
    absl::StatusOr<int> v = storage::ApplyMigrations(*s->pool_);
    if (v.ok()) {
      spdlog::info("database schema at version {}", *v);
      break;
    }
    if (!absl::IsUnavailable(v.status()) || absl::Now() > give_up) {
      return absl::Status(v.status().code(), absl::StrCat("database: ", v.status().message()));
    }
    spdlog::warn("database not reachable yet ({}); retrying", std::string(v.status().message()));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }

  s->store_ = std::make_unique<storage::PgStore>(s->pool_.get());
  s->metrics_ = std::make_unique<metrics::SchedulerMetrics>(registry->registry());
  s->job_service_ = std::make_unique<JobService>(s->store_.get(), s->store_.get(), s->store_.get(),
                                                 s->metrics_.get(), options.config);
  storage::JobPredicate eligible;
  // fio/iozone jobs only go to agents offering their kernel and IOMMU mode.
  eligible = [](const pb::Job& j, const storage::AgentView& a) {
    return RealRunEligible(j, a.capabilities, a.host);
  };
  s->agent_service_ = std::make_unique<AgentService>(s->store_.get(), s->metrics_.get(),
                                                     options.config, std::move(eligible));
  s->analysis_service_ = std::make_unique<AnalysisService>(s->store_.get());

  if (!options.catalog_dir.empty()) {
    absl::StatusOr<std::vector<std::string>> loaded =
        s->job_service_->LoadCatalogDir(options.catalog_dir, options.catalog_source);
    if (!loaded.ok()) return loaded.status();
  }

  if (options.watch_events) {
    s->listener_ = std::make_unique<storage::PgMatrixListener>(options.db_uri);
    s->listener_->Start();
  }
  s->workers_ = std::make_unique<WorkerPool>(options.worker_threads);
  s->job_grpc_ = std::make_unique<JobServiceGrpc>(s->job_service_.get(), s->workers_.get(),
                                                  options.token, s->listener_.get(), options.watch);
  s->agent_grpc_ =
      std::make_unique<AgentServiceGrpc>(s->agent_service_.get(), s->workers_.get(), options.token);
  s->analysis_grpc_ = std::make_unique<AnalysisServiceGrpc>(s->analysis_service_.get(),
                                                            s->workers_.get(), options.token);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->job_grpc_.get());
  builder.RegisterService(s->agent_grpc_.get());
  builder.RegisterService(s->analysis_grpc_.get());
  // Raw tool output and large specs travel in one message.
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(64 << 20);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->workers_->Stop();
    return absl::UnavailableError(
        absl::StrCat("--listen ", options.listen, ": cannot listen (address in use or invalid)"));
  }
  s->address_ = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", s->port_);
  s->reaper_ = std::make_unique<Reaper>(s->store_.get(), s->metrics_.get(), options.config);
  if (options.run_reaper) s->reaper_->Start();
  return s;
}

void SchedulerServer::Shutdown(absl::Duration deadline) {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (reaper_) reaper_->Stop();
  if (workers_) workers_->BeginStopping();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(deadline));
  }
  if (workers_) workers_->Stop();
  if (server_) server_->Wait();
  if (listener_) listener_->Stop();
}

SchedulerServer::~SchedulerServer() { Shutdown(); }

}  // namespace farm::scheduler
