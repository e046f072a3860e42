// iozone_spec: the command of a real iozone run, built from the validated
// IozoneSpec (lib/toolspec/iozone_spec.h, the check the scheduler also runs
// at submit).
//
// Contract:
// - The run is always in throughput mode (-t N -F file...) so every file
//   iozone touches is named by the agent, inside the allowed directory.
// - Tests map to iozone's -i groups: write/rewrite -> -i0, read/reread ->
//   -i1, randread/randwrite -> -i2; -i0 is always included because iozone's
//   other tests read the files it creates.
// - Pure apart from BuildIozoneCommand's realpath of the directory;
//   thread-safe.
#ifndef AGENT_RUNNERS_IOZONE_SPEC_H_
#define AGENT_RUNNERS_IOZONE_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/runners/params.h"
#include "agent/runners/targets.h"
#include "lib/toolspec/iozone_spec.h"

namespace farm::runners {

using ::farm::toolspec::IozoneAllowedParams;
using ::farm::toolspec::IozoneSpec;
using ::farm::toolspec::IozoneSpecFromParams;

// The argv (argv[0] = `iozone`) and the directory to run in (the tool's
// cwd, so nothing lands elsewhere). `file_prefix` ([A-Za-z0-9_.-]+) names
// the -F files; give concurrent runs distinct prefixes.
struct IozoneCommand {
  std::vector<std::string> argv;
  std::string directory;
  std::vector<std::string> files;  // the -F files, to remove after the run
};
absl::StatusOr<IozoneCommand> BuildIozoneCommand(const IozoneSpec& spec,
                                                 const AllowedTargets& allowed,
                                                 const std::string& iozone = "iozone",
                                                 const std::string& file_prefix = "iozone.farm");

// The argv of the same run inside a VM guest (agent/kernels/vm_provider.h),
// whose only place for files is `directory` (the guest's scratch file
// system): the -F files are <directory>/<file_prefix>.<i>. InvalidArgument
// when the spec names another directory.
absl::StatusOr<std::vector<std::string>> BuildIozoneGuestArgv(
    const IozoneSpec& spec, const std::string& directory, const std::string& iozone = "iozone",
    const std::string& file_prefix = "iozone.farm");

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_IOZONE_SPEC_H_
