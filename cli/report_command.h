// farmctl report: its flags (AddReportCommand) and what it does against a
// farm: gather a matrix's or a regression's sources through the API, render
// them (cli/report.h) to a file, or serve every report over HTTP
// (cli/report_server.h).
//
// Thread-safety: GatherReport and ReportHtml use only the Commands' stubs
// and options, so the report server calls them from its workers
// concurrently; RunReport and RunReportServe use their Commands
// (cli/commands.h), one per thread.
#ifndef CLI_REPORT_COMMAND_H_
#define CLI_REPORT_COMMAND_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/report.h"
#include "cli/report_mail.h"
#include "cli/report_server.h"

namespace farm::cli {

void AddReportCommand(CLI::App& app, Subcommands* out);

// Writes the HTML report of a matrix, or of one regression when
// regression_id is set (matrix_id is then ignored), to output_path ("-":
// stdout).
int RunReport(Commands& commands, int64_t matrix_id, std::optional<int64_t> regression_id,
              const std::string& output_path);
// Writes regression `regression_id` as a mail (cli/report_mail.h) to
// output_path ("-": stdout), dated now.
int RunReportMail(Commands& commands, int64_t regression_id, MailOptions options,
                  const std::string& output_path);
// Serves the reports over HTTP(S) until the process is stopped (it holds no
// state: SIGTERM's default action is the stop).
int RunReportServe(Commands& commands, const std::string& listen, const ReportServer::Tls& tls);
// The HTML of that report (BuildReport, RenderReportHtml over GatherReport).
absl::StatusOr<std::string> ReportHtml(Commands& commands, int64_t matrix_id,
                                       std::optional<int64_t> regression_id);
// What a report shows, fetched through the API.
absl::StatusOr<ReportSources> GatherReport(Commands& commands, int64_t matrix_id,
                                           std::optional<int64_t> regression_id);

}  // namespace farm::cli

#endif  // CLI_REPORT_COMMAND_H_
