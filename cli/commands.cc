#include "cli/commands.h"

#include <unistd.h>

#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "cli/agents.h"
#include "cli/catalog.h"
#include "cli/compare.h"
#include "cli/format.h"
#include "cli/kernels.h"
#include "cli/matrix.h"
#include "cli/report_command.h"
#include "lib/base/file.h"
#include "lib/client/retry.h"

namespace farm::cli {
namespace {

constexpr absl::Duration kUnaryTimeout = absl::Seconds(30);
constexpr absl::Duration kWatchSilence = absl::Seconds(20);
constexpr absl::Duration kWatchFirstMessage = absl::Seconds(5);
constexpr int kSubmitRetries = 5;

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

}  // namespace

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
  retention_ = pb::RetentionService::NewStub(channel_);
  err_is_tty_ = (&err == &std::cerr) && isatty(STDERR_FILENO) == 1;
}

int Commands::Fail(const std::string& what, const absl::Status& status) {
  err_ << "farmctl: " << Printable(what) << ": " << absl::StatusCodeToString(status.code()) << ": "
       << PrintableLines(std::string(status.message()));
  if (status.code() == absl::StatusCode::kUnavailable) {
    err_ << " (" << UnavailableHint(status.message(), options_) << ")";
  }
  err_ << "\n";
  return 1;
}

std::unique_ptr<grpc::ClientContext> Commands::UnaryContext() const {
  return client::NewContext(options_, kUnaryTimeout);
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
    // A stream cap's refusal is an answer: the server is alive and said why,
    // so it neither counts as silence nor hides behind "frozen".
    const bool refused = status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    if (refused) last_heard = absl::Now();
    // Silent across streams too: against a frozen server each new stream
    // may fail at once (its connection broken by keepalive), before any
    // watchdog's deadline.
    if (!refused && (watchdog.silent() || absl::Now() - last_heard >= kWatchSilence)) {
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
      if (refused) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the server refused to watch matrix ", matrix_id, " for ",
                         absl::FormatDuration(unavailable_limit), ": ", status.error_message(),
                         "; the matrix goes on (farmctl status ", matrix_id, ")"));
      }
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

int Commands::RunSubmit(const std::string& path, bool wait, bool dry_run) {
  return cli::RunSubmit(*this, path, wait, dry_run);
}

int Commands::RunAgents(OutputFormat format) { return cli::RunAgents(*this, format); }

int Commands::RunCatalogMeasure(int64_t matrix_id, const std::string& reference,
                                const std::string& name, const std::string& mode, bool print_only) {
  return cli::RunCatalogMeasure(*this, matrix_id, reference, name, mode, print_only);
}

int Commands::RunCatalogImportGit(const std::string& repo, const std::string& range,
                                  const std::string& catalog) {
  return cli::RunCatalogImportGit(*this, repo, range, catalog);
}

int Commands::RunKernelsCatalog(const std::string& store, const std::string& catalog) {
  return cli::RunKernelsCatalog(*this, store, catalog);
}

int Commands::RunTry(const std::string& spec_path, const std::map<std::string, std::string>& set,
                     const std::string& patch_commit, const std::string& patch_path,
                     OutputFormat format, const std::string& html_path) {
  return cli::RunTry(*this, spec_path, set, patch_commit, patch_path, format, html_path);
}

absl::StatusOr<std::string> Commands::ReportHtml(int64_t matrix_id,
                                                 std::optional<int64_t> regression_id) {
  return cli::ReportHtml(*this, matrix_id, regression_id);
}

}  // namespace farm::cli
