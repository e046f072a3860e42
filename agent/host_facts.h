// farm::agent host facts: what the agent's machine is (kernel release, CPUs,
// NUMA nodes, architecture) and which IOMMU mode its kernel runs in.
//
// The IOMMU mode is detected in one place so that the real-run runners (fio,
// iozone) can tag results with it and later extend it: registered IOMMU units
// in /sys/class/iommu, the default domain type of each IOMMU group in
// /sys/kernel/iommu_groups/*/type, and the kernel command line.
// All paths are read under a root directory so tests can feed fake trees.
//
// Thread-safety: reentrant. No ownership.
#ifndef AGENT_HOST_FACTS_H_
#define AGENT_HOST_FACTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// What the kernel command line says about the IOMMU. mode is UNSPECIFIED when
// the command line leaves it to the kernel's default; detail lists the
// parameters that decided it ("intel_iommu=on iommu.strict=1").
struct CmdlineIommu {
  iommufarm::v1::IommuMode mode = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
  std::string detail;
};

// Later parameters override earlier ones, as the kernel applies them in order.
// Recognised: intel_iommu=, amd_iommu=, iommu=off|pt|nopt|strict,
// iommu.passthrough=, iommu.strict=.
CmdlineIommu ParseIommuCmdline(std::string_view cmdline);

// Maps IOMMU group default-domain types ("DMA", "DMA-FQ", "identity",
// "blocked") to a mode: the most common translated type wins; UNSPECIFIED when
// the list is empty.
iommufarm::v1::IommuMode ModeFromGroupTypes(const std::vector<std::string>& types);

// Reads everything under `root` ("/" on a real host).
iommufarm::v1::HostFacts DetectHostFacts(const std::string& root = "/");

}  // namespace farm::agent

#endif  // AGENT_HOST_FACTS_H_
