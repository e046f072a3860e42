#include "agent/runners/tools.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/process/process.h"

namespace farm::runners {
namespace {

absl::StatusOr<ToolInfo> Detect(const std::string& tool, const char* flag,
                                absl::StatusOr<std::string> (*parse)(absl::string_view)) {
  absl::StatusOr<std::string> path = process::ResolveExecutable(tool);
  if (!path.ok()) return path.status();
  process::ProcessOptions opts;
  opts.argv = {*path, flag};
  opts.timeout = absl::Seconds(10);
  opts.max_stdout = 64 << 10;
  absl::StatusOr<process::ProcessResult> run = process::RunProcess(opts);
  if (!run.ok()) return run.status();
  // iozone -v exits 0; be lenient about the exit code and trust the text.
  absl::StatusOr<std::string> version = parse(run->stdout_data + run->stderr_data);
  if (!version.ok()) {
    return absl::InternalError(
        absl::StrCat(*path, " ", flag, " (", run->Describe(), "): ", version.status().message()));
  }
  return ToolInfo{*path, *version};
}

}  // namespace

absl::StatusOr<std::string> ParseFioVersion(absl::string_view output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, "fio-")) return std::string(line);
  }
  return absl::InternalError("no \"fio-<version>\" line in fio --version");
}

absl::StatusOr<std::string> ParseIozoneVersion(absl::string_view output) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "Version $Revision:")) {
      line = absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripAsciiWhitespace(line), "$"));
      if (!line.empty()) return std::string(line);
    }
  }
  return absl::InternalError("no \"Version $Revision: X $\" line in iozone -v");
}

absl::StatusOr<ToolInfo> DetectFio(const std::string& fio) {
  return Detect(fio, "--version", &ParseFioVersion);
}

absl::StatusOr<ToolInfo> DetectIozone(const std::string& iozone) {
  return Detect(iozone, "-v", &ParseIozoneVersion);
}

}  // namespace farm::runners
