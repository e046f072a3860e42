#include "agent/host_facts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/sysfs_tree.h"
#include "lib/base/file.h"
#include "lib/iommu_mode/iommu_mode.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

// "on"/"off" from a sysfs 0/1 flag (`one_is_on`: 1 means on), "" when absent.
std::string OnOff(const std::string& flag, bool one_is_on) {
  if (flag != "0" && flag != "1") return "";
  return (flag == "1") == one_is_on ? "on" : "off";
}

// The value of `key:` in a /proc/<pid>/status text.
std::string StatusField(const std::string& status, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, ":")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return "";
}

}  // namespace

pb::Hygiene DetectHygiene(const std::string& root) {
  pb::Hygiene h;
  h.set_governor(ReadTrimmed(Under(root, "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")));
  std::string turbo =
      OnOff(ReadTrimmed(Under(root, "/sys/devices/system/cpu/intel_pstate/no_turbo")), false);
  if (turbo.empty()) {
    turbo = OnOff(ReadTrimmed(Under(root, "/sys/devices/system/cpu/cpufreq/boost")), true);
  }
  h.set_turbo(turbo);
  h.set_smt(OnOff(ReadTrimmed(Under(root, "/sys/devices/system/cpu/smt/active")), true));
  const std::string status = base::ReadFileOrEmpty(Under(root, "/proc/self/status").string());
  h.set_cpus_allowed(StatusField(status, "Cpus_allowed_list"));
  h.set_mems_allowed(StatusField(status, "Mems_allowed_list"));
  return h;
}

absl::Status SetGovernor(const std::string& governor, const std::string& root) {
  std::error_code ec;
  int set = 0;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/devices/system/cpu"), ec)) {
    const fs::path file = e.path() / "cpufreq" / "scaling_governor";
    if (!fs::exists(file, ec)) continue;
    if (absl::Status s = base::WriteFile(file.string(), governor + "\n");
        !s.ok() || ReadTrimmed(file) != governor) {
      const std::string offered = ReadTrimmed(e.path() / "cpufreq" / "scaling_available_governors");
      return absl::FailedPreconditionError(
          absl::StrCat("--set-governor ", governor, ": ", file.string(), " refused it",
                       s.ok() ? "" : absl::StrCat(" (", s.message(), ")"),
                       offered.empty() ? "" : absl::StrCat("; offered: ", offered)));
    }
    ++set;
  }
  if (set == 0) {
    return absl::NotFoundError(
        absl::StrCat("--set-governor ", governor, ": this host has no cpufreq governors"));
  }
  return absl::OkStatus();
}

namespace {

// Writes `value` to `file` and reads `expect` back from `check`.
absl::Status WriteSysfsFlag(const char* flag, const fs::path& file, const std::string& value,
                            const fs::path& check, const std::string& expect) {
  absl::Status s = base::WriteFile(file.string(), value + "\n");
  const std::string now = ReadTrimmed(check);
  if (!s.ok() || now != expect) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, ": ", file.string(), " refused ", value,
                     s.ok() ? absl::StrCat(" (", check.string(), " reads '", now, "')")
                            : absl::StrCat(" (", s.message(), ")")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SetTurbo(bool on, const std::string& root) {
  std::error_code ec;
  const fs::path no_turbo = Under(root, "/sys/devices/system/cpu/intel_pstate/no_turbo");
  if (fs::exists(no_turbo, ec)) {
    const std::string v = on ? "0" : "1";
    return WriteSysfsFlag("--set-turbo", no_turbo, v, no_turbo, v);
  }
  const fs::path boost = Under(root, "/sys/devices/system/cpu/cpufreq/boost");
  if (fs::exists(boost, ec)) {
    const std::string v = on ? "1" : "0";
    return WriteSysfsFlag("--set-turbo", boost, v, boost, v);
  }
  return absl::NotFoundError(
      "--set-turbo: this host has neither intel_pstate/no_turbo nor cpufreq/boost");
}

absl::Status SetSmt(bool on, const std::string& root) {
  std::error_code ec;
  const fs::path control = Under(root, "/sys/devices/system/cpu/smt/control");
  if (!fs::exists(control, ec)) {
    return absl::NotFoundError("--set-smt: this kernel has no smt/control");
  }
  const std::string v = on ? "on" : "off";
  return WriteSysfsFlag("--set-smt", control, v, control, v);
}

pb::HostFacts DetectHostFacts(const std::string& root) {
  pb::HostFacts facts;
  std::error_code ec;
  facts.set_hostname(ReadTrimmed(Under(root, "/proc/sys/kernel/hostname")));
  facts.set_kernel_release(ReadTrimmed(Under(root, "/proc/sys/kernel/osrelease")));
  struct utsname uts {};
  if (root == "/" && uname(&uts) == 0) {
    if (facts.hostname().empty()) facts.set_hostname(uts.nodename);
    if (facts.kernel_release().empty()) facts.set_kernel_release(uts.release);
    facts.set_architecture(uts.machine);
  }
  if (root == "/") {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    facts.set_cpus(cpus > 0 ? static_cast<uint32_t>(cpus) : 0);
  } else {
    // Fake trees describe CPUs as /sys/devices/system/cpu/cpuN.
    uint32_t cpus = 0;
    for (const auto& e : fs::directory_iterator(Under(root, "/sys/devices/system/cpu"), ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 3 && absl::StartsWith(name, "cpu") &&
          std::all_of(name.begin() + 3, name.end(), ::isdigit)) {
        ++cpus;
      }
    }
    facts.set_cpus(cpus);
  }
  uint32_t nodes = 0;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/devices/system/node"), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && absl::StartsWith(name, "node") &&
        std::all_of(name.begin() + 4, name.end(), ::isdigit)) {
      ++nodes;
    }
  }
  facts.set_numa_nodes(nodes == 0 ? 1 : nodes);

  std::vector<std::string> units;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/class/iommu"), ec)) {
    units.push_back(e.path().filename().string());
  }
  std::sort(units.begin(), units.end());
  std::vector<std::string> group_types;
  for (const auto& e : fs::directory_iterator(Under(root, "/sys/kernel/iommu_groups"), ec)) {
    std::string type = ReadTrimmed(e.path() / "type");
    if (!type.empty()) group_types.push_back(type);
  }
  const std::string cmdline = ReadTrimmed(Under(root, "/proc/cmdline"));
  std::string arch = facts.architecture();
  if (arch.empty()) arch = ReadTrimmed(Under(root, "/proc/sys/kernel/arch"));

  iommu_mode::RunningKernel kernel;
  // No IOMMU unit registered: devices do dma-direct whatever the cmdline says.
  kernel.behind_iommu = !units.empty();
  kernel.group_types = group_types;
  kernel.cmdline = cmdline;
  kernel.release = facts.kernel_release();
  kernel.arch = arch;
  const iommu_mode::ModeReading reading = iommu_mode::ReadRunningMode(kernel);
  facts.set_iommu_mode(reading.mode ? proto::ProtoMode(*reading.mode) : pb::IOMMU_MODE_UNSPECIFIED);

  std::vector<std::string> detail;
  if (!reading.cmdline_detail.empty()) detail.push_back(reading.cmdline_detail);
  if (units.empty()) {
    detail.push_back("no IOMMU units in /sys/class/iommu");
  } else {
    detail.push_back(absl::StrCat("units: ", absl::StrJoin(units, ",")));
    if (!group_types.empty()) {
      std::map<std::string, int> counts;
      for (const auto& t : group_types) ++counts[t];
      std::vector<std::string> parts;
      for (const auto& [t, n] : counts) parts.push_back(absl::StrCat(t, " x", n));
      detail.push_back(absl::StrCat("groups: ", absl::StrJoin(parts, ", ")));
    }
    if (!reading.note.empty()) detail.push_back(reading.note);
  }
  facts.set_iommu_detail(absl::StrJoin(detail, "; "));
  *facts.mutable_hygiene() = DetectHygiene(root);
  return facts;
}

}  // namespace farm::agent
