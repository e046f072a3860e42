#include "agent/host_iommu_environment.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "agent/kernels/iommu_environment.h"
#include "agent/sysfs_tree.h"
#include "lib/base/file.h"
#include "lib/base/sha256.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

using Facts = std::map<std::string, std::string>;

// A sysfs link's target's last component ("arm-smmu-v3.0.auto").
std::string LinkName(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return ec ? "" : target.filename().string();
}

// The kernel log as text, or nullopt when it cannot be read. /dev/kmsg
// hands out one record per read() (a buffer smaller than a record is
// EINVAL) and EAGAIN at its end when opened non-blocking; EPIPE says
// records were overwritten while reading, and reading goes on.
std::optional<std::string> KernelLog(const std::string& root) {
  const int fd = open(Under(root, "/dev/kmsg").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  constexpr size_t kMaxLog = size_t{32} << 20;
  std::string log;
  char buf[8192];
  while (log.size() < kMaxLog) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      log.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EPIPE) {
      continue;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // 0: end of a plain file; EAGAIN: end of the log
    }
  }
  close(fd);
  return log;
}

// The last line of `log` in which the SMMUv3 driver names `device` with its
// features ("arm-smmu-v3 arm-smmu-v3.0.auto: ias 44-bit, ..."); "" for none.
std::string SmmuLine(const std::string& log, const std::string& device) {
  const std::string needle = absl::StrCat(device, ": ");
  std::string found;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, needle) && absl::StrContains(line, "(features 0x")) {
      found = std::string(line.substr(line.find(needle) + needle.size()));
    }
  }
  return found;
}

// The kernel-log facts recorded for one boot (KernelLogRecord in the
// header): "boot_id <id>", then "<raw key>=<line>" per SMMUv3 unit.
Facts ReadRecord(const std::string& path, const std::string& boot_id) {
  Facts lines;
  const std::string text = base::ReadFileOrEmpty(path);
  std::vector<absl::string_view> rows = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (rows.empty() || rows[0] != absl::StrCat("boot_id ", boot_id)) return lines;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(rows[i], absl::MaxSplits('=', 1));
    if (!kv.second.empty()) lines[kv.first] = kv.second;
  }
  return lines;
}

void WriteRecord(const std::string& path, const std::string& boot_id, const Facts& lines) {
  std::string text = absl::StrCat("boot_id ", boot_id, "\n");
  for (const auto& [key, line] : lines) absl::StrAppend(&text, key, "=", line, "\n");
  if (absl::Status st = base::WriteFileAtomically(path, text, 0644); !st.ok()) {
    spdlog::warn(
        "IOMMU environment: {} (an agent restarted after the kernel log wraps will "
        "miss the SMMUv3 features)",
        std::string(st.message()));
  }
}

// The SMMUv3 units' boot lines: from the kernel log, else from the record of
// this boot. The lines are what the driver printed at probe, so they are
// fixed for the boot; the record keeps them for an agent restarted after the
// log wrapped, and the digest with them (a value that vanished with the log
// would split one host's series in two with nothing changed). A record of
// another boot is never used: the next kernel may be another build, whose
// driver reports other features.
void ReadSmmuLines(const std::string& root, const std::string& record,
                   const std::map<std::string, std::string>& devices, Facts* raw,
                   Facts* unavailable) {
  const std::optional<std::string> log = KernelLog(root);
  const std::string boot_id = ReadTrimmed(Under(root, "/proc/sys/kernel/random/boot_id"));
  const bool keep = !record.empty() && !boot_id.empty();
  const Facts recorded = keep ? ReadRecord(record, boot_id) : Facts();
  Facts lines = recorded;
  for (const auto& [unit, device] : devices) {
    const std::string key = absl::StrCat("unit/", unit, kernels::kSmmuLogSuffix);
    if (std::string line = log ? SmmuLine(*log, device) : ""; !line.empty()) lines[key] = line;
    if (auto it = lines.find(key); it != lines.end()) {
      (*raw)[key] = it->second;
      continue;
    }
    (*unavailable)[absl::StrCat("unit/", unit, "/features")] =
        log ? absl::StrCat("no arm-smmu-v3 boot line for ", device,
                           " in the kernel log (it has wrapped since boot)",
                           keep ? " nor in the agent's record of this boot" : "")
            : "the kernel log is unreadable (/dev/kmsg: not root, or dmesg_restrict)";
  }
  if (keep && lines != recorded) WriteRecord(record, boot_id, lines);
}

void ReadUnits(const std::string& root, const std::string& record, Facts* raw, Facts* unavailable) {
  std::map<std::string, std::string> smmus;  // unit -> its platform device
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/class/iommu"), ec)) {
    const std::string unit = e.path().filename().string();
    const std::string prefix = absl::StrCat("unit/", unit, "/");
    for (const char* a : {"version", "cap", "ecap"}) {
      const std::string v = ReadTrimmed(e.path() / "intel-iommu" / a);
      if (!v.empty()) (*raw)[prefix + a] = v;
    }
    for (const char* a : {"cap", "features"}) {
      const std::string v = ReadTrimmed(e.path() / "amd-iommu" / a);
      if (!v.empty()) (*raw)[prefix + a] = v;
    }
    if (LinkName(e.path() / "device" / "driver") != "arm-smmu-v3") continue;
    (*unavailable)[prefix + "iidr"] = "the kernel exports no SMMUv3 register (not even its IIDR)";
    smmus[unit] = LinkName(e.path() / "device");
  }
  // The log is read only on a host with an SMMUv3.
  if (!smmus.empty()) ReadSmmuLines(root, record, smmus, raw, unavailable);
}

void ReadFirmware(const std::string& root, Facts* raw, Facts* unavailable) {
  std::error_code ec;
  for (const char* table : kernels::kIommuAcpiTables) {
    const fs::path path = Under(root, "/sys/firmware/acpi/tables") / table;
    if (!fs::exists(path, ec)) continue;
    absl::StatusOr<std::string> bytes = base::ReadFile(path.string());
    const std::string key = absl::StrCat("acpi/", table, "/sha256");
    if (bytes.ok()) {
      (*raw)[key] = base::Sha256Hex(*bytes);
    } else {
      (*unavailable)[key] = std::string(bytes.status().message());
    }
  }
  for (const char* file : kernels::kFirmwareFiles) {
    const std::string v = ReadTrimmed(Under(root, "/sys/class/dmi/id") / file);
    if (!v.empty()) (*raw)[absl::StrCat("firmware/", file)] = v;
  }
}

void ReadDevices(const std::string& root, Facts* raw, Facts* unavailable) {
  std::error_code ec;
  bool ats_short = false;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/bus/pci/devices"), ec)) {
    const std::string group = LinkName(e.path() / "iommu_group");
    if (group.empty()) continue;
    const std::string prefix = absl::StrCat("device/", e.path().filename().string(), "/");
    const std::string type = ReadTrimmed(Under(root, "/sys/kernel/iommu_groups") / group / "type");
    if (!type.empty()) (*raw)[prefix + "domain"] = type;
    std::optional<std::string> ats =
        kernels::AtsState(base::ReadFileOrEmpty((e.path() / "config").string()));
    if (!ats) {
      ats_short = true;
    } else if (!ats->empty()) {
      (*raw)[prefix + "ats"] = *ats;
    }
  }
  if (ats_short) {
    (*unavailable)["device/*/ats"] =
        "PCI config space past 64 bytes is readable by root only: ATS not read for some devices";
  }
}

}  // namespace

pb::IommuEnvironment DetectIommuEnvironment(const std::string& root,
                                            const std::string& kernel_log_record) {
  Facts raw, unavailable;
  ReadUnits(root, kernel_log_record, &raw, &unavailable);
  ReadFirmware(root, &raw, &unavailable);
  ReadDevices(root, &raw, &unavailable);
  return kernels::FinishIommuEnvironment(std::move(raw), std::move(unavailable));
}

pb::IommuEnvironment RefreshIommuEnvironment(const pb::IommuEnvironment& at_start,
                                             const std::string& root) {
  Facts raw, unavailable;
  for (const auto& [key, value] : at_start.facts()) {
    if (!absl::StartsWith(key, "device/")) raw[key] = value;
  }
  for (const auto& [key, why] : at_start.unavailable()) {
    if (!absl::StartsWith(key, "device/")) unavailable[key] = why;
  }
  ReadDevices(root, &raw, &unavailable);
  return kernels::FinishIommuEnvironment(std::move(raw), std::move(unavailable));
}

}  // namespace farm::agent
