// fio_spec: the argv of a real fio run, built from the validated FioSpec
// (lib/toolspec/fio_spec.h, the check the scheduler also runs at submit).
//
// Contract:
// - BuildFioArgv resolves the target against AllowedTargets (refusing with
//   PermissionDenied) and returns an argv for execve: never a shell string,
//   every value already checked against a narrow grammar.
// - Pure apart from BuildFioArgv's stat/realpath of the target; it starts no
//   process. Thread-safe.
#ifndef AGENT_RUNNERS_FIO_SPEC_H_
#define AGENT_RUNNERS_FIO_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/runners/params.h"
#include "agent/runners/targets.h"
#include "lib/toolspec/fio_spec.h"

namespace farm::runners {

using ::farm::toolspec::FioAllowedParams;
using ::farm::toolspec::FioSpec;
using ::farm::toolspec::FioSpecFromParams;
using ::farm::toolspec::FioTargetKind;

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
