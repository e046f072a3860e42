// farm::cli::Commands: farmctl's subcommands as plain methods.
//
// Each Run* method performs one subcommand against a farm server, writes its
// output to `out`, diagnostics and progress to `err`, and returns the process
// exit status (0 ok, 1 a server or I/O error, which is printed as
// "farmctl: <what>: <CODE>: <message>"). main.cc only parses flags and calls
// these. The lower-level calls (SubmitSpec, WaitForMatrix, FetchResults) are
// public so tests and scripts can drive a farm with farmctl's own client code.
//
// Thread-safety: one Commands per thread. Ownership: borrows the streams,
// which must outlive it.
#ifndef CLI_COMMANDS_H_
#define CLI_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cli/format.h"
#include "cli/report.h"
#include "cli/report_server.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/kbuild/kernel_builder.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

// What to check when a call fails UNAVAILABLE with gRPC's `message`: the
// TLS setup when the handshake failed or the server closed the connection
// during it (a plaintext client of a TLS farm, a client certificate the farm
// does not trust), else whether a scheduler listens at options.server.
std::string UnavailableHint(absl::string_view message, const client::ClientOptions& options);

class Commands {
 public:
  Commands(client::ClientOptions options, std::ostream& out, std::ostream& err);
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  int RunSubmit(const std::string& path, bool wait, bool dry_run);
  int RunStatus(std::optional<int64_t> matrix_id, OutputFormat format);
  int RunWatch(int64_t matrix_id);
  int RunCancel(int64_t matrix_id, const std::string& reason);
  // With raw and kJson, each result's raw output comes through
  // GetRawOutput, one result at a time.
  int RunResults(int64_t matrix_id, OutputFormat format, bool raw);
  // Writes one result's raw output (attempt 0: the job's latest result) to
  // `out` verbatim, chunk by chunk as it arrives.
  int RunRawOutput(int64_t job_id, int attempt);
  int RunAgents(OutputFormat format);
  int RunCatalogList(OutputFormat format);
  int RunCatalogShow(const std::string& name, bool resolve, OutputFormat format);
  int RunCatalogLoad(const std::string& path, bool replace);
  // A measured catalog (cli/measured_costs.h) from the `mode` runs of a real
  // dma-map-bench matrix, the deltas over `reference`, loaded as `name`
  // (replacing one of that name; "" = "<catalog>-measured"), or only printed.
  int RunCatalogMeasure(int64_t matrix_id, const std::string& reference, const std::string& name,
                        const std::string& mode, bool print_only);
  int RunCatalogImportGit(const std::string& repo, const std::string& range,
                          const std::string& catalog);
  // Kernel stores (lib/kstore). import and list work on the local store
  // only; catalog adds the store's commits to a catalog on the server.
  int RunKernelsImport(const std::string& store, const std::string& deb, const std::string& commit,
                       bool replace);
  int RunKernelsList(const std::string& store, OutputFormat format);
  int RunKernelsCatalog(const std::string& store, const std::string& catalog);
  // Builds one commit of a kernel tree into the local store (lib/kbuild),
  // without a farm; the build's whole output goes to `log_file` when given.
  int RunKernelsBuild(const kbuild::BuildRequest& request, const std::string& log_file);
  int RunRegressions(bool all, OutputFormat format);
  int RunRegressionShow(int64_t regression_id, OutputFormat format);
  // `state` is a triage state (ParseRegressionMark) or kReopen.
  int RunRegressionMark(int64_t regression_id, const std::string& state, const std::string& note);
  static constexpr const char* kReopen = "reopen";
  int RunBisect(int64_t id, bool id_is_bisect, OutputFormat format);
  // Side A: matrix_a (at commit_a when given); side B: matrix_b, or matrix_a
  // again when 0 (at commit_b when given). cli/compare.h.
  // `html_path` not empty: also writes FormatCompareHtml there.
  int RunCompare(int64_t matrix_a, int64_t matrix_b, const std::string& commit_a,
                 const std::string& commit_b, OutputFormat format,
                 const std::string& html_path = "");
  // A try job (cli/compare.h PlanTry): submits, waits, answers with the
  // comparison of base and patch.
  int RunTry(const std::string& spec_path, const std::map<std::string, std::string>& set,
             const std::string& patch_commit, const std::string& patch_path, OutputFormat format);
  // Writes the HTML report (cli/report.h) of a matrix, or of one regression
  // when regression_id is set (matrix_id is then ignored), to output_path
  // ("-": stdout).
  int RunReport(int64_t matrix_id, std::optional<int64_t> regression_id,
                const std::string& output_path);
  // Serves the reports over HTTP(S) (cli/report_server.h) until the process
  // is stopped (it holds no state: SIGTERM's default action is the stop).
  int RunReportServe(const std::string& listen, const ReportServer::Tls& tls);
  // The HTML of that report (BuildReport, RenderReportHtml over
  // GatherReport). Thread-safe.
  absl::StatusOr<std::string> ReportHtml(int64_t matrix_id, std::optional<int64_t> regression_id);
  // What a report shows, fetched through the API. Thread-safe (the stubs
  // are), so the report server calls it from its workers.
  absl::StatusOr<ReportSources> GatherReport(int64_t matrix_id,
                                             std::optional<int64_t> regression_id);
  // API tokens (admin): create prints the secret, once, alone on stdout.
  int RunTokenCreate(const std::string& name, const std::string& role);
  int RunTokenList(OutputFormat format);
  int RunTokenRevoke(const std::string& name);

  // Submits spec text. Retries transient failures (lib/client/retry.h) a few
  // times with one idempotency key, so a retried submit never creates a
  // second matrix.
  absl::StatusOr<pb::SubmitMatrixResponse> SubmitSpec(const std::string& yaml, bool dry_run);
  // Follows WatchMatrix until the matrix is done, calling on_progress for each
  // update; reconnects while the server is away for up to `unavailable_limit`
  // in a row. Returns the final progress.
  absl::StatusOr<pb::MatrixProgress> WaitForMatrix(
      int64_t matrix_id, const std::function<void(const pb::MatrixProgress&)>& on_progress,
      absl::Duration unavailable_limit = absl::Minutes(2));
  absl::StatusOr<std::vector<pb::Result>> FetchResults(int64_t matrix_id, bool include_raw);
  // GetResults, calling on_result for each result as it arrives (nothing is
  // kept: raw outputs of a large matrix do not pile up here).
  absl::Status StreamResults(int64_t matrix_id, bool include_raw,
                             const std::function<void(const pb::Result&)>& on_result);
  // GetRawOutput, calling on_chunk for each chunk as it arrives; fails if
  // the chunks do not add up to the output's size.
  absl::Status StreamRawOutput(int64_t job_id, int attempt,
                               const std::function<void(const pb::RawOutputChunk&)>& on_chunk);
  // Every page of ListAgents / ListRegressions.
  absl::StatusOr<std::vector<pb::Agent>> ListAllAgents();
  absl::StatusOr<std::vector<pb::Regression>> ListAllRegressions(
      pb::ListRegressionsRequest request);

 private:
  int Fail(const std::string& what, const absl::Status& status);
  // Prints progress lines: rewritten in place on a terminal, otherwise at
  // most one line every few seconds (plus the last).
  void PrintProgress(const pb::MatrixProgress& progress);
  int FollowMatrix(int64_t matrix_id);

  client::ClientOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AnalysisService::Stub> analysis_;
  std::unique_ptr<pb::AccessService::Stub> access_;
  bool err_is_tty_ = false;
  absl::Time last_progress_print_ = absl::InfinitePast();
  std::string last_progress_line_;
};

}  // namespace farm::cli

#endif  // CLI_COMMANDS_H_
