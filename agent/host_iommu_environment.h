// farm::agent host IOMMU environment: the agent's own kernel's IOMMU
// environment (HostFacts.iommu_environment; the layout and what each key
// means: agent/kernels/iommu_environment.h), read at agent start:
//   - each /sys/class/iommu unit's identity registers: intel-iommu/{version,
//     cap,ecap} (drivers/iommu/intel/iommu.c intel_iommu_attrs; not
//     domains_used, which counts live domains), amd-iommu/{cap,features}
//     (drivers/iommu/amd/init.c amd_iommu_attrs);
//   - an SMMUv3 unit exports no attribute at all (arm-smmu-v3.c registers
//     its iommu_device without groups), so its IDR-derived features come from
//     the driver's boot line in the kernel log (/dev/kmsg), matched by the
//     unit's device name, and kept in a record for the rest of the boot
//     (below); unavailable when the log has wrapped before any agent of this
//     boot read it, or the agent may not read it (dmesg_restrict). Its IIDR
//     is printed nowhere.
//   - SHA-256 of /sys/firmware/acpi/tables/{DMAR,IVRS,IORT} where present
//     (root only: the kernel makes them 0400);
//   - /sys/class/dmi/id/{bios_vendor,bios_version,bios_date};
//   - each PCI device with an IOMMU group: the group's type, and its ATS
//     enable bit from config space (root only: others read 64 bytes).
// What could not be read is named in IommuEnvironment.unavailable, never an
// error (a container or a VM shows less).
//
// Thread-safety: reentrant, except that two calls writing one
// kernel_log_record race (the last write wins; both hold the same lines).
// No ownership.
#ifndef AGENT_HOST_IOMMU_ENVIRONMENT_H_
#define AGENT_HOST_IOMMU_ENVIRONMENT_H_

#include <string>

#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// Reads the environment under `root` ("/" on a real host; a fake tree's
// dev/kmsg is a plain file of log lines).
//
// `kernel_log_record` (a file; "" for none): where the facts only the kernel
// log holds (the SMMUv3 boot lines) are written with the boot's id
// (proc/sys/kernel/random/boot_id), and read back in a later call of the same
// boot for the units whose line the log no longer holds. So an agent
// restarted after the log wrapped has the digest of one started before it.
// A record of another boot is ignored and replaced; one that cannot be
// written costs a warning, nothing else.
iommufarm::v1::IommuEnvironment DetectIommuEnvironment(const std::string& root = "/",
                                                       const std::string& kernel_log_record = "");

// `at_start` (DetectIommuEnvironment's at agent start) with its device/*
// facts read again under `root`: the units, ACPI tables and firmware are
// fixed until the next boot (and the kernel log that held an SMMUv3's boot
// line may since have wrapped), while a group's type can be written through
// sysfs and ATS follows the driver bound, under a running agent.
iommufarm::v1::IommuEnvironment RefreshIommuEnvironment(
    const iommufarm::v1::IommuEnvironment& at_start, const std::string& root = "/");

}  // namespace farm::agent

#endif  // AGENT_HOST_IOMMU_ENVIRONMENT_H_
