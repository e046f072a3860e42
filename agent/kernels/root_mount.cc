#include "agent/kernels/root_mount.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "lib/base/file.h"
#include "proto/failure_marks.h"

namespace farm::kernels {
namespace {

namespace fs = std::filesystem;

// The config option that builds each driver a root may sit behind, by the
// name sysfs gives the bound driver (drivers/*/.../Kconfig).
const std::map<std::string_view, std::string_view>& DriverOptions() {
  static const auto* m = new std::map<std::string_view, std::string_view>{
      {"nvme", "CONFIG_BLK_DEV_NVME"},
      {"virtio_blk", "CONFIG_VIRTIO_BLK"},
      {"virtio-pci", "CONFIG_VIRTIO_PCI"},
      {"ahci", "CONFIG_SATA_AHCI"},
      {"sd", "CONFIG_BLK_DEV_SD"},
      {"megaraid_sas", "CONFIG_MEGARAID_SAS"},
      {"mpt3sas", "CONFIG_SCSI_MPT3SAS"},
      {"smartpqi", "CONFIG_SCSI_SMARTPQI"},
      {"xen_blkfront", "CONFIG_XEN_BLKDEV_FRONTEND"},
  };
  return *m;
}

// ... and each root file system.
const std::map<std::string_view, std::string_view>& FsOptions() {
  static const auto* m = new std::map<std::string_view, std::string_view>{
      {"ext4", "CONFIG_EXT4_FS"}, {"xfs", "CONFIG_XFS_FS"}, {"btrfs", "CONFIG_BTRFS_FS"}};
  return *m;
}

struct RootMount {
  std::string device;  // "/dev/nvme0n1p2"
  std::string fstype;  // "ext4"
};

// The last mount of "/" in <root>/proc/self/mounts.
RootMount ReadRootMount(const fs::path& root) {
  RootMount out;
  const std::string mounts = base::ReadFileOrEmpty((root / "proc/self/mounts").string());
  for (absl::string_view line : absl::StrSplit(mounts, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() >= 3 && f[1] == "/" && f[2] != "rootfs") {
      out = {std::string(f[0]), std::string(f[2])};
    }
  }
  return out;
}

// The block device name of the root: "/dev/X" when sysfs knows X, else
// (the kernel's "/dev/root") the one behind "/"'s st_dev on a live host.
std::string RootBlock(const fs::path& root, const std::string& device) {
  std::error_code ec;
  if (absl::StartsWith(device, "/dev/")) {
    const std::string name = device.substr(5);
    if (fs::exists(root / "sys/class/block" / name, ec)) return name;
  }
  if (root != fs::path("/")) return "";
  struct stat st {};
  if (::stat("/", &st) != 0) return "";
  const fs::path link = absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
  const fs::path real = fs::canonical(link, ec);
  return ec ? "" : real.filename().string();
}

// True when `p` lies strictly below `dir`.
bool IsBelow(const fs::path& p, const fs::path& dir) {
  auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
  return d == dir.end() && q != p.end();
}

// The drivers bound on `block`'s disk's device path, nearest first.
std::vector<std::string> DriversBelow(const fs::path& root, const std::string& block) {
  std::error_code ec;
  const fs::path sys = fs::weakly_canonical(root / "sys", ec);
  fs::path disk = root / "sys/class/block" / block;
  if (fs::exists(disk / "partition", ec)) disk = fs::canonical(disk, ec).parent_path();
  std::vector<std::string> out;
  for (fs::path p = fs::canonical(disk / "device", ec); !ec && IsBelow(p, sys);
       p = p.parent_path()) {
    std::error_code link_ec;
    const fs::path driver = fs::read_symlink(p / "driver", link_ec);
    if (!link_ec) out.push_back(driver.filename().string());
  }
  return out;
}

// CONFIG_X -> its value ("y", "m", "\"...\""); "# CONFIG_X is not set" lines
// are left out.
std::map<std::string, std::string> ParseConfig(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    const size_t eq = line.find('=');
    if (!absl::StartsWith(line, "CONFIG_") || eq == absl::string_view::npos) continue;
    out[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return out;
}

}  // namespace

std::vector<RootNeed> ReadRootNeeds(const std::string& root) {
  const fs::path r(root);
  const RootMount mount = ReadRootMount(r);
  std::vector<RootNeed> out;
  std::set<std::string> seen;
  const std::string block = mount.device.empty() ? "" : RootBlock(r, mount.device);
  if (!block.empty()) {
    for (const std::string& driver : DriversBelow(r, block)) {
      const auto it = DriverOptions().find(driver);
      if (it == DriverOptions().end() || !seen.insert(std::string(it->second)).second) continue;
      out.push_back({std::string(it->second),
                     absl::StrCat("the root ", mount.device, " is on driver ", driver)});
    }
  }
  if (const auto it = FsOptions().find(mount.fstype); it != FsOptions().end()) {
    out.push_back({std::string(it->second), absl::StrCat("the root is ", mount.fstype)});
  }
  return out;
}

absl::Status CheckMountsRoot(const kstore::KernelBuild& build, const std::vector<RootNeed>& needs) {
  if (!build.initrd.empty() || build.config.empty() || needs.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> text = base::ReadFile(build.ConfigPath());
  if (!text.ok()) return absl::OkStatus();  // a store entry without its config: not judged
  const std::map<std::string, std::string> config = ParseConfig(*text);
  std::vector<std::string> missing;
  for (const RootNeed& n : needs) {
    const auto it = config.find(n.option);
    if (it != config.end() && it->second == "y") continue;
    missing.push_back(absl::StrCat(n.option, "=", it == config.end() ? "(not set)" : it->second,
                                   " (", n.why, ")"));
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "kernel ", build.release, " (commit ", build.commit,
      ") cannot mount this host's root without an initramfs, which the build does not have: ",
      absl::StrJoin(missing, ", "), "; so it ", std::string(proto::kDoesNotBootMark),
      " (no kexec was tried)"));
}

}  // namespace farm::kernels
