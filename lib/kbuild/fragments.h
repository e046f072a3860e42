// fragments: the config fragments the project ships, one per vm machine
// model (lib/kbuild/fragments/*.config, compiled into the library so that a
// build never depends on where the sources are): `guest.config`, what every
// guest of the vm provider needs, then the model's own (serial console,
// IOMMU driver); one per architecture for the kernel of a host platform,
// which a lab host kexecs into (`host-x86.config`, `host-arm64.config`:
// kexec, what the agent and fio use, the IOMMU drivers and their debugfs;
// no guest.config: a host boots from its own root, not the guests'
// initramfs); `dma-map-bench.config` (CONFIG_DMA_MAP_BENCHMARK) only for a
// kernel a dma-map-bench job boots. Thread-safe: constant data.
#ifndef LIB_KBUILD_FRAGMENTS_H_
#define LIB_KBUILD_FRAGMENTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::kbuild {

struct Fragment {
  std::string name;  // "q35-intel-iommu.config", or a user fragment's path
  std::string text;
};

struct MachineModel {
  const char* name;  // the vm platform name: q35-intel-iommu, q35-amd-iommu, virt-smmuv3
  const char* arch;  // kstore::kArchX86 or kstore::kArchArm64
};

// The machine models fragments are shipped for.
const std::vector<MachineModel>& MachineModels();

// The machine name that stands for every machine model of an architecture:
// one kernel for all of them (a build job's, so one build serves q35 with
// intel-iommu and with amd-iommu).
inline constexpr char kAllMachines[] = "all";

// The machine name of a host platform's kernel: the host fragment of the
// architecture alone.
inline constexpr char kHostMachine[] = "host";

// guest.config and the fragment of `machine` for `arch` (every fragment of
// `arch`, in MachineModels() order, for kAllMachines; the host fragment of
// `arch` alone for kHostMachine). InvalidArgument for a machine without a
// fragment or one of another architecture.
absl::StatusOr<std::vector<Fragment>> MachineFragments(absl::string_view machine,
                                                       absl::string_view arch);

// dma-map-bench.config: what a kernel a dma-map-bench job boots needs beyond
// guest.config (CONFIG_DMA_MAP_BENCHMARK, which trees before v5.11 lack).
Fragment DmaMapBenchFragment();

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_FRAGMENTS_H_
