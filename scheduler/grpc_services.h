// gRPC callback-API adapters for JobService, AgentService, AnalysisService,
// AccessService and RetentionService: hand the call to the WorkerPool (database work never
// runs on gRPC's threads), authorize it there (scheduler/authz.h: the
// principal, its role against the RPC table, an agent's own name and
// leases), call the plain service class, convert absl::Status to
// grpc::Status. WatchMatrix, GetResults and GetRawOutput are
// ServerWriteReactors driven by the pool, which authorizes them too (a
// token lookup never blocks a gRPC thread); WatchMatrix streams share one
// reader per matrix and are capped (scheduler/watch_hub.h).
//
// Contract: the services, pool and authorizer must outlive the grpc::Server
// the adapters are registered with; shut the server down (after
// pool->BeginStopping()) before stopping the pool.
#ifndef SCHEDULER_GRPC_SERVICES_H_
#define SCHEDULER_GRPC_SERVICES_H_

#include <atomic>
#include <cstddef>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/storage/access_store.h"
#include "lib/storage/repositories.h"
#include "scheduler/authz.h"
#include "scheduler/retention_service.h"
#include "scheduler/scheduler_service.h"
#include "scheduler/watch_hub.h"
#include "scheduler/worker_pool.h"

namespace farm::scheduler {

// The most of a status message a client is sent; farmctl's channel takes
// this much in a trailer (lib/client/client.h, kMaxMetadataBytes).
inline constexpr size_t kMaxClientMessageBytes = 64 * 1024;

// The status a client sees: the same code; the message whole up to
// kMaxClientMessageBytes (cut at a line end past it, the rest in the log
// under an id the message names); for kInternal, kUnknown and kDataLoss
// only an error id, since their text may hold database internals.
grpc::Status ToGrpcStatus(const absl::Status& st);

// OK while the caller still waits for the answer; CANCELLED or
// DEADLINE_EXCEEDED once it left. Safe from any thread while the call runs.
grpc::Status CallerGone(grpc::CallbackServerContext& ctx);

class JobServiceGrpc final : public pb::JobService::CallbackService {
 public:
  // `events` (not owned, may be null) wakes WatchMatrix streams; `watch`
  // paces and caps them. `heavy`
  // (not owned; null: `pool`) runs the expensive calls (SubmitMatrix,
  // LoadCatalog, ImportGitCatalog, GetResults); give it a queue bound so
  // they are shed with RESOURCE_EXHAUSTED instead of piling up.
  JobServiceGrpc(JobService* svc, WorkerPool* pool, Authorizer* authz,
                 storage::MatrixEvents* events = nullptr, WatchOptions watch = {},
                 WorkerPool* heavy = nullptr)
      : svc_(svc),
        pool_(pool),
        heavy_(heavy != nullptr ? heavy : pool),
        authz_(authz),
        hub_(
            [svc](int64_t matrix_id) {
              pb::GetMatrixRequest req;
              req.set_matrix_id(matrix_id);
              return svc->GetMatrix(req);
            },
            pool, events, watch) {}

  // WatchMatrix streams and the reads of their matrices.
  using WatchStats = scheduler::WatchStats;
  const WatchStats& watch_stats() const { return hub_.stats(); }

  grpc::ServerUnaryReactor* SubmitMatrix(grpc::CallbackServerContext* ctx,
                                         const pb::SubmitMatrixRequest* req,
                                         pb::SubmitMatrixResponse* resp) override;
  grpc::ServerUnaryReactor* GetMatrix(grpc::CallbackServerContext* ctx,
                                      const pb::GetMatrixRequest* req, pb::Matrix* resp) override;
  grpc::ServerUnaryReactor* ListMatrices(grpc::CallbackServerContext* ctx,
                                         const pb::ListMatricesRequest* req,
                                         pb::ListMatricesResponse* resp) override;
  grpc::ServerWriteReactor<pb::MatrixProgress>* WatchMatrix(
      grpc::CallbackServerContext* ctx, const pb::WatchMatrixRequest* req) override;
  grpc::ServerUnaryReactor* CancelMatrix(grpc::CallbackServerContext* ctx,
                                         const pb::CancelMatrixRequest* req,
                                         pb::CancelMatrixResponse* resp) override;
  grpc::ServerWriteReactor<pb::Result>* GetResults(grpc::CallbackServerContext* ctx,
                                                   const pb::GetResultsRequest* req) override;
  grpc::ServerWriteReactor<pb::RawOutputChunk>* GetRawOutput(
      grpc::CallbackServerContext* ctx, const pb::GetRawOutputRequest* req) override;
  grpc::ServerUnaryReactor* ListAgents(grpc::CallbackServerContext* ctx,
                                       const pb::ListAgentsRequest* req,
                                       pb::ListAgentsResponse* resp) override;
  grpc::ServerUnaryReactor* ListCatalogs(grpc::CallbackServerContext* ctx,
                                         const pb::ListCatalogsRequest* req,
                                         pb::ListCatalogsResponse* resp) override;
  grpc::ServerUnaryReactor* GetCatalog(grpc::CallbackServerContext* ctx,
                                       const pb::GetCatalogRequest* req,
                                       pb::Catalog* resp) override;
  grpc::ServerUnaryReactor* LoadCatalog(grpc::CallbackServerContext* ctx,
                                        const pb::LoadCatalogRequest* req,
                                        pb::LoadCatalogResponse* resp) override;
  grpc::ServerUnaryReactor* ImportGitCatalog(grpc::CallbackServerContext* ctx,
                                             const pb::ImportGitCatalogRequest* req,
                                             pb::ImportGitCatalogResponse* resp) override;

 private:
  JobService* const svc_;
  WorkerPool* const pool_;
  WorkerPool* const heavy_;
  Authorizer* const authz_;
  WatchHub hub_;
};

class AgentServiceGrpc final : public pb::AgentService::CallbackService {
 public:
  // `lease_svc` on `lease_pool` (not owned; null: `svc` on `pool`) serves
  // Heartbeat and ReleaseLeases: lease renewals get their own threads (and,
  // through their own store, their own database connections) so they never
  // wait behind other work.
  AgentServiceGrpc(AgentService* svc, WorkerPool* pool, Authorizer* authz,
                   AgentService* lease_svc = nullptr, WorkerPool* lease_pool = nullptr)
      : svc_(svc),
        pool_(pool),
        lease_svc_(lease_svc != nullptr ? lease_svc : svc),
        lease_pool_(lease_pool != nullptr ? lease_pool : pool),
        authz_(authz) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx,
                                     const pb::RegisterRequest* req,
                                     pb::RegisterResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx,
                                      const pb::HeartbeatRequest* req,
                                      pb::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* LeaseJobs(grpc::CallbackServerContext* ctx,
                                      const pb::LeaseJobsRequest* req,
                                      pb::LeaseJobsResponse* resp) override;
  grpc::ServerUnaryReactor* ReportResult(grpc::CallbackServerContext* ctx,
                                         const pb::ReportResultRequest* req,
                                         pb::ReportResultResponse* resp) override;
  grpc::ServerUnaryReactor* ReportResults(grpc::CallbackServerContext* ctx,
                                          const pb::ReportResultsRequest* req,
                                          pb::ReportResultsResponse* resp) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* ctx,
                                          const pb::ReportFailureRequest* req,
                                          pb::ReportFailureResponse* resp) override;
  grpc::ServerUnaryReactor* ReleaseLeases(grpc::CallbackServerContext* ctx,
                                          const pb::ReleaseLeasesRequest* req,
                                          pb::ReleaseLeasesResponse* resp) override;

 private:
  AgentService* const svc_;
  WorkerPool* const pool_;
  AgentService* const lease_svc_;
  WorkerPool* const lease_pool_;
  Authorizer* const authz_;
};

class AnalysisServiceGrpc final : public pb::AnalysisService::CallbackService {
 public:
  AnalysisServiceGrpc(AnalysisService* svc, WorkerPool* pool, Authorizer* authz)
      : svc_(svc), pool_(pool), authz_(authz) {}

  grpc::ServerUnaryReactor* ListRegressions(grpc::CallbackServerContext* ctx,
                                            const pb::ListRegressionsRequest* req,
                                            pb::ListRegressionsResponse* resp) override;
  grpc::ServerUnaryReactor* GetRegression(grpc::CallbackServerContext* ctx,
                                          const pb::GetRegressionRequest* req,
                                          pb::Regression* resp) override;
  grpc::ServerUnaryReactor* GetBisect(grpc::CallbackServerContext* ctx,
                                      const pb::GetBisectRequest* req, pb::Bisect* resp) override;
  grpc::ServerUnaryReactor* UpdateRegression(grpc::CallbackServerContext* ctx,
                                             const pb::UpdateRegressionRequest* req,
                                             pb::Regression* resp) override;

 private:
  AnalysisService* const svc_;
  WorkerPool* const pool_;
  Authorizer* const authz_;
};

// API tokens: created (the secret returned once, only its SHA-256 stored),
// listed and revoked by admins.
class AccessServiceGrpc final : public pb::AccessService::CallbackService {
 public:
  AccessServiceGrpc(storage::AccessStore* store, WorkerPool* pool, Authorizer* authz)
      : store_(store), pool_(pool), authz_(authz) {}

  grpc::ServerUnaryReactor* CreateToken(grpc::CallbackServerContext* ctx,
                                        const pb::CreateTokenRequest* req,
                                        pb::CreateTokenResponse* resp) override;
  grpc::ServerUnaryReactor* ListTokens(grpc::CallbackServerContext* ctx,
                                       const pb::ListTokensRequest* req,
                                       pb::ListTokensResponse* resp) override;
  grpc::ServerUnaryReactor* RevokeToken(grpc::CallbackServerContext* ctx,
                                        const pb::RevokeTokenRequest* req,
                                        pb::RevokeTokenResponse* resp) override;

 private:
  storage::AccessStore* const store_;
  WorkerPool* const pool_;
  Authorizer* const authz_;
};

// farmctl prune: admins only, on the heavy pool (a prune reads every
// matrix's facts and deletes in many transactions).
class RetentionServiceGrpc final : public pb::RetentionService::CallbackService {
 public:
  RetentionServiceGrpc(RetentionService* svc, WorkerPool* pool, Authorizer* authz)
      : svc_(svc), pool_(pool), authz_(authz) {}

  grpc::ServerUnaryReactor* Prune(grpc::CallbackServerContext* ctx, const pb::PruneRequest* req,
                                  pb::PruneResponse* resp) override;

 private:
  RetentionService* const svc_;
  WorkerPool* const pool_;
  Authorizer* const authz_;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_GRPC_SERVICES_H_
