#include "lib/iommu_mode/iommu_mode.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

namespace farm::iommu_mode {
namespace {

const ModeSpelling& SpellingOf(Mode mode) { return kModes[static_cast<int>(mode)]; }

// The kernel's kstrtobool(): y/Y/t/T/1 and "on" are true, n/N/f/F/0 and
// "off" false; anything else (-1) leaves the parameter unset.
int KstrToBool(std::string_view v) {
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

// Splits at `sep` (any of its characters), dropping empty pieces.
std::vector<std::string_view> Split(std::string_view s, std::string_view sep) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t end = std::min(s.find_first_of(sep, i), s.size());
    if (end > i) out.push_back(s.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// "5.11.0-rc5" -> {5, 11}; {0, 0} when unparsable.
std::pair<int, int> KernelVersion(std::string_view release) {
  auto number = [](std::string_view s, size_t* pos) {
    int n = 0;
    const size_t start = *pos;
    while (*pos < s.size() && std::isdigit(static_cast<unsigned char>(s[*pos]))) {
      n = n * 10 + (s[*pos] - '0');
      ++*pos;
    }
    return *pos > start ? n : -1;
  };
  size_t pos = 0;
  const int major = number(release, &pos);
  if (major < 0 || pos >= release.size() || release[pos] != '.') return {0, 0};
  ++pos;
  const int minor = number(release, &pos);
  if (minor < 0) return {0, 0};
  return {major, minor};
}

// The most common translated type of `types`; nullopt without one.
std::optional<Mode> VoteOfGroupTypes(const std::vector<std::string>& types) {
  std::map<Mode, int> votes;
  for (const std::string& t : types) {
    if (const std::optional<Mode> m = FromDomainType(t)) ++votes[*m];
  }
  std::optional<Mode> best;
  int best_votes = 0;
  for (const auto& [mode, n] : votes) {
    if (n > best_votes) {
      best = mode;
      best_votes = n;
    }
  }
  return best;
}

}  // namespace

std::optional<Mode> FromWord(std::string_view word) {
  for (const ModeSpelling& s : kModes) {
    if (std::string_view(s.word) == word) return s.mode;
  }
  return std::nullopt;
}

std::string WordList() {
  std::string out;
  for (const ModeSpelling& s : kModes) {
    if (!out.empty()) out += ", ";
    out += s.word;
  }
  return out;
}

std::optional<Mode> FromDomainType(std::string_view type) {
  if (type.empty()) return std::nullopt;
  for (const ModeSpelling& s : kModes) {
    if (std::string_view(s.domain_type) == type) return s.mode;
  }
  return std::nullopt;
}

std::vector<std::string> KernelParams(Mode mode, const std::vector<Driver>& drivers) {
  if (mode != Mode::kOff) return {std::string(SpellingOf(mode).kernel_param)};
  std::vector<std::string> out;
  for (Driver d : drivers) {
    switch (d) {
      case Driver::kIntelVtd:
        out.emplace_back("intel_iommu=off");
        break;
      case Driver::kAmdVi:
        out.emplace_back("amd_iommu=off");
        break;
      case Driver::kArmSmmuV3:
        break;  // no switch: the machine has no SMMU
    }
  }
  return out;
}

bool IsModeParam(std::string_view word) {
  for (std::string_view prefix :
       {"intel_iommu=", "amd_iommu=", "iommu=", "iommu.strict=", "iommu.passthrough="}) {
    if (word.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

bool OverridesMode(std::string_view word) {
  const size_t eq = word.find('=');
  const std::string_view name = word.substr(0, eq);
  const std::string_view value = eq == std::string_view::npos ? "" : word.substr(eq + 1);
  return name == "iommu.strict" || name == "iommu.passthrough" ||
         (name == "iommu" && (value == "pt" || value == "nopt"));
}

CmdlineMode ModeFromCmdline(std::string_view cmdline) {
  bool disabled = false, passthrough = false;
  int strict = -1;  // -1 unset, 0 lazy, 1 strict
  std::string detail;
  for (std::string_view word : Split(cmdline, " \t\n")) {
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos || !IsModeParam(word)) continue;
    const std::string_view key = word.substr(0, eq);
    const std::string_view value = word.substr(eq + 1);
    if (key == "intel_iommu" || key == "amd_iommu") {
      // Values are comma lists: intel_iommu=on,sm_on / amd_iommu=off.
      for (std::string_view v : Split(value, ",")) {
        if (v == "off") disabled = true;
        if (v == "on" || v == "force") disabled = false;
        if (v == "strict") strict = 1;     // deprecated alias of iommu.strict=1
        if (v == "fullflush") strict = 1;  // AMD's pre-v5.15 spelling of strict
      }
    } else if (key == "iommu") {
      for (std::string_view v : Split(value, ",")) {
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
    }
    if (!detail.empty()) detail += ' ';
    detail += word;
  }
  CmdlineMode out;
  out.detail = std::move(detail);
  if (disabled) {
    out.mode = Mode::kOff;
  } else if (passthrough) {
    out.mode = Mode::kPassthrough;
  } else if (strict == 1) {
    out.mode = Mode::kStrict;
  } else if (strict == 0) {
    out.mode = Mode::kLazy;
  }
  return out;
}

ModeReading ReadRunningMode(const RunningKernel& kernel) {
  ModeReading out;
  const CmdlineMode cmdline = ModeFromCmdline(kernel.cmdline);
  out.cmdline_detail = cmdline.detail;
  if (!kernel.behind_iommu) {
    out.mode = Mode::kOff;
    return out;
  }
  // The groups' live domain types are the truth; the command line is what
  // was asked for and the fallback when no group shows a mode.
  const std::optional<Mode> from_groups = VoteOfGroupTypes(kernel.group_types);
  out.mode = from_groups ? from_groups : cmdline.mode;
  const auto [major, minor] = KernelVersion(kernel.release);
  const bool pre_dma_fq = major > 0 && (major < 5 || (major == 5 && minor < 15));
  const bool any_dma_fq = std::find(kernel.group_types.begin(), kernel.group_types.end(),
                                    DomainType(Mode::kLazy)) != kernel.group_types.end();
  if (from_groups != Mode::kStrict || !pre_dma_fq || any_dma_fq) return out;
  // Before v5.15, "DMA" meant translated, strict or lazy: the strictness is
  // the command line's, else the default of that era (VT-d and AMD-Vi
  // flushed lazily unless told otherwise; arm64 dma-iommu was strict).
  if (cmdline.mode == Mode::kStrict || cmdline.mode == Mode::kLazy) {
    out.mode = cmdline.mode;
  } else if (kernel.arch == "x86_64" || kernel.arch == "i686" || kernel.arch == "i386") {
    out.mode = Mode::kLazy;
    out.note = "pre-5.15 kernel: DMA groups, x86 default lazy";
  }
  return out;
}

}  // namespace farm::iommu_mode
