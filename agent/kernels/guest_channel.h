// guest_channel: the framed output the guest's init (agent/kernels/guest/init)
// writes to the VM's farm serial port, and what it says.
//
// Frame grammar (one item a line; a serial tty may end lines with "\r\n" or
// "\r\r\n"):
//   @@farm-begin <section>
//   <body lines>
//   @@farm-end <section> <exit status>
//   ...
//   @@farm-done
// Sections the init writes: facts (key=value: release, machine, cmdline,
// iommu, and "env.<key>" for each IOMMU environment fact, whose keys readers
// that know none of them skip),
// iommu-groups ("<id> <type> <device>..."), nvme ("<name> <pci> <group|->
// <namespace>..."), tool (the tool's stdout), tool-stderr, monitor-before and
// monitor-after (agent/monitors/monitors.h's snapshot layout, taken just
// before and just after the tool).
//
// Contract: pure functions of their input (no I/O), thread-safe. Lines
// outside a frame are ignored; a frame that never ends, a mismatched end, or
// a section given twice is InvalidArgument. A missing `@@farm-done` is not an
// error here: GuestOutput::done says whether the guest got to the end.
#ifndef AGENT_KERNELS_GUEST_CHANNEL_H_
#define AGENT_KERNELS_GUEST_CHANNEL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/kernels/kernel_provider.h"

namespace farm::kernels {

struct GuestSection {
  std::string body;  // its lines, each ending in "\n", without their final "\r"s
  int exit = 0;
};

struct GuestOutput {
  std::map<std::string, GuestSection> sections;
  bool done = false;  // `@@farm-done` seen
};

absl::StatusOr<GuestOutput> ParseGuestChannel(absl::string_view text);

// The facts, iommu-groups and nvme sections as KernelFacts. InvalidArgument
// when the facts section is missing or a line is malformed. The env. lines
// become KernelFacts::iommu_environment (GuestIommuEnvironment); none leave
// it empty.
absl::StatusOr<KernelFacts> KernelFactsFromGuest(const GuestOutput& output);

// The IOMMU environment of a guest's facts section's "env.<key>=<value>"
// lines (empty values skipped), with what the guest cannot tell named as
// unavailable: SMMUv3 registers (IIDR never; features when the boot line
// was not in the log) for units of `iommus` (KernelFacts::iommu) driven by
// arm-smmu-v3, and ATS. Empty when there are no env. lines.
iommufarm::v1::IommuEnvironment GuestIommuEnvironment(absl::string_view facts_body,
                                                      absl::string_view iommus);

// The guest's monitors: the delta from its monitor-before to its
// monitor-after snapshot, parsed by the code that parses the host's
// (farm::monitors). NotFound when the guest wrote no snapshots (no tool
// ran); InvalidArgument when one does not parse.
absl::StatusOr<iommufarm::v1::Monitors> MonitorsFromGuest(const GuestOutput& output);

// The last `max_lines` lines of a console log (at most `max_bytes`), "\r"
// removed: what a failure reason quotes.
std::string ConsoleTail(absl::string_view console, int max_lines = 30,
                        std::size_t max_bytes = 4096);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_GUEST_CHANNEL_H_
