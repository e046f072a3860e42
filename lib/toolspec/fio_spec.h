// lib/toolspec/fio_spec: the typed, validated fio job an agent is willing to
// run, built from a job's workload params. The scheduler runs the same check
// at submit, so a job the agent would refuse is never queued; the agent
// builds the argv from it (agent/runners/fio_spec.h, BuildFioArgv).
//
// Contract:
// - FioSpecFromParams accepts only these params: rw, bs, iodepth, numjobs,
//   size, runtime, ramp_time, time_based, rwmixread, ioengine (psync, libaio,
//   io_uring), direct, cpus_allowed, and at most one target: filename (a
//   file, or a /dev/ path for a device), directory. Anything else is refused
//   with InvalidArgument saying why; dangerous options (exec_prerun,
//   exec_postrun, ioengine external/exec, trim modes, allow_mounted_write,
//   log / output paths, triggers) get a message naming the danger.
// - Pure functions (no I/O, the target is only resolved by the agent);
//   thread-safe.
#ifndef LIB_TOOLSPEC_FIO_SPEC_H_
#define LIB_TOOLSPEC_FIO_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/toolspec/params.h"

namespace farm::toolspec {

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
  // Bytes fio lays out on a file system: size for one file (every job shares
  // it), size x numjobs in a directory (a file per job), 0 on a device.
  std::uint64_t FilesystemFootprint() const;
};

// The param keys FioSpecFromParams accepts, for --help and error messages.
const std::vector<std::string>& FioAllowedParams();

absl::StatusOr<FioSpec> FioSpecFromParams(const Params& params);

}  // namespace farm::toolspec

#endif  // LIB_TOOLSPEC_FIO_SPEC_H_
