#include "scheduler/spec.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "emu/model/model_config.h"
#include "emu/workloads/workload.h"
#include "lib/toolspec/fio_spec.h"
#include "lib/toolspec/iozone_spec.h"
#include "proto/kernel_params.h"
#include "scheduler/yaml_limits.h"

namespace farm::scheduler {
namespace {

// Names every emulator build knows (docs/emulator.md); others only warn,
// since the emulator may offer more.
const std::set<std::string>& KnownPlatforms() {
  static const auto* const k = new std::set<std::string>{"intel-vtd-2s12c", "intel-vtd-snb16c",
                                                         "kunpeng920-smmuv3", "arm-mmu500-8c"};
  return *k;
}
class Errors {
 public:
  void Add(const std::string& path, const std::string& msg) {
    lines_.push_back(path.empty() ? msg : path + ": " + msg);
  }
  bool empty() const { return lines_.empty(); }
  std::string Join() const { return absl::StrJoin(lines_, "\n"); }

 private:
  std::vector<std::string> lines_;
};

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

const char* KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "undefined";
  }
}

bool GetString(const YAML::Node& n, const std::string& path, Errors& e, std::string* out) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    e.Add(path, absl::StrCat("expected a non-empty string, got ", KindOf(n)));
    return false;
  }
  *out = n.Scalar();
  return true;
}

bool GetInt(const YAML::Node& n, const std::string& path, Errors& e, int64_t lo, int64_t hi,
            int64_t* out) {
  int64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok) {
    e.Add(path, absl::StrCat("expected an integer, got ",
                             n.IsScalar() ? Quote(n.Scalar()) : std::string(KindOf(n))));
    return false;
  }
  if (v < lo || v > hi) {
    e.Add(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
    return false;
  }
  *out = v;
  return true;
}

bool GetBool(const YAML::Node& n, const std::string& path, Errors& e, bool* out) {
  bool ok = n.IsScalar();
  if (ok) {
    try {
      *out = n.as<bool>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok) e.Add(path, "expected true or false");
  return ok;
}

// A scalar, or a list of scalars (comma-joined).
bool GetParamValue(const YAML::Node& n, const std::string& path, Errors& e, std::string* out) {
  if (n.IsScalar()) {
    *out = n.Scalar();
    return true;
  }
  if (n.IsSequence()) {
    std::vector<std::string> parts;
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) {
        e.Add(absl::StrCat(path, "[", i, "]"), "expected a scalar");
        return false;
      }
      parts.push_back(n[i].Scalar());
    }
    if (parts.empty()) {
      e.Add(path, "empty list");
      return false;
    }
    *out = absl::StrJoin(parts, ",");
    return true;
  }
  e.Add(path, absl::StrCat("expected a scalar or a list of scalars, got ", KindOf(n)));
  return false;
}

// A string or a list of strings, non-empty, without duplicates.
std::vector<std::string> GetStringList(const YAML::Node& n, const std::string& path, Errors& e) {
  std::vector<std::string> out;
  if (n.IsScalar()) {
    if (n.Scalar().empty()) {
      e.Add(path, "empty");
    } else {
      out.push_back(n.Scalar());
    }
    return out;
  }
  if (!n.IsSequence() || n.size() == 0) {
    e.Add(path, absl::StrCat("expected a string or a non-empty list, got ",
                             n.IsSequence() ? "an empty list" : KindOf(n)));
    return out;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = absl::StrCat(path, "[", i, "]");
    std::string s;
    if (!GetString(n[i], p, e, &s)) continue;
    if (!seen.insert(s).second) {
      e.Add(p, absl::StrCat("duplicate ", Quote(s)));
      continue;
    }
    out.push_back(s);
  }
  return out;
}

void CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed,
               Errors& e) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    if (allowed.count(key) == 0) {
      e.Add(path.empty() ? key : path + "." + key,
            absl::StrCat("unknown field (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// The checks an agent would otherwise make only when it runs a job, made
// here so a job it would refuse is never queued: emulator workload params
// against the workload's parameter table (each value on its own, so the
// error names its field), `set:` keys against the model registry (what
// farm-emu --set checks), and fio / iozone params by the agent's validator.
void CheckAgainstTables(const MatrixSpec& spec, Errors& e) {
  for (size_t i = 0; i < spec.workloads.size(); ++i) {
    const WorkloadSpec& w = spec.workloads[i];
    const std::string p = absl::StrCat("workloads[", i, "]");
    if (spec.executor == pb::EXECUTOR_FIO || spec.executor == pb::EXECUTOR_IOZONE) {
      toolspec::Params params(w.params.begin(), w.params.end());
      // The guest's command line, checked by the allow-list when parsed;
      // the agent takes it out before the tool's own checks too.
      params.erase(::farm::proto::kKernelParamsKey);
      // Without a target the agent chooses one: its allowed directory on the
      // host (which needs a size; the agent checks that) or the guest's NVMe
      // in a VM. Which one is known only at lease time, so the target's own
      // rules are the agent's; here a device stands in for it.
      if (spec.executor == pb::EXECUTOR_FIO && params.count("filename") == 0 &&
          params.count("directory") == 0) {
        params.emplace("filename", "/dev/nvme0n1");
      }
      absl::Status s = spec.executor == pb::EXECUTOR_FIO
                           ? toolspec::FioSpecFromParams(params).status()
                           : toolspec::IozoneSpecFromParams(params).status();
      if (!s.ok()) e.Add(p + ".params", std::string(s.message()));
      continue;
    }
    absl::StatusOr<const emu::WorkloadInfo*> info = emu::FindWorkload(w.name);
    if (!info.ok()) {
      e.Add(p + ".name", std::string(info.status().message()));
      continue;
    }
    std::vector<std::string> known;
    for (const emu::WorkloadParam& t : (*info)->params) known.emplace_back(t.name);
    for (const auto& [key, value] : w.params) {
      const std::string field = absl::StrCat(p, ".params.", key);
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        e.Add(field, absl::StrCat("unknown parameter of ", w.name,
                                  " (known: ", absl::StrJoin(known, ", "), ")"));
        continue;
      }
      absl::Status s = emu::ValidateWorkloadParams(w.name, {{key, value}});
      if (!s.ok()) e.Add(field, std::string(s.message()));
    }
  }
  // "agent." keys are directives the agent takes out before any executor
  // sees the set (agent/agent.h); every other key is a model key.
  const emu::ModelConfig defaults;
  for (const auto& [key, value] : spec.model_set) {
    if (absl::StartsWith(key, "agent.")) continue;
    absl::StatusOr<emu::ModelConfig> applied = defaults.Apply({{key, value}});
    if (!applied.ok()) e.Add("set." + key, std::string(applied.status().message()));
  }
}

}  // namespace

int JobPriority(pb::JobKind kind, int priority) {
  int band = 0;
  if (kind == pb::JOB_KIND_CONFIRM) band = 2000;
  if (kind == pb::JOB_KIND_BISECT) band = 4000;
  return band + priority;
}

uint64_t JobSeed(uint64_t spec_seed, const std::string& platform, const WorkloadSpec& workload,
                 pb::IommuMode mode, int repeat) {
  uint64_t h = Fnv1a(platform);
  h = Fnv1a("\x1f" + workload.name, h);
  for (const auto& [k, v] : workload.params) h = Fnv1a("\x1f" + k + "=" + v, h);
  h = SplitMix64(h ^ SplitMix64(spec_seed));
  h = SplitMix64(h ^ static_cast<uint64_t>(mode));
  return SplitMix64(h ^ static_cast<uint64_t>(repeat));
}

absl::StatusOr<MatrixSpec> ParseMatrixSpec(std::string_view yaml, const SpecLimits& limits) {
  if (yaml.size() > limits.max_spec_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spec: ", yaml.size(), " bytes is more than the limit of ",
                     limits.max_spec_bytes, " bytes (--max-spec-bytes)"));
  }
  if (absl::Status st = CheckYamlExpansion(yaml, YamlExpansionLimits{}); !st.ok()) return st;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat("spec: YAML syntax error at line ",
                                                   ex.mark.line + 1, ", column ",
                                                   ex.mark.column + 1, ": ", ex.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec: expected a YAML map at the top level, got ", KindOf(root)));
  }
  Errors e;
  MatrixSpec spec;
  CheckKeys(root, "",
            {"name", "catalog", "platform", "commits", "modes", "workloads", "repeats", "executor",
             "analysis", "priority", "seed", "set", "kind"},
            e);

  if (!root["name"]) {
    e.Add("name", "required");
  } else if (GetString(root["name"], "name", e, &spec.name) && spec.name.size() > 200) {
    e.Add("name", "longer than 200 characters");
  }
  if (!root["catalog"]) {
    e.Add("catalog", "required");
  } else {
    GetString(root["catalog"], "catalog", e, &spec.catalog);
  }
  if (!root["platform"]) {
    e.Add("platform", "required (a platform name or a list of them)");
  } else {
    spec.platforms = GetStringList(root["platform"], "platform", e);
  }

  if (!root["commits"]) {
    e.Add("commits", "required (a range \"A..B\" or a list of commit ids)");
  } else {
    const YAML::Node c = root["commits"];
    if (c.IsScalar()) {
      const std::string s = c.Scalar();
      const auto dots = s.find("..");
      if (dots != std::string::npos) {
        spec.commit_range = true;
        spec.range_from = std::string(absl::StripAsciiWhitespace(s.substr(0, dots)));
        spec.range_to = std::string(absl::StripAsciiWhitespace(s.substr(dots + 2)));
        if (spec.range_from.empty() || spec.range_to.empty() ||
            spec.range_to.find("..") != std::string::npos) {
          e.Add("commits", absl::StrCat("bad range ", Quote(s), " (expected \"A..B\")"));
        }
      } else if (s.empty()) {
        e.Add("commits", "empty");
      } else {
        spec.commit_ids.push_back(s);
      }
    } else {
      spec.commit_ids = GetStringList(c, "commits", e);
    }
  }

  if (!root["modes"]) {
    e.Add("modes", "required (a list of: off, passthrough, strict, lazy)");
  } else {
    const YAML::Node m = root["modes"];
    std::vector<YAML::Node> items;
    if (m.IsScalar()) {
      items.push_back(m);
    } else if (m.IsSequence() && m.size() > 0) {
      for (size_t i = 0; i < m.size(); ++i) items.push_back(m[i]);
    } else {
      e.Add("modes", "expected a non-empty list of: off, passthrough, strict, lazy");
    }
    std::set<int> seen;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string p = m.IsScalar() ? "modes" : absl::StrCat("modes[", i, "]");
      if (!items[i].IsScalar()) {
        e.Add(p, absl::StrCat("expected a mode name, got ", KindOf(items[i])));
        continue;
      }
      const std::string name = items[i].Scalar();
      const pb::IommuMode mode = ModeFromName(name);
      if (mode == pb::IOMMU_MODE_UNSPECIFIED) {
        e.Add(p, absl::StrCat("unknown mode ", Quote(name),
                              " (expected off, passthrough, strict, lazy)"));
        continue;
      }
      if (!seen.insert(mode).second) {
        e.Add(p, absl::StrCat("duplicate mode ", Quote(name)));
        continue;
      }
      spec.modes.push_back(mode);
    }
  }

  if (!root["workloads"]) {
    e.Add("workloads", "required (a list of {name, params})");
  } else {
    const YAML::Node w = root["workloads"];
    if (!w.IsSequence() || w.size() == 0) {
      e.Add("workloads", absl::StrCat("expected a non-empty list of {name, params}, got ",
                                      w.IsSequence() ? "an empty list" : KindOf(w)));
    } else {
      for (size_t i = 0; i < w.size(); ++i) {
        const std::string p = absl::StrCat("workloads[", i, "]");
        const YAML::Node item = w[i];
        WorkloadSpec ws;
        if (item.IsScalar()) {  // shorthand: just a name
          GetString(item, p, e, &ws.name);
          spec.workloads.push_back(std::move(ws));
          continue;
        }
        if (!item.IsMap()) {
          e.Add(p, absl::StrCat("expected {name, params}, got ", KindOf(item)));
          continue;
        }
        CheckKeys(item, p, {"name", "params"}, e);
        if (!item["name"]) {
          e.Add(p + ".name", "required");
        } else {
          GetString(item["name"], p + ".name", e, &ws.name);
        }
        if (item["params"]) {
          const YAML::Node params = item["params"];
          if (params.IsNull()) {
            // params: with nothing after it means none.
          } else if (!params.IsMap()) {
            e.Add(p + ".params", absl::StrCat("expected a map, got ", KindOf(params)));
          } else {
            for (auto it = params.begin(); it != params.end(); ++it) {
              const std::string key = it->first.Scalar();
              std::string value;
              if (GetParamValue(it->second, p + ".params." + key, e, &value)) {
                std::string refused;
                if (key == ::farm::proto::kKernelParamsKey) {
                  ::farm::proto::ParseKernelParams(value, &refused);
                }
                if (!refused.empty()) e.Add(p + ".params." + key, refused);
                ws.params[key] = value;
              }
            }
          }
        }
        spec.workloads.push_back(std::move(ws));
      }
    }
  }

  int64_t v = 0;
  if (root["repeats"] && GetInt(root["repeats"], "repeats", e, 1, 10000, &v)) {
    spec.repeats = static_cast<int>(v);
  }
  if (root["executor"]) {
    std::string ex;
    if (GetString(root["executor"], "executor", e, &ex)) {
      spec.executor = ExecutorFromName(ex);
      if (spec.executor == pb::EXECUTOR_UNSPECIFIED) {
        e.Add("executor",
              absl::StrCat("unknown executor ", Quote(ex), " (expected emulator, fio, iozone)"));
      }
    }
  }
  if (root["analysis"]) {
    const YAML::Node a = root["analysis"];
    if (!a.IsMap()) {
      e.Add("analysis", absl::StrCat("expected a map like {bisect: true}, got ", KindOf(a)));
    } else {
      CheckKeys(a, "analysis", {"bisect"}, e);
      if (a["bisect"]) GetBool(a["bisect"], "analysis.bisect", e, &spec.bisect);
    }
  }
  if (root["kind"]) {
    std::string k;
    if (GetString(root["kind"], "kind", e, &k)) {
      if (k == "bulk") {
        spec.kind = pb::JOB_KIND_BULK;
      } else if (k == "confirm") {
        spec.kind = pb::JOB_KIND_CONFIRM;
      } else if (k == "bisect") {
        spec.kind = pb::JOB_KIND_BISECT;
      } else {
        e.Add("kind", absl::StrCat("unknown kind ", Quote(k), " (expected bulk, confirm, bisect)"));
      }
    }
  }
  if (root["priority"] && GetInt(root["priority"], "priority", e, -999, 999, &v)) {
    spec.priority = static_cast<int>(v);
  }
  if (root["seed"]) {
    const YAML::Node s = root["seed"];
    bool ok = s.IsScalar();
    if (ok) {
      try {
        spec.seed = s.as<uint64_t>();
      } catch (const YAML::Exception&) {
        ok = false;
      }
    }
    if (!ok) e.Add("seed", "expected a non-negative integer");
  }
  if (root["set"]) {
    const YAML::Node s = root["set"];
    if (!s.IsMap()) {
      e.Add("set", absl::StrCat("expected a map of model keys, got ", KindOf(s)));
    } else {
      for (auto it = s.begin(); it != s.end(); ++it) {
        const std::string key = it->first.Scalar();
        if (!it->second.IsScalar()) {
          e.Add("set." + key, absl::StrCat("expected a scalar, got ", KindOf(it->second)));
          continue;
        }
        spec.model_set[key] = it->second.Scalar();
      }
    }
  }

  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  CheckAgainstTables(spec, e);
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());

  if (spec.executor == pb::EXECUTOR_EMULATOR) {
    for (const std::string& p : spec.platforms) {
      if (KnownPlatforms().count(p) == 0) {
        spec.warnings.push_back(absl::StrCat("platform ", Quote(p),
                                             " is not one of the documented platforms; the "
                                             "emulator will fail its jobs if it does not know it"));
      }
    }
  }
  return spec;
}

namespace {

// A commit id as written in a spec: the catalog's id, or an abbreviation of
// at least kMinAbbrev hex digits that is the prefix of exactly one id.
// NotFound carries only a hint for the caller's "unknown" message (maybe
// empty); an ambiguous abbreviation is InvalidArgument listing the ids.
constexpr size_t kMinAbbrev = 7;

absl::StatusOr<std::map<std::string, int>::const_iterator> FindCommit(
    const std::map<std::string, int>& index, const std::string& id, const std::string& catalog) {
  auto exact = index.find(id);
  if (exact != index.end()) return exact;
  const bool hex = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
  if (!hex) return absl::NotFoundError("");
  if (id.size() < kMinAbbrev) {
    return absl::NotFoundError(
        absl::StrCat(" (abbreviations need at least ", kMinAbbrev, " hex digits)"));
  }
  const std::string prefix = absl::AsciiStrToLower(id);
  std::vector<std::string> matches;
  auto first = index.lower_bound(prefix);
  for (auto it = first; it != index.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    matches.push_back(it->first);
  }
  if (matches.empty()) return absl::NotFoundError("");
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("ambiguous commit ", Quote(id), " in catalog ",
                                                   Quote(catalog), ": candidates ",
                                                   absl::StrJoin(matches, ", ")));
  }
  return first;
}

}  // namespace

absl::StatusOr<std::vector<ResolvedCommit>> ResolveCommits(const MatrixSpec& spec,
                                                           const pb::Catalog& catalog) {
  std::map<std::string, int> index;
  std::map<int, std::map<std::string, std::string>> settings;
  {
    std::map<std::string, std::string> state;
    for (const pb::CatalogCommit& c : catalog.commits()) {
      index.emplace(c.id(), c.index());
      for (const auto& [k, v] : c.set()) state[k] = v;
      settings[c.index()] = state;
    }
  }
  std::vector<ResolvedCommit> out;
  if (spec.commit_range) {
    Errors e;
    auto from = FindCommit(index, spec.range_from, catalog.name());
    auto to = FindCommit(index, spec.range_to, catalog.name());
    for (const auto& [what, id, found] : {std::tuple("range start ", &spec.range_from, &from),
                                          std::tuple("range end ", &spec.range_to, &to)}) {
      if (absl::IsNotFound(found->status())) {
        e.Add("commits", absl::StrCat(what, Quote(*id), " is not in catalog ",
                                      Quote(catalog.name()), found->status().message()));
      } else if (!found->ok()) {
        e.Add("commits", absl::StrCat(what, found->status().message()));
      }
    }
    if (!e.empty()) return absl::InvalidArgumentError(e.Join());
    if ((*from)->second > (*to)->second) {
      return absl::InvalidArgumentError(
          absl::StrCat("commits: range ", spec.range_from, "..", spec.range_to,
                       " is backwards: ", Quote((*from)->first), " comes after ",
                       Quote((*to)->first), " in catalog ", Quote(catalog.name())));
    }
    for (const pb::CatalogCommit& c : catalog.commits()) {
      if (c.index() >= (*from)->second && c.index() <= (*to)->second) {
        out.push_back({c.id(), c.index(), settings[c.index()]});
      }
    }
    return out;
  }
  Errors e;
  for (size_t i = 0; i < spec.commit_ids.size(); ++i) {
    auto it = FindCommit(index, spec.commit_ids[i], catalog.name());
    if (absl::IsNotFound(it.status())) {
      e.Add(absl::StrCat("commits[", i, "]"),
            absl::StrCat("unknown commit ", Quote(spec.commit_ids[i]), " in catalog ",
                         Quote(catalog.name()), it.status().message()));
      continue;
    }
    if (!it.ok()) {
      e.Add(absl::StrCat("commits[", i, "]"), std::string(it.status().message()));
      continue;
    }
    out.push_back({(*it)->first, (*it)->second, settings[(*it)->second]});
  }
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  return out;
}

absl::StatusOr<int64_t> CountJobs(const MatrixSpec& spec, size_t commits,
                                  const SpecLimits& limits) {
  // Saturating product: a huge spec must not overflow into a small number.
  const std::vector<uint64_t> factors = {commits, spec.modes.size(), spec.workloads.size(),
                                         spec.platforms.size(),
                                         static_cast<uint64_t>(spec.repeats)};
  uint64_t n = 1;
  const uint64_t cap = static_cast<uint64_t>(limits.max_jobs_per_matrix);
  for (uint64_t f : factors) {
    if (f != 0 && n > (cap + 1) / f + 1) {
      n = cap + 1;
    } else {
      n *= f;
    }
  }
  if (n > cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "matrix: ", commits, " commits x ", spec.modes.size(), " modes x ", spec.workloads.size(),
        " workloads x ", spec.platforms.size(), " platforms x ", spec.repeats,
        " repeats is more than the limit of ", cap, " jobs (--max-jobs-per-matrix)"));
  }
  return static_cast<int64_t>(n);
}

std::vector<pb::Job> ExpandMatrix(const MatrixSpec& spec,
                                  const std::vector<ResolvedCommit>& commits, int max_attempts) {
  std::vector<pb::Job> jobs;
  jobs.reserve(commits.size() * spec.modes.size() * spec.workloads.size() * spec.platforms.size() *
               static_cast<size_t>(spec.repeats));
  const int priority = JobPriority(spec.kind, spec.priority);
  for (const ResolvedCommit& c : commits) {
    for (pb::IommuMode mode : spec.modes) {
      for (const WorkloadSpec& w : spec.workloads) {
        for (const std::string& platform : spec.platforms) {
          for (int r = 0; r < spec.repeats; ++r) {
            pb::Job j;
            j.set_catalog(spec.catalog);
            j.set_commit_id(c.id);
            j.set_commit_index(c.index);
            j.set_platform(platform);
            j.mutable_workload()->set_name(w.name);
            for (const auto& [k, v] : w.params) (*j.mutable_workload()->mutable_params())[k] = v;
            j.set_mode(mode);
            j.set_repeat(r);
            j.set_executor(spec.executor);
            j.set_priority(priority);
            j.set_kind(spec.kind);
            j.set_state(pb::JOB_STATE_QUEUED);
            j.set_max_attempts(max_attempts);
            for (const auto& [k, v] : c.settings) (*j.mutable_model_set())[k] = v;
            for (const auto& [k, v] : spec.model_set) (*j.mutable_model_set())[k] = v;
            j.set_seed(JobSeed(spec.seed, platform, w, mode, r));
            jobs.push_back(std::move(j));
          }
        }
      }
    }
  }
  return jobs;
}

}  // namespace farm::scheduler
