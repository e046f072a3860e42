// qemu_args: how the vm provider (vm_provider.h) starts QEMU -- the guest
// architectures and machine models, the guest kernel's command line and
// QEMU's argv for one run (x86_64 q35 with an emulated Intel VT-d,
// `intel-iommu` in caching mode, or AMD-Vi, `amd-iommu`; or aarch64 virt with
// an emulated SMMUv3; one emulated NVMe on a scratch file; the accelerator).
//
// Safety: the argv has -nodefaults -no-user-config and only the devices
// above (no network).
//
// Thread-safety: pure functions of their arguments; no state.
#ifndef AGENT_KERNELS_QEMU_ARGS_H_
#define AGENT_KERNELS_QEMU_ARGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::kernels {

// Guest architectures and their machine models.
inline constexpr char kArchX86[] = "x86_64";     // q35 + intel-iommu
inline constexpr char kArchArm64[] = "aarch64";  // virt + smmuv3

// Machine models (KernelOffer.machine_model).
inline constexpr char kModelIntel[] = "q35+intel-iommu";
inline constexpr char kModelAmd[] = "q35+amd-iommu";
inline constexpr char kModelSmmuv3[] = "virt+smmuv3";

// One QEMU run with every path already chosen.
struct QemuInvocation {
  std::string arch = kArchX86;
  bool iommu = true;                      // aarch64 and amd-iommu: no IOMMU device for mode off
  std::string iommu_model = kModelIntel;  // x86_64: kModelIntel or kModelAmd
  std::string cpu;                        // aarch64 only
  std::string qemu;
  std::string accel;          // "tcg", "tcg-icount", "kvm"
  int icount_shift = 7;       // tcg-icount only
  bool bench_device = false;  // the spare PCI device of a dma_map_benchmark job
  int memory_mib = 1024;
  int cpus = 2;
  std::string kernel;
  std::string initrd;
  std::string nvme_image;
  std::string console_log;  // first serial port: the kernel console
  std::string channel_log;  // second serial port: the farm channel (x86_64;
                            // aarch64's one UART carries both)
  std::string cmdline;
};

// The guest kernel's command line for `mode`: on x86_64 console on ttyS0
// (early printk too, so that a decompressor failure is visible), on aarch64
// on ttyAMA0; panic=-1 so that a panic ends QEMU (-no-reboot), then `extra`
// (each checked against the allow-list of proto/kernel_params.h:
// InvalidArgument naming a refused one), then the mode's parameter last, so
// the job's mode wins: ModeKernelParams(mode) for VT-d on x86_64, for the
// SMMUv3 on aarch64 (off needs none there: the machine has no SMMUv3 then).
absl::StatusOr<std::string> GuestCmdline(iommufarm::v1::IommuMode mode,
                                         const std::vector<std::string>& extra = {},
                                         const std::string& arch = kArchX86);

// QEMU's argv: x86_64 q35 + intel-iommu (caching mode) with two serial
// ports; aarch64 virt[,iommu=smmuv3] -cpu <cpu> with one; tcg-icount as
// -accel tcg,thread=single -icount shift=N,align=off,sleep=off (sleep=off:
// an idle guest jumps to its next timer instead of waiting for the host's
// clock); bench_device adds `-device edu`. InvalidArgument for a path QEMU's
// option syntax cannot carry (containing ','), a non-positive size, an
// unknown accelerator, an icount shift outside 0..10 or an unknown arch.
absl::StatusOr<std::vector<std::string>> BuildQemuArgv(const QemuInvocation& q);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_QEMU_ARGS_H_
