#include "lib/kbuild/fragments.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/kbuild/fragments_data.inc"  // kGuestConfig, kQ35IntelIommuConfig, ...
#include "lib/kstore/kernel_store.h"

namespace farm::kbuild {

namespace {

struct Shipped {
  MachineModel model;
  const char* text;
};

const std::vector<Shipped>& ShippedFragments() {
  static const auto* shipped = new std::vector<Shipped>{
      {{"q35-intel-iommu", kstore::kArchX86}, kQ35IntelIommuConfig},
      {{"q35-amd-iommu", kstore::kArchX86}, kQ35AmdIommuConfig},
      {{"virt-smmuv3", kstore::kArchArm64}, kVirtSmmuv3Config},
  };
  return *shipped;
}

}  // namespace

const std::vector<MachineModel>& MachineModels() {
  static const auto* models = [] {
    auto* m = new std::vector<MachineModel>;
    for (const Shipped& s : ShippedFragments()) m->push_back(s.model);
    return m;
  }();
  return *models;
}

absl::StatusOr<std::vector<Fragment>> MachineFragments(absl::string_view machine,
                                                       absl::string_view arch) {
  if (machine == kHostMachine) {
    if (arch == kstore::kArchX86) return std::vector<Fragment>{{"host-x86.config", kHostX86Config}};
    if (arch == kstore::kArchArm64) {
      return std::vector<Fragment>{{"host-arm64.config", kHostArm64Config}};
    }
    return absl::InvalidArgumentError(absl::StrCat("no host fragment for ", arch));
  }
  if (machine == kAllMachines) {
    std::vector<Fragment> out{{"guest.config", kGuestConfig}};
    for (const Shipped& s : ShippedFragments()) {
      if (arch == s.model.arch) out.push_back({absl::StrCat(s.model.name, ".config"), s.text});
    }
    if (out.size() == 1) {
      return absl::InvalidArgumentError(absl::StrCat("no machine model is ", arch));
    }
    return out;
  }
  std::vector<std::string> names;
  for (const Shipped& s : ShippedFragments()) {
    names.push_back(s.model.name);
    if (machine != s.model.name) continue;
    if (arch != s.model.arch) {
      return absl::InvalidArgumentError(
          absl::StrCat("machine model ", machine, " is ", s.model.arch, ", not ", arch));
    }
    return std::vector<Fragment>{{"guest.config", kGuestConfig},
                                 {absl::StrCat(machine, ".config"), s.text}};
  }
  return absl::InvalidArgumentError(absl::StrCat("no config fragment for machine model '", machine,
                                                 "' (", absl::StrJoin(names, ", "), ", ",
                                                 kHostMachine, ")"));
}

Fragment DmaMapBenchFragment() { return {"dma-map-bench.config", kDmaMapBenchConfig}; }

}  // namespace farm::kbuild
