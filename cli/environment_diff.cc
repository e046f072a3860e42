#include "cli/environment_diff.h"

#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "cli/format.h"
#include "proto/names.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

using EnvironmentGroup = std::tuple<std::string, std::string, std::string>;  // platform, host, mode
// Per group, per key, the values its runs had ("" for a run without it).
using SideEnvironments = std::map<EnvironmentGroup, std::map<std::string, std::set<std::string>>>;

// The side's environments by group; runs without one are left out.
SideEnvironments CollectEnvironments(const std::vector<pb::Result>& results) {
  SideEnvironments out;
  std::map<EnvironmentGroup, std::vector<const pb::IommuEnvironment*>> by_group;
  for (const pb::Result& r : results) {
    if (!proto::IsRealExecutor(r.job().executor())) continue;
    const pb::IommuEnvironment& env = r.host().iommu_environment();
    if (env.digest().empty()) continue;
    by_group[{r.job().platform(), r.host().hostname(), proto::ModeName(r.job().mode())}].push_back(
        &env);
  }
  for (const auto& [group, envs] : by_group) {
    std::set<std::string> keys;
    for (const pb::IommuEnvironment* env : envs) {
      for (const auto& [key, value] : env->facts()) keys.insert(key);
    }
    auto& facts = out[group];
    for (const std::string& key : keys) {
      for (const pb::IommuEnvironment* env : envs) {
        auto it = env->facts().find(key);
        facts[key].insert(it == env->facts().end() ? "" : it->second);
      }
    }
  }
  return out;
}

std::string EnvironmentValuesText(const std::set<std::string>* values) {
  if (values == nullptr) return "(absent)";
  std::vector<std::string> shown;
  for (const std::string& v : *values) shown.push_back(v.empty() ? "(absent)" : v);
  return absl::StrJoin(shown, " | ");
}

std::vector<std::vector<std::string>> EnvironmentCells(const EnvironmentDiff& diff) {
  std::vector<std::vector<std::string>> cells;
  for (const EnvironmentRow& r : diff.rows) {
    cells.push_back({r.platform, r.host, r.mode, r.key, r.a, r.b});
  }
  return cells;
}

const std::vector<std::string>& EnvironmentHeaders() {
  static const std::vector<std::string> kHeaders = {"platform", "host", "mode", "key", "A", "B"};
  return kHeaders;
}

}  // namespace

EnvironmentDiff CompareEnvironments(const std::vector<pb::Result>& a,
                                    const std::vector<pb::Result>& b) {
  const SideEnvironments side_a = CollectEnvironments(a);
  const SideEnvironments side_b = CollectEnvironments(b);
  EnvironmentDiff diff;
  for (const auto& [group, facts_a] : side_a) {
    auto other = side_b.find(group);
    if (other == side_b.end()) continue;
    ++diff.groups;
    const auto& facts_b = other->second;
    std::set<std::string> keys;
    for (const auto& [key, values] : facts_a) keys.insert(key);
    for (const auto& [key, values] : facts_b) keys.insert(key);
    for (const std::string& key : keys) {
      auto in_a = facts_a.find(key);
      auto in_b = facts_b.find(key);
      const std::set<std::string>* va = in_a == facts_a.end() ? nullptr : &in_a->second;
      const std::set<std::string>* vb = in_b == facts_b.end() ? nullptr : &in_b->second;
      if (va != nullptr && vb != nullptr && *va == *vb) continue;
      const auto& [platform, host, mode] = group;
      diff.rows.push_back(
          {platform, host, mode, key, EnvironmentValuesText(va), EnvironmentValuesText(vb)});
    }
  }
  return diff;
}

std::string FormatEnvironmentDiffTable(const EnvironmentDiff& diff) {
  if (diff.groups == 0) return "";
  if (diff.rows.empty()) {
    return absl::StrCat("IOMMU environment: the same on both sides (", diff.groups,
                        " host/platform/mode groups)\n");
  }
  return absl::StrCat("IOMMU environment differences (A -> B):\n",
                      RenderTable(EnvironmentHeaders(), EnvironmentCells(diff)));
}

std::string FormatEnvironmentDiffCsv(const EnvironmentDiff& diff) {
  if (diff.groups == 0) return "";
  std::string out = "platform,host,mode,key,a,b\n";
  for (const EnvironmentRow& r : diff.rows) {
    absl::StrAppend(&out, CsvField(r.platform), ",", CsvField(r.host), ",", r.mode, ",",
                    CsvField(r.key), ",", CsvField(r.a), ",", CsvField(r.b), "\n");
  }
  return out;
}

ReportTable EnvironmentDiffTable(const EnvironmentDiff& diff) {
  ReportTable t;
  t.title = "IOMMU environment differences (A -> B)";
  t.empty_text = diff.groups == 0 ? "no host with a recorded IOMMU environment on both sides"
                                  : "none: the same on both sides";
  t.headers = EnvironmentHeaders();
  t.rows = EnvironmentCells(diff);
  return t;
}

std::string ShortDigest(const std::string& digest) {
  return digest.empty() ? "-" : digest.substr(0, 12);
}

namespace {

// "unit/<name>/<attr>" or "device/<pci>/<attr>" split at its last '/'.
struct FactKey {
  std::string kind, name, attr;
};

std::optional<FactKey> SplitFactKey(absl::string_view key) {
  const size_t first = key.find('/');
  const size_t last = key.rfind('/');
  if (first == absl::string_view::npos || last == first) return std::nullopt;
  return FactKey{std::string(key.substr(0, first)),
                 std::string(key.substr(first + 1, last - first - 1)),
                 std::string(key.substr(last + 1))};
}

// "2 VT-d units (caching mode 0,1)" per kind of unit.
std::vector<std::string> UnitParts(
    const std::map<std::string, std::map<std::string, std::string>>& units) {
  struct Kind {
    int count = 0;
    std::set<std::string> detail;
  };
  std::map<std::string, Kind> kinds;
  for (const auto& [name, attrs] : units) {
    auto value = [&attrs](const char* a) {
      auto it = attrs.find(a);
      return it == attrs.end() ? std::string() : it->second;
    };
    if (attrs.contains("ecap")) {
      Kind& k = kinds["VT-d"];
      ++k.count;
      if (!value("caching_mode").empty()) k.detail.insert("caching mode " + value("caching_mode"));
    } else if (attrs.contains("oas")) {
      Kind& k = kinds["SMMUv3"];
      ++k.count;
      if (!value("features").empty()) k.detail.insert("features " + value("features"));
    } else {
      Kind& k = kinds["AMD-Vi"];
      ++k.count;
      if (!value("features").empty()) k.detail.insert("features " + value("features"));
    }
  }
  std::vector<std::string> out;
  for (const auto& [kind, k] : kinds) {
    std::string part = absl::StrCat(k.count, " ", kind, k.count == 1 ? " unit" : " units");
    if (!k.detail.empty()) absl::StrAppend(&part, " (", absl::StrJoin(k.detail, ", "), ")");
    out.push_back(std::move(part));
  }
  return out;
}

// "ATS on 1/3 devices; domains DMA x2, identity x1".
std::vector<std::string> DeviceParts(const pb::IommuEnvironment& env,
                                     const std::map<std::string, std::string>& ats,
                                     const std::map<std::string, int>& domains) {
  std::vector<std::string> out;
  if (!ats.empty()) {
    int on = 0;
    for (const auto& [device, state] : ats) on += state == "on" ? 1 : 0;
    out.push_back(
        absl::StrCat("ATS on ", on, "/", ats.size(), ats.size() == 1 ? " device" : " devices"));
  } else if (env.unavailable().contains("device/*/ats")) {
    out.push_back("ATS unread");
  }
  if (!domains.empty()) {
    std::vector<std::string> counted;
    for (const auto& [type, n] : domains) counted.push_back(absl::StrCat(type, " x", n));
    out.push_back(absl::StrCat("domains ", absl::StrJoin(counted, ", ")));
  }
  return out;
}

}  // namespace

std::string EnvironmentSummary(const pb::IommuEnvironment& env) {
  if (env.facts().empty()) return "-";
  std::map<std::string, std::map<std::string, std::string>> units;
  std::map<std::string, std::string> ats, firmware;
  std::map<std::string, int> domains;
  std::vector<std::string> tables;
  const std::map<std::string, std::string> facts(env.facts().begin(), env.facts().end());
  for (const auto& [key, value] : facts) {
    std::optional<FactKey> k = SplitFactKey(key);
    if (!k) {
      continue;
    } else if (k->kind == "unit") {
      units[k->name][k->attr] = value;
    } else if (k->kind == "device" && k->attr == "ats") {
      ats[k->name] = value;
    } else if (k->kind == "device" && k->attr == "domain") {
      ++domains[value];
    } else if (k->kind == "acpi") {
      tables.push_back(k->name);
    }
  }
  std::vector<std::string> parts = UnitParts(units);
  for (std::string& p : DeviceParts(env, ats, domains)) parts.push_back(std::move(p));
  std::vector<std::string> fw;
  for (const char* file : {"bios_vendor", "bios_version", "bios_date"}) {
    auto it = env.facts().find(absl::StrCat("firmware/", file));
    if (it != env.facts().end()) fw.push_back(it->second);
  }
  if (!fw.empty()) parts.push_back(absl::StrCat("firmware ", absl::StrJoin(fw, " ")));
  if (!tables.empty()) parts.push_back(absl::StrCat("ACPI ", absl::StrJoin(tables, ",")));
  if (env.unavailable_size() > 0) {
    parts.push_back(absl::StrCat(env.unavailable_size(), " unavailable"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace farm::cli
