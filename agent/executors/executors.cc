#include "agent/executors/executors.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/executors/emulator_executor.h"
#include "agent/executors/real_executors.h"

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
      out.push_back(std::make_unique<EmulatorExecutor>(config.emu_catalog));
    } else if (cap == "fio" || cap == "iozone") {
      // Real runs (agent/runners): advertised only when the tool is installed.
      farm::runners::RealExecutorOptions real;
      real.allow_dirs = config.allow_dirs;
      real.allow_devices = config.allow_devices;
      auto executor = farm::runners::MakeRealExecutor(cap, real);
      if (executor.status().code() == absl::StatusCode::kNotFound) {
        std::fprintf(stderr, "farm-agent: %s; not advertising it\n",
                     std::string(executor.status().message()).c_str());
        continue;
      }
      if (!executor.ok()) return executor.status();
      out.push_back(*std::move(executor));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown capability '", cap, "' (known: emulator, fio, iozone)"));
    }
  }
  return out;
}

}  // namespace farm::agent
