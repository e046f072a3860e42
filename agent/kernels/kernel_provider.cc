#include "agent/kernels/kernel_provider.h"

#include "absl/strings/str_cat.h"
#include "proto/kernel_config.h"
#include "proto/names.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

absl::StatusOr<std::vector<std::string>> ModeKernelParams(
    pb::IommuMode mode, const std::vector<iommu_mode::Driver>& drivers) {
  const std::optional<iommu_mode::Mode> m = proto::ModeOf(mode);
  if (!m) {
    return absl::InvalidArgumentError(
        absl::StrCat("no kernel parameter for IOMMU mode ", static_cast<int>(mode)));
  }
  return iommu_mode::KernelParams(*m, drivers);
}

absl::StatusOr<pb::IommuMode> EffectiveMode(const KernelFacts& facts, std::string* detail) {
  if (facts.nvme.empty()) {
    return absl::InternalError("the kernel reported no NVMe controller: its IOMMU mode is unknown");
  }
  const NvmeController& nvme = facts.nvme.front();
  std::string who = absl::StrCat(nvme.name, " ", nvme.pci_address);
  iommu_mode::RunningKernel device;
  device.behind_iommu = !nvme.group.empty();
  if (!device.behind_iommu) {
    if (detail) *detail = absl::StrCat(who, ": no IOMMU group");
    return proto::ProtoMode(*iommu_mode::ReadRunningMode(device).mode);
  }
  for (const IommuGroup& g : facts.groups) {
    if (g.id != nvme.group) continue;
    device.group_types = {g.type};
    const std::optional<iommu_mode::Mode> mode = iommu_mode::ReadRunningMode(device).mode;
    if (detail) *detail = absl::StrCat(who, " group ", g.id, ": ", g.type);
    if (!mode) {
      return absl::InternalError(absl::StrCat(who, " is in IOMMU group ", g.id, " of type '",
                                              g.type, "', which no farm mode stands for"));
    }
    return proto::ProtoMode(*mode);
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

std::vector<std::string> OfferedConfigs(const kstore::KernelBuild& build) {
  std::vector<std::string> out{build.kernel_config};
  if (!proto::IsDmaMapBenchBuild(build.kernel_config) &&
      kstore::BuildConfigEnabled(build, "CONFIG_DMA_MAP_BENCHMARK")) {
    out.push_back(proto::BuildConfigId(build.kernel_config, true));
  }
  return out;
}

bool OffersConfig(const kstore::KernelBuild& build, const std::string& kernel_config) {
  for (const std::string& c : OfferedConfigs(build)) {
    if (c == kernel_config) return true;
  }
  return false;
}

}  // namespace farm::kernels
