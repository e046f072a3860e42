// lib/toolspec/iozone_spec: the typed, validated iozone run an agent is
// willing to do, built from a job's workload params. The scheduler runs the
// same check at submit; the agent builds the command from it
// (agent/runners/iozone_spec.h, BuildIozoneCommand).
//
// Contract:
// - IozoneSpecFromParams accepts only: tests (comma-joined list of write,
//   rewrite, read, reread, randread, randwrite), size, record, threads,
//   direct (-I, O_DIRECT), machine_info (-M, iozone reports `uname -a`), and
//   directory (where the -F files go; default: the agent's first allowed
//   directory). Anything else is refused with InvalidArgument saying why.
// - Pure functions, thread-safe.
#ifndef LIB_TOOLSPEC_IOZONE_SPEC_H_
#define LIB_TOOLSPEC_IOZONE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/toolspec/params.h"

namespace farm::toolspec {

struct IozoneSpec {
  std::vector<std::string> tests = {"write", "read"};
  std::uint64_t size_bytes = 0;           // required (-s), per process
  std::uint64_t record_bytes = 64 << 10;  // -r
  int threads = 1;                        // -t
  bool direct = false;                    // -I
  bool machine_info = false;              // -M
  std::string directory;                  // empty: the first allowed directory
  // Bytes iozone lays out: a file of size per process.
  std::uint64_t FilesystemFootprint() const {
    return size_bytes * static_cast<std::uint64_t>(threads);
  }
};

const std::vector<std::string>& IozoneAllowedParams();

absl::StatusOr<IozoneSpec> IozoneSpecFromParams(const Params& params);

}  // namespace farm::toolspec

#endif  // LIB_TOOLSPEC_IOZONE_SPEC_H_
