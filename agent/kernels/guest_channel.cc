#include "agent/kernels/guest_channel.h"

#include <map>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/kernels/iommu_environment.h"
#include "agent/monitors/monitors.h"

namespace farm::kernels {
namespace {

constexpr absl::string_view kBegin = "@@farm-begin ";
constexpr absl::string_view kEnd = "@@farm-end ";
constexpr absl::string_view kDone = "@@farm-done";

// A guest's line as an error quotes it: cut, so a garbled console line of
// any length makes a short failure reason.
std::string QuoteGuestLine(absl::string_view line) {
  constexpr size_t kMaxQuoted = 200;
  if (line.size() <= kMaxQuoted) return absl::StrCat("'", line, "'");
  return absl::StrCat("'", line.substr(0, kMaxQuoted), "' (", line.size(), " bytes)");
}

// The snapshot parser's message quotes the guest's line whole.
std::string CutSnapshotError(absl::string_view message) {
  constexpr size_t kMaxQuoted = 512;
  if (message.size() <= kMaxQuoted) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxQuoted), "... (", message.size(), " bytes)");
}

std::vector<std::string> Fields(absl::string_view line) {
  return absl::StrSplit(line, ' ', absl::SkipWhitespace());
}

}  // namespace

absl::StatusOr<GuestOutput> ParseGuestChannel(absl::string_view text) {
  GuestOutput out;
  std::optional<std::string> open;  // the section being read
  GuestSection current;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    // A tty that maps "\n" to "\r\n" turns a written "\r\n" into "\r\r\n".
    while (absl::ConsumeSuffix(&line, "\r")) {
    }
    if (open) {
      if (absl::ConsumePrefix(&line, kEnd)) {
        std::vector<std::string> f = Fields(line);
        if (f.size() != 2 || f[0] != *open || !absl::SimpleAtoi(f[1], &current.exit)) {
          return absl::InvalidArgumentError(absl::StrCat("guest channel: section ",
                                                         QuoteGuestLine(*open), " ends with ",
                                                         QuoteGuestLine(absl::StrCat(kEnd, line))));
        }
        if (!out.sections.emplace(*open, std::move(current)).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("guest channel: section ", QuoteGuestLine(*open), " given twice"));
        }
        current = GuestSection{};
        open.reset();
      } else {
        absl::StrAppend(&current.body, line, "\n");
      }
      continue;
    }
    if (absl::ConsumePrefix(&line, kBegin)) {
      std::vector<std::string> f = Fields(line);
      if (f.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("guest channel: bad section start ",
                                                       QuoteGuestLine(absl::StrCat(kBegin, line))));
      }
      open = f[0];
    } else if (line == kDone) {
      out.done = true;
    }
  }
  if (open) {
    return absl::InvalidArgumentError(
        absl::StrCat("guest channel: section ", QuoteGuestLine(*open), " never ends"));
  }
  return out;
}

iommufarm::v1::IommuEnvironment GuestIommuEnvironment(absl::string_view facts_body,
                                                      absl::string_view iommus) {
  std::map<std::string, std::string> raw, unavailable;
  for (absl::string_view line : absl::StrSplit(facts_body, '\n', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&line, "env.")) continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (!kv.first.empty() && !value.empty()) raw[std::string(kv.first)] = std::string(value);
  }
  if (raw.empty()) return {};
  for (absl::string_view unit : absl::StrSplit(iommus, ' ', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> nd =
        absl::StrSplit(unit, absl::MaxSplits(':', 1));
    if (nd.second != "arm-smmu-v3") continue;
    const std::string prefix = absl::StrCat("unit/", nd.first, "/");
    unavailable[prefix + "iidr"] = "the kernel exports no SMMUv3 register (not even its IIDR)";
    if (!raw.contains(absl::StrCat(prefix, "smmu_log"))) {
      unavailable[prefix + "features"] = "no arm-smmu-v3 boot line in the guest's kernel log";
    }
  }
  unavailable["device/*/ats"] = "the guest init does not read PCI config space";
  return FinishIommuEnvironment(std::move(raw), std::move(unavailable));
}

absl::StatusOr<KernelFacts> KernelFactsFromGuest(const GuestOutput& output) {
  KernelFacts facts;
  auto facts_it = output.sections.find("facts");
  if (facts_it == output.sections.end()) {
    return absl::InvalidArgumentError("guest channel: no facts section");
  }
  for (absl::string_view line : absl::StrSplit(facts_it->second.body, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (kv.first == "release") facts.release = std::string(kv.second);
    if (kv.first == "machine") facts.machine = std::string(kv.second);
    if (kv.first == "cmdline") facts.cmdline = std::string(kv.second);
    if (kv.first == "iommu") facts.iommu = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  if (facts.release.empty()) {
    return absl::InvalidArgumentError("guest channel: facts section has no release");
  }
  facts.iommu_environment = GuestIommuEnvironment(facts_it->second.body, facts.iommu);
  if (auto it = output.sections.find("iommu-groups"); it != output.sections.end()) {
    for (absl::string_view line : absl::StrSplit(it->second.body, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = Fields(line);
      if (f.size() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat("guest channel: bad iommu-groups line ", QuoteGuestLine(line)));
      }
      facts.groups.push_back(
          IommuGroup{f[0], f[1], std::vector<std::string>(f.begin() + 2, f.end())});
    }
  }
  if (auto it = output.sections.find("nvme"); it != output.sections.end()) {
    for (absl::string_view line : absl::StrSplit(it->second.body, '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = Fields(line);
      if (f.size() < 3) {
        return absl::InvalidArgumentError(
            absl::StrCat("guest channel: bad nvme line ", QuoteGuestLine(line)));
      }
      facts.nvme.push_back(NvmeController{f[0], f[1], f[2] == "-" ? "" : f[2],
                                          std::vector<std::string>(f.begin() + 3, f.end())});
    }
  }
  return facts;
}

absl::StatusOr<iommufarm::v1::Monitors> MonitorsFromGuest(const GuestOutput& output) {
  auto before = output.sections.find("monitor-before");
  auto after = output.sections.find("monitor-after");
  if (before == output.sections.end() || after == output.sections.end()) {
    return absl::NotFoundError("guest channel: no monitor-before / monitor-after sections");
  }
  absl::StatusOr<monitors::Snapshot> b = monitors::ParseSnapshot(before->second.body);
  if (!b.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("monitor-before: ", CutSnapshotError(b.status().message())));
  }
  absl::StatusOr<monitors::Snapshot> a = monitors::ParseSnapshot(after->second.body);
  if (!a.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("monitor-after: ", CutSnapshotError(a.status().message())));
  }
  iommufarm::v1::Monitors m = monitors::Diff(*b, *a, "guest");
  m.set_perf_note("none: the guest root has no perf");
  return m;
}

std::string ConsoleTail(absl::string_view console, int max_lines, std::size_t max_bytes) {
  std::vector<absl::string_view> lines = absl::StrSplit(console, '\n');
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  std::size_t first = lines.size() > static_cast<std::size_t>(max_lines)
                          ? lines.size() - static_cast<std::size_t>(max_lines)
                          : 0;
  std::string tail;
  for (std::size_t i = first; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    absl::ConsumeSuffix(&line, "\r");
    absl::StrAppend(&tail, line, "\n");
  }
  if (tail.size() > max_bytes) tail = tail.substr(tail.size() - max_bytes);
  return tail;
}

}  // namespace farm::kernels
