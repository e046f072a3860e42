// module_deps: the kernel modules a vm guest loads before its job, when
// its build has the NVMe (or, for iozone's scratch file system, the ext4)
// driver as a module rather than built in: found in the build's modules
// directory and ordered by their .modinfo dependencies (no modules.dep
// needed: a .deb has none, depmod writes it at install). guest_archive.h
// packs them for the guest's init.
//
// Thread-safety: no state; GuestModules reads the build's config and
// module files, ModuleDepends is pure.
#ifndef AGENT_KERNELS_MODULE_DEPS_H_
#define AGENT_KERNELS_MODULE_DEPS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/kstore/kernel_store.h"

namespace farm::kernels {

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

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_MODULE_DEPS_H_
