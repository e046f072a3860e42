// guest_archive: the newc cpio archives the vm provider (vm_provider.h)
// appends to the project's guest initramfs (scripts/build-guest-root, init
// in agent/kernels/guest/init): the job's (the tool's argv, its device, its
// scratch file system or benchmark device, the farm channel) and the
// kernel modules' the guest loads first (module_deps.h). The kernel unpacks
// concatenated archives in order, so each only adds files.
//
// Safety: a job archive carries only what the guest's init can run: fio,
// an iozone confined to its scratch file system, or the build's
// dma_map_benchmark; arguments it cannot pass are refused.
//
// Thread-safety: no state; GuestModulesArchive reads the module files, the
// others are pure.
#ifndef AGENT_KERNELS_GUEST_ARCHIVE_H_
#define AGENT_KERNELS_GUEST_ARCHIVE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace farm::kernels {

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
// given, farm/channel (the farm channel's device); with `kernel_counters`
// and a tool, farm/kernel-counters (the init counts the kernel's IOMMU
// events around the tool). InvalidArgument for an
// argv the guest cannot run (argv[0] not fio, iozone or dma_map_benchmark,
// an iozone argv CheckGuestIozoneArgv refuses or without a device, a
// dma_map_benchmark without its binary, an argument with a newline or NUL).
absl::StatusOr<std::string> GuestJobArchive(const std::vector<std::string>& tool_argv,
                                            const std::string& wait_device,
                                            const std::string& channel = "",
                                            const std::string& tool_binary = "",
                                            bool kernel_counters = false);

// The archive of `modules` (paths) for the guest's init: each file as
// farm/modules/<basename>, and farm/modules.order naming them in order.
absl::StatusOr<std::string> GuestModulesArchive(const std::vector<std::string>& modules);

// A newc ("070701") cpio archive of regular files (path, content), their
// parent directories included, ending with the trailer. Files under
// farm/bin/ are executable (0755), the others 0644.
std::string NewcArchive(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_GUEST_ARCHIVE_H_
