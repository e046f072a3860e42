// vm_provider: the `vm` KernelProvider. It boots the requested kernel release
// under QEMU (x86_64 q35 with an emulated Intel VT-d, `intel-iommu` in caching
// mode, or AMD-Vi, `amd-iommu`; or aarch64 virt with an emulated SMMUv3; one
// emulated NVMe on a scratch file), with the mode's parameter on
// the kernel command line, runs the tool inside the guest from the project's
// initramfs (scripts/build-guest-root, init in agent/kernels/guest/init;
// fio on the raw NVMe, iozone on an ext2 the guest makes on it; the
// build's NVMe/ext4 modules loaded first when they are not built in),
// reads the guest's framed output from its second serial port
// (guest_channel.h) and derives the mode the guest kernel really ran from its
// NVMe's IOMMU group. A dma_map_benchmark job gets a spare PCI device (QEMU's
// `edu`) behind the same IOMMU, which the guest binds to the kernel's
// dma_map_benchmark driver, and the build's static tool in the job archive.
//
// Accelerators: kvm; tcg (multi-threaded software emulation, whose guest
// clock is the host's: figures move with host load); tcg-icount
// (single-threaded TCG with -icount shift=N,align=off,sleep=off: the guest
// clock advances 2^N ns per guest instruction, so figures are
// instruction-timed and repeat, whatever else the host runs).
//
// Safety: QEMU runs with -nodefaults -no-user-config and only the devices
// above (no network), its scratch files (NVMe image, initrd, console logs)
// live in a fresh directory under VmConfig::allow_dir and are removed after
// the run, and it runs through RunProcess with a wall-clock limit (boot
// timeout + tool runtime + margin) and process-group kill. A guest whose
// kernel decompressor halts is stopped as soon as the console says so.
//
// Known limit of the q35 models: the VT-d driver forces strict invalidation
// when it sees caching mode ("IOMMU batching disallowed due to
// virtualization") and the AMD driver when the IOMMU reports NpCache, so lazy
// requests end as a strict/lazy mismatch on both (docs/kernels.md).
//
// Thread-safety: immutable after construction; concurrent runs each get their
// own scratch directory. Error contract: kernel_provider.h. The run's pieces
// have their own headers: QEMU's command line and argv (qemu_args.h), the
// job's and the modules' archives (guest_archive.h), the modules a guest
// loads (module_deps.h), the meaning of a finished run (guest_run.h) and the
// choice of accelerator (accel_probe.h).
#ifndef AGENT_KERNELS_VM_PROVIDER_H_
#define AGENT_KERNELS_VM_PROVIDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/kernels/kernel_provider.h"
#include "agent/kernels/qemu_args.h"
#include "lib/kstore/kernel_store.h"
#include "lib/kstore/store_watch.h"

namespace farm::kernels {

struct VmConfig {
  std::string arch = kArchX86;
  std::string qemu = "qemu-system-x86_64";  // a name on PATH or a path
  // aarch64 only: pauth-impdef keeps `max`'s features but makes pointer
  // authentication cheap under TCG.
  std::string cpu = "max,pauth-impdef=on";
  // The kernel store (lib/kstore/kernel_store.h): build directories with a
  // kernel.yaml, or <kernels_dir>/<release>/vmlinuz as
  // scripts/fetch-test-kernels lays them out.
  std::string kernels_dir = "/var/cache/iommu-farm/kernels";
  std::string initramfs;      // scripts/build-guest-root's initramfs.cpio
  std::string allow_dir;      // the only place scratch files are made
  std::string accel = "tcg";  // "tcg", "tcg-icount" or "kvm"
  // tcg-icount's shift: 7 (128 ns a guest instruction) keeps a q35 boot near
  // 3 s of host time and one strict map+unmap pair well above the
  // benchmark's 100 ns resolution; 0 rounds every call to that resolution,
  // and shift=auto follows the host's speed, so it does not repeat.
  int icount_shift = 7;
  int memory_mib = 1024;
  int cpus = 2;  // x86_64 under tcg-icount runs one (GuestCpus)
  std::uint64_t nvme_bytes = std::uint64_t{256} << 20;
  absl::Duration boot_timeout = absl::Seconds(60);
  absl::Duration margin = absl::Seconds(30);
  // The guest's init counts the kernel's IOMMU events around the tool
  // (farm-agent --kernel-counters; the guest archive's farm/kernel-counters).
  bool kernel_counters = false;
};

// <kernels_dir>/<release>/vmlinuz; InvalidArgument for a release that is not
// a plain name ([A-Za-z0-9._+-]+, no "..").
absl::StatusOr<std::string> KernelImagePath(const std::string& kernels_dir,
                                            const std::string& release);

// The IOMMU models `build` runs under on `arch`: virt+smmuv3 on aarch64;
// q35+intel-iommu on x86_64, plus q35+amd-iommu when the build's config
// sets CONFIG_AMD_IOMMU=y (Debian's cloud amd64 kernel does not: it has no
// AMD IOMMU driver).
std::vector<std::string> IommuModelsFor(const kstore::KernelBuild& build, const std::string& arch);

class VmKernelProvider : public KernelProvider {
 public:
  explicit VmKernelProvider(VmConfig config);

  // What the machine model really runs: on q35 + VT-d in caching mode and
  // q35 + AMD-Vi off, passthrough and strict (lazy ends as strict, so it is
  // not offered); on virt + SMMUv3 all four.
  std::vector<iommufarm::v1::IommuMode> Modes() const;
  // One offer per build of the store for the config's architecture and IOMMU
  // model (IommuModelsFor), sorted by commit id, with the build's commit and
  // release. The store and its builds' configs are read again only when the
  // store changed (kstore::StoreWatch): the agent asks at every lease.
  std::vector<iommufarm::v1::KernelOffer> Offers() const ABSL_LOCKS_EXCLUDED(offers_mu_);
  // The store's build the request names: the build of request.commit when
  // set, else the first build of request.kernel_release; for the config's
  // architecture. FailedPrecondition naming what is missing.
  absl::StatusOr<kstore::KernelBuild> FindKernel(const KernelRequest& request) const;
  // The default model: "q35+intel-iommu" or "virt+smmuv3"; a request names
  // another in KernelRequest::machine_model.
  std::string MachineModel() const;
  // The guest's CPUs: config().cpus, but one for x86_64 under tcg-icount
  // (QEMU 7.2's q35 hangs at SMP bring-up with -icount and -smp 2).
  int GuestCpus() const;
  // config().icount_shift under tcg-icount, else 0 (GuestFacts.icount_shift).
  int IcountShift() const;

  std::string_view name() const override { return "vm"; }
  absl::Status CanRun(const KernelRequest& request) const override;
  absl::StatusOr<KernelRun> Run(const KernelRequest& request) override;

  const VmConfig& config() const { return config_; }

 private:
  // QEMU's run of `request` on `build` with its scratch files in `scratch`.
  absl::StatusOr<QemuInvocation> Invocation(const KernelRequest& request,
                                            const kstore::KernelBuild& build,
                                            const std::string& scratch) const;

  VmConfig config_;
  std::unique_ptr<kstore::StoreWatch> store_;
  mutable absl::Mutex offers_mu_;
  mutable std::uint64_t offers_generation_ ABSL_GUARDED_BY(offers_mu_) = 0;
  mutable std::vector<iommufarm::v1::KernelOffer> offers_ ABSL_GUARDED_BY(offers_mu_);
};

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_VM_PROVIDER_H_
