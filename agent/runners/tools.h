// tools: detects the installed fio / iozone so the agent advertises the
// `fio` / `iozone` capability (with the tool's version) only when it can
// really run it.
//
// Contract: each call runs the tool once (`fio --version`, `iozone -v`)
// through RunProcess with a short timeout; no caching, thread-safe.
// NotFound when the executable is absent, Internal when it runs but its
// version cannot be read.
#ifndef AGENT_RUNNERS_TOOLS_H_
#define AGENT_RUNNERS_TOOLS_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace farm::runners {

struct ToolInfo {
  std::string path;     // absolute path that will be exec'd
  std::string version;  // "fio-3.33", "3.489"
};

// `fio` may be a name (looked up on the default PATH) or a path.
absl::StatusOr<ToolInfo> DetectFio(const std::string& fio = "fio");
absl::StatusOr<ToolInfo> DetectIozone(const std::string& iozone = "iozone");

// Pure helpers, exposed for tests: version from `fio --version` output
// ("fio-3.33\n") and from `iozone -v` output ("Version $Revision: 3.489 $").
absl::StatusOr<std::string> ParseFioVersion(absl::string_view output);
absl::StatusOr<std::string> ParseIozoneVersion(absl::string_view output);

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_TOOLS_H_
