// vm_provider: the `vm` KernelProvider. It boots the requested kernel release
// under QEMU (x86_64 q35 with an emulated Intel VT-d, `intel-iommu` in caching
// mode, and one emulated NVMe on a scratch file), with the mode's parameter on
// the kernel command line, runs the tool inside the guest from the project's
// initramfs (scripts/build-guest-root, init in agent/kernels/guest/init),
// reads the guest's framed output from its second serial port
// (guest_channel.h) and derives the mode the guest kernel really ran from its
// NVMe's IOMMU group.
//
// Safety: QEMU runs with -nodefaults -no-user-config and only the devices
// above (no network), its scratch files (NVMe image, initrd, console logs)
// live in a fresh directory under VmConfig::allow_dir and are removed after
// the run, and it runs through RunProcess with a wall-clock limit (boot
// timeout + tool runtime + margin) and process-group kill. A guest whose
// kernel decompressor halts is stopped as soon as the console says so.
//
// Known limit of the model: the VT-d driver forces strict invalidation when
// it sees caching mode ("IOMMU batching disallowed due to virtualization"),
// so lazy requests end as a strict/lazy mismatch on this machine model.
//
// Thread-safety: immutable after construction; concurrent runs each get their
// own scratch directory. Error contract: kernel_provider.h. The pure pieces
// (command line, argv, job archive, interpretation of a finished run) are
// exposed for tests.
#ifndef AGENT_KERNELS_VM_PROVIDER_H_
#define AGENT_KERNELS_VM_PROVIDER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "agent/kernels/kernel_provider.h"

namespace farm::kernels {

struct VmConfig {
  std::string qemu = "qemu-system-x86_64";  // a name on PATH or a path
  // Kernel images as scripts/fetch-test-kernels lays them out:
  // <kernels_dir>/<release>/vmlinuz.
  std::string kernels_dir = "/var/cache/iommu-farm/kernels";
  std::string initramfs;  // scripts/build-guest-root's initramfs.cpio
  std::string allow_dir;  // the only place scratch files are made
  std::string accel = "tcg";
  int memory_mib = 1024;
  int cpus = 2;
  std::uint64_t nvme_bytes = std::uint64_t{256} << 20;
  absl::Duration boot_timeout = absl::Seconds(60);
  absl::Duration margin = absl::Seconds(30);
};

// One QEMU run with every path already chosen.
struct QemuInvocation {
  std::string qemu;
  std::string accel;
  int memory_mib = 1024;
  int cpus = 2;
  std::string kernel;
  std::string initrd;
  std::string nvme_image;
  std::string console_log;  // first serial port: the kernel console
  std::string channel_log;  // second serial port: the farm channel
  std::string cmdline;
};

// The guest kernel's command line for `mode`: console on ttyS0 (early
// printk too, so that a decompressor failure is visible), panic=-1 so that a
// panic ends QEMU (-no-reboot), then ModeKernelParameter(mode).
absl::StatusOr<std::string> GuestCmdline(iommufarm::v1::IommuMode mode);

// QEMU's argv. InvalidArgument for a path QEMU's option syntax cannot carry
// (containing ',') or a non-positive size.
absl::StatusOr<std::vector<std::string>> BuildQemuArgv(const QemuInvocation& q);

// <kernels_dir>/<release>/vmlinuz; InvalidArgument for a release that is not
// a plain name ([A-Za-z0-9._+-]+, no "..").
absl::StatusOr<std::string> KernelImagePath(const std::string& kernels_dir,
                                            const std::string& release);

// The per-job archive appended to the initramfs: farm/argv (one argument a
// line, argv[0] as the guest's tool name) and farm/wait-device. InvalidArgument
// for an argv the guest cannot run (argv[0] not fio, an argument with a
// newline or NUL).
absl::StatusOr<std::string> GuestJobArchive(const std::vector<std::string>& tool_argv,
                                            const std::string& wait_device);

// A newc ("070701") cpio archive of regular files (path, content), their
// parent directories included, ending with the trailer.
std::string NewcArchive(const std::vector<std::pair<std::string, std::string>>& files);

// How the QEMU process ended, as the run saw it.
struct QemuExit {
  bool exited_cleanly = false;  // QEMU exited 0 (guest powered off)
  bool timed_out = false;
  bool halted = false;      // stopped because the console said the guest halted
  std::string description;  // "exit 1", "signal 9 (timed out after 90s)", ...
  std::string qemu_stderr;
};

// Turns a finished QEMU run into the KernelRun or the failure the error
// contract names: ABORTED with the console tail when the guest did not get to
// `@@farm-done`; FAILED_PRECONDITION when it booted another release or ran
// another mode than requested (the message names both). Pure.
absl::StatusOr<KernelRun> InterpretGuestRun(const KernelRequest& request, absl::string_view channel,
                                            absl::string_view console, const QemuExit& exit);

class VmKernelProvider : public KernelProvider {
 public:
  explicit VmKernelProvider(VmConfig config);

  std::string_view name() const override { return "vm"; }
  absl::Status CanRun(const KernelRequest& request) const override;
  absl::StatusOr<KernelRun> Run(const KernelRequest& request) override;

  const VmConfig& config() const { return config_; }

 private:
  VmConfig config_;
};

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_VM_PROVIDER_H_
