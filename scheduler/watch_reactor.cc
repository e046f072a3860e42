#include "scheduler/watch_reactor.h"

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/progress_rate.h"
#include "scheduler/grpc_services.h"
#include "scheduler/stream_admission.h"

namespace farm::scheduler {
namespace {

// The concurrency rules: watch_reactor.h.
class WatchReactor final : public grpc::ServerWriteReactor<pb::MatrixProgress> {
 public:
  WatchReactor(grpc::CallbackServerContext* ctx, WorkerPool* pool, Authorizer* authz, WatchHub* hub,
               int64_t matrix_id)
      : ctx_(ctx), pool_(pool), authz_(authz), hub_(hub), matrix_id_(matrix_id) {
    {
      absl::MutexLock lock(&mu_);
      ++tasks_;
    }
    if (auto st = ScheduleStreamRead(pool_, /*first=*/true, [this] { Start(); })) {
      Release();
      FinishOnce(*std::move(st));
    }
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
    Idle();
  }
  // An idle stream ends now, so its place under the caps is free at once.
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    bool idle = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      idle = !busy_;
    }
    if (idle) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<WatchHub::Handle> joined;
    {
      absl::MutexLock lock(&mu_);
      joined = handle_;
    }
    // Outside mu_: the hub holds its lock while it hands reads over.
    if (joined.has_value()) hub_->Leave(*joined);
    bool del = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      del = tasks_ == 0;
    }
    if (del) delete this;
  }

 private:
  static constexpr const char* kRpc = "JobService/WatchMatrix";

  // The caller authorized, then the request checked (an unknown caller
  // learns nothing of it), then the hub joined.
  absl::StatusOr<WatchHub::Handle> Join() {
    absl::StatusOr<Principal> who = AuthorizeStream(*ctx_, authz_, kRpc);
    if (!who.ok()) return who.status();
    if (matrix_id_ <= 0) return absl::InvalidArgumentError("matrix_id: required");
    return hub_->Join(matrix_id_, who->name,
                      [this](std::shared_ptr<const WatchUpdate> u) { Deliver(std::move(u)); });
  }

  // The first step.
  void Start() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::StatusOr<WatchHub::Handle> handle = Join();
    if (!handle.ok()) {
      FinishOnce(ToGrpcStatus(handle.status()));
      Release();
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      handle_ = *handle;
    }
    Idle();
    Release();
  }

  // The hub's sink: cheap, never blocks (the hub's lock is held).
  void Deliver(std::shared_ptr<const WatchUpdate> update) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      pending_fallback_ = pending_fallback_ || update->fallback;
      pending_ = std::move(update);
      if (busy_) return;
      busy_ = true;
      ++tasks_;
    }
    if (!pool_->Post([this] { Step(); })) {
      Release();
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
  }

  // The step ended without a write: take the next read if one came.
  void Idle() ABSL_LOCKS_EXCLUDED(mu_) {
    bool post = false;
    bool cancelled = false;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (pending_ != nullptr) {
        post = true;
        ++tasks_;
      } else {
        busy_ = false;
        cancelled = cancelled_;
      }
    }
    if (post && !pool_->Post([this] { Step(); })) {
      Release();
      FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down"));
    }
    if (cancelled) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

  void Step() ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<const WatchUpdate> update;
    bool fallback = false;
    bool cancelled = false;
    bool finished = false;
    {
      absl::MutexLock lock(&mu_);
      finished = finished_;
      if (finished_) {
        busy_ = false;
      } else {
        update = std::move(pending_);
        pending_ = nullptr;
        fallback = pending_fallback_;
        pending_fallback_ = false;
        cancelled = cancelled_;
      }
    }
    if (finished) {
      Release();
      return;
    }
    bool wrote = false;
    std::optional<grpc::Status> end;
    if (cancelled) {
      end = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    } else if (update != nullptr) {
      end = Send(*update, fallback, &wrote);
    }
    // After a write the next step may already run (OnWriteDone): only
    // locals from here.
    if (end.has_value()) {
      FinishOnce(*std::move(end));
    } else if (!wrote) {
      Idle();
    }
    Release();
  }

  // Writes the message `update` makes, if any (*wrote), or returns the
  // status the stream ends with.
  std::optional<grpc::Status> Send(const WatchUpdate& update, bool fallback, bool* wrote) {
    if (pool_->stopping())
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
    absl::Status allowed = StillAuthorized(authz_, *ctx_, kRpc);
    if (!allowed.ok()) return ToGrpcStatus(allowed);
    if (!update.matrix.ok()) {
      // The hub reads again soon; a stream that showed nothing yet ends.
      if (absl::IsUnavailable(update.matrix.status()) && sent_any_) return std::nullopt;
      return ToGrpcStatus(update.matrix.status());
    }
    const pb::Matrix& m = *update.matrix;
    const pb::MatrixCounts& c = m.counts();
    const int64_t finished = c.succeeded() + c.failed() + c.cancelled();
    const Clock::time_point now = Clock::now();
    if (!sent_any_) {
      t0_ = now;
      finished0_ = finished;
    }
    const bool done = m.state() != pb::MATRIX_STATE_RUNNING;
    const bool changed = !sent_any_ || finished != last_finished_ || c.leased() != last_leased_;
    if (!done && !changed && !fallback) return std::nullopt;
    msg_.Clear();
    msg_.set_matrix_id(matrix_id_);
    msg_.set_state(m.state());
    *msg_.mutable_counts() = c;
    const double secs = std::chrono::duration<double>(now - t0_).count();
    if (const double rate = proto::MeasuredJobsPerSecond(finished - finished0_, secs); rate > 0) {
      msg_.set_jobs_per_second(rate);
      const double eta = static_cast<double>(c.total() - finished) / rate;
      msg_.mutable_eta()->set_seconds(static_cast<int64_t>(eta));
    }
    *msg_.mutable_building() = m.building();
    msg_.set_done(done);
    sent_any_ = true;
    last_finished_ = finished;
    last_leased_ = c.leased();
    *wrote = true;
    StartWrite(&msg_);
    return std::nullopt;
  }

  void FinishOnce(grpc::Status st) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      pending_ = nullptr;
    }
    Finish(std::move(st));
  }

  // A posted task is over; the last one after OnDone deletes.
  void Release() ABSL_LOCKS_EXCLUDED(mu_) {
    bool del = false;
    {
      absl::MutexLock lock(&mu_);
      --tasks_;
      del = done_ && tasks_ == 0;
    }
    if (del) delete this;
  }

  using Clock = std::chrono::steady_clock;
  grpc::CallbackServerContext* const ctx_;
  WorkerPool* const pool_;
  Authorizer* const authz_;
  WatchHub* const hub_;
  const int64_t matrix_id_;

  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = true;  // a step runs or a write is in flight
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;                   // Finish() called
  bool done_ ABSL_GUARDED_BY(mu_) = false;                       // OnDone() ran
  int tasks_ ABSL_GUARDED_BY(mu_) = 0;                           // posted tasks that refer to this
  std::optional<WatchHub::Handle> handle_ ABSL_GUARDED_BY(mu_);  // joined the hub
  std::shared_ptr<const WatchUpdate> pending_ ABSL_GUARDED_BY(mu_);
  bool pending_fallback_ ABSL_GUARDED_BY(mu_) = false;

  // Only touched by the single step in flight (busy_ hands it over), so not
  // under mu_.
  pb::MatrixProgress msg_;
  bool sent_any_ = false;
  Clock::time_point t0_;
  int64_t finished0_ = 0, last_finished_ = -1, last_leased_ = -1;
};

}  // namespace

grpc::ServerWriteReactor<pb::MatrixProgress>* NewWatchReactor(grpc::CallbackServerContext* ctx,
                                                              WorkerPool* pool, Authorizer* authz,
                                                              WatchHub* hub, int64_t matrix_id) {
  return new WatchReactor(ctx, pool, authz, hub, matrix_id);
}

}  // namespace farm::scheduler
