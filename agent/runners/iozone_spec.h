// iozone_spec: the typed, validated iozone run an agent is willing to do,
// built from a job's workload params, and the argv built from it.
//
// Contract:
// - IozoneSpecFromParams accepts only: tests (comma-joined list of write,
//   rewrite, read, reread, randread, randwrite), size, record, threads,
//   direct (-I, O_DIRECT), machine_info (-M, iozone reports `uname -a`), and
//   directory (where the -F files go; default: the agent's first allowed
//   directory). Anything else is refused with InvalidArgument saying why.
// - The run is always in throughput mode (-t N -F file...) so every file
//   iozone touches is named by the agent, inside the allowed directory.
// - Tests map to iozone's -i groups: write/rewrite -> -i0, read/reread ->
//   -i1, randread/randwrite -> -i2; -i0 is always included because iozone's
//   other tests read the files it creates.
// - Pure apart from BuildIozoneArgv's realpath of the directory; thread-safe.
#ifndef AGENT_RUNNERS_IOZONE_SPEC_H_
#define AGENT_RUNNERS_IOZONE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/runners/params.h"
#include "agent/runners/targets.h"

namespace farm::runners {

struct IozoneSpec {
  std::vector<std::string> tests = {"write", "read"};
  std::uint64_t size_bytes = 0;           // required (-s), per process
  std::uint64_t record_bytes = 64 << 10;  // -r
  int threads = 1;                        // -t
  bool direct = false;                    // -I
  bool machine_info = false;              // -M
  std::string directory;                  // empty: the first allowed directory
};

const std::vector<std::string>& IozoneAllowedParams();

absl::StatusOr<IozoneSpec> IozoneSpecFromParams(const Params& params);

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

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_IOZONE_SPEC_H_
