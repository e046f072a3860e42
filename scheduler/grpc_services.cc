#include "scheduler/grpc_services.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/auth/auth.h"
#include "lib/storage/row_codec.h"
#include "proto/progress_rate.h"
#include "scheduler/stream_admission.h"
#include "scheduler/watch_reactor.h"

namespace farm::scheduler {

grpc::Status CallerGone(grpc::CallbackServerContext& ctx) {
  if (ctx.IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "caller cancelled");
  if (ctx.deadline() <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed before the call ran");
  }
  return grpc::Status::OK;
}

namespace {

// Runs `fn` (returning absl::StatusOr<T>) on the pool and finishes the call
// with its value copied into *resp. A full pool sheds the call with
// RESOURCE_EXHAUSTED; a caller that left (cancelled, or past its deadline)
// while the call waited gets no work done for it.
// `fn` may take the caller's Principal. Authorization runs on the pool too:
// an API token is looked up in the database.
template <typename T, typename Fn>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, WorkerPool* pool,
                                Authorizer* authz, const char* rpc, T* resp, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  authz->CountCall();
  const WorkerPool::Admission admitted =
      pool->Admit([reactor, ctx, authz, rpc, resp, fn = std::move(fn)]() mutable {
        grpc::Status gone = CallerGone(*ctx);
        if (!gone.ok()) {
          reactor->Finish(gone);
          return;
        }
        absl::StatusOr<Principal> who = authz->Authorize(*ctx, rpc);
        if (!who.ok()) {
          reactor->Finish(ToGrpcStatus(who.status()));
          return;
        }
        absl::StatusOr<T> out = [&] {
          if constexpr (std::is_invocable_v<Fn&, const Principal&>) {
            return fn(*who);
          } else {
            return fn();
          }
        }();
        if (out.ok()) {
          *resp = *std::move(out);
          reactor->Finish(grpc::Status::OK);
        } else {
          reactor->Finish(ToGrpcStatus(out.status()));
        }
      });
  if (admitted == WorkerPool::Admission::kFull) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("scheduler busy: ", pool->max_queued(), " calls of this kind queued; retry")));
  } else if (admitted == WorkerPool::Admission::kStopped) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down"));
  }
  return reactor;
}

// GetResults: pages of results fetched on the pool, written one by one. A
// page is bounded by rows and, with raw output, by bytes
// (JobService::kResultsPageRawBytes), and the next is fetched only after the
// last write of this one completed, so the stream holds one page at a time.
// The first fetch authorizes the caller (on the pool, as every fetch).
class ResultsReactor final : public grpc::ServerWriteReactor<pb::Result> {
 public:
  ResultsReactor(grpc::CallbackServerContext* ctx, Authorizer* authz, JobService* svc,
                 WorkerPool* pool, int64_t matrix_id, bool raw)
      : ctx_(ctx), authz_(authz), svc_(svc), pool_(pool), matrix_id_(matrix_id), raw_(raw) {
    Fetch();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    // Written: its raw output need not wait for the rest of the page.
    if (pos_ > 0) buf_[pos_ - 1].Clear();
    WriteNextOrFetch();
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  static constexpr int kPage = 500;

  void Fetch() {
    if (auto st = ScheduleStreamRead(pool_, after_ == 0, [this] { FetchNow(); })) Finish(*st);
  }
  void FetchNow() {
    if (cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    if (after_ == 0) {
      absl::StatusOr<Principal> who = AuthorizeStream(*ctx_, authz_, "JobService/GetResults");
      if (!who.ok()) {
        Finish(ToGrpcStatus(who.status()));
        return;
      }
    }
    absl::StatusOr<std::vector<pb::Result>> page =
        svc_->ResultsPage(matrix_id_, after_, kPage, raw_);
    if (!page.ok()) {
      Finish(ToGrpcStatus(page.status()));
      return;
    }
    // A page with raw output may end early at the byte bound; only an
    // empty one says there is nothing more.
    last_page_ = page->empty() || (!raw_ && static_cast<int>(page->size()) < kPage);
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

  grpc::CallbackServerContext* const ctx_;
  Authorizer* const authz_;
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

// GetRawOutput: one chunk per database read, the next read only after the
// chunk is written, so the scheduler holds one chunk per call whatever the
// output's size. The first read authorizes the caller (on the pool).
class RawOutputReactor final : public grpc::ServerWriteReactor<pb::RawOutputChunk> {
 public:
  RawOutputReactor(grpc::CallbackServerContext* ctx, Authorizer* authz, JobService* svc,
                   WorkerPool* pool, int64_t job_id, int attempt)
      : ctx_(ctx), authz_(authz), svc_(svc), pool_(pool), job_id_(job_id), attempt_(attempt) {
    Fetch();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      return;
    }
    chunk_.Clear();
    if (done_) {
      Finish(grpc::Status::OK);
      return;
    }
    Fetch();
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override { delete this; }

 private:
  void Fetch() {
    if (auto st = ScheduleStreamRead(pool_, chars_ == 0, [this] { FetchNow(); })) Finish(*st);
  }
  void FetchNow() {
    if (cancelled_.load()) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    if (chars_ == 0) {
      absl::StatusOr<Principal> who = AuthorizeStream(*ctx_, authz_, "JobService/GetRawOutput");
      if (!who.ok()) {
        Finish(ToGrpcStatus(who.status()));
        return;
      }
    }
    absl::StatusOr<storage::RawOutputSlice> slice = svc_->RawOutputChunk(job_id_, attempt_, chars_);
    if (!slice.ok()) {
      Finish(ToGrpcStatus(slice.status()));
      return;
    }
    if (slice->data.empty() && chars_ > 0) {
      Finish(grpc::Status::OK);  // the output ended exactly at the last chunk
      return;
    }
    if (chars_ == 0) {
      // Later reads name the attempt the first one found.
      attempt_ = slice->attempt;
      chunk_.set_raw_format(slice->raw_format);
      chunk_.set_attempt(attempt_);
      if (slice->raw_pruned_at.has_value()) {
        storage::SetTime(*slice->raw_pruned_at, chunk_.mutable_raw_pruned_at());
      }
    }
    chunk_.set_offset(bytes_);
    chunk_.set_total_size(slice->total_bytes);
    bytes_ += static_cast<int64_t>(slice->data.size());
    chars_ += JobService::kRawChunkChars;
    done_ = bytes_ >= slice->total_bytes;
    chunk_.set_data(std::move(slice->data));
    StartWrite(&chunk_);
  }

  grpc::CallbackServerContext* const ctx_;
  Authorizer* const authz_;
  JobService* const svc_;
  WorkerPool* const pool_;
  const int64_t job_id_;
  int attempt_;  // 0 until the first read resolved "the latest"
  std::atomic<bool> cancelled_{false};
  pb::RawOutputChunk chunk_;
  int64_t chars_ = 0;  // characters read so far
  int64_t bytes_ = 0;  // bytes written so far
  bool done_ = false;
};

// A short random id that ties an error a client sees to the server log line.
std::string ErrorId() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%08x", absl::Uniform<uint32_t>(gen));
}

void ToProto(const storage::ApiToken& t, pb::ApiToken* out) {
  out->set_id(t.id);
  out->set_name(t.name);
  out->set_role(t.role);
  const int64_t created = absl::ToUnixMicros(t.created_at);
  out->mutable_created_at()->set_seconds(created / 1000000);
  out->mutable_created_at()->set_nanos(static_cast<int32_t>(created % 1000000) * 1000);
  out->set_revoked(t.revoked);
  if (t.revoked) {
    const int64_t revoked = absl::ToUnixMicros(t.revoked_at);
    out->mutable_revoked_at()->set_seconds(revoked / 1000000);
    out->mutable_revoked_at()->set_nanos(static_cast<int32_t>(revoked % 1000000) * 1000);
  }
}

// Names of principals: what scripts/farm-certs accepts, so a token name can
// also be an agent name or a certificate CN.
bool ValidPrincipalName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return absl::ascii_isalnum(name[0]);
}

// `msg` cut to at most `limit` bytes at the end of a line (a whole problem
// of a spec), or inside a line only when its first one is longer, never
// inside a UTF-8 sequence.
absl::string_view CutAtLineEnd(absl::string_view msg, size_t limit) {
  if (msg.size() <= limit) return msg;
  const size_t nl = msg.rfind('\n', limit);
  if (nl != absl::string_view::npos && nl > 0) return msg.substr(0, nl);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(msg[cut]) & 0xC0) == 0x80) --cut;
  return msg.substr(0, cut);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& st) {
  if (st.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  const auto code = static_cast<grpc::StatusCode>(st.code());
  // What a client sees: never database internals (SQL, server messages);
  // those go to the log under an id the client is given. Any other message
  // is the client's to read whole (a spec's problems, one a line), up to
  // kMaxClientMessageBytes; the log has the whole of a longer one.
  const bool internal = st.code() == absl::StatusCode::kInternal ||
                        st.code() == absl::StatusCode::kUnknown ||
                        st.code() == absl::StatusCode::kDataLoss;
  const auto log_under_id = [&st] {
    std::string id = ErrorId();
    spdlog::warn("error {} ({}): {}", id, absl::StatusCodeToString(st.code()),
                 absl::CEscape(st.message()));
    return id;
  };
  if (internal) {
    return grpc::Status(
        code, absl::StrCat("internal error (error id ", log_under_id(), " in the scheduler log)"));
  }
  if (st.message().size() <= kMaxClientMessageBytes) {
    // More than a line's worth: in the log too, as the client saw it.
    constexpr size_t kLogAbove = 200;
    if (st.message().size() > kLogAbove) {
      spdlog::info("answered {}: {}", absl::StatusCodeToString(st.code()),
                   absl::CEscape(st.message()));
    }
    return grpc::Status(code, std::string(st.message()));
  }
  const std::string id = log_under_id();
  constexpr size_t kNote = 128;  // room for the note on what was left out
  const absl::string_view shown = CutAtLineEnd(st.message(), kMaxClientMessageBytes - kNote);
  return grpc::Status(code,
                      absl::StrCat(shown, "\n... (", st.message().size() - shown.size(),
                                   " more bytes under error id ", id, " in the scheduler log)"));
}

// ----------------------------------------------------------------- JobService

grpc::ServerUnaryReactor* JobServiceGrpc::SubmitMatrix(grpc::CallbackServerContext* ctx,
                                                       const pb::SubmitMatrixRequest* req,
                                                       pb::SubmitMatrixResponse* resp) {
  return Unary(ctx, heavy_, authz_, "JobService/SubmitMatrix", resp,
               // The matrix records its submitter's principal (farmctl shows it).
               [this, req](const Principal& who) { return svc_->SubmitMatrix(*req, who.name); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::GetMatrix(grpc::CallbackServerContext* ctx,
                                                    const pb::GetMatrixRequest* req,
                                                    pb::Matrix* resp) {
  return Unary(ctx, pool_, authz_, "JobService/GetMatrix", resp,
               [this, req] { return svc_->GetMatrix(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListMatrices(grpc::CallbackServerContext* ctx,
                                                       const pb::ListMatricesRequest* req,
                                                       pb::ListMatricesResponse* resp) {
  return Unary(ctx, pool_, authz_, "JobService/ListMatrices", resp,
               [this, req] { return svc_->ListMatrices(*req); });
}
grpc::ServerWriteReactor<pb::MatrixProgress>* JobServiceGrpc::WatchMatrix(
    grpc::CallbackServerContext* ctx, const pb::WatchMatrixRequest* req) {
  authz_->CountCall();
  return NewWatchReactor(ctx, pool_, authz_, &hub_, req->matrix_id());
}
grpc::ServerUnaryReactor* JobServiceGrpc::CancelMatrix(grpc::CallbackServerContext* ctx,
                                                       const pb::CancelMatrixRequest* req,
                                                       pb::CancelMatrixResponse* resp) {
  // Only the matrix's owner or an admin: the service checks the principal.
  return Unary(ctx, pool_, authz_, "JobService/CancelMatrix", resp,
               [this, req](const Principal& who) { return svc_->CancelMatrix(*req, who); });
}
grpc::ServerWriteReactor<pb::Result>* JobServiceGrpc::GetResults(grpc::CallbackServerContext* ctx,
                                                                 const pb::GetResultsRequest* req) {
  authz_->CountCall();
  return new ResultsReactor(ctx, authz_, svc_, heavy_, req->matrix_id(), req->include_raw_output());
}
grpc::ServerWriteReactor<pb::RawOutputChunk>* JobServiceGrpc::GetRawOutput(
    grpc::CallbackServerContext* ctx, const pb::GetRawOutputRequest* req) {
  authz_->CountCall();
  return new RawOutputReactor(ctx, authz_, svc_, heavy_, req->job_id(), req->attempt());
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListAgents(grpc::CallbackServerContext* ctx,
                                                     const pb::ListAgentsRequest* req,
                                                     pb::ListAgentsResponse* resp) {
  return Unary(ctx, pool_, authz_, "JobService/ListAgents", resp,
               [this, req] { return svc_->ListAgents(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ListCatalogs(grpc::CallbackServerContext* ctx,
                                                       const pb::ListCatalogsRequest* req,
                                                       pb::ListCatalogsResponse* resp) {
  return Unary(ctx, pool_, authz_, "JobService/ListCatalogs", resp,
               [this, req] { return svc_->ListCatalogs(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::GetCatalog(grpc::CallbackServerContext* ctx,
                                                     const pb::GetCatalogRequest* req,
                                                     pb::Catalog* resp) {
  return Unary(ctx, pool_, authz_, "JobService/GetCatalog", resp,
               [this, req] { return svc_->GetCatalog(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::LoadCatalog(grpc::CallbackServerContext* ctx,
                                                      const pb::LoadCatalogRequest* req,
                                                      pb::LoadCatalogResponse* resp) {
  return Unary(ctx, heavy_, authz_, "JobService/LoadCatalog", resp,
               [this, req] { return svc_->LoadCatalog(*req); });
}
grpc::ServerUnaryReactor* JobServiceGrpc::ImportGitCatalog(grpc::CallbackServerContext* ctx,
                                                           const pb::ImportGitCatalogRequest* req,
                                                           pb::ImportGitCatalogResponse* resp) {
  return Unary(ctx, heavy_, authz_, "JobService/ImportGitCatalog", resp,
               [this, req] { return svc_->ImportGitCatalog(*req); });
}

// --------------------------------------------------------------- AgentService

grpc::ServerUnaryReactor* AgentServiceGrpc::Register(grpc::CallbackServerContext* ctx,
                                                     const pb::RegisterRequest* req,
                                                     pb::RegisterResponse* resp) {
  return Unary(ctx, pool_, authz_, "AgentService/Register", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::RegisterResponse> {
                 absl::Status st = authz_->CheckRegister(who, req->name());
                 if (!st.ok()) return st;
                 return svc_->Register(*req);
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::Heartbeat(grpc::CallbackServerContext* ctx,
                                                      const pb::HeartbeatRequest* req,
                                                      pb::HeartbeatResponse* resp) {
  return Unary(ctx, lease_pool_, authz_, "AgentService/Heartbeat", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::HeartbeatResponse> {
                 // Another agent's lease is answered as revoked by the queue's
                 // statement (it renews only leases of req->agent_id()).
                 absl::Status st = authz_->CheckAgentId(who, req->agent_id(), /*lease_path=*/true);
                 if (!st.ok()) return st;
                 return lease_svc_->Heartbeat(*req);
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::LeaseJobs(grpc::CallbackServerContext* ctx,
                                                      const pb::LeaseJobsRequest* req,
                                                      pb::LeaseJobsResponse* resp) {
  // Checked again once the leases are taken: a caller that left meanwhile
  // never learns of them, so they go back unspent.
  return Unary(ctx, pool_, authz_, "AgentService/LeaseJobs", resp,
               [this, ctx, req](const Principal& who) -> absl::StatusOr<pb::LeaseJobsResponse> {
                 absl::Status st = authz_->CheckAgentId(who, req->agent_id());
                 if (!st.ok()) return st;
                 return svc_->LeaseJobs(*req, [ctx] { return !CallerGone(*ctx).ok(); });
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportResult(grpc::CallbackServerContext* ctx,
                                                         const pb::ReportResultRequest* req,
                                                         pb::ReportResultResponse* resp) {
  // The lease holder is checked by the report's own statement (JobQueue).
  return Unary(ctx, pool_, authz_, "AgentService/ReportResult", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::ReportResultResponse> {
                 absl::Status st = authz_->CheckAgentId(who, req->agent_id());
                 if (!st.ok()) return st;
                 absl::StatusOr<pb::ReportResultResponse> out = svc_->ReportResult(*req);
                 if (!out.ok()) return authz_->QueueRefusal(who, out.status());
                 return out;
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportResults(grpc::CallbackServerContext* ctx,
                                                          const pb::ReportResultsRequest* req,
                                                          pb::ReportResultsResponse* resp) {
  return Unary(ctx, pool_, authz_, "AgentService/ReportResults", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::ReportResultsResponse> {
                 // Every item as ReportResult checks it: the caller's own
                 // agent id here; a lease another agent holds is refused in
                 // its slot by the queue.
                 for (const pb::ReportResultRequest& r : req->results()) {
                   absl::Status st = authz_->CheckAgentId(who, r.agent_id());
                   if (!st.ok()) return st;
                 }
                 absl::StatusOr<pb::ReportResultsResponse> out = svc_->ReportResults(*req);
                 if (!out.ok()) return out;
                 for (pb::ReportResultResponse& item : *out->mutable_results()) {
                   if (item.error_code() != grpc::StatusCode::PERMISSION_DENIED) continue;
                   item.set_error_message(std::string(
                       authz_->QueueRefusal(who, absl::PermissionDeniedError(item.error_message()))
                           .message()));
                 }
                 return out;
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReportFailure(grpc::CallbackServerContext* ctx,
                                                          const pb::ReportFailureRequest* req,
                                                          pb::ReportFailureResponse* resp) {
  return Unary(ctx, pool_, authz_, "AgentService/ReportFailure", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::ReportFailureResponse> {
                 absl::Status st = authz_->CheckAgentId(who, req->agent_id());
                 if (!st.ok()) return st;
                 absl::StatusOr<pb::ReportFailureResponse> out = svc_->ReportFailure(*req);
                 if (!out.ok()) return authz_->QueueRefusal(who, out.status());
                 return out;
               });
}
grpc::ServerUnaryReactor* AgentServiceGrpc::ReleaseLeases(grpc::CallbackServerContext* ctx,
                                                          const pb::ReleaseLeasesRequest* req,
                                                          pb::ReleaseLeasesResponse* resp) {
  return Unary(ctx, lease_pool_, authz_, "AgentService/ReleaseLeases", resp,
               [this, req](const Principal& who) -> absl::StatusOr<pb::ReleaseLeasesResponse> {
                 absl::Status st = authz_->CheckAgentId(who, req->agent_id(), /*lease_path=*/true);
                 if (!st.ok()) return st;
                 return lease_svc_->ReleaseLeases(*req);
               });
}

// ------------------------------------------------------------ AnalysisService

grpc::ServerUnaryReactor* AnalysisServiceGrpc::ListRegressions(
    grpc::CallbackServerContext* ctx, const pb::ListRegressionsRequest* req,
    pb::ListRegressionsResponse* resp) {
  return Unary(ctx, pool_, authz_, "AnalysisService/ListRegressions", resp,
               [this, req] { return svc_->ListRegressions(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::GetRegression(grpc::CallbackServerContext* ctx,
                                                             const pb::GetRegressionRequest* req,
                                                             pb::Regression* resp) {
  return Unary(ctx, pool_, authz_, "AnalysisService/GetRegression", resp,
               [this, req] { return svc_->GetRegression(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::GetBisect(grpc::CallbackServerContext* ctx,
                                                         const pb::GetBisectRequest* req,
                                                         pb::Bisect* resp) {
  return Unary(ctx, pool_, authz_, "AnalysisService/GetBisect", resp,
               [this, req] { return svc_->GetBisect(*req); });
}
grpc::ServerUnaryReactor* AnalysisServiceGrpc::UpdateRegression(
    grpc::CallbackServerContext* ctx, const pb::UpdateRegressionRequest* req,
    pb::Regression* resp) {
  // Only the owner of the regression's matrix or an admin (the service).
  return Unary(ctx, pool_, authz_, "AnalysisService/UpdateRegression", resp,
               [this, req](const Principal& who) { return svc_->UpdateRegression(*req, who); });
}

// ------------------------------------------------------------- AccessService

grpc::ServerUnaryReactor* AccessServiceGrpc::CreateToken(grpc::CallbackServerContext* ctx,
                                                         const pb::CreateTokenRequest* req,
                                                         pb::CreateTokenResponse* resp) {
  return Unary(
      ctx, pool_, authz_, "AccessService/CreateToken", resp,
      [this, req]() -> absl::StatusOr<pb::CreateTokenResponse> {
        if (!ValidPrincipalName(req->name())) {
          return absl::InvalidArgumentError(
              "name: 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit");
        }
        if (!ParseRole(req->role()).has_value()) {
          return absl::InvalidArgumentError("role: viewer, submitter, agent or admin");
        }
        const std::string secret = auth::NewToken();
        if (secret.empty()) return absl::InternalError("random number generator failed");
        absl::StatusOr<storage::ApiToken> t =
            store_->CreateToken(req->name(), req->role(), auth::TokenSha256Hex(secret));
        if (!t.ok()) return t.status();
        pb::CreateTokenResponse out;
        ToProto(*t, out.mutable_info());
        out.set_token(secret);
        spdlog::info("token created: name \"{}\" role {}", absl::CEscape(t->name), t->role);
        return out;
      });
}
grpc::ServerUnaryReactor* AccessServiceGrpc::ListTokens(grpc::CallbackServerContext* ctx,
                                                        const pb::ListTokensRequest* req,
                                                        pb::ListTokensResponse* resp) {
  return Unary(ctx, pool_, authz_, "AccessService/ListTokens", resp,
               [this]() -> absl::StatusOr<pb::ListTokensResponse> {
                 absl::StatusOr<std::vector<storage::ApiToken>> all = store_->ListTokens();
                 if (!all.ok()) return all.status();
                 pb::ListTokensResponse out;
                 for (const storage::ApiToken& t : *all) ToProto(t, out.add_tokens());
                 return out;
               });
}
grpc::ServerUnaryReactor* AccessServiceGrpc::RevokeToken(grpc::CallbackServerContext* ctx,
                                                         const pb::RevokeTokenRequest* req,
                                                         pb::RevokeTokenResponse* resp) {
  return Unary(ctx, pool_, authz_, "AccessService/RevokeToken", resp,
               [this, req]() -> absl::StatusOr<pb::RevokeTokenResponse> {
                 absl::Status st = store_->RevokeToken(req->name());
                 if (!st.ok()) return st;
                 authz_->ForgetTokensOf(req->name());
                 spdlog::info("token revoked: name \"{}\"", absl::CEscape(req->name()));
                 return pb::RevokeTokenResponse();
               });
}

grpc::ServerUnaryReactor* RetentionServiceGrpc::Prune(grpc::CallbackServerContext* ctx,
                                                      const pb::PruneRequest* req,
                                                      pb::PruneResponse* resp) {
  return Unary(ctx, pool_, authz_, "RetentionService/Prune", resp,
               [this, req] { return svc_->Prune(*req); });
}

}  // namespace farm::scheduler
