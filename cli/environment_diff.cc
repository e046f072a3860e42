#include "cli/environment_diff.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

}  // namespace farm::cli
