// agent/kernels/root_mount.h: what a kernel must have built in to mount this
// host's root file system by itself. A kernel the farm builds for a host has
// no initramfs (its modules are built in, docs/kernels.md "Kernels for a host
// platform"), so one whose config leaves the root's block driver or file
// system a module, or out, panics at "VFS: Unable to mount root fs" and only
// a power cycle brings the host back. The kexec provider checks a build
// against the host's needs before it kexecs, and fails the job at once as a
// kernel that does not boot on this host (a bisect skip) instead.
//
// The needs are read from the running kernel: the device and file system
// of "/" (/proc/self/mounts, or the root's st_dev for "/dev/root"), the
// drivers bound on that disk's sysfs path (the block driver and the bus
// drivers below it), each mapped to the config option that builds it.
// Drivers without a known option are not judged.
//
// Thread-safety: reentrant functions. No ownership.
#ifndef AGENT_KERNELS_ROOT_MOUNT_H_
#define AGENT_KERNELS_ROOT_MOUNT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/kstore/kernel_store.h"

namespace farm::kernels {

struct RootNeed {
  std::string option;  // "CONFIG_BLK_DEV_NVME"
  std::string why;     // "/dev/nvme0n1 is on driver nvme"
};

// The options a kernel needs built in (=y) to mount the root of the system
// under `root` ("/" on a host); empty when the root's device cannot be
// read (a container, an overlay root).
std::vector<RootNeed> ReadRootNeeds(const std::string& root = "/");

// OK when `build` can mount a root with `needs`: every option is =y in its
// config. Not judged (OK): a build with an initramfs, which may load the
// modules, or without a config. Otherwise FailedPrecondition naming each
// missing option, its value and why the root needs it, and carrying
// proto::kDoesNotBootMark.
absl::Status CheckMountsRoot(const kstore::KernelBuild& build, const std::vector<RootNeed>& needs);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_ROOT_MOUNT_H_
