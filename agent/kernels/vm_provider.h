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
// own scratch directory. Error contract: kernel_provider.h. The pure pieces
// (command line, argv, job archive, interpretation of a finished run) are
// exposed for tests.
#ifndef AGENT_KERNELS_VM_PROVIDER_H_
#define AGENT_KERNELS_VM_PROVIDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "agent/kernels/kernel_provider.h"
#include "lib/kstore/kernel_store.h"
#include "lib/kstore/store_watch.h"

namespace farm::kernels {

// Guest architectures and their machine models.
inline constexpr char kArchX86[] = "x86_64";     // q35 + intel-iommu
inline constexpr char kArchArm64[] = "aarch64";  // virt + smmuv3

// Machine models (KernelOffer.machine_model).
inline constexpr char kModelIntel[] = "q35+intel-iommu";
inline constexpr char kModelAmd[] = "q35+amd-iommu";
inline constexpr char kModelSmmuv3[] = "virt+smmuv3";

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
};

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

// <kernels_dir>/<release>/vmlinuz; InvalidArgument for a release that is not
// a plain name ([A-Za-z0-9._+-]+, no "..").
absl::StatusOr<std::string> KernelImagePath(const std::string& kernels_dir,
                                            const std::string& release);

// Where a guest iozone's files live: an ext2 file system the guest's init
// makes on the VM's NVMe and mounts here (iozone works on files).
inline constexpr char kGuestScratchDir[] = "/mnt/nvme";

// A guest iozone argv is the form BuildIozoneGuestArgv
// (agent/runners/iozone_spec.h) builds: only -s/-r/-t with a size, -i0/-i1/
// -i2, -I, -M and -F with files directly in kGuestScratchDir; throughput
// mode (-t and -F) required. InvalidArgument naming what is refused.
absl::Status CheckGuestIozoneArgv(const std::vector<std::string>& argv);

// The guest tool of dma-map-bench jobs, and the PCI id (vendor:device) of
// the spare device it binds: QEMU's edu.
inline constexpr char kBenchTool[] = "dma_map_benchmark";
inline constexpr char kBenchDeviceId[] = "1234:11e8";

// The per-job archive appended to the initramfs: farm/argv (one argument a
// line, argv[0] as the guest's tool name), farm/wait-device, for iozone
// farm/scratch-fs ("<wait_device> <kGuestScratchDir>": the init makes and
// mounts the file system, and the tool does not run when that fails), for
// dma_map_benchmark farm/bin/dma_map_benchmark (`tool_binary`, executable)
// and farm/bench-device (kBenchDeviceId: the init binds that device to the
// kernel's driver, and the tool does not run when that fails) and, when
// given, farm/channel (the farm channel's device). InvalidArgument for an
// argv the guest cannot run (argv[0] not fio, iozone or dma_map_benchmark,
// an iozone argv CheckGuestIozoneArgv refuses or without a device, a
// dma_map_benchmark without its binary, an argument with a newline or NUL).
absl::StatusOr<std::string> GuestJobArchive(const std::vector<std::string>& tool_argv,
                                            const std::string& wait_device,
                                            const std::string& channel = "",
                                            const std::string& tool_binary = "");

// The kernel modules a guest of `build` must load before its job: the NVMe
// driver ("nvme") when the build's config has CONFIG_BLK_DEV_NVME=m, and
// for a job on iozone's scratch file system ("ext4", which mounts ext2)
// when CONFIG_EXT4_FS=m; each after its dependencies (ModuleDepends; soft
// ones when the build has them), as paths under build.ModulesPath(). Empty when all are built
// in. FailedPrecondition when one is a module but the build has no modules
// directory or the module (or a dependency) is not in it.
absl::StatusOr<std::vector<std::string>> GuestModules(const kstore::KernelBuild& build,
                                                      bool scratch_fs);

// What a kernel module's .modinfo (ELF64 section) says it needs loaded
// first, module names as the kernel writes them ("nvme-core").
struct ModuleNeeds {
  std::vector<std::string> depends;   // `depends=`: required
  std::vector<std::string> soft_pre;  // `softdep=pre: ...`: loaded when present
};
// InvalidArgument for a file that is not an ELF64 object with a .modinfo
// section.
absl::StatusOr<ModuleNeeds> ModuleDepends(absl::string_view elf);

// The archive of `modules` (paths) for the guest's init: each file as
// farm/modules/<basename>, and farm/modules.order naming them in order.
absl::StatusOr<std::string> GuestModulesArchive(const std::vector<std::string>& modules);

// A newc ("070701") cpio archive of regular files (path, content), their
// parent directories included, ending with the trailer. Files under
// farm/bin/ are executable (0755), the others 0644.
std::string NewcArchive(const std::vector<std::pair<std::string, std::string>>& files);

// How the QEMU process ended, as the run saw it.
struct QemuExit {
  bool exited_cleanly = false;  // QEMU exited 0 (guest powered off)
  bool timed_out = false;
  bool halted = false;         // stopped because the console said the guest halted
  bool image_refused = false;  // QEMU's loader refused the kernel image
  std::string description;     // "exit 1", "signal 9 (timed out after 90s)", ...
  std::string qemu_stderr;
};

// Turns a finished QEMU run into the KernelRun or the failure the error
// contract names: FAILED_PRECONDITION (permanent) with the console tail for
// an image that cannot boot (its boot stub halted, or QEMU's loader refused
// it), ABORTED with the console tail when the guest did not get to
// `@@farm-done` otherwise (panic, hang, QEMU failure) or when the guest
// could not make iozone's scratch file system; FAILED_PRECONDITION
// when it booted another release or ran another mode than requested (the
// message names both). Pure.
absl::StatusOr<KernelRun> InterpretGuestRun(const KernelRequest& request, absl::string_view channel,
                                            absl::string_view console, const QemuExit& exit);

// The first line of `qemu --version` ("QEMU emulator version 7.2.x ...").
// FailedPrecondition when QEMU is missing or does not run.
absl::StatusOr<std::string> QemuVersion(const std::string& qemu);

// The IOMMU models `build` runs under on `arch`: virt+smmuv3 on aarch64;
// q35+intel-iommu on x86_64, plus q35+amd-iommu when the build's config
// sets CONFIG_AMD_IOMMU=y (Debian's cloud amd64 kernel does not: it has no
// AMD IOMMU driver).
std::vector<std::string> IommuModelsFor(const kstore::KernelBuild& build, const std::string& arch);

// The accelerator for --vm-accel `flag`: "tcg", "tcg-icount" and "kvm" as
// given; "auto": "kvm" when kvm_probe() is OK, else "tcg-icount" (figures
// that repeat) with the probe's message in `why`.
std::string ResolveAccel(const std::string& flag, const std::function<absl::Status()>& kvm_probe,
                         std::string* why);

// Why KVM cannot run a `guest_arch` guest on a `host_arch` host (uname's
// machine: KVM runs guests of the host's own architecture only, so such a
// guest is emulated by TCG); "" when the architectures match.
std::string KvmArchMismatch(const std::string& guest_arch, const std::string& host_arch);
// --vm-accel `flag` for `guest_arch` guests on a `host_arch` host:
// FailedPrecondition for "kvm" when KvmArchMismatch says why it can never
// work (every boot would fail), else OK ("auto" finds TCG by itself).
absl::Status CheckAccel(const std::string& flag, const std::string& guest_arch,
                        const std::string& host_arch);
// The running host's architecture as uname reports it ("x86_64", "aarch64").
std::string HostArch();

// Whether KVM can run this machine's guests: the guest is of the host's
// architecture (KvmArchMismatch, checked first), /dev/kvm opens read-write and
// one facts-only boot of the store's `commit` / `kernel_release` under
// -accel kvm reaches its result within 20 s (these machines have a /dev/kvm
// on which stock guests stop with internal errors). FailedPrecondition
// saying why not.
absl::Status ProbeKvm(const VmConfig& config, const std::string& kernel_release,
                      const std::string& commit);

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
