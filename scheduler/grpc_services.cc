#include "scheduler/grpc_services.h"

#include <chrono>
#include <deque>
#include <mutex>

#include <spdlog/spdlog.h>

#include "services/auth/auth.h"

namespace farm::scheduler {
namespace {

// Runs `fn` (returning absl::StatusOr<T>) on the pool and finishes the call
// with its value copied into *resp.
template <typename T, typename Fn>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, WorkerPool* pool,
                                const std::string& token, T* resp, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  grpc::Status auth = auth::CheckBearer(*ctx, token);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  const bool posted = pool->Post([reactor, resp, fn = std::move(fn)]() mutable {
    absl::StatusOr<T> out = fn();
    if (out.ok()) {
      *resp = *std::move(out);
      reactor->Finish(grpc::Status::OK);
    } else {
      reactor->Finish(ToGrpcStatus(out.status()));
    }
  });
  if (!posted) reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
  return reactor;
}

// WatchMatrix: polls the matrix on the pool, writes a progress message when
// it changed (or every few seconds), ends after done = true. Database
// outages do not end the stream: it keeps polling.
class WatchReactor final : public grpc::ServerWriteReactor<pb::MatrixProgress> {
 public:
  WatchReactor(JobService* svc, WorkerPool* pool, int64_t matrix_id)
      : svc_(svc), pool_(pool), matrix_id_(matrix_id) {
    Schedule(0);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    if (msg_.done()) {
      Finish(grpc::Status::OK);
      return;
    }
    Schedule(JobServiceGrpc::kWatchPollMs);
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  using Clock = std::chrono::steady_clock;

  void Schedule(int delay_ms) {
    if (!pool_->PostAfter(std::chrono::milliseconds(delay_ms), [this] { Poll(); })) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }

  void Poll() {
    if (cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    if (pool_->stopping()) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
      return;
    }
    pb::GetMatrixRequest req;
    req.set_matrix_id(matrix_id_);
    absl::StatusOr<pb::Matrix> m = svc_->GetMatrix(req);
    if (!m.ok()) {
      if (absl::IsUnavailable(m.status()) && sent_any_) {
        Schedule(JobServiceGrpc::kWatchPollMs * 4);
        return;
      }
      Finish(ToGrpcStatus(m.status()));
      return;
    }
    const pb::MatrixCounts& c = m->counts();
    const int64_t finished = c.succeeded() + c.failed() + c.cancelled();
    const Clock::time_point now = Clock::now();
    if (!sent_any_) {
      t0_ = now;
      finished0_ = finished;
    }
    const bool done = m->state() != pb::MATRIX_STATE_RUNNING;
    const bool changed = !sent_any_ || finished != last_finished_ || c.leased() != last_leased_;
    if (!done && !changed && now - last_sent_ < std::chrono::seconds(2)) {
      Schedule(JobServiceGrpc::kWatchPollMs);
      return;
    }
    msg_.Clear();
    msg_.set_matrix_id(matrix_id_);
    msg_.set_state(m->state());
    *msg_.mutable_counts() = c;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    if (secs > 0.5 && finished > finished0_) {
      const double rate = static_cast<double>(finished - finished0_) / secs;
      msg_.set_jobs_per_second(rate);
      const double eta = static_cast<double>(c.total() - finished) / rate;
      msg_.mutable_eta()->set_seconds(static_cast<int64_t>(eta));
    }
    msg_.set_done(done);
    sent_any_ = true;
    last_sent_ = now;
    last_finished_ = finished;
    last_leased_ = c.leased();
    StartWrite(&msg_);
  }

  JobService* const svc_;
  WorkerPool* const pool_;
  const int64_t matrix_id_;
  std::atomic<bool> cancelled_{false};
  // Only touched by the single in-flight step (poll or write completion).
  pb::MatrixProgress msg_;
  bool sent_any_ = false;
  Clock::time_point t0_, last_sent_;
  int64_t finished0_ = 0, last_finished_ = -1, last_leased_ = -1;
};

// GetResults: pages of results fetched on the pool, written one by one.
class ResultsReactor final : public grpc::ServerWriteReactor<pb::Result> {
 public:
  ResultsReactor(JobService* svc, WorkerPool* pool, int64_t matrix_id, bool raw)
      : svc_(svc), pool_(pool), matrix_id_(matrix_id), raw_(raw) {
    Fetch();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    WriteNextOrFetch();
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  static constexpr int kPage = 500;

  void Fetch() {
    if (!pool_->Post([this] { FetchNow(); })) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }
  void FetchNow() {
    if (cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    absl::StatusOr<std::vector<pb::Result>> page =
        svc_->ResultsPage(matrix_id_, after_, kPage, raw_);
    if (!page.ok()) {
      Finish(ToGrpcStatus(page.status()));
      return;
    }
    last_page_ = static_cast<int>(page->size()) < kPage;
    buf_ = std::move(*page);
    pos_ = 0;
    if (!buf_.empty()) after_ = buf_.back().job_id();
    WriteNextOrFetch();
  }
  void WriteNextOrFetch() {
    if (pos_ < buf_.size()) {
      StartWrite(&buf_[pos_++]);
      return;
    }
    if (last_page_) {
      Finish(grpc::Status::OK);
      return;
    }
    Fetch();
  }

  JobService* const svc_;
  WorkerPool* const pool_;
  const int64_t matrix_id_;
  const bool raw_;
  std::atomic<bool> cancelled_{false};
  std::vector<pb::Result> buf_;
  size_t pos_ = 0;
  int64_t after_ = 0;
  bool last_page_ = false;
};

std::string Peer(grpc::CallbackServerContext* ctx) { return ctx->peer(); }

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
}

// ----------------------------------------------------------------- JobService

grpc::ServerUnaryReactor* JobServiceGrpc::SubmitMatrix(grpc::CallbackServerContext* ctx,
                                                       const pb::SubmitMatrixRequest* req,
                                                       pb::SubmitMatrixResponse* resp) {
  return Unary(ctx, pool_, token_, resp,
               [this, req, peer = Peer(ctx)] { return svc_->SubmitMatrix(*req, peer); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::GetMatrix(grpc::CallbackServerContext* ctx,
                                                    const pb::GetMatrixRequest* req,
                                                    pb::Matrix* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->GetMatrix(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListMatrices(grpc::CallbackServerContext* ctx,
                                                       const pb::ListMatricesRequest* req,
                                                       pb::ListMatricesResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ListMatrices(*req); });
}
grpc::ServerWriteReactor<pb::MatrixProgress>* JobServiceGrpc::WatchMatrix(
    grpc::CallbackServerContext* ctx, const pb::WatchMatrixRequest* req) {
  grpc::Status auth = auth::CheckBearer(*ctx, token_);
  if (!auth.ok() || req->matrix_id() <= 0) {
    class Fail final : public grpc::ServerWriteReactor<pb::MatrixProgress> {
     public:
      explicit Fail(grpc::Status s) { Finish(std::move(s)); }
      void OnDone() override { delete this; }
    };
    return new Fail(!auth.ok()
                        ? auth
                        : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "matrix_id: required"));
  }
  return new WatchReactor(svc_, pool_, req->matrix_id());
}
grpc::ServerUnaryReactor* JobServiceGrpc::CancelMatrix(grpc::CallbackServerContext* ctx,
                                                       const pb::CancelMatrixRequest* req,
                                                       pb::CancelMatrixResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->CancelMatrix(*req); });
}
grpc::ServerWriteReactor<pb::Result>* JobServiceGrpc::GetResults(grpc::CallbackServerContext* ctx,
                                                                 const pb::GetResultsRequest* req) {
  grpc::Status auth = auth::CheckBearer(*ctx, token_);
  if (!auth.ok()) {
    class Fail final : public grpc::ServerWriteReactor<pb::Result> {
     public:
      explicit Fail(grpc::Status s) { Finish(std::move(s)); }
      void OnDone() override { delete this; }
    };
    return new Fail(auth);
  }
  return new ResultsReactor(svc_, pool_, req->matrix_id(), req->include_raw_output());
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListAgents(grpc::CallbackServerContext* ctx,
                                                     const pb::ListAgentsRequest* req,
                                                     pb::ListAgentsResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ListAgents(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListCatalogs(grpc::CallbackServerContext* ctx,
                                                       const pb::ListCatalogsRequest* req,
                                                       pb::ListCatalogsResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ListCatalogs(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::GetCatalog(grpc::CallbackServerContext* ctx,
                                                     const pb::GetCatalogRequest* req,
                                                     pb::Catalog* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->GetCatalog(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::LoadCatalog(grpc::CallbackServerContext* ctx,
                                                      const pb::LoadCatalogRequest* req,
                                                      pb::LoadCatalogResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->LoadCatalog(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ImportGitCatalog(grpc::CallbackServerContext* ctx,
                                                           const pb::ImportGitCatalogRequest* req,
                                                           pb::ImportGitCatalogResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ImportGitCatalog(*req); });
}

// --------------------------------------------------------------- AgentService

grpc::ServerUnaryReactor* AgentServiceGrpc::Register(grpc::CallbackServerContext* ctx,
                                                     const pb::RegisterRequest* req,
                                                     pb::RegisterResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->Register(*req); });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const pb::HeartbeatRequest* req,
                                                      pb::HeartbeatResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->Heartbeat(*req); });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::LeaseJobs(grpc::CallbackServerContext* ctx,
                                                      const pb::LeaseJobsRequest* req,
                                                      pb::LeaseJobsResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->LeaseJobs(*req); });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportResult(grpc::CallbackServerContext* ctx,
                                                         const pb::ReportResultRequest* req,
                                                         pb::ReportResultResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ReportResult(*req); });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportFailure(grpc::CallbackServerContext* ctx,
                                                          const pb::ReportFailureRequest* req,
                                                          pb::ReportFailureResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ReportFailure(*req); });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReleaseLeases(grpc::CallbackServerContext* ctx,
                                                          const pb::ReleaseLeasesRequest* req,
                                                          pb::ReleaseLeasesResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ReleaseLeases(*req); });
}

// ------------------------------------------------------------ AnalysisService

grpc::ServerUnaryReactor* AnalysisServiceGrpc::ListRegressions(
    grpc::CallbackServerContext* ctx, const pb::ListRegressionsRequest* req,
    pb::ListRegressionsResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ListRegressions(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::GetRegression(grpc::CallbackServerContext* ctx,
                                                             const pb::GetRegressionRequest* req,
                                                             pb::Regression* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->GetRegression(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::GetBisect(grpc::CallbackServerContext* ctx,
                                                         const pb::GetBisectRequest* req,
                                                         pb::Bisect* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->GetBisect(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::UpdateRegression(
    grpc::CallbackServerContext* ctx, const pb::UpdateRegressionRequest* req,
    pb::Regression* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->UpdateRegression(*req); });
}

}  // namespace farm::scheduler
