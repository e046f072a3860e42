// farmctl's matrix commands: submit, status, watch, cancel. Their flags
// (AddMatrixCommands), what each does against a farm, and the matrix list and
// detail views.
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; the Format* functions are pure and reentrant.
#ifndef CLI_MATRIX_H_
#define CLI_MATRIX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddMatrixCommands(CLI::App& app, Subcommands* out);

// `yaml` (the spec file `spec_path`'s text; "-" for standard input) with
// the kernel config files it names read in: a `kernel_config` base that is a
// path (has a '/' or ends in .config) and each fragment given as a path,
// relative to the spec's directory (the working directory for "-"). The
// scheduler cannot read the submitter's files. InvalidArgument naming the
// field for a file that does not read or is empty; `yaml` itself when it
// names none (or does not map: the checks that follow say why).
absl::StatusOr<std::string> ReadKernelConfigFiles(const std::string& yaml,
                                                  const std::string& spec_path);

int RunSubmit(Commands& commands, const std::string& path, bool wait, bool dry_run);
int RunStatus(Commands& commands, std::optional<int64_t> matrix_id, OutputFormat format);
int RunWatch(Commands& commands, int64_t matrix_id);
int RunCancel(Commands& commands, int64_t matrix_id, const std::string& reason);

// The matrix list as RenderList renders it (cli/format.h).
std::string FormatMatrixList(const std::vector<pb::Matrix>& matrices,
                             OutputFormat format = OutputFormat::kTable);
std::string FormatMatrixDetail(const pb::Matrix& matrix);
// Matrix.failures, one line per group, each line opened by `indent`:
// "3 failed (first job 12): kernel build 7 failed: ...", the further lines
// of a reason (a lab host's console tail) under it, indented. Control
// characters are shown escaped. "" without any.
std::string FormatFailures(const pb::Matrix& matrix, const std::string& indent);
// The kernel builds running for the matrix (Matrix.building), a line each
// (FormatBuildProgress) after `indent`; "" when none.
std::string FormatBuilding(const pb::Matrix& matrix, const std::string& indent);
// FormatFailures of the matrix as GetMatrix returns it now; "" when it has
// none or cannot be read (the caller is already reporting a failure).
std::string FetchFailures(Commands& commands, int64_t matrix_id, const std::string& indent);

}  // namespace farm::cli

#endif  // CLI_MATRIX_H_
