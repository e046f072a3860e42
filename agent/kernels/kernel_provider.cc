#include "agent/kernels/kernel_provider.h"

#include "absl/strings/str_cat.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

absl::StatusOr<std::string> ModeKernelParameter(pb::IommuMode mode) {
  switch (mode) {
    case pb::IOMMU_MODE_OFF:
      return std::string("intel_iommu=off");
    case pb::IOMMU_MODE_PASSTHROUGH:
      return std::string("iommu.passthrough=1");
    case pb::IOMMU_MODE_STRICT:
      return std::string("iommu.strict=1");
    case pb::IOMMU_MODE_LAZY:
      return std::string("iommu.strict=0");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("no kernel parameter for IOMMU mode ", static_cast<int>(mode)));
  }
}

pb::IommuMode ModeFromDomainType(std::string_view type) {
  // iommu_group_show_type() in drivers/iommu/iommu.c spells these.
  if (type == "identity") return pb::IOMMU_MODE_PASSTHROUGH;
  if (type == "DMA") return pb::IOMMU_MODE_STRICT;
  if (type == "DMA-FQ") return pb::IOMMU_MODE_LAZY;
  return pb::IOMMU_MODE_UNSPECIFIED;
}

absl::StatusOr<pb::IommuMode> EffectiveMode(const KernelFacts& facts, std::string* detail) {
  if (facts.nvme.empty()) {
    return absl::InternalError("the kernel reported no NVMe controller: its IOMMU mode is unknown");
  }
  const NvmeController& nvme = facts.nvme.front();
  std::string who = absl::StrCat(nvme.name, " ", nvme.pci_address);
  if (nvme.group.empty()) {
    if (detail) *detail = absl::StrCat(who, ": no IOMMU group");
    return pb::IOMMU_MODE_OFF;
  }
  for (const IommuGroup& g : facts.groups) {
    if (g.id != nvme.group) continue;
    pb::IommuMode mode = ModeFromDomainType(g.type);
    if (detail) *detail = absl::StrCat(who, " group ", g.id, ": ", g.type);
    if (mode == pb::IOMMU_MODE_UNSPECIFIED) {
      return absl::InternalError(absl::StrCat(who, " is in IOMMU group ", g.id, " of type '",
                                              g.type, "', which no farm mode stands for"));
    }
    return mode;
  }
  return absl::InternalError(
      absl::StrCat(who, " names IOMMU group ", nvme.group, ", which the kernel did not list"));
}

std::string NvmeDomainType(const KernelFacts& facts) {
  if (facts.nvme.empty() || facts.nvme.front().group.empty()) return "";
  for (const IommuGroup& g : facts.groups) {
    if (g.id == facts.nvme.front().group) return g.type;
  }
  return "";
}

}  // namespace farm::kernels
