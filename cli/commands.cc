#include "cli/commands.h"

#include <unistd.h>

#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/compare.h"
#include "cli/format.h"
#include "cli/git_import.h"
#include "cli/kernels.h"
#include "cli/measured_costs.h"
#include "cli/report.h"
#include "lib/base/file.h"
#include "lib/client/retry.h"
#include "lib/spec/spec_check.h"

namespace farm::cli {
namespace {

constexpr absl::Duration kUnaryTimeout = absl::Seconds(30);
constexpr absl::Duration kWatchSilence = absl::Seconds(20);
constexpr absl::Duration kWatchFirstMessage = absl::Seconds(5);
constexpr int kSubmitRetries = 5;

// A file named on the command line, standard input for "-"; the error
// quotes the name as given.
absl::StatusOr<std::string> ReadInputFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    if (std::cin.bad()) return absl::DataLossError("cannot read standard input");
    return text.str();
  }
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("cannot read file '", path, "'"));
  return text;
}

// Cancels a WatchMatrix call whose server has gone silent. The server
// writes at least every 2 s (its fallback poll); silence for kWatchSilence
// means it is frozen or cut off (a stopped process keeps its sockets open,
// so nothing else notices). The silence counts across reconnects (keepalive
// may break a frozen server's stream first), so `last_heard` outlives each
// stream's watchdog; a fresh stream gets kWatchFirstMessage to say
// something, which a restarted server does at once.
//
// One per stream, on the thread that reads it; its own thread waits for the
// deadline. `ctx` and `last_heard` must outlive it; Stop (or the
// destructor) joins the thread before the call ends.
class SilenceWatchdog {
 public:
  SilenceWatchdog(grpc::ClientContext* ctx, absl::Time* last_heard)
      : ctx_(ctx), last_heard_(last_heard), stream_start_(absl::Now()) {
    thread_ = std::thread([this] { Watch(); });
  }
  ~SilenceWatchdog() { Stop(); }
  SilenceWatchdog(const SilenceWatchdog&) = delete;
  SilenceWatchdog& operator=(const SilenceWatchdog&) = delete;

  // The stream said something.
  void Heard() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    *last_heard_ = absl::Now();
  }

  // Ends the watch; idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stream_over_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // True when the watchdog cancelled the call. REQUIRES: Stop() returned.
  bool silent() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return silent_;
  }

 private:
  void Watch() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (!stream_over_) {
      const absl::Time give_up =
          std::max(*last_heard_ + kWatchSilence, stream_start_ + kWatchFirstMessage);
      if (absl::Now() >= give_up) {
        silent_ = true;
        ctx_->TryCancel();
        return;
      }
      mu_.AwaitWithDeadline(absl::Condition(&stream_over_), give_up);
    }
  }

  grpc::ClientContext* const ctx_;
  mutable absl::Mutex mu_;
  absl::Time* const last_heard_ ABSL_PT_GUARDED_BY(mu_);
  const absl::Time stream_start_;
  bool stream_over_ ABSL_GUARDED_BY(mu_) = false;
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

std::string RandomKey() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  return absl::StrFormat("farmctl-%016x%016x", gen(), gen());
}

// The checks of a spec that need no scheduler (lib/spec), run before the
// submit so every problem shows at once without a round trip. The size cap
// is the scheduler's (--max-spec-bytes); catalogs and counts are checked there.
absl::Status CheckSpecLocally(const std::string& yaml) {
  spec::SpecLimits limits;
  limits.max_spec_bytes = std::numeric_limits<size_t>::max();
  return spec::ParseMatrixSpec(yaml, limits).status();
}

}  // namespace

std::string UnavailableHint(absl::string_view message, const client::ClientOptions& options) {
  const std::string& server = options.server;
  if (absl::StrContains(message, "andshake")) {
    return absl::StrCat("the TLS handshake with ", server,
                        " failed: does the server's certificate verify against --tls-ca "
                        "(FARM_TLS_CA), and is it the farm's server? docs/security.md");
  }
  if (absl::StrContains(message, "Socket closed") ||
      absl::StrContains(message, "Connection reset")) {
    if (!options.tls.enabled()) {
      return absl::StrCat(server,
                          " closed the connection: a farm with TLS refuses plaintext clients; "
                          "give --tls-ca (FARM_TLS_CA), and with client certificates "
                          "--tls-cert/--tls-key (FARM_TLS_CERT/FARM_TLS_KEY)");
    }
    return absl::StrCat(server,
                        " closed the connection during the TLS handshake: it wants a client "
                        "certificate of its CA; check --tls-cert/--tls-key "
                        "(FARM_TLS_CERT/FARM_TLS_KEY), docs/security.md");
  }
  return absl::StrCat("is a farm-scheduler listening on ", server, "? set --server or FARM_SERVER");
}

Commands::Commands(client::ClientOptions options, std::ostream& out, std::ostream& err)
    : options_(std::move(options)), out_(out), err_(err) {
  channel_ = client::MakeChannel(options_);
  jobs_ = pb::JobService::NewStub(channel_);
  analysis_ = pb::AnalysisService::NewStub(channel_);
  access_ = pb::AccessService::NewStub(channel_);
  err_is_tty_ = (&err == &std::cerr) && isatty(STDERR_FILENO) == 1;
}

int Commands::Fail(const std::string& what, const absl::Status& status) {
  err_ << "farmctl: " << what << ": " << absl::StatusCodeToString(status.code()) << ": "
       << status.message();
  if (status.code() == absl::StatusCode::kUnavailable) {
    err_ << " (" << UnavailableHint(status.message(), options_) << ")";
  }
  err_ << "\n";
  return 1;
}

absl::StatusOr<pb::SubmitMatrixResponse> Commands::SubmitSpec(const std::string& yaml,
                                                              bool dry_run) {
  pb::SubmitMatrixRequest request;
  request.set_spec_yaml(yaml);
  request.set_dry_run(dry_run);
  request.set_idempotency_key(RandomKey());
  client::Backoff backoff;
  for (int attempt = 0;; ++attempt) {
    pb::SubmitMatrixResponse response;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = jobs_->SubmitMatrix(ctx.get(), request, &response);
    if (status.ok()) return response;
    // The idempotency key makes a retry after a call that did reach the
    // server return the matrix it created.
    if (!client::IsTransient(status.error_code()) || attempt >= kSubmitRetries) {
      return client::ToAbsl(status);
    }
    absl::SleepFor(backoff.Next());
  }
}

absl::StatusOr<pb::MatrixProgress> Commands::WaitForMatrix(
    int64_t matrix_id, const std::function<void(const pb::MatrixProgress&)>& on_progress,
    absl::Duration unavailable_limit) {
  client::Backoff backoff;
  absl::Time unavailable_since = absl::InfiniteFuture();
  absl::Time last_heard = absl::Now();  // across streams: see SilenceWatchdog
  pb::MatrixProgress last;
  for (;;) {
    pb::WatchMatrixRequest request;
    request.set_matrix_id(matrix_id);
    auto ctx = client::NewContext(options_, absl::InfiniteDuration());
    SilenceWatchdog watchdog(ctx.get(), &last_heard);
    // Created with the watchdog running: the call's start blocks too when
    // the server is frozen.
    auto reader = jobs_->WatchMatrix(ctx.get(), request);
    pb::MatrixProgress progress;
    while (reader->Read(&progress)) {
      watchdog.Heard();
      unavailable_since = absl::InfiniteFuture();
      backoff.Reset();
      last = progress;
      if (on_progress) on_progress(progress);
      if (progress.done()) {
        watchdog.Stop();
        ctx->TryCancel();
        (void)reader->Finish();
        return last;
      }
    }
    watchdog.Stop();
    grpc::Status status = reader->Finish();
    // Silent across streams too: against a frozen server each new stream
    // may fail at once (its connection broken by keepalive), before any
    // watchdog's deadline.
    if (watchdog.silent() || absl::Now() - last_heard >= kWatchSilence) {
      return absl::DeadlineExceededError(absl::StrCat("no progress from the server for ",
                                                      absl::FormatDuration(kWatchSilence),
                                                      " (server frozen or unreachable)"));
    }
    // A stream that ends cleanly without done=true (server shutting down) or
    // a transient failure (lib/client/retry.h) is resumed: the matrix lives
    // in PostgreSQL.
    if (!status.ok() && !client::IsTransient(status.error_code())) {
      return client::ToAbsl(status);
    }
    const absl::Time now = absl::Now();
    if (unavailable_since == absl::InfiniteFuture()) unavailable_since = now;
    if (now - unavailable_since > unavailable_limit) {
      return absl::UnavailableError(
          absl::StrCat("lost the server for more than ", absl::FormatDuration(unavailable_limit),
                       status.ok() ? "" : absl::StrCat(": ", status.error_message())));
    }
    absl::SleepFor(backoff.Next());
  }
}

absl::Status Commands::StreamResults(int64_t matrix_id, bool include_raw,
                                     const std::function<void(const pb::Result&)>& on_result) {
  pb::GetResultsRequest request;
  request.set_matrix_id(matrix_id);
  request.set_include_raw_output(include_raw);
  auto ctx = client::NewContext(options_, absl::Minutes(10));
  auto reader = jobs_->GetResults(ctx.get(), request);
  pb::Result result;
  while (reader->Read(&result)) on_result(result);
  grpc::Status status = reader->Finish();
  if (!status.ok()) return client::ToAbsl(status);
  return absl::OkStatus();
}

absl::Status Commands::StreamRawOutput(
    int64_t job_id, int attempt, const std::function<void(const pb::RawOutputChunk&)>& on_chunk) {
  pb::GetRawOutputRequest request;
  request.set_job_id(job_id);
  request.set_attempt(attempt);
  auto ctx = client::NewContext(options_, absl::Minutes(10));
  auto reader = jobs_->GetRawOutput(ctx.get(), request);
  pb::RawOutputChunk chunk;
  int64_t got = 0;
  int64_t total = -1;
  while (reader->Read(&chunk)) {
    if (chunk.offset() != got) {
      ctx->TryCancel();
      (void)reader->Finish();
      return absl::DataLossError(absl::StrCat("raw output of job ", job_id, ": a chunk at byte ",
                                              chunk.offset(), ", expected ", got));
    }
    got += static_cast<int64_t>(chunk.data().size());
    total = chunk.total_size();
    on_chunk(chunk);
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return client::ToAbsl(status);
  if (got != total) {
    return absl::DataLossError(
        absl::StrCat("raw output of job ", job_id, " ended at byte ", got, " of ", total));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<pb::Result>> Commands::FetchResults(int64_t matrix_id,
                                                               bool include_raw) {
  std::vector<pb::Result> results;
  absl::Status st =
      StreamResults(matrix_id, include_raw, [&](const pb::Result& r) { results.push_back(r); });
  if (!st.ok()) return st;
  return results;
}

absl::StatusOr<std::vector<pb::Agent>> Commands::ListAllAgents() {
  std::vector<pb::Agent> agents;
  pb::ListAgentsRequest request;
  do {
    pb::ListAgentsResponse response;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = jobs_->ListAgents(ctx.get(), request, &response);
    if (!status.ok()) return client::ToAbsl(status);
    agents.insert(agents.end(), response.agents().begin(), response.agents().end());
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return agents;
}

absl::StatusOr<std::vector<pb::Regression>> Commands::ListAllRegressions(
    pb::ListRegressionsRequest request) {
  std::vector<pb::Regression> regs;
  do {
    pb::ListRegressionsResponse response;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = analysis_->ListRegressions(ctx.get(), request, &response);
    if (!status.ok()) return client::ToAbsl(status);
    regs.insert(regs.end(), response.regressions().begin(), response.regressions().end());
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return regs;
}

void Commands::PrintProgress(const pb::MatrixProgress& progress) {
  const std::string line = FormatProgressLine(progress);
  if (err_is_tty_) {
    err_ << "\r\033[K" << line << (progress.done() ? "\n" : "") << std::flush;
    return;
  }
  const absl::Time now = absl::Now();
  if (progress.done() ||
      (line != last_progress_line_ && now - last_progress_print_ >= absl::Seconds(2))) {
    err_ << line << "\n" << std::flush;
    last_progress_print_ = now;
    last_progress_line_ = line;
  }
}

int Commands::FollowMatrix(int64_t matrix_id) {
  // The final line reports the whole wait. The server's rate covers only its
  // last watch stream (0 when the matrix was done before it began), so the
  // final rate is measured here; the matrix was just submitted, so every
  // finished job finished during the wait.
  const absl::Time started = absl::Now();
  auto final_progress = WaitForMatrix(matrix_id, [&](const pb::MatrixProgress& p) {
    if (!p.done()) {
      PrintProgress(p);
      return;
    }
    const pb::MatrixCounts& c = p.counts();
    pb::MatrixProgress last = p;
    last.set_jobs_per_second(JobsPerSecond(c.succeeded() + c.failed() + c.cancelled(),
                                           absl::ToDoubleSeconds(absl::Now() - started)));
    PrintProgress(last);
  });
  if (!final_progress.ok()) {
    return Fail(absl::StrCat("WatchMatrix ", matrix_id), final_progress.status());
  }
  const auto& counts = final_progress->counts();
  if (final_progress->state() == pb::MATRIX_STATE_COMPLETED && counts.failed() == 0) {
    return 0;
  }
  err_ << "farmctl: matrix " << matrix_id << " ended " << MatrixStateName(final_progress->state())
       << ": " << counts.failed() << " failed, " << counts.cancelled() << " cancelled of "
       << counts.total() << "\n";
  return 1;
}

int Commands::RunSubmit(const std::string& path, bool wait, bool dry_run) {
  absl::StatusOr<std::string> yaml = ReadInputFile(path);
  if (!yaml.ok()) return Fail("submit", yaml.status());
  if (absl::Status local = CheckSpecLocally(*yaml); !local.ok()) {
    return Fail(absl::StrCat("submit ", path), local);
  }
  absl::StatusOr<pb::SubmitMatrixResponse> response = SubmitSpec(*yaml, dry_run);
  if (!response.ok()) return Fail(absl::StrCat("submit ", path), response.status());
  for (const auto& warning : response->warnings()) {
    err_ << "farmctl: warning: " << warning << "\n";
  }
  const pb::Matrix& m = response->matrix();
  if (dry_run) {
    // A dry run creates nothing; the expansion's size is in counts.total.
    out_ << "dry run: " << path << " is valid: matrix '" << m.name() << "' would create "
         << m.counts().total() << " jobs\n";
    return 0;
  }
  out_ << "submitted matrix " << m.id() << " (" << m.name() << "): " << response->jobs_created()
       << " jobs\n";
  if (response->build_job_ids_size() > 0) {
    out_ << "waiting for " << response->build_job_ids_size() << " kernel builds";
    if (response->build_matrix_id() != 0)
      out_ << " (build matrix " << response->build_matrix_id() << ")";
    out_ << "\n";
  }
  out_ << std::flush;
  if (!wait) return 0;
  return FollowMatrix(m.id());
}

int Commands::RunStatus(std::optional<int64_t> matrix_id, OutputFormat format) {
  if (matrix_id.has_value()) {
    pb::GetMatrixRequest request;
    request.set_matrix_id(*matrix_id);
    pb::Matrix matrix;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = jobs_->GetMatrix(ctx.get(), request, &matrix);
    if (!status.ok()) {
      return Fail(absl::StrCat("GetMatrix ", *matrix_id), client::ToAbsl(status));
    }
    // csv and json render the one matrix as a one-row list, so scripts read
    // `status` and `status MATRIX` alike.
    out_ << (format == OutputFormat::kTable ? FormatMatrixDetail(matrix)
                                            : FormatMatrixList({matrix}, format));
    return 0;
  }
  pb::ListMatricesRequest request;
  request.set_limit(50);
  pb::ListMatricesResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->ListMatrices(ctx.get(), request, &response);
  if (!status.ok()) return Fail("ListMatrices", client::ToAbsl(status));
  out_ << FormatMatrixList({response.matrices().begin(), response.matrices().end()}, format);
  return 0;
}

int Commands::RunWatch(int64_t matrix_id) {
  // watch prints to stdout: following the matrix is its whole output.
  auto final_progress = WaitForMatrix(matrix_id, [this](const pb::MatrixProgress& p) {
    out_ << FormatProgressLine(p) << "\n" << std::flush;
  });
  if (!final_progress.ok()) {
    return Fail(absl::StrCat("WatchMatrix ", matrix_id), final_progress.status());
  }
  return final_progress->state() == pb::MATRIX_STATE_COMPLETED ? 0 : 1;
}

int Commands::RunCancel(int64_t matrix_id, const std::string& reason) {
  pb::CancelMatrixRequest request;
  request.set_matrix_id(matrix_id);
  request.set_reason(reason);
  pb::CancelMatrixResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->CancelMatrix(ctx.get(), request, &response);
  if (!status.ok()) {
    return Fail(absl::StrCat("CancelMatrix ", matrix_id), client::ToAbsl(status));
  }
  out_ << "matrix " << matrix_id << ": " << response.jobs_cancelled() << " jobs cancelled, state "
       << MatrixStateName(response.matrix().state()) << "\n";
  return 0;
}

int Commands::RunResults(int64_t matrix_id, OutputFormat format, bool raw) {
  if (format == OutputFormat::kTable) {
    // The table sizes its columns over every result (without raw output).
    absl::StatusOr<std::vector<pb::Result>> results = FetchResults(matrix_id, false);
    if (!results.ok()) return Fail(absl::StrCat("GetResults ", matrix_id), results.status());
    out_ << FormatResultsTable(*results);
    return 0;
  }
  // CSV and JSON go out as the results arrive; raw outputs one at a time
  // (GetRawOutput), so farmctl holds one result's. An error after some were
  // written leaves a truncated document and a non-zero exit.
  ResultsStreamWriter writer(out_, format);
  const bool with_raw = raw && format == OutputFormat::kJson;
  absl::Status raw_error;
  std::string failed_at;
  absl::Status st = StreamResults(matrix_id, false, [&](const pb::Result& r) {
    if (!raw_error.ok()) return;  // stop writing after the first failed fetch
    if (!with_raw || r.raw_size() == 0) {
      writer.Add(r);
      return;
    }
    pb::Result full = r;
    std::string* text = full.mutable_raw_output();
    text->reserve(static_cast<size_t>(r.raw_size()));
    raw_error = StreamRawOutput(r.job_id(), r.attempt(),
                                [&](const pb::RawOutputChunk& c) { text->append(c.data()); });
    if (!raw_error.ok()) {
      failed_at = absl::StrCat("GetRawOutput job ", r.job_id(), " attempt ", r.attempt());
      return;
    }
    writer.Add(full);
  });
  if (!st.ok()) return Fail(absl::StrCat("GetResults ", matrix_id), st);
  if (!raw_error.ok()) return Fail(failed_at, raw_error);
  writer.Finish();
  return 0;
}

int Commands::RunRawOutput(int64_t job_id, int attempt) {
  absl::Status st = StreamRawOutput(job_id, attempt, [&](const pb::RawOutputChunk& c) {
    out_.write(c.data().data(), static_cast<std::streamsize>(c.data().size()));
    out_.flush();
  });
  if (!st.ok()) {
    return Fail(absl::StrCat("GetRawOutput job ", job_id,
                             attempt > 0 ? absl::StrCat(" attempt ", attempt) : ""),
                st);
  }
  return 0;
}

int Commands::RunTokenCreate(const std::string& name, const std::string& role) {
  pb::CreateTokenRequest request;
  request.set_name(name);
  request.set_role(role);
  pb::CreateTokenResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = access_->CreateToken(ctx.get(), request, &response);
  if (!status.ok()) return Fail("CreateToken", client::ToAbsl(status));
  out_ << response.token() << "\n";
  err_ << "token \"" << response.info().name() << "\" (role " << response.info().role()
       << ") created; it is shown only this once\n";
  return 0;
}

int Commands::RunTokenList(OutputFormat format) {
  pb::ListTokensResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = access_->ListTokens(ctx.get(), {}, &response);
  if (!status.ok()) return Fail("ListTokens", client::ToAbsl(status));
  out_ << FormatTokens({response.tokens().begin(), response.tokens().end()}, format);
  return 0;
}

int Commands::RunTokenRevoke(const std::string& name) {
  pb::RevokeTokenRequest request;
  request.set_name(name);
  pb::RevokeTokenResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = access_->RevokeToken(ctx.get(), request, &response);
  if (!status.ok()) return Fail("RevokeToken", client::ToAbsl(status));
  err_ << "token \"" << name << "\" revoked\n";
  return 0;
}

int Commands::RunAgents(OutputFormat format) {
  absl::StatusOr<std::vector<pb::Agent>> agents = ListAllAgents();
  if (!agents.ok()) return Fail("ListAgents", agents.status());
  out_ << FormatAgents(*agents, format);
  return 0;
}

int Commands::RunCatalogList(OutputFormat format) {
  pb::ListCatalogsResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->ListCatalogs(ctx.get(), {}, &response);
  if (!status.ok()) return Fail("ListCatalogs", client::ToAbsl(status));
  // ListCatalogs omits the commits (by contract), so each catalog is fetched
  // to count them; catalogs are few.
  std::vector<pb::Catalog> catalogs;
  for (const pb::Catalog& summary : response.catalogs()) {
    pb::GetCatalogRequest request;
    request.set_name(summary.name());
    pb::Catalog catalog;
    auto get_ctx = client::NewContext(options_, kUnaryTimeout);
    status = jobs_->GetCatalog(get_ctx.get(), request, &catalog);
    if (!status.ok()) {
      return Fail(absl::StrCat("GetCatalog ", summary.name()), client::ToAbsl(status));
    }
    catalogs.push_back(std::move(catalog));
  }
  out_ << FormatCatalogList(catalogs, format);
  return 0;
}

int Commands::RunCatalogShow(const std::string& name, bool resolve, OutputFormat format) {
  pb::GetCatalogRequest request;
  request.set_name(name);
  request.set_resolve(resolve);
  pb::Catalog catalog;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->GetCatalog(ctx.get(), request, &catalog);
  if (!status.ok()) {
    return Fail(absl::StrCat("GetCatalog ", name), client::ToAbsl(status));
  }
  out_ << FormatCatalog(catalog, format);
  return 0;
}

int Commands::RunCatalogLoad(const std::string& path, bool replace) {
  absl::StatusOr<std::string> yaml = ReadInputFile(path);
  if (!yaml.ok()) return Fail("catalog load", yaml.status());
  pb::LoadCatalogRequest request;
  request.set_yaml(*yaml);
  request.set_source_name(path);
  request.set_replace(replace);
  pb::LoadCatalogResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->LoadCatalog(ctx.get(), request, &response);
  if (!status.ok()) {
    return Fail(absl::StrCat("LoadCatalog ", path), client::ToAbsl(status));
  }
  out_ << "loaded catalog " << response.catalog().name() << ": "
       << response.catalog().commits_size() << " commits\n";
  return 0;
}

int Commands::RunCatalogMeasure(int64_t matrix_id, const std::string& reference,
                                const std::string& name, const std::string& mode, bool print_only) {
  const pb::IommuMode m = proto::ModeFromName(mode);
  if (m == pb::IOMMU_MODE_UNSPECIFIED) {
    return Fail("catalog measure",
                absl::InvalidArgumentError(
                    absl::StrCat("--mode ", mode, ": expected off, passthrough, strict or lazy")));
  }
  absl::StatusOr<std::vector<pb::Result>> results = FetchResults(matrix_id, false);
  if (!results.ok()) return Fail(absl::StrCat("GetResults ", matrix_id), results.status());
  absl::StatusOr<Measurement> measured = MeasureCommits(*results, m);
  if (!measured.ok()) return Fail(absl::StrCat("catalog measure ", matrix_id), measured.status());
  pb::GetCatalogRequest get;
  get.set_name(results->front().job().catalog());
  pb::Catalog source;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->GetCatalog(ctx.get(), get, &source);
  if (!status.ok()) return Fail(absl::StrCat("GetCatalog ", get.name()), client::ToAbsl(status));
  const std::string catalog = name.empty() ? absl::StrCat(source.name(), "-measured") : name;
  absl::StatusOr<std::string> yaml = MeasuredCatalogYaml(source, catalog, *measured, reference);
  if (!yaml.ok()) return Fail("catalog measure", yaml.status());
  if (print_only) {
    out_ << *yaml;
    return 0;
  }
  pb::LoadCatalogRequest load;
  load.set_yaml(*yaml);
  load.set_source_name(absl::StrCat("measured:matrix ", matrix_id));
  load.set_replace(true);
  pb::LoadCatalogResponse loaded;
  auto load_ctx = client::NewContext(options_, kUnaryTimeout);
  status = jobs_->LoadCatalog(load_ctx.get(), load, &loaded);
  if (!status.ok()) return Fail("LoadCatalog", client::ToAbsl(status));
  out_ << "loaded catalog " << catalog << ": " << loaded.catalog().commits_size() << " commits, "
       << measured->commits.size() << " measured at icount shift " << measured->icount_shift
       << " against " << reference << "\n";
  out_ << FormatMeasurement(source, *measured);
  return 0;
}

int Commands::RunCatalogImportGit(const std::string& repo, const std::string& range,
                                  const std::string& catalog) {
  auto commits = GitFirstParentLog(repo, range);
  if (!commits.ok()) return Fail(absl::StrCat("git log ", range), commits.status());
  pb::ImportGitCatalogRequest request;
  request.set_catalog(catalog);
  request.set_range(range);
  for (auto& c : *commits) *request.add_commits() = std::move(c);
  pb::ImportGitCatalogResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->ImportGitCatalog(ctx.get(), request, &response);
  if (!status.ok()) return Fail("ImportGitCatalog", client::ToAbsl(status));
  out_ << "catalog " << response.catalog().name() << ": added " << response.added() << " of "
       << request.commits_size() << " commits from " << range << "\n";
  return 0;
}

int Commands::RunKernelsImport(const std::string& store, const std::string& deb,
                               const std::string& commit, bool replace) {
  kstore::DebImport request;
  request.deb = deb;
  request.commit = commit;
  request.replace = replace;
  absl::StatusOr<kstore::KernelBuild> b = kstore::ImportDeb(store, request);
  if (!b.ok()) return Fail(absl::StrCat("kernels import ", deb), b.status());
  out_ << "imported " << b->commit << " (" << b->arch << "): " << b->release
       << (b->modules.empty() ? "" : ", modules") << (b->config.empty() ? "" : ", config") << " in "
       << b->dir << "\n";
  return 0;
}

int Commands::RunKernelsList(const std::string& store, OutputFormat format) {
  absl::StatusOr<kstore::StoreListing> listing = kstore::ReadStore(store);
  if (!listing.ok()) return Fail("kernels list", listing.status());
  for (const std::string& p : listing->problems) err_ << "farmctl: skipped: " << p << "\n";
  out_ << FormatKernelBuilds(kstore::CatalogOrder(std::move(listing->builds)), format);
  return 0;
}

int Commands::RunKernelsCatalog(const std::string& store, const std::string& catalog) {
  absl::StatusOr<kstore::StoreListing> listing = kstore::ReadStore(store);
  if (!listing.ok()) return Fail("kernels catalog", listing.status());
  for (const std::string& p : listing->problems) err_ << "farmctl: skipped: " << p << "\n";
  if (listing->builds.empty()) {
    return Fail("kernels catalog", absl::InvalidArgumentError(
                                       absl::StrCat("kernel store ", store, " holds no build")));
  }
  pb::ImportGitCatalogRequest request = KernelCatalogRequest(listing->builds, catalog, store);
  pb::ImportGitCatalogResponse response;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = jobs_->ImportGitCatalog(ctx.get(), request, &response);
  if (!status.ok()) return Fail("ImportGitCatalog", client::ToAbsl(status));
  out_ << "catalog " << response.catalog().name() << ": added " << response.added() << " of "
       << request.commits_size() << " kernel commits from " << store << "\n";
  for (const pb::CatalogCommit& c : request.commits()) {
    out_ << "  " << c.id() << "\t" << c.subject() << "\n";
  }
  return 0;
}

int Commands::RunKernelsBuild(const kbuild::BuildRequest& request, const std::string& log_file) {
  std::string log;
  absl::StatusOr<kbuild::BuildResult> r = kbuild::BuildKernel(request, &log);
  if (!log_file.empty()) {
    if (!base::WriteFile(log_file, log).ok()) {
      err_ << "farmctl: cannot write the build log to " << log_file << "\n";
    }
  }
  if (!r.ok()) {
    // The build's own last lines, for the context of its first error.
    std::vector<absl::string_view> lines = absl::StrSplit(log, '\n', absl::SkipWhitespace());
    const size_t from = lines.size() > 20 ? lines.size() - 20 : 0;
    for (size_t i = from; i < lines.size(); ++i) err_ << "  " << lines[i] << "\n";
    err_ << "farmctl: kernels build " << request.rev << ": "
         << absl::StatusCodeToString(r.status().code()) << ": " << r.status().message() << "\n";
    return 1;
  }
  out_ << "built " << r->commit << " (" << r->build.arch << "): " << r->release << " in "
       << r->build.dir << "\n"
       << "  " << absl::StrFormat("%.1f", absl::ToDoubleSeconds(r->wall_time))
       << " s, build directory " << r->build_dir << (r->reused_build_dir ? " (reused)" : " (fresh)")
       << "\n";
  for (const std::string& d : r->evicted) out_ << "  evicted " << d << "\n";
  return 0;
}

int Commands::RunRegressions(bool all, OutputFormat format) {
  pb::ListRegressionsRequest request;
  request.set_include_closed(all);
  request.set_include_improvements(all);
  absl::StatusOr<std::vector<pb::Regression>> listed = ListAllRegressions(request);
  if (!listed.ok()) return Fail("ListRegressions", listed.status());
  const std::vector<pb::Regression>& regs = *listed;
  out_ << (format == OutputFormat::kJson  ? FormatRegressionsJson(regs)
           : format == OutputFormat::kCsv ? FormatRegressionsCsv(regs)
                                          : FormatRegressionsTable(regs));
  return 0;
}

int Commands::RunRegressionShow(int64_t regression_id, OutputFormat format) {
  pb::GetRegressionRequest request;
  request.set_regression_id(regression_id);
  pb::Regression reg;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = analysis_->GetRegression(ctx.get(), request, &reg);
  if (!status.ok()) {
    return Fail(absl::StrCat("GetRegression ", regression_id), client::ToAbsl(status));
  }
  out_ << (format == OutputFormat::kJson  ? FormatRegressionJson(reg)
           : format == OutputFormat::kCsv ? FormatRegressionsCsv({reg})
                                          : FormatRegression(reg));
  return 0;
}

int Commands::RunRegressionMark(int64_t regression_id, const std::string& state,
                                const std::string& note) {
  pb::UpdateRegressionRequest request;
  request.set_regression_id(regression_id);
  request.set_note(note);
  if (state == kReopen) {
    request.set_reopen(true);
  } else {
    absl::StatusOr<pb::RegressionState> parsed = ParseRegressionMark(state);
    if (!parsed.ok()) return Fail("regression mark", parsed.status());
    request.set_state(*parsed);
  }
  pb::Regression reg;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = analysis_->UpdateRegression(ctx.get(), request, &reg);
  if (!status.ok()) {
    return Fail(absl::StrCat("UpdateRegression ", regression_id), client::ToAbsl(status));
  }
  out_ << "regression " << reg.id() << " is now " << RegressionStateName(reg.state())
       << (reg.metric_rank().empty() ? "" : " (" + reg.metric_rank() + " metric)") << "\n";
  return 0;
}

int Commands::RunBisect(int64_t id, bool id_is_bisect, OutputFormat format) {
  pb::GetBisectRequest request;
  if (id_is_bisect) {
    request.set_bisect_id(id);
  } else {
    request.set_regression_id(id);
  }
  pb::Bisect bisect;
  auto ctx = client::NewContext(options_, kUnaryTimeout);
  grpc::Status status = analysis_->GetBisect(ctx.get(), request, &bisect);
  if (!status.ok()) {
    return Fail(absl::StrCat("GetBisect ", id), client::ToAbsl(status));
  }
  out_ << (format == OutputFormat::kJson  ? FormatBisectJson(bisect)
           : format == OutputFormat::kCsv ? FormatBisectCsv(bisect)
                                          : FormatBisectTable(bisect));
  return 0;
}

namespace {

// The results of `commit` ("" = all of them), and the side's label.
std::vector<pb::Result> AtCommit(const std::vector<pb::Result>& results,
                                 const std::string& commit) {
  if (commit.empty()) return results;
  std::vector<pb::Result> out;
  for (const pb::Result& r : results) {
    if (CommitIs(r.job().commit_id(), commit)) out.push_back(r);
  }
  return out;
}

std::string SideLabel(int64_t matrix, const std::string& commit) {
  return commit.empty() ? absl::StrCat("matrix ", matrix)
                        : absl::StrCat(commit, " in matrix ", matrix);
}

}  // namespace

int Commands::RunCompare(int64_t matrix_a, int64_t matrix_b, const std::string& commit_a,
                         const std::string& commit_b, OutputFormat format,
                         const std::string& html_path) {
  if (matrix_b == 0) matrix_b = matrix_a;
  absl::StatusOr<std::vector<pb::Result>> a = FetchResults(matrix_a, false);
  if (!a.ok()) return Fail(absl::StrCat("GetResults ", matrix_a), a.status());
  absl::StatusOr<std::vector<pb::Result>> b =
      matrix_b == matrix_a ? a : FetchResults(matrix_b, false);
  if (!b.ok()) return Fail(absl::StrCat("GetResults ", matrix_b), b.status());
  const std::vector<pb::Result> side_a = AtCommit(*a, commit_a);
  const std::vector<pb::Result> side_b = AtCommit(*b, commit_b);
  const std::string label_a = SideLabel(matrix_a, commit_a);
  const std::string label_b = SideLabel(matrix_b, commit_b);
  for (const auto& [side, label] : {std::pair{&side_a, label_a}, {&side_b, label_b}}) {
    if (side->empty()) {
      return Fail("compare", absl::NotFoundError(absl::StrCat("no results for ", label)));
    }
  }
  const std::vector<CompareRow> rows = CompareSides(side_a, side_b);
  const std::vector<MonitorRow> monitors = CompareMonitors(side_a, side_b);
  if (!html_path.empty()) {
    absl::Status written =
        base::WriteFile(html_path, FormatCompareHtml(rows, label_a, label_b, monitors));
    if (!written.ok()) return Fail(absl::StrCat("compare --html ", html_path), written);
  }
  out_ << (format == OutputFormat::kJson  ? FormatCompareJson(rows, label_a, label_b, monitors)
           : format == OutputFormat::kCsv ? FormatCompareCsv(rows, monitors)
                                          : FormatCompareTable(rows, label_a, label_b, monitors));
  return 0;
}

int Commands::RunTry(const std::string& spec_path, const std::map<std::string, std::string>& set,
                     const std::string& patch_commit, const std::string& patch_path,
                     OutputFormat format) {
  if (spec_path == "-" && patch_path == "-") {
    return Fail("try", absl::InvalidArgumentError("SPEC and --patch cannot both be '-'"));
  }
  absl::StatusOr<std::string> yaml = ReadInputFile(spec_path);
  if (!yaml.ok()) return Fail(absl::StrCat("try ", spec_path), yaml.status());
  std::string patch;
  if (!patch_path.empty()) {
    absl::StatusOr<std::string> text = ReadInputFile(patch_path);
    if (!text.ok()) return Fail(absl::StrCat("try --patch ", patch_path), text.status());
    if (text->empty()) {
      return Fail(absl::StrCat("try --patch ", patch_path),
                  absl::InvalidArgumentError("the patch is empty"));
    }
    patch = *std::move(text);
  }
  absl::StatusOr<TryPlan> plan = PlanTry(*yaml, set, patch_commit, patch);
  if (!plan.ok()) return Fail(absl::StrCat("try ", spec_path), plan.status());
  // Both submitted before either is waited for: their jobs interleave.
  std::vector<int64_t> ids;
  for (const std::string& spec : plan->specs_yaml) {
    absl::StatusOr<pb::SubmitMatrixResponse> submitted = SubmitSpec(spec, /*dry_run=*/false);
    if (!submitted.ok()) return Fail("try: SubmitMatrix", submitted.status());
    ids.push_back(submitted->matrix().id());
    err_ << "matrix " << ids.back() << " \"" << submitted->matrix().name()
         << "\": " << submitted->jobs_created() << " jobs\n";
  }
  for (int64_t id : ids) {
    absl::StatusOr<pb::MatrixProgress> done =
        WaitForMatrix(id, [this](const pb::MatrixProgress& p) { PrintProgress(p); });
    if (!done.ok()) return Fail(absl::StrCat("try: WatchMatrix ", id), done.status());
  }
  return ids.size() == 1 ? RunCompare(ids[0], 0, plan->base_commit, plan->patch_commit, format)
                         : RunCompare(ids[0], ids[1], "", "", format);
}

namespace {

// `status` with what failed in front, its code kept.
absl::Status Context(const std::string& what, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

absl::StatusOr<ReportSources> Commands::GatherReport(int64_t matrix_id,
                                                     std::optional<int64_t> regression_id) {
  ReportSources sources;
  sources.farm_version = FARM_VERSION;
  sources.generated_at =
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone());
  if (regression_id.has_value()) {
    pb::GetRegressionRequest request;
    request.set_regression_id(*regression_id);
    pb::Regression reg;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = analysis_->GetRegression(ctx.get(), request, &reg);
    if (!status.ok()) {
      return Context(absl::StrCat("GetRegression ", *regression_id), client::ToAbsl(status));
    }
    matrix_id = reg.matrix_id();
    sources.focus_regression = reg.id();
    sources.regressions.push_back(std::move(reg));
  } else {
    pb::ListRegressionsRequest request;
    request.set_matrix_id(matrix_id);
    request.set_include_closed(true);
    request.set_include_improvements(true);
    absl::StatusOr<std::vector<pb::Regression>> listed = ListAllRegressions(request);
    if (!listed.ok()) return Context("ListRegressions", listed.status());
    sources.regressions = *std::move(listed);
  }
  {
    pb::GetMatrixRequest request;
    request.set_matrix_id(matrix_id);
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = jobs_->GetMatrix(ctx.get(), request, &sources.matrix);
    if (!status.ok()) return Context(absl::StrCat("GetMatrix ", matrix_id), client::ToAbsl(status));
  }
  absl::StatusOr<std::vector<pb::Result>> results = FetchResults(matrix_id, false);
  if (!results.ok()) return Context(absl::StrCat("GetResults ", matrix_id), results.status());
  sources.results = std::move(*results);
  {
    pb::GetCatalogRequest request;
    request.set_name(sources.matrix.catalog());
    pb::Catalog catalog;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = jobs_->GetCatalog(ctx.get(), request, &catalog);
    if (!status.ok()) {
      return Context(absl::StrCat("GetCatalog ", request.name()), client::ToAbsl(status));
    }
    sources.commits.assign(catalog.commits().begin(), catalog.commits().end());
  }
  for (const pb::Regression& reg : sources.regressions) {
    if (reg.bisect_id() == 0) continue;
    pb::GetBisectRequest request;
    request.set_bisect_id(reg.bisect_id());
    pb::Bisect bisect;
    auto ctx = client::NewContext(options_, kUnaryTimeout);
    grpc::Status status = analysis_->GetBisect(ctx.get(), request, &bisect);
    if (!status.ok()) {
      return Context(absl::StrCat("GetBisect ", reg.bisect_id()), client::ToAbsl(status));
    }
    sources.bisects.push_back(std::move(bisect));
  }
  return sources;
}

absl::StatusOr<std::string> Commands::ReportHtml(int64_t matrix_id,
                                                 std::optional<int64_t> regression_id) {
  absl::StatusOr<ReportSources> sources = GatherReport(matrix_id, regression_id);
  if (!sources.ok()) return sources.status();
  return RenderReportHtml(BuildReport(*sources));
}

int Commands::RunReport(int64_t matrix_id, std::optional<int64_t> regression_id,
                        const std::string& output_path) {
  absl::StatusOr<ReportSources> sources = GatherReport(matrix_id, regression_id);
  if (!sources.ok()) return Fail("report", sources.status());
  const ReportData report = BuildReport(*sources);
  const std::string html = RenderReportHtml(report);
  if (output_path == "-") {
    out_ << html;
    return 0;
  }
  if (!base::WriteFile(output_path, html).ok()) {
    return Fail("report",
                absl::PermissionDeniedError(absl::StrCat("cannot write '", output_path, "'")));
  }
  out_ << "wrote " << output_path << ": " << report.plots.size() << " plots, "
       << sources->regressions.size() << " regressions, " << sources->bisects.size() << " bisects, "
       << sources->results.size() << " results\n";
  return 0;
}

int Commands::RunReportServe(const std::string& listen, const ReportServer::Tls& tls) {
  absl::StatusOr<std::unique_ptr<ReportServer>> server = ReportServer::Start(
      listen,
      [this](int64_t matrix_id, std::optional<int64_t> regression_id) {
        return ReportHtml(matrix_id, regression_id);
      },
      tls);
  if (!server.ok()) return Fail("report --serve", server.status());
  out_ << "serving reports on " << (tls.cert_file.empty() ? "http" : "https") << "://"
       << listen.substr(0, listen.rfind(':')) << ":" << (*server)->port()
       << " (/regressions/ID, /matrices/ID)" << std::endl;
  (*server)->Wait();
  return 0;
}

}  // namespace farm::cli
