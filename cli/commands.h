// farm::cli::Commands: farmctl's connection to one farm, shared by every
// command noun (cli/matrix.h, cli/results.h, cli/catalog.h, ...).
//
// It holds the client options (server address, TLS, token), the channel and
// the service stubs, and the streams a command writes to: its output to
// `out`, diagnostics and progress to `err`. A noun's Run* functions take it
// and return the process exit status (0 ok, 1 a server or I/O error, which
// Fail prints as "farmctl: <what>: <CODE>: <message>"). The calls several
// nouns make (SubmitSpec, WaitForMatrix, FetchResults, ...) are methods here,
// public so tests and scripts can drive a farm with farmctl's own client
// code; so are the commands those tests drive, each the noun's Run* function.
//
// Thread-safety: one Commands per thread, except that the stubs and the
// calls that use only them (FetchResults, ListAllRegressions, ReportHtml)
// may be shared. Ownership: borrows the streams, which must outlive it.
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
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

// What to check when a call fails UNAVAILABLE with gRPC's `message`: the
// TLS setup when the handshake failed or the server closed the connection
// during it (a plaintext client of a TLS farm, a client certificate the farm
// does not trust), else whether a scheduler listens at options.server.
std::string UnavailableHint(absl::string_view message, const client::ClientOptions& options);

// A file named on the command line, standard input for "-"; the error
// quotes the name as given.
absl::StatusOr<std::string> ReadInputFile(const std::string& path);

class Commands {
 public:
  Commands(client::ClientOptions options, std::ostream& out, std::ostream& err);
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  const client::ClientOptions& options() const { return options_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  pb::JobService::Stub& jobs() { return *jobs_; }
  pb::AnalysisService::Stub& analysis() { return *analysis_; }
  pb::AccessService::Stub& access() { return *access_; }
  pb::RetentionService::Stub& retention() { return *retention_; }
  // The context of a unary call: the token, and farmctl's deadline for one.
  std::unique_ptr<grpc::ClientContext> UnaryContext() const;

  // Prints "farmctl: <what>: <CODE>: <message>" (with UnavailableHint for
  // UNAVAILABLE) to `err`; returns 1, the exit status.
  int Fail(const std::string& what, const absl::Status& status);
  // Prints progress lines to `err`: rewritten in place on a terminal,
  // otherwise at most one line every few seconds (plus the last).
  void PrintProgress(const pb::MatrixProgress& progress);

  // Submits spec text. Retries transient failures (lib/client/retry.h) a few
  // times with one idempotency key, so a retried submit never creates a
  // second matrix.
  absl::StatusOr<pb::SubmitMatrixResponse> SubmitSpec(const std::string& yaml, bool dry_run);
  // Follows WatchMatrix until the matrix is done, calling on_progress for each
  // update; reconnects while the server is away, or refuses the stream at a
  // cap (RESOURCE_EXHAUSTED, returned with the server's reason), for up to
  // `unavailable_limit` in a row. Returns the final progress.
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

  // The commands tests drive through this object; each is its noun's Run*
  // function (RunSubmit: cli/matrix.h; RunAgents: cli/agents.h;
  // RunCatalog*: cli/catalog.h; RunKernelsCatalog: cli/kernels.h; RunTry:
  // cli/compare.h; ReportHtml: cli/report_command.h). A new command needs
  // no line here.
  int RunSubmit(const std::string& path, bool wait, bool dry_run);
  int RunAgents(OutputFormat format);
  int RunCatalogMeasure(int64_t matrix_id, const std::string& reference, const std::string& name,
                        const std::string& mode, bool print_only);
  int RunCatalogImportGit(const std::string& repo, const std::string& range,
                          const std::string& catalog);
  int RunKernelsCatalog(const std::string& store, const std::string& catalog);
  int RunTry(const std::string& spec_path, const std::map<std::string, std::string>& set,
             const std::string& patch_commit, const std::string& patch_path, OutputFormat format,
             const std::string& html_path = "");
  absl::StatusOr<std::string> ReportHtml(int64_t matrix_id, std::optional<int64_t> regression_id);

 private:
  client::ClientOptions options_;
  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::AnalysisService::Stub> analysis_;
  std::unique_ptr<pb::AccessService::Stub> access_;
  std::unique_ptr<pb::RetentionService::Stub> retention_;
  bool err_is_tty_ = false;
  absl::Time last_progress_print_ = absl::InfinitePast();
  std::string last_progress_line_;
};

}  // namespace farm::cli

#endif  // CLI_COMMANDS_H_
