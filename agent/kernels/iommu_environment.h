// iommu_environment: what makes one kernel's IOMMU costs differ from another
// run's without being the farm's choice (iommufarm.v1.IommuEnvironment,
// recorded with every real result): the IOMMU units' identity registers,
// the firmware's ACPI IOMMU tables and version, each PCI device's domain
// type and ATS. Two results of one host with different environments are
// two series.
//
// Both readers of an environment end here: the agent's own host
// (agent/host_iommu_environment.h, under a root for tests) and a guest's
// init, whose facts section carries the same keys as "env.<key>=<value>"
// lines (guest_channel.h). Each collects raw facts; FinishIommuEnvironment
// derives what the kernel prints only in encoded form and digests the lot,
// so both produce one layout.
//
// Raw keys beyond IommuEnvironment's own (farm.proto):
//   unit/<name>/smmu_log  the arm-smmu-v3 driver's boot line of that unit
//                          (arm_smmu_device_hw_probe: "[ias N-bit, ]oas
//                          N-bit (features 0x%08x)"), turned into
//                          unit/<name>/{ias,oas,features}
//
// Pure functions; thread-safe.
#ifndef AGENT_KERNELS_IOMMU_ENVIRONMENT_H_
#define AGENT_KERNELS_IOMMU_ENVIRONMENT_H_

#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::kernels {

// The raw key of an SMMUv3 unit's boot line.
inline constexpr absl::string_view kSmmuLogSuffix = "/smmu_log";

// The ACPI tables that describe IOMMUs: VT-d's DMAR, AMD-Vi's IVRS, Arm's
// IORT (under /sys/firmware/acpi/tables/).
inline constexpr const char* kIommuAcpiTables[] = {"DMAR", "IVRS", "IORT"};

// The DMI firmware identity files (/sys/class/dmi/id/).
inline constexpr const char* kFirmwareFiles[] = {"bios_vendor", "bios_version", "bios_date"};

// What the SMMUv3 driver says of a unit at probe.
struct SmmuBootLine {
  std::string ias;  // "48"; "" when the kernel no longer prints it
  std::string oas;
  std::string features;  // "0x00001fef": the driver's ARM_SMMU_FEAT_* bits
};

// Finds "[ias N-bit, ]oas N-bit (features 0x...)" in a kernel log line;
// nullopt when the line holds none.
std::optional<SmmuBootLine> ParseSmmuBootLine(absl::string_view line);

// VT-d's caching mode (cap bit 7, the kernel's cap_caching_mode() in
// drivers/iommu/intel/iommu.h) of a cap register as its sysfs file prints it
// ("%llx", drivers/iommu/intel/iommu.c cap_show): "0" or "1"; nullopt when
// `cap_hex` is not hex.
std::optional<std::string> CachingMode(absl::string_view cap_hex);

// Whether PCI config space `config` (the bytes of a device's sysfs config
// file) holds an ATS extended capability (ID 0x000f) and its control
// register's enable bit (PCI_ATS_CTRL 0x06, bit 15; include/uapi/linux/
// pci_regs.h): "on", "off"; "" when the device has no ATS capability;
// nullopt when `config` stops short of extended space (an unprivileged
// reader gets the first 64 bytes only).
std::optional<std::string> AtsState(absl::string_view config);

// The environment from raw facts: unit/<n>/caching_mode added for each unit
// with a VT-d ecap, each unit/<n>/smmu_log turned into ias/oas/features (or
// an unavailable note when it does not parse), and the digest.
iommufarm::v1::IommuEnvironment FinishIommuEnvironment(
    std::map<std::string, std::string> raw, std::map<std::string, std::string> unavailable);

// Hex SHA-256 over "key=value\n" of `facts` in key order; "" when empty.
std::string EnvironmentDigest(const std::map<std::string, std::string>& facts);

// The facts of an environment in key order.
std::map<std::string, std::string> SortedFacts(const iommufarm::v1::IommuEnvironment& env);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_IOMMU_ENVIRONMENT_H_
