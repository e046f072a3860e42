#include "agent/inventory.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/monitors/kernel_counters.h"
#include "agent/sysfs_tree.h"
#include "lib/base/file.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

// The file name a sysfs link points at ("nvme" for .../drivers/nvme), "" when
// there is no link.
std::string LinkTarget(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return ec ? "" : target.filename().string();
}

// The value of the first "key : value" line of /proc/cpuinfo for `key`.
std::string CpuinfoField(const std::string& cpuinfo, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (absl::StripAsciiWhitespace(kv.first) == key) {
      return std::string(absl::StripAsciiWhitespace(kv.second));
    }
  }
  return "";
}

// x86 names its CPU; arm64's /proc/cpuinfo gives only the MIDR fields.
std::string CpuModel(const std::string& root) {
  const std::string cpuinfo = base::ReadFileOrEmpty(Under(root, "/proc/cpuinfo").string());
  std::string model = CpuinfoField(cpuinfo, "model name");
  if (!model.empty()) return model;
  const std::string implementer = CpuinfoField(cpuinfo, "CPU implementer");
  const std::string part = CpuinfoField(cpuinfo, "CPU part");
  if (implementer.empty()) return "";
  return absl::StrCat("implementer ", implementer, " part ", part);
}

uint32_t Sockets(const std::string& root) {
  std::set<std::string> packages;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/devices/system/cpu"), ec)) {
    const std::string id = ReadTrimmed(e.path() / "topology" / "physical_package_id");
    if (!id.empty()) packages.insert(id);
  }
  return static_cast<uint32_t>(packages.size());
}

uint64_t MemoryKib(const std::string& root) {
  const std::string meminfo = base::ReadFileOrEmpty(Under(root, "/proc/meminfo").string());
  std::string total = CpuinfoField(meminfo, "MemTotal");  // "16318440 kB"
  uint64_t kib = 0;
  return absl::SimpleAtoi(absl::StripSuffix(total, " kB"), &kib) ? kib : 0;
}

// The attribute groups IOMMU drivers register on their class device:
// intel-iommu (drivers/iommu/intel/iommu.c intel_iommu_attrs) and amd-iommu
// (drivers/iommu/amd/init.c amd_iommu_attrs).
constexpr const char* kIommuAttributeGroups[] = {"intel-iommu", "amd-iommu"};

pb::IommuUnit ReadIommuUnit(const fs::path& dir) {
  pb::IommuUnit unit;
  unit.set_name(dir.filename().string());
  unit.set_driver(LinkTarget(dir / "device" / "driver"));
  std::error_code ec;
  for (const char* group : kIommuAttributeGroups) {
    for (const auto& e : fs::directory_iterator(dir / group, ec)) {
      if (!e.is_regular_file(ec)) continue;
      (*unit.mutable_attributes())[absl::StrCat(group, "/", e.path().filename().string())] =
          ReadTrimmed(e.path());
    }
  }
  uint32_t devices = 0;
  for (const auto& e : fs::directory_iterator(dir / "devices", ec)) {
    (void)e;
    ++devices;
  }
  unit.set_devices(devices);
  return unit;
}

std::vector<pb::IommuUnit> IommuUnits(const std::string& root) {
  std::vector<pb::IommuUnit> units;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/class/iommu"), ec)) {
    units.push_back(ReadIommuUnit(e.path()));
  }
  std::sort(units.begin(), units.end(),
            [](const pb::IommuUnit& a, const pb::IommuUnit& b) { return a.name() < b.name(); });
  return units;
}

// The whole disk of a block device name: a partition's parent.
std::string DiskOf(const std::string& root, const std::string& block) {
  const fs::path dir = Under(root, "/sys/class/block") / block;
  std::error_code ec;
  if (!fs::exists(dir / "partition", ec)) return block;
  const fs::path real = fs::canonical(dir, ec);
  return ec ? block : real.parent_path().filename().string();
}

// The block device holding `path`'s file system, from its st_dev
// (/sys/dev/block/MAJOR:MINOR); "" for one that has none (tmpfs, overlay).
std::string BlockOfDirectory(const std::string& root, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  const fs::path link =
      Under(root, absl::StrCat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev)));
  std::error_code ec;
  const fs::path real = fs::canonical(link, ec);
  return ec ? "" : real.filename().string();
}

// Fills the PCI function nearest the disk in its sysfs path, its driver
// and IOMMU group.
void FillPci(const std::string& root, const std::string& disk, pb::InventoryDevice* d) {
  static const std::regex kPciAddress("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  std::error_code ec;
  const fs::path real = fs::canonical(Under(root, "/sys/class/block") / disk, ec);
  if (ec) return;
  for (const fs::path& part : real) {
    if (std::regex_match(part.string(), kPciAddress)) d->set_pci_address(part.string());
  }
  if (d->pci_address().empty()) return;
  const fs::path pci = Under(root, "/sys/bus/pci/devices") / d->pci_address();
  d->set_driver(LinkTarget(pci / "driver"));
  d->set_iommu_group(LinkTarget(pci / "iommu_group"));
  if (!d->iommu_group().empty()) {
    d->set_group_type(
        ReadTrimmed(Under(root, "/sys/kernel/iommu_groups") / d->iommu_group() / "type"));
  }
}

pb::InventoryDevice DescribePath(const std::string& root, const std::string& path, bool is_device) {
  pb::InventoryDevice d;
  d.set_path(path);
  const std::string block =
      is_device ? fs::path(path).filename().string() : BlockOfDirectory(root, path);
  if (block.empty()) return d;
  d.set_block(block);
  const std::string disk = DiskOf(root, block);
  d.set_model(ReadTrimmed(Under(root, "/sys/class/block") / disk / "device" / "model"));
  FillPci(root, disk, &d);
  return d;
}

}  // namespace

pb::Inventory DetectInventory(const InventoryScope& scope, const std::string& root) {
  pb::Inventory inv;
  inv.set_cpu_model(CpuModel(root));
  inv.set_sockets(Sockets(root));
  inv.set_memory_kib(MemoryKib(root));
  for (pb::IommuUnit& u : IommuUnits(root)) *inv.add_iommus() = std::move(u);
  for (const std::string& dev : scope.allow_devices) {
    *inv.add_devices() = DescribePath(root, dev, /*is_device=*/true);
  }
  for (const std::string& dir : scope.allow_dirs) {
    *inv.add_devices() = DescribePath(root, dir, /*is_device=*/false);
  }
  // Said here once, so that a run's monitors need not repeat what the host
  // lacks.
  monitors::KernelCounterOptions counters;
  counters.root = root;
  for (pb::MonitorCounter& c : monitors::CounterInventory(counters)) {
    *inv.add_monitor_counters() = std::move(c);
  }
  return inv;
}

}  // namespace farm::agent
