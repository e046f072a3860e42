// kernel_provider: where a real job's kernel comes from. A KernelProvider
// runs a job's tool (fio) under the kernel release and IOMMU mode the job
// names and reports the mode that kernel really ran, so that nothing is ever
// recorded under a mode the kernel did not run: a kernel asked for one mode
// that chose another reports the one it ran (CheckRanMode).
//
// Kinds: `host` (this machine's booted kernel, host_provider.h) and `vm` (the
// release booted under QEMU with an emulated IOMMU, vm_provider.h).
//
// Error contract, shared by every provider (it matches the executors' one in
// agent/executors/executor.h, so a caller can pass statuses through):
// - CanRun: OK, or FAILED_PRECONDITION saying why this provider cannot run
//   the request (wrong release or mode on the host, no image for the release,
//   no qemu). Callers use it to decide what to lease, never to fail a job.
// - Run: INVALID_ARGUMENT for a request that can never run (unspecified mode,
//   bad argv); FAILED_PRECONDITION when the kernel ran another mode than the
//   one requested and the farm is at fault (its command line did not ask
//   for the mode: CheckRanMode; permanent, the message names both), when the image
//   cannot boot (corrupt: its boot stub halts or QEMU refuses it; the message
//   carries the console tail) or when CanRun refuses; ABORTED when the
//   kernel did not get to the result otherwise (panic, hang, QEMU failure;
//   the message carries the console tail); CANCELLED when
//   `cancelled` fired; INTERNAL for local I/O failures. A tool that runs and
//   exits non-zero is not an error: see KernelRun::tool_exit.
//
// Thread-safety: implementations are safe for concurrent Run/CanRun calls
// (each run owns its scratch files). Providers own no kernel images; they
// read them from the paths their config names.
#ifndef AGENT_KERNELS_KERNEL_PROVIDER_H_
#define AGENT_KERNELS_KERNEL_PROVIDER_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/iommu_mode/iommu_mode.h"
#include "lib/kstore/kernel_store.h"

namespace farm::kernels {

// What a job asks of a kernel.
struct KernelRequest {
  std::string kernel_release;  // the commit's kernel, e.g. "6.1.0-57-cloud-amd64"
  // The commit id of a kernel store's build (lib/kstore); "" when the release
  // alone names the kernel.
  std::string commit;
  // The build config id of the store's build (KernelOffer.kernel_config,
  // proto/kernel_config.h); "" for the default.
  std::string kernel_config;
  // The IOMMU model to boot under (KernelOffer.machine_model); "" for the
  // provider's default.
  std::string machine_model;
  iommufarm::v1::IommuMode mode = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
  // The tool's validated argv (argv[0] "fio"); empty: boot and report facts
  // only. Arguments are passed verbatim, never through a shell.
  std::vector<std::string> tool_argv;
  // How long the tool itself is expected to run; the provider adds its boot
  // timeout and margin to make the wall-clock limit.
  absl::Duration tool_runtime = absl::ZeroDuration();
  std::function<bool()> cancelled;  // may be empty; polled, must be cheap
  // Extra kernel command-line parameters (proto/kernel_params.h allow-list);
  // only a provider that boots a kernel can honour them.
  std::vector<std::string> kernel_params;
};

// One IOMMU group as the running kernel reports it.
struct IommuGroup {
  std::string id;
  std::string type;                  // default domain type: "DMA", "DMA-FQ", "identity", ...
  std::vector<std::string> devices;  // PCI addresses
};

// One NVMe controller of the running kernel.
struct NvmeController {
  std::string name;                     // "nvme0"
  std::string pci_address;              // "0000:00:01.0"
  std::string group;                    // its IOMMU group id; empty when it has none
  std::vector<std::string> namespaces;  // "nvme0n1"
};

// What the kernel that ran the job says about itself.
struct KernelFacts {
  std::string release;  // uname -r
  std::string machine;  // uname -m
  std::string cmdline;  // /proc/cmdline
  // The registered IOMMUs, /sys/class/iommu: "<name>[:<driver>] ...", e.g.
  // "dmar0"; empty when none.
  std::string iommu;
  std::vector<IommuGroup> groups;
  std::vector<NvmeController> nvme;
  // The kernel's IOMMU environment (iommu_environment.h); empty when the
  // kernel's reporter told none (a guest root older than the env. lines).
  iommufarm::v1::IommuEnvironment iommu_environment;
  // How long the kernel has run (/proc/uptime): a clock of its own boot,
  // which no wall-clock step moves; zero when not read.
  absl::Duration uptime = absl::ZeroDuration();
};

struct KernelRun {
  std::string provider;  // "host", "vm"
  iommufarm::v1::IommuMode requested = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
  iommufarm::v1::IommuMode effective = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
  std::string effective_detail;  // what decided it, e.g. "nvme0 0000:00:01.0 group 1: DMA"
  std::string domain_type;       // the group type that decided it; "" when no group
  KernelFacts facts;
  std::string accel;          // vm: "tcg", "tcg-icount" or "kvm"; host: empty
  int icount_shift = 0;       // vm under tcg-icount: QEMU's -icount shift
  std::string machine_model;  // vm: "q35+intel-iommu"; host: empty
  std::string tool_stdout;    // fio's JSON report when argv asked for it
  std::string tool_stderr;
  int tool_exit = -1;  // -1: no tool ran
  // vm: the guest's monitors around the tool (guest_channel.h); unset when
  // no tool ran.
  std::optional<iommufarm::v1::Monitors> monitors;
  absl::Duration wall_time;  // start of the run (boot) to its result
};

class KernelProvider {
 public:
  virtual ~KernelProvider() = default;
  virtual std::string_view name() const = 0;
  virtual absl::Status CanRun(const KernelRequest& request) const = 0;
  virtual absl::StatusOr<KernelRun> Run(const KernelRequest& request) = 0;
};

// The kernel command-line words that select `mode` on a kernel whose IOMMU
// may be any of `drivers` (iommu_mode::KernelParams), e.g. strict
// "iommu.strict=1", off on VT-d "intel_iommu=off". InvalidArgument for
// unspecified.
absl::StatusOr<std::vector<std::string>> ModeKernelParams(
    iommufarm::v1::IommuMode mode, const std::vector<iommu_mode::Driver>& drivers);

// The effective mode of the kernel that reported `facts`, decided by the
// group of its first NVMe controller (the device the job's I/O goes to) with
// iommu_mode::ReadRunningMode from that group's type alone, so that a mode
// is proven, never inferred: no group means no IOMMU translates it (off).
// `detail` gets what decided it. INTERNAL when there is no NVMe controller
// or the group's type has no mode.
absl::StatusOr<iommufarm::v1::IommuMode> EffectiveMode(const KernelFacts& facts,
                                                       std::string* detail);

// Whether a run of a kernel that reported `facts` and, by EffectiveMode,
// `*effective` (what decided it in `*detail`) for a request of `requested`
// is a result. OK when the kernel ran the requested mode, and OK too when
// the kernel chose another one itself: its command line asked for
// `requested` (iommu_mode::ModeFromCmdline) and its device's group type
// proves the other mode; then `*detail` is rewritten to say both, as
// "the kernel ran strict although its command line asked for lazy
// (iommu.strict=0): nvme0 0000:00:02.0 group 1: DMA", and the result is
// recorded under the effective mode like an emulator's whose kernel chose
// (HostFacts.iommu_mode beside GuestFacts.requested_mode). Otherwise
// FAILED_PRECONDITION naming both modes and the command line: the farm did
// not ask for the mode (its parameters are missing or overridden), or the
// type cannot tell (a pre-v5.15 "DMA" group, strict and lazy alike).
absl::Status CheckRanMode(const KernelFacts& facts, iommufarm::v1::IommuMode requested,
                          iommufarm::v1::IommuMode effective, std::string* detail);

// The default domain type of the group of `facts`' first NVMe controller;
// "" when it has no group (or there is no controller).
std::string NvmeDomainType(const KernelFacts& facts);

// The config ids a kernel store's build is offered under: its own
// (kernel_config, "" for the default), and, for a build not made for
// dma-map-bench whose config sets CONFIG_DMA_MAP_BENCHMARK (one built before
// the option was asked only for dma-map-bench, an imported one), the id a
// dma-map-bench job of that config asks for (proto::BuildConfigId).
std::vector<std::string> OfferedConfigs(const kstore::KernelBuild& build);

// True when `build` is offered under `kernel_config` (OfferedConfigs).
bool OffersConfig(const kstore::KernelBuild& build, const std::string& kernel_config);

// Where a store's build boots. A farm build for a host platform
// (proto::IsHostBuild: the host fragment, no initramfs of the farm's) boots
// a bare-metal host by kexec and not a vm guest; a farm build for guests
// (its fragments hold guest.config: it runs from the guest initramfs, with
// none of a host's drivers) boots a guest and not a host; a packaged kernel
// (no fragments: farmctl kernels import, scripts/fetch-test-kernels) both.
enum class BootTarget { kHost, kGuest };
bool BootsOn(const kstore::KernelBuild& build, BootTarget target);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_KERNEL_PROVIDER_H_
