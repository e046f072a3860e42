// farm::agent executor factory: capability names from --capabilities to
// Executor instances.
//
// "emulator" runs the IOMMU emulation core in-process. "fio" and "iozone"
// (real runs on the host) are routed here once their runners exist; until
// then they are refused with UNIMPLEMENTED so an agent never advertises work
// it cannot do.
//
// Thread-safety: reentrant. Ownership: the caller owns the executors.
#ifndef AGENT_EXECUTORS_EXECUTORS_H_
#define AGENT_EXECUTORS_EXECUTORS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/executors/executor.h"

namespace farm::agent {

struct ExecutorConfig {
  std::vector<std::string> allow_dirs;     // --allow-dir (real runs)
  std::vector<std::string> allow_devices;  // --allow-device DEV[:rw]
  std::string emu_catalog;                 // --emu-catalog FILE ("" = shipped)
};

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> MakeExecutors(
    const std::vector<std::string>& capabilities, const ExecutorConfig& config);

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_EXECUTORS_H_
