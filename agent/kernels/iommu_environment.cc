#include "agent/kernels/iommu_environment.h"

#include <cstdint>
#include <regex>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/base/sha256.h"

namespace farm::kernels {
namespace {

namespace pb = ::iommufarm::v1;

// PCI Express extended capabilities start at 0x100 of a 4 KiB config space
// (include/uapi/linux/pci_regs.h PCI_CFG_SPACE_SIZE, PCI_EXT_CAP_ID_ATS).
constexpr size_t kExtendedStart = 0x100;
constexpr uint32_t kExtCapAts = 0x000f;
constexpr size_t kAtsControl = 0x06;
constexpr uint32_t kAtsEnable = 0x8000;

uint32_t Le32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3])) << 24;
}

// The unit name of a "unit/<name>/<suffix>" key; "" for other keys.
std::string UnitOf(const std::string& key, absl::string_view suffix) {
  if (!absl::StartsWith(key, "unit/") || !absl::EndsWith(key, suffix)) return "";
  return key.substr(5, key.size() - 5 - suffix.size());
}

}  // namespace

std::optional<SmmuBootLine> ParseSmmuBootLine(absl::string_view line) {
  // drivers/iommu/arm/arm-smmu-v3/arm-smmu-v3.c arm_smmu_device_hw_probe:
  // dev_info(smmu->dev, "ias %lu-bit, oas %lu-bit (features 0x%08x)\n", ...);
  // recent kernels print "oas %lu-bit (features 0x%08x)" alone.
  static const std::regex kLine(
      "(?:ias ([0-9]+)-bit, )?oas ([0-9]+)-bit \\(features (0x[0-9a-fA-F]+)\\)");
  std::match_results<absl::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kLine)) return std::nullopt;
  return SmmuBootLine{m[1].str(), m[2].str(), m[3].str()};
}

std::optional<std::string> CachingMode(absl::string_view cap_hex) {
  uint64_t cap = 0;
  if (cap_hex.empty() || !absl::SimpleHexAtoi(cap_hex, &cap)) return std::nullopt;
  return ((cap >> 7) & 1) ? "1" : "0";
}

std::optional<std::string> AtsState(absl::string_view config) {
  if (config.size() < kExtendedStart) return std::nullopt;
  size_t at = kExtendedStart;
  // Each capability is at least 4 bytes, so a walk longer than the space
  // holds is a loop in a corrupt list.
  for (int hops = 0; hops < 1024 && at >= kExtendedStart && at + 4 <= config.size(); ++hops) {
    const uint32_t header = Le32(config, at);
    if (header == 0 || header == 0xffffffffu) return "";
    if ((header & 0xffff) == kExtCapAts) {
      if (at + kAtsControl + 2 > config.size()) return std::nullopt;
      const uint32_t control = Le32(config, at + kAtsControl - 2) >> 16;
      return (control & kAtsEnable) ? "on" : "off";
    }
    const size_t next = (header >> 20) & 0xffc;
    if (next == 0) return "";
    at = next;
  }
  return "";
}

std::string EnvironmentDigest(const std::map<std::string, std::string>& facts) {
  if (facts.empty()) return "";
  std::string text;
  for (const auto& [key, value] : facts) absl::StrAppend(&text, key, "=", value, "\n");
  return base::Sha256Hex(text);
}

std::map<std::string, std::string> SortedFacts(const pb::IommuEnvironment& env) {
  return std::map<std::string, std::string>(env.facts().begin(), env.facts().end());
}

pb::IommuEnvironment FinishIommuEnvironment(std::map<std::string, std::string> raw,
                                            std::map<std::string, std::string> unavailable) {
  std::map<std::string, std::string> facts;
  for (const auto& [key, value] : raw) {
    if (const std::string unit = UnitOf(key, kSmmuLogSuffix); !unit.empty()) {
      const std::string prefix = absl::StrCat("unit/", unit, "/");
      if (std::optional<SmmuBootLine> line = ParseSmmuBootLine(value)) {
        if (!line->ias.empty()) facts[prefix + "ias"] = line->ias;
        facts[prefix + "oas"] = line->oas;
        facts[prefix + "features"] = line->features;
      } else {
        unavailable[prefix + "features"] = "the SMMUv3 boot line does not parse: " + value;
      }
      continue;
    }
    if (const std::string unit = UnitOf(key, "/ecap"); !unit.empty()) {
      auto cap = raw.find(absl::StrCat("unit/", unit, "/cap"));
      if (cap != raw.end()) {
        if (std::optional<std::string> cm = CachingMode(cap->second)) {
          facts[absl::StrCat("unit/", unit, "/caching_mode")] = *cm;
        }
      }
    }
    facts[key] = value;
  }
  pb::IommuEnvironment env;
  env.set_digest(EnvironmentDigest(facts));
  for (auto& [key, value] : facts) (*env.mutable_facts())[key] = std::move(value);
  for (auto& [key, why] : unavailable) (*env.mutable_unavailable())[key] = std::move(why);
  return env;
}

}  // namespace farm::kernels
