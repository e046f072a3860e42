// fio_spec: the typed, validated fio job an agent is willing to run, built
// from a job's workload params, and the argv built from it.
//
// Contract:
// - FioSpecFromParams accepts only these params: rw, bs, iodepth, numjobs,
//   size, runtime, ramp_time, time_based, rwmixread, ioengine (psync, libaio,
//   io_uring), direct, cpus_allowed, and at most one target: filename (a
//   file, or a /dev/ path for a device), directory. Anything else is refused
//   with InvalidArgument saying why; dangerous options (exec_prerun,
//   exec_postrun, ioengine external/exec, trim modes, allow_mounted_write,
//   log / output paths, triggers) get a message naming the danger.
// - BuildFioArgv resolves the target against AllowedTargets (refusing with
//   PermissionDenied) and returns an argv for execve: never a shell string,
//   every value already checked against a narrow grammar.
// - Both are pure apart from BuildFioArgv's stat/realpath of the target;
//   neither starts a process. Thread-safe.
#ifndef AGENT_RUNNERS_FIO_SPEC_H_
#define AGENT_RUNNERS_FIO_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/runners/params.h"
#include "agent/runners/targets.h"

namespace farm::runners {

enum class FioTargetKind {
  kDefaultDirectory,  // no target param: the agent's first allowed directory
  kDirectory,         // directory=...
  kFile,              // filename=... (not under /dev/)
  kDevice,            // filename=/dev/...
};

struct FioSpec {
  std::string rw = "read";  // read write randread randwrite rw readwrite randrw
  std::uint64_t bs_bytes = 4096;
  int iodepth = 1;
  int numjobs = 1;
  std::uint64_t size_bytes = 0;  // 0: unset (devices: whole device)
  int runtime_s = 0;             // 0: unset (run until size is done)
  int ramp_time_s = 0;
  bool time_based = false;
  int rwmixread = -1;  // -1: unset
  std::string ioengine = "psync";
  bool direct = false;
  std::string cpus_allowed;  // empty: unset
  FioTargetKind target_kind = FioTargetKind::kDefaultDirectory;
  std::string target;  // as requested; resolved by BuildFioArgv

  bool writes() const;  // rw mode writes to the target
};

// The param keys FioSpecFromParams accepts, for --help and error messages.
const std::vector<std::string>& FioAllowedParams();

absl::StatusOr<FioSpec> FioSpecFromParams(const Params& params);

// argv[0] is `fio` (a path or a name); ends with --output-format=json.
// `job_name` ([A-Za-z0-9_.-]+) names fio's files in directory targets; give
// concurrent runs distinct names so they never share files.
absl::StatusOr<std::vector<std::string>> BuildFioArgv(const FioSpec& spec,
                                                      const AllowedTargets& allowed,
                                                      const std::string& fio = "fio",
                                                      const std::string& job_name = "farm");

// The argv of `spec` run inside a VM guest on `device`, the guest's own
// scratch NVMe: no host target is resolved. InvalidArgument when the spec
// names a target other than `device` (a host path means nothing in the
// guest). Job name "farm".
absl::StatusOr<std::vector<std::string>> BuildFioGuestArgv(const FioSpec& spec,
                                                           const std::string& device,
                                                           const std::string& fio = "fio");

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_FIO_SPEC_H_
