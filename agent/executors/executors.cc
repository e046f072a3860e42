#include "agent/executors/executors.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/executors/emulator_executor.h"
#include "agent/executors/real_executors.h"
#include "proto/names.h"

namespace farm::agent {
namespace pb = ::iommufarm::v1;

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> MakeExecutors(
    const std::vector<std::string>& capabilities, const ExecutorConfig& config) {
  std::vector<std::unique_ptr<Executor>> out;
  std::set<std::string> seen;
  if (capabilities.empty()) {
    return absl::InvalidArgumentError("no capabilities given");
  }
  for (const std::string& cap : capabilities) {
    if (!seen.insert(cap).second) continue;
    const pb::Executor kind = proto::ExecutorFromName(cap);
    if (kind == pb::EXECUTOR_EMULATOR) {
      out.push_back(std::make_unique<EmulatorExecutor>(config.emu_catalog));
    } else if (kind == pb::EXECUTOR_FIO || kind == pb::EXECUTOR_IOZONE) {
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
          absl::StrCat("unknown capability '", cap,
                       "' (known: ", absl::StrJoin(proto::ExecutorNames(), ", "), ")"));
    }
  }
  return out;
}

}  // namespace farm::agent
