// farm::agent executor factory: capability names from --capabilities to
// Executor instances.
//
// "emulator" runs the IOMMU emulation core in-process. "fio" and "iozone"
// are real runs (agent/runners), advertised only when the tool is installed,
// each wrapped in a KernelExecutor (kernel_executor.h) that offers the host
// kernel and, for fio with a vm provider configured, the kernels it boots
// (and, with a kexec provider, the store's kernels booted on this host).
// "dma-map-bench" runs the kernel's DMA-API benchmark in vm guests only:
// advertised when a vm provider is configured. "kbuild" builds kernels of
// the catalogs it has a tree for into the kernel store (kbuild_executor.h);
// it needs a tree and the store.
//
// Thread-safety: reentrant. Ownership: the caller owns the executors.
#ifndef AGENT_EXECUTORS_EXECUTORS_H_
#define AGENT_EXECUTORS_EXECUTORS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "agent/executors/kbuild_executor.h"
#include "agent/kernels/kexec_provider.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

struct ExecutorConfig {
  std::vector<std::string> allow_dirs;     // --allow-dir (real runs)
  std::vector<std::string> allow_devices;  // --allow-device DEV[:rw]
  std::string fio, iozone;                 // --fio, --iozone ("": found on the default PATH)
  bool perf = true;                        // --perf: profile host runs with perf record -a
  // --kernel-counters: count the kernel's IOMMU events around each real run
  // (agent/monitors/kernel_counters.h), on the host and in guests.
  bool kernel_counters = false;
  std::string emu_catalog;  // --emu-catalog FILE ("" = shipped)
  // --emulator-time-limit: an emulator run still going after this long
  // fails for good (zero: no limit).
  absl::Duration emu_time_limit = absl::Minutes(30);
  // The host kernel's offer for real runs: its release and detected mode.
  iommufarm::v1::HostFacts host;
  // The vm kernel provider for fio (--vm-kernels): offered when the
  // directory, the guest initramfs and QEMU are there; otherwise the agent
  // says why at start and offers only the host kernel. Scratch files go to
  // the first --allow-dir.
  std::string vm_kernels_dir;
  std::string vm_initramfs;
  std::string vm_arch = "x86_64";  // the guest architecture: x86_64 or aarch64
  std::string qemu;                // "" = qemu-system-<vm_arch>
  // "tcg", "tcg-icount", "kvm", or "auto": KVM when a probe boot under it
  // works, else tcg-icount (kernels::VmConfig says why).
  std::string vm_accel = "auto";
  int vm_icount_shift = 7;  // tcg-icount's -icount shift
  // The kexec kernel provider (nullable; --kexec-state-dir): fio and iozone
  // also offer the store's kernels booted on this host. With it, the vm
  // provider is made only when vm_initramfs is given.
  std::shared_ptr<kernels::KexecKernelProvider> kexec;
  // The kbuild capability: the trees it builds from (--kbuild-tree) and the
  // kernel store it writes (--kernel-store).
  KbuildConfig kbuild;
};

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> MakeExecutors(
    const std::vector<std::string>& capabilities, const ExecutorConfig& config);

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_EXECUTORS_H_
