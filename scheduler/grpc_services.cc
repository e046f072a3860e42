#include "scheduler/grpc_services.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include <spdlog/spdlog.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lib/auth/auth.h"

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

// WatchMatrix: event-driven. The reactor subscribes to the matrix's change
// notifications (one PostgreSQL LISTEN connection per scheduler fans out to
// every stream); a wake-up posts a read of the matrix to the pool, at most
// one per min_interval, and a progress message goes out when the counts
// changed. A slow fallback poll (which always sends, doubling as a
// keep-alive) covers lost notifications. Database outages do not end the
// stream.
//
// Concurrency: at most one step (a read on the pool or a write in flight)
// at a time (`busy_`); wake-ups during a step set `wake_` and cause one more
// read when the step ends. Timers cannot be cancelled, so a fallback timer
// carries a generation and is ignored once a newer read was scheduled. The
// reactor is deleted when gRPC is done with it and no posted task still
// refers to it.
class WatchReactor final : public grpc::ServerWriteReactor<pb::MatrixProgress> {
 public:
  WatchReactor(JobService* svc, WorkerPool* pool, storage::MatrixEvents* events,
               const WatchOptions& options, JobServiceGrpc::WatchStats* stats, int64_t matrix_id)
      : svc_(svc),
        pool_(pool),
        events_(events),
        options_(options),
        stats_(stats),
        matrix_id_(matrix_id) {
    // busy_ starts true: a wake-up arriving before the first read only marks
    // wake_.
    if (events_ != nullptr) handle_ = events_->Subscribe(matrix_id_, [this] { Wake(); });
    bool failed = false;
    {
      absl::MutexLock lock(&mu_);
      failed = !PostLocked(std::chrono::milliseconds(0), Cause::kFirst, 0);
    }
    if (failed) FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    if (!ok) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    if (msg_.done()) {
      FinishOnce(grpc::Status::OK);
      return;
    }
    Idle(options_.fallback_poll);
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    // Outside mu_: the events thread holds its own lock while calling Wake().
    if (events_ != nullptr) events_->Unsubscribe(handle_);
    bool del = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      del = pending_ == 0;
    }
    if (del) delete this;
  }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Cause { kFirst, kWake, kFallback };

  // Called by the events thread: cheap, never blocks on the database.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_) {
    bool failed = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (busy_) {
        wake_ = true;
        return;
      }
      failed = !ScheduleReadLocked();
    }
    if (failed) FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }

  // A read soon, but not sooner than min_interval after the previous one,
  // so a burst of notifications costs at most one read per interval.
  bool ScheduleReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    busy_ = true;
    wake_ = false;
    ++timer_gen_;
    const auto earliest = last_read_ + absl::ToChronoMilliseconds(options_.min_interval);
    const auto delay =
        std::max(std::chrono::milliseconds(0),
                 std::chrono::duration_cast<std::chrono::milliseconds>(earliest - Clock::now()));
    return PostLocked(delay, Cause::kWake, 0);
  }

  bool PostLocked(std::chrono::milliseconds delay, Cause cause, uint64_t gen)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++pending_;
    if (!pool_->PostAfter(delay, [this, cause, gen] { Run(cause, gen); })) {
      --pending_;
      return false;
    }
    return true;
  }

  // The step ended without a write: wait for a wake-up or the fallback.
  void Idle(absl::Duration fallback) ABSL_LOCKS_EXCLUDED(mu_) {
    bool failed = false;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      if (finished_) return;
      if (wake_) {
        failed = !ScheduleReadLocked();
      } else {
        failed = !PostLocked(absl::ToChronoMilliseconds(fallback), Cause::kFallback, ++timer_gen_);
      }
    }
    if (failed) FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
  }

  void Run(Cause cause, uint64_t gen) ABSL_LOCKS_EXCLUDED(mu_) {
    bool gone = false;  // OnDone() ran: only the last task deletes
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      --pending_;
      if (done_) {
        gone = true;
        last = pending_ == 0;
      } else {
        if (finished_) return;
        if (cause == Cause::kFallback) {
          if (busy_ || gen != timer_gen_) return;  // superseded by a wake-up
          busy_ = true;
        }
        wake_ = false;  // this read sees every change notified so far
        last_read_ = Clock::now();
      }
    }
    if (gone) {
      if (last) delete this;
      return;
    }
    (cause == Cause::kFallback ? stats_->fallback_reads : stats_->wake_reads).fetch_add(1);
    Read(cause == Cause::kFallback);
  }

  void Read(bool fallback) ABSL_LOCKS_EXCLUDED(mu_) {
    if (cancelled_.load()) {
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    if (pool_->stopping()) {
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
      return;
    }
    pb::GetMatrixRequest req;
    req.set_matrix_id(matrix_id_);
    absl::StatusOr<pb::Matrix> m = svc_->GetMatrix(req);
    if (!m.ok()) {
      if (absl::IsUnavailable(m.status()) && sent_any_) {
        // Notifications stop with the database too: look again soon.
        Idle(std::min(options_.fallback_poll, absl::Seconds(1)));
        return;
      }
      FinishOnce(ToGrpcStatus(m.status()));
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
    if (!done && !changed && !fallback) {
      Idle(options_.fallback_poll);
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
    last_finished_ = finished;
    last_leased_ = c.leased();
    StartWrite(&msg_);
  }

  void FinishOnce(grpc::Status st) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(std::move(st));
  }

  JobService* const svc_;
  WorkerPool* const pool_;
  storage::MatrixEvents* const events_;  // may be null: fallback polling only
  const WatchOptions options_;
  JobServiceGrpc::WatchStats* const stats_;
  const int64_t matrix_id_;
  storage::MatrixEvents::Handle handle_ = 0;
  std::atomic<bool> cancelled_{false};

  absl::Mutex mu_;
  // A read is posted/running or a write in flight.
  bool busy_ ABSL_GUARDED_BY(mu_) = true;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;      // notified while busy
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
  bool done_ ABSL_GUARDED_BY(mu_) = false;      // OnDone() ran
  int pending_ ABSL_GUARDED_BY(mu_) = 0;        // posted tasks that refer to this
  uint64_t timer_gen_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point last_read_ ABSL_GUARDED_BY(mu_) = {};

  // Only touched by the single step in flight (busy_ hands it over), so not
  // under mu_.
  pb::MatrixProgress msg_;
  bool sent_any_ = false;
  Clock::time_point t0_;
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
  return new WatchReactor(svc_, pool_, events_, watch_, &watch_stats_, req->matrix_id());
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
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportResults(grpc::CallbackServerContext* ctx,
                                                          const pb::ReportResultsRequest* req,
                                                          pb::ReportResultsResponse* resp) {
  return Unary(ctx, pool_, token_, resp, [this, req] { return svc_->ReportResults(*req); });
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
