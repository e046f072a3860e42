// farm::agent host facts: what the agent's machine is (kernel release, CPUs,
// NUMA nodes, architecture) and which IOMMU mode its kernel runs in.
//
// The IOMMU mode is read so that the real-run runners (fio, iozone) can tag
// results with it: registered IOMMU units in /sys/class/iommu, the default
// domain type of each IOMMU group in /sys/kernel/iommu_groups/*/type and the
// kernel command line, which iommu_mode::ReadRunningMode turns into a mode.
// All paths are read under a root directory so tests can feed fake trees.
//
// Thread-safety: reentrant. No ownership.
#ifndef AGENT_HOST_FACTS_H_
#define AGENT_HOST_FACTS_H_

#include <string>

#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// Reads everything under `root` ("/" on a real host).
iommufarm::v1::HostFacts DetectHostFacts(const std::string& root = "/");

}  // namespace farm::agent

#endif  // AGENT_HOST_FACTS_H_
