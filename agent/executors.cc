#include "agent/executors.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace farm::agent {

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> MakeExecutors(
    const std::vector<std::string>& capabilities, const ExecutorConfig& config) {
  std::vector<std::unique_ptr<Executor>> out;
  std::set<std::string> seen;
  if (capabilities.empty()) {
    return absl::InvalidArgumentError("no capabilities given");
  }
  for (const std::string& cap : capabilities) {
    if (!seen.insert(cap).second) continue;
    if (cap == "emulator") {
      return absl::UnimplementedError(
          "emulator: the emulation core's run API is not linked into this build yet");
    } else if (cap == "fio" || cap == "iozone") {
      return absl::UnimplementedError(
          absl::StrCat(cap, ": real runs are not built into this farm-agent yet"));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown capability '", cap, "' (known: emulator, fio, iozone)"));
    }
  }
  (void)config;
  return out;
}

}  // namespace farm::agent
