// farm::agent host facts: what the agent's machine is (kernel release, CPUs,
// NUMA nodes, architecture) and which IOMMU mode its kernel runs in.
//
// The IOMMU mode is read so that the real-run runners (fio, iozone) can tag
// results with it: registered IOMMU units in /sys/class/iommu, the default
// domain type of each IOMMU group in /sys/kernel/iommu_groups/*/type and the
// kernel command line, which iommu_mode::ReadRunningMode turns into a mode.
// Measurement hygiene (governor, turbo, SMT, the CPU and memory binding)
// is recorded with every result, so figures measured otherwise never share
// a series (lib/storage/analyzer_rows.h HostTiming). All paths are read
// under a root directory so tests can feed fake trees.
//
// Thread-safety: reentrant. No ownership.
#ifndef AGENT_HOST_FACTS_H_
#define AGENT_HOST_FACTS_H_

#include <string>

#include "absl/status/status.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// Reads everything under `root` ("/" on a real host).
iommufarm::v1::HostFacts DetectHostFacts(const std::string& root = "/");

// The measurement hygiene under `root`: cpu0's cpufreq scaling_governor,
// turbo (intel_pstate/no_turbo, else cpufreq/boost), SMT (smt/active) and
// the process's Cpus_allowed_list / Mems_allowed_list (/proc/self/status).
iommufarm::v1::Hygiene DetectHygiene(const std::string& root = "/");

// Writes `governor` to every CPU's cpufreq scaling_governor under `root`;
// FailedPrecondition naming the first CPU that refused (not root, a
// governor the driver does not offer: its scaling_available_governors),
// NotFound when the host has no cpufreq.
absl::Status SetGovernor(const std::string& governor, const std::string& root = "/");

// Turns turbo on or off: intel_pstate/no_turbo, else cpufreq/boost (the
// file DetectHygiene reads). FailedPrecondition when the write is refused
// or does not stick, NotFound when the host has neither file.
absl::Status SetTurbo(bool on, const std::string& root = "/");

// Turns SMT on or off through smt/control (kernel/cpu.c: "on", "off").
// FailedPrecondition when refused (not root, "forceoff", "notsupported"),
// NotFound when the kernel has no SMT control.
absl::Status SetSmt(bool on, const std::string& root = "/");

}  // namespace farm::agent

#endif  // AGENT_HOST_FACTS_H_
