#include "agent/host_facts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

std::string ReadTrimmed(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream buf;
  buf << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(buf.str()));
}

fs::path Under(const std::string& root, const char* absolute) {
  return fs::path(root) / (absolute + 1);  // drop the leading '/'
}

// The kernel's kstrtobool(): y/Y/t/T/1 and "on" are true, n/N/f/F/0 and
// "off" false; anything else leaves the parameter unset.
int KstrToBool(absl::string_view v) {
  if (v.empty()) return -1;
  switch (v[0]) {
    case 'y':
    case 'Y':
    case 't':
    case 'T':
    case '1':
      return 1;
    case 'n':
    case 'N':
    case 'f':
    case 'F':
    case '0':
      return 0;
    case 'o':
    case 'O':
      if (v.size() > 1 && (v[1] == 'n' || v[1] == 'N')) return 1;
      if (v.size() > 1 && (v[1] == 'f' || v[1] == 'F')) return 0;
      return -1;
    default:
      return -1;
  }
}

// "5.11.0-rc5" -> {5, 11}; {0, 0} when unparsable.
std::pair<int, int> KernelVersion(absl::string_view release) {
  int major = 0, minor = 0;
  std::vector<absl::string_view> parts = absl::StrSplit(release, absl::MaxSplits('.', 2));
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major)) return {0, 0};
  absl::string_view m = parts[1];
  size_t digits = 0;
  while (digits < m.size() && absl::ascii_isdigit(static_cast<unsigned char>(m[digits]))) ++digits;
  if (digits == 0 || !absl::SimpleAtoi(m.substr(0, digits), &minor)) return {0, 0};
  return {major, minor};
}

}  // namespace

CmdlineIommu ParseIommuCmdline(std::string_view cmdline) {
  CmdlineIommu out;
  // Translation: true = translated, false = off/passthrough decided.
  bool disabled = false, passthrough = false;
  int strict = -1;  // -1 unset, 0 lazy, 1 strict
  std::vector<std::string> detail;
  for (absl::string_view word : absl::StrSplit(absl::string_view(cmdline.data(), cmdline.size()),
                                               absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view key = word.substr(0, eq);
    absl::string_view value = word.substr(eq + 1);
    bool relevant = true;
    if (key == "intel_iommu" || key == "amd_iommu") {
      // Values are comma lists: intel_iommu=on,sm_on / amd_iommu=off.
      for (absl::string_view v : absl::StrSplit(value, ',')) {
        if (v == "off") disabled = true;
        if (v == "on" || v == "force") disabled = false;
        if (v == "strict") strict = 1;     // deprecated alias of iommu.strict=1
        if (v == "fullflush") strict = 1;  // AMD's pre-v5.15 spelling of strict
      }
    } else if (key == "iommu") {
      for (absl::string_view v : absl::StrSplit(value, ',')) {
        if (v == "off") disabled = true;
        if (v == "pt") passthrough = true;
        if (v == "nopt") passthrough = false;
        if (v == "strict") strict = 1;
        if (v == "force" || v == "on") disabled = false;
      }
    } else if (key == "iommu.passthrough") {
      if (const int b = KstrToBool(value); b >= 0) passthrough = b == 1;
    } else if (key == "iommu.strict") {
      if (const int b = KstrToBool(value); b >= 0) strict = b;
    } else {
      relevant = false;
    }
    if (relevant) detail.emplace_back(word);
  }
  out.detail = absl::StrJoin(detail, " ");
  if (disabled) {
    out.mode = pb::IOMMU_MODE_OFF;
  } else if (passthrough) {
    out.mode = pb::IOMMU_MODE_PASSTHROUGH;
  } else if (strict == 1) {
    out.mode = pb::IOMMU_MODE_STRICT;
  } else if (strict == 0) {
    out.mode = pb::IOMMU_MODE_LAZY;
  }
  return out;
}

pb::IommuMode ModeFromGroupTypes(const std::vector<std::string>& types) {
  std::map<pb::IommuMode, int> votes;
  for (const auto& t : types) {
    if (t == "DMA") {
      ++votes[pb::IOMMU_MODE_STRICT];
    } else if (t == "DMA-FQ") {
      ++votes[pb::IOMMU_MODE_LAZY];
    } else if (t == "identity") {
      ++votes[pb::IOMMU_MODE_PASSTHROUGH];
    }
  }
  pb::IommuMode best = pb::IOMMU_MODE_UNSPECIFIED;
  int best_votes = 0;
  for (const auto& [mode, n] : votes) {
    if (n > best_votes) {
      best = mode;
      best_votes = n;
    }
  }
  return best;
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
  const CmdlineIommu cmdline = ParseIommuCmdline(ReadTrimmed(Under(root, "/proc/cmdline")));

  std::vector<std::string> detail;
  if (!cmdline.detail.empty()) detail.push_back(cmdline.detail);
  if (units.empty()) {
    // No IOMMU unit registered: devices do dma-direct whatever the cmdline says.
    facts.set_iommu_mode(pb::IOMMU_MODE_OFF);
    detail.push_back("no IOMMU units in /sys/class/iommu");
  } else {
    detail.push_back(absl::StrCat("units: ", absl::StrJoin(units, ",")));
    const pb::IommuMode from_groups = ModeFromGroupTypes(group_types);
    if (!group_types.empty()) {
      std::map<std::string, int> counts;
      for (const auto& t : group_types) ++counts[t];
      std::vector<std::string> parts;
      for (const auto& [t, n] : counts) parts.push_back(absl::StrCat(t, " x", n));
      detail.push_back(absl::StrCat("groups: ", absl::StrJoin(parts, ", ")));
    }
    // The groups' live domain types are the truth; the cmdline is what was
    // asked for and the fallback when groups are not visible.
    pb::IommuMode mode = from_groups != pb::IOMMU_MODE_UNSPECIFIED ? from_groups : cmdline.mode;
    // Before v5.15 there was no "DMA-FQ" type: "DMA" meant translated,
    // strict or lazy. Then the strictness is the cmdline's, else the
    // architecture's default of that era (x86: VT-d and AMD-Vi flushed
    // lazily unless told otherwise; arm64 dma-iommu was strict).
    const auto [major, minor] = KernelVersion(facts.kernel_release());
    const bool pre_dma_fq = major > 0 && (major < 5 || (major == 5 && minor < 15));
    if (from_groups == pb::IOMMU_MODE_STRICT && pre_dma_fq &&
        std::find(group_types.begin(), group_types.end(), "DMA-FQ") == group_types.end()) {
      std::string arch = facts.architecture();
      if (arch.empty()) arch = ReadTrimmed(Under(root, "/proc/sys/kernel/arch"));
      if (cmdline.mode == pb::IOMMU_MODE_STRICT || cmdline.mode == pb::IOMMU_MODE_LAZY) {
        mode = cmdline.mode;
      } else if (arch == "x86_64" || arch == "i686" || arch == "i386") {
        mode = pb::IOMMU_MODE_LAZY;
        detail.push_back("pre-5.15 kernel: DMA groups, x86 default lazy");
      }
    }
    facts.set_iommu_mode(mode);
  }
  facts.set_iommu_detail(absl::StrJoin(detail, "; "));
  return facts;
}

}  // namespace farm::agent
