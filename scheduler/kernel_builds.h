// kernel_builds: at submit, which kernels a real matrix's jobs must have
// built first, and which jobs nothing can run.
//
// A real job (fio, iozone) runs on an agent offering its kernel
// (proto/kernel_offers.h). When no registered agent (connected or not)
// offers it, the job's kernel is built: for a vm platform, by an agent whose
// `kbuild` capability builds the job's catalog for the platform's
// architecture, into a kernel store the vm agents read; one build job per
// (catalog, commit, architecture, build config), shared by every job and
// matrix that needs it, so each commit is built once per config. The build
// config (proto/kernel_config.h) is the matrix's `kernel_config`, with the
// dma-map-bench fragment when a dma-map-bench job boots the kernel.
//
// On a host platform (any other platform name: a lab's hosts, which kexec
// into the job's kernel) a kernel is built only for a matrix with a kernel
// config (the spec's, or the one the lab hosts file names for the
// platform's hosts: LabKernelConfig), for the architecture the platform's
// registered agents run, as a host build (HostBuildConfigId: the host
// fragment instead of the guests'), by a build agent: a kexec host builds
// nothing itself (farm-agent refuses kbuild with --kexec-state-dir), so the
// build never runs on the host under test. With the default config a host
// platform's kernel is the host's own and is not built.
//
// A job whose kernel nobody offers and nobody can build is named in a
// submit warning saying why; the reaper fails it after
// SchedulerConfig::unrunnable_wait unless an agent that can run it
// registers.
//
// Pure functions of their arguments; thread-safe.
#ifndef SCHEDULER_KERNEL_BUILDS_H_
#define SCHEDULER_KERNEL_BUILDS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "proto/kernel_offers.h"

namespace farm::scheduler {

struct KernelPlan {
  std::vector<proto::BuildKey> builds;  // sorted, unique
  // Per job: the index in `builds` of the build it waits for, or -1.
  std::vector<int> waits;
  // What nobody can run, one line per (commit, platform, mode, executor).
  std::vector<std::string> unrunnable;
};

// The plan for `jobs` (one matrix's) given the registered `agents`.
KernelPlan PlanKernels(const std::vector<iommufarm::v1::Job>& jobs,
                       const std::vector<iommufarm::v1::Agent>& agents);

// The kernel config the lab hosts file names for a real matrix on
// `platforms` that names none itself: the config of a host in
// `lab_configs` (by agent name, farm-scheduler --lab-hosts) whose agent's
// platform (its "platform" label, else its name; an agent not registered
// yet answers to its name) is one of `platforms`. nullopt when no such host
// names one. InvalidArgument, naming the field "platform", when two such
// hosts name different configs or the matrix has a vm platform too (the
// lab's config would be built for the guests).
struct LabConfig {
  iommufarm::v1::KernelConfig config;
  std::string id;        // proto::KernelConfigId(config)
  std::string agent;     // the host whose entry names it
  std::string platform;  // that host's platform
};
absl::StatusOr<std::optional<LabConfig>> LabKernelConfig(
    const std::vector<std::string>& platforms, const std::vector<iommufarm::v1::Agent>& agents,
    const std::map<std::string, iommufarm::v1::KernelConfig>& lab_configs);

// The build job of `key`: platform = architecture, workload "kbuild", kind
// BUILD at the build band's priority, `commit_index` its catalog position;
// a try commit's job (proto/try_commit.h) carries `patch` in its workload
// param `patch`; the key's config id goes in param kernel_config and a
// `config` other than the default in kernel_config_text.
iommufarm::v1::Job MakeBuildJob(const proto::BuildKey& key, int commit_index, int max_attempts,
                                const std::string& patch = "",
                                const iommufarm::v1::KernelConfig& config = {});

// The submit warnings of `plan.unrunnable`: at most `max_lines` of them,
// then how many more, each saying when such jobs fail.
std::vector<std::string> UnrunnableWarnings(const KernelPlan& plan, absl::Duration wait,
                                            int max_lines = 20);

}  // namespace farm::scheduler

#endif  // SCHEDULER_KERNEL_BUILDS_H_
