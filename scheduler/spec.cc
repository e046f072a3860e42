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
#include "emu/model/platform.h"
#include "emu/workloads/workload.h"
#include "lib/toolspec/fio_spec.h"
#include "lib/toolspec/iozone_spec.h"
#include "proto/kernel_offers.h"
#include "proto/kernel_params.h"
#include "scheduler/yaml_limits.h"

namespace farm::scheduler {
namespace {

// "off, passthrough, strict, lazy": for "expected ..." messages.
std::string ModeList() { return absl::StrJoin(::farm::proto::ModeNames(), ", "); }

class Errors {
 public:
  void Add(const std::string& path, const std::string& msg) {
    lines_.push_back(path.empty() ? msg : path + ": " + msg);
    paths_.push_back(path);
  }
  // Add unless `path` or a field holding it already has an error: the YAML
  // mapping reports what it could not map, and the typed checks that follow
  // would otherwise report the same field again as missing.
  void AddIfNew(const std::string& path, const std::string& msg) {
    for (const std::string& p : paths_) {
      if (p == path || (absl::StartsWith(path, p) && path.size() > p.size() &&
                        (path[p.size()] == '.' || path[p.size()] == '['))) {
        return;
      }
    }
    Add(path, msg);
  }
  bool empty() const { return lines_.empty(); }
  std::string Join() const { return absl::StrJoin(lines_, "\n"); }

 private:
  std::vector<std::string> lines_;
  std::vector<std::string> paths_;
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

// A string or a list of strings, non-empty. Entries keep their YAML index
// (a bad one maps to "") so the typed checks name the same index.
void GetStringList(const YAML::Node& n, const std::string& path, Errors& e,
                   google::protobuf::RepeatedPtrField<std::string>* out) {
  if (n.IsScalar()) {
    if (n.Scalar().empty()) {
      e.Add(path, "empty");
    } else {
      out->Add(std::string(n.Scalar()));
    }
    return;
  }
  if (!n.IsSequence() || n.size() == 0) {
    e.Add(path, absl::StrCat("expected a string or a non-empty list, got ",
                             n.IsSequence() ? "an empty list" : KindOf(n)));
    return;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    GetString(n[i], absl::StrCat(path, "[", i, "]"), e, &s);
    out->Add(std::move(s));
  }
}

// The typed checks of a list of names: non-empty, no duplicates.
void CheckNames(const google::protobuf::RepeatedPtrField<std::string>& names,
                const std::string& path, Errors& e, std::vector<std::string>* out) {
  std::set<std::string> seen;
  for (int i = 0; i < names.size(); ++i) {
    const std::string p = names.size() == 1 ? path : absl::StrCat(path, "[", i, "]");
    const std::string& s = names[i];
    if (s.empty()) {
      e.AddIfNew(p, "empty");
      continue;
    }
    if (!seen.insert(s).second) {
      e.AddIfNew(absl::StrCat(path, "[", i, "]"), absl::StrCat("duplicate ", Quote(s)));
      continue;
    }
    out->push_back(s);
  }
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
  // A real job's vm platform picks the emulated IOMMU its kernel boots
  // under (proto/kernel_offers.h): a misspelt one would never be leased.
  if (spec.executor == pb::EXECUTOR_FIO || spec.executor == pb::EXECUTOR_IOZONE) {
    for (size_t i = 0; i < spec.platforms.size(); ++i) {
      const std::string& name = spec.platforms[i];
      if (!::farm::proto::LooksLikeVmPlatform(name) || ::farm::proto::FindVmPlatform(name)) {
        continue;
      }
      std::vector<std::string> known;
      for (const ::farm::proto::VmPlatform& v : ::farm::proto::VmPlatforms()) {
        known.emplace_back(v.name);
      }
      e.Add(absl::StrCat("platform[", i, "]"),
            absl::StrCat("unknown IOMMU model ", Quote(name),
                         " (vm platforms: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  if (spec.confirm.enabled) {
    toolspec::Params params(spec.confirm.workload.params.begin(),
                            spec.confirm.workload.params.end());
    params.erase(::farm::proto::kKernelParamsKey);
    // As for a fio matrix below: the target is the agent's choice.
    if (spec.confirm.executor == pb::EXECUTOR_FIO && params.count("filename") == 0 &&
        params.count("directory") == 0) {
      params.emplace("filename", "/dev/nvme0n1");
    }
    absl::Status s = spec.confirm.executor == pb::EXECUTOR_FIO
                         ? toolspec::FioSpecFromParams(params).status()
                         : toolspec::IozoneSpecFromParams(params).status();
    if (!s.ok()) e.Add("analysis.confirm.workload.params", std::string(s.message()));
  }
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

namespace {

// `analysis.confirm: {executor, workload: {name, params}, catalog, platform,
// repeats, max_repeats, metric}` onto the typed message.
void MapConfirmYaml(const YAML::Node& c, Errors& e, pb::AnalysisConfirm* out) {
  const std::string p = "analysis.confirm";
  if (!c.IsMap()) {
    e.Add(p, absl::StrCat("expected a map like {executor: fio, workload: {name, params}}, got ",
                          KindOf(c)));
    return;
  }
  CheckKeys(c, p,
            {"executor", "workload", "catalog", "platform", "repeats", "max_repeats", "metric"}, e);
  std::string ex;
  if (c["executor"] && GetString(c["executor"], p + ".executor", e, &ex)) {
    out->set_executor(ExecutorFromName(ex));
    if (out->executor() != pb::EXECUTOR_FIO && out->executor() != pb::EXECUTOR_IOZONE) {
      e.Add(p + ".executor",
            absl::StrCat("unknown real executor ", Quote(ex), " (expected fio, iozone)"));
    }
  }
  if (c["workload"]) {
    const YAML::Node w = c["workload"];
    const std::string wp = p + ".workload";
    if (w.IsScalar()) {
      GetString(w, wp, e, out->mutable_workload()->mutable_name());
    } else if (!w.IsMap()) {
      e.Add(wp, absl::StrCat("expected {name, params}, got ", KindOf(w)));
    } else {
      CheckKeys(w, wp, {"name", "params"}, e);
      if (w["name"]) GetString(w["name"], wp + ".name", e, out->mutable_workload()->mutable_name());
      const YAML::Node params = w["params"];
      if (params && !params.IsNull() && !params.IsMap()) {
        e.Add(wp + ".params", absl::StrCat("expected a map, got ", KindOf(params)));
      } else if (params && params.IsMap()) {
        for (auto it = params.begin(); it != params.end(); ++it) {
          const std::string key = it->first.Scalar();
          std::string value;
          if (GetParamValue(it->second, wp + ".params." + key, e, &value)) {
            (*out->mutable_workload()->mutable_params())[key] = value;
          }
        }
      }
    }
  }
  for (const char* k : {"catalog", "platform", "metric"}) {
    std::string v;
    if (!c[k] || !GetString(c[k], p + "." + k, e, &v)) continue;
    if (std::string_view(k) == "catalog") out->set_catalog(v);
    if (std::string_view(k) == "platform") out->set_platform(v);
    if (std::string_view(k) == "metric") out->set_metric(v);
  }
  int64_t v = 0;
  // Two runs per commit at least: a t-test needs a variance on each side.
  if (c["repeats"] && GetInt(c["repeats"], p + ".repeats", e, 2, 100, &v)) {
    out->set_repeats(static_cast<int32_t>(v));
  }
  if (c["max_repeats"] && GetInt(c["max_repeats"], p + ".max_repeats", e, 2, 1000, &v)) {
    out->set_max_repeats(static_cast<int32_t>(v));
  }
}

// The typed checks of `analysis.confirm`: a real executor and a workload,
// an emulator matrix, bounds, and a metric (fio's default from `rw`).
void CheckConfirm(const pb::MatrixSpec& in, Errors& e, MatrixSpec* spec) {
  const pb::AnalysisConfirm& c = in.analysis().confirm();
  const std::string p = "analysis.confirm";
  ConfirmSpec& out = spec->confirm;
  out.enabled = true;
  if (in.executor() != pb::EXECUTOR_UNSPECIFIED && in.executor() != pb::EXECUTOR_EMULATOR) {
    e.AddIfNew(p, absl::StrCat("confirms an emulator matrix's findings on real kernels; this "
                               "matrix already runs ",
                               ExecutorName(in.executor())));
  }
  if (c.executor() == pb::EXECUTOR_UNSPECIFIED) {
    e.AddIfNew(p + ".executor", "required (fio or iozone)");
  } else if (c.executor() != pb::EXECUTOR_FIO && c.executor() != pb::EXECUTOR_IOZONE) {
    e.AddIfNew(p + ".executor",
               absl::StrCat("unknown real executor ", static_cast<int>(c.executor()),
                            " (expected fio, iozone)"));
  }
  out.executor = c.executor();
  if (c.workload().name().empty()) {
    e.AddIfNew(p + ".workload.name", "required (the real workload, e.g. fio-nvme)");
  }
  out.workload.name = c.workload().name();
  for (const auto& [key, value] : c.workload().params()) {
    if (key.empty()) {
      e.AddIfNew(p + ".workload.params", "empty parameter name");
      continue;
    }
    std::string refused;
    if (key == ::farm::proto::kKernelParamsKey) ::farm::proto::ParseKernelParams(value, &refused);
    if (!refused.empty()) e.AddIfNew(p + ".workload.params." + key, refused);
    out.workload.params[key] = value;
  }
  out.catalog = c.catalog();
  out.platform = c.platform();
  if (c.repeats() < 0 || c.repeats() == 1 || c.repeats() > 100) {
    e.AddIfNew(p + ".repeats", absl::StrCat("must be between 2 and 100, got ", c.repeats()));
  }
  out.repeats = c.repeats() == 0 ? 3 : c.repeats();
  if (c.max_repeats() != 0 && (c.max_repeats() < out.repeats || c.max_repeats() > 1000)) {
    e.AddIfNew(p + ".max_repeats", absl::StrCat("must be between repeats (", out.repeats,
                                                ") and 1000, got ", c.max_repeats()));
  }
  out.max_repeats = c.max_repeats() == 0 ? out.repeats : c.max_repeats();
  out.metric = c.metric();
  if (out.metric.empty()) {
    auto rw = out.workload.params.find("rw");
    out.metric = ::farm::proto::DefaultConfirmMetric(
        c.executor(), rw == out.workload.params.end() ? "" : rw->second);
  }
  if (out.metric.empty() && c.executor() != pb::EXECUTOR_UNSPECIFIED) {
    e.AddIfNew(p + ".metric",
               "required unless fio's rw is read, randread, write or randwrite (\"metric/phase\" "
               "of a throughput the tool reports, e.g. iops/read or throughput_kb_s/read)");
  }
}

// The YAML spec mapped onto the message, key by key. Reports what cannot be
// mapped (YAML kinds, unknown keys, unknown names of modes, executors and
// kinds); every other check is the typed one (CheckSpec), so YAML and typed
// submits are held to the same rules.
void MapYaml(const YAML::Node& root, Errors& e, pb::MatrixSpec* out) {
  CheckKeys(root, "",
            {"name", "catalog", "platform", "commits", "modes", "workloads", "repeats", "executor",
             "analysis", "priority", "seed", "set", "kind"},
            e);
  if (root["name"]) GetString(root["name"], "name", e, out->mutable_name());
  if (root["catalog"]) GetString(root["catalog"], "catalog", e, out->mutable_catalog());
  if (root["platform"]) GetStringList(root["platform"], "platform", e, out->mutable_platform());

  if (root["commits"]) {
    const YAML::Node c = root["commits"];
    if (c.IsScalar()) {
      const std::string s = c.Scalar();
      const auto dots = s.find("..");
      if (dots != std::string::npos) {
        pb::CommitRange* r = out->mutable_commit_range();
        r->set_from(std::string(absl::StripAsciiWhitespace(s.substr(0, dots))));
        r->set_to(std::string(absl::StripAsciiWhitespace(s.substr(dots + 2))));
        if (r->from().empty() || r->to().empty() || r->to().find("..") != std::string::npos) {
          e.Add("commits", absl::StrCat("bad range ", Quote(s), " (expected \"A..B\")"));
        }
      } else if (s.empty()) {
        e.Add("commits", "empty");
      } else {
        out->mutable_commit_list()->add_ids(s);
      }
    } else {
      GetStringList(c, "commits", e, out->mutable_commit_list()->mutable_ids());
    }
  }

  if (root["modes"]) {
    const YAML::Node m = root["modes"];
    std::vector<YAML::Node> items;
    if (m.IsScalar()) {
      items.push_back(m);
    } else if (m.IsSequence() && m.size() > 0) {
      for (size_t i = 0; i < m.size(); ++i) items.push_back(m[i]);
    } else {
      e.Add("modes", absl::StrCat("expected a non-empty list of: ", ModeList()));
    }
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string p = m.IsScalar() ? "modes" : absl::StrCat("modes[", i, "]");
      pb::IommuMode mode = pb::IOMMU_MODE_UNSPECIFIED;
      if (!items[i].IsScalar()) {
        e.Add(p, absl::StrCat("expected a mode name, got ", KindOf(items[i])));
      } else {
        const std::string name = items[i].Scalar();
        mode = ModeFromName(name);
        if (mode == pb::IOMMU_MODE_UNSPECIFIED) {
          e.Add(p, absl::StrCat("unknown mode ", Quote(name), " (expected ", ModeList(), ")"));
        }
      }
      out->add_modes(mode);  // keeps the index; the typed check skips it
    }
  }

  if (root["workloads"]) {
    const YAML::Node w = root["workloads"];
    if (!w.IsSequence() || w.size() == 0) {
      e.Add("workloads", absl::StrCat("expected a non-empty list of {name, params}, got ",
                                      w.IsSequence() ? "an empty list" : KindOf(w)));
    } else {
      for (size_t i = 0; i < w.size(); ++i) {
        const std::string p = absl::StrCat("workloads[", i, "]");
        const YAML::Node item = w[i];
        pb::Workload* ws = out->add_workloads();
        if (item.IsScalar()) {  // shorthand: just a name
          GetString(item, p, e, ws->mutable_name());
          continue;
        }
        if (!item.IsMap()) {
          e.Add(p, absl::StrCat("expected {name, params}, got ", KindOf(item)));
          continue;
        }
        CheckKeys(item, p, {"name", "params"}, e);
        if (item["name"]) GetString(item["name"], p + ".name", e, ws->mutable_name());
        if (!item["params"]) continue;
        const YAML::Node params = item["params"];
        if (params.IsNull()) continue;  // `params:` with nothing after it means none
        if (!params.IsMap()) {
          e.Add(p + ".params", absl::StrCat("expected a map, got ", KindOf(params)));
          continue;
        }
        for (auto it = params.begin(); it != params.end(); ++it) {
          const std::string key = it->first.Scalar();
          std::string value;
          if (GetParamValue(it->second, p + ".params." + key, e, &value)) {
            (*ws->mutable_params())[key] = value;
          }
        }
      }
    }
  }

  int64_t v = 0;
  if (root["repeats"] && GetInt(root["repeats"], "repeats", e, 1, 10000, &v)) {
    out->set_repeats(static_cast<int32_t>(v));
  }
  if (root["executor"]) {
    std::string ex;
    if (GetString(root["executor"], "executor", e, &ex)) {
      out->set_executor(ExecutorFromName(ex));
      if (out->executor() == pb::EXECUTOR_UNSPECIFIED) {
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
      CheckKeys(a, "analysis", {"bisect", "confirm"}, e);
      bool bisect = false;
      if (a["bisect"] && GetBool(a["bisect"], "analysis.bisect", e, &bisect)) {
        out->mutable_analysis()->set_bisect(bisect);
      }
      if (a["confirm"]) MapConfirmYaml(a["confirm"], e, out->mutable_analysis()->mutable_confirm());
    }
  }
  if (root["kind"]) {
    std::string k;
    if (GetString(root["kind"], "kind", e, &k)) {
      if (k == "bulk") {
        out->set_kind(pb::JOB_KIND_BULK);
      } else if (k == "confirm") {
        out->set_kind(pb::JOB_KIND_CONFIRM);
      } else if (k == "bisect") {
        out->set_kind(pb::JOB_KIND_BISECT);
      } else {
        e.Add("kind", absl::StrCat("unknown kind ", Quote(k), " (expected bulk, confirm, bisect)"));
      }
    }
  }
  if (root["priority"] && GetInt(root["priority"], "priority", e, -999, 999, &v)) {
    out->set_priority(static_cast<int32_t>(v));
  }
  if (root["seed"]) {
    const YAML::Node s = root["seed"];
    bool ok = s.IsScalar();
    if (ok) {
      try {
        out->set_seed(s.as<uint64_t>());
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
        (*out->mutable_set())[key] = it->second.Scalar();
      }
    }
  }
}

// The typed checks, into the expansion's form. Errors already reported for
// a field (by MapYaml) are not repeated.
void CheckSpec(const pb::MatrixSpec& in, Errors& e, MatrixSpec* spec) {
  if (in.name().empty()) {
    e.AddIfNew("name", "required");
  } else if (in.name().size() > 200) {
    e.AddIfNew("name", "longer than 200 characters");
  }
  spec->name = in.name();
  if (in.catalog().empty()) e.AddIfNew("catalog", "required");
  spec->catalog = in.catalog();
  if (in.platform().empty()) {
    e.AddIfNew("platform", "required (a platform name or a list of them)");
  }
  CheckNames(in.platform(), "platform", e, &spec->platforms);

  switch (in.commits_case()) {
    case pb::MatrixSpec::kCommitRange:
      spec->commit_range = true;
      spec->range_from = in.commit_range().from();
      spec->range_to = in.commit_range().to();
      if (spec->range_from.empty())
        e.AddIfNew("commits", "range start (commit_range.from) required");
      if (spec->range_to.empty()) e.AddIfNew("commits", "range end (commit_range.to) required");
      break;
    case pb::MatrixSpec::kCommitList:
      if (in.commit_list().ids().empty()) e.AddIfNew("commits", "empty list");
      CheckNames(in.commit_list().ids(), "commits", e, &spec->commit_ids);
      break;
    default:
      e.AddIfNew("commits", "required (a range \"A..B\" or a list of commit ids)");
  }

  if (in.modes().empty())
    e.AddIfNew("modes", absl::StrCat("required (a list of: ", ModeList(), ")"));
  std::set<int> seen_modes;
  for (int i = 0; i < in.modes_size(); ++i) {
    const std::string p = absl::StrCat("modes[", i, "]");
    const pb::IommuMode mode = in.modes(i);
    if (mode == pb::IOMMU_MODE_UNSPECIFIED || !pb::IommuMode_IsValid(mode)) {
      e.AddIfNew(
          in.modes_size() == 1 ? "modes" : p,
          absl::StrCat("unknown mode ", static_cast<int>(mode), " (expected ", ModeList(), ")"));
      continue;
    }
    if (!seen_modes.insert(mode).second) {
      e.AddIfNew(p, absl::StrCat("duplicate mode ", Quote(ModeName(mode))));
      continue;
    }
    spec->modes.push_back(mode);
  }

  if (in.workloads().empty()) e.AddIfNew("workloads", "required (a list of {name, params})");
  for (int i = 0; i < in.workloads_size(); ++i) {
    const std::string p = absl::StrCat("workloads[", i, "]");
    const pb::Workload& w = in.workloads(i);
    WorkloadSpec ws;
    if (w.name().empty()) e.AddIfNew(p + ".name", "required");
    ws.name = w.name();
    for (const auto& [key, value] : w.params()) {
      if (key.empty()) {
        e.AddIfNew(p + ".params", "empty parameter name");
        continue;
      }
      std::string refused;
      if (key == ::farm::proto::kKernelParamsKey) {
        ::farm::proto::ParseKernelParams(value, &refused);
      }
      if (!refused.empty()) e.AddIfNew(p + ".params." + key, refused);
      ws.params[key] = value;
    }
    spec->workloads.push_back(std::move(ws));
  }

  if (in.repeats() < 0 || in.repeats() > 10000) {
    e.AddIfNew("repeats", absl::StrCat("must be between 1 and 10000, got ", in.repeats()));
  }
  spec->repeats = in.repeats() == 0 ? 1 : in.repeats();
  if (!pb::Executor_IsValid(in.executor())) {
    e.AddIfNew("executor", absl::StrCat("unknown executor ", static_cast<int>(in.executor()),
                                        " (expected emulator, fio, iozone)"));
  }
  spec->executor =
      in.executor() == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR : in.executor();
  spec->bisect = in.analysis().bisect();
  if (in.analysis().has_confirm()) CheckConfirm(in, e, spec);
  if (!pb::JobKind_IsValid(in.kind())) {
    e.AddIfNew("kind", absl::StrCat("unknown kind ", static_cast<int>(in.kind()),
                                    " (expected bulk, confirm, bisect)"));
  }
  spec->kind = in.kind() == pb::JOB_KIND_UNSPECIFIED ? pb::JOB_KIND_BULK : in.kind();
  if (in.priority() < -999 || in.priority() > 999) {
    e.AddIfNew("priority", absl::StrCat("must be between -999 and 999, got ", in.priority()));
  }
  spec->priority = in.priority();
  spec->seed = in.seed();
  for (const auto& [key, value] : in.set()) {
    if (key.empty()) {
      e.AddIfNew("set", "empty model key");
      continue;
    }
    spec->model_set[key] = value;
  }
}

// The checks of a mapped or typed spec after the field checks: the tables
// the jobs will meet, then warnings.
absl::StatusOr<MatrixSpec> FinishSpec(const pb::MatrixSpec& in, Errors& e) {
  MatrixSpec spec;
  CheckSpec(in, e, &spec);
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  CheckAgainstTables(spec, e);
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  if (spec.executor == pb::EXECUTOR_EMULATOR) {
    for (const std::string& p : spec.platforms) {
      // Only a warning: the agents' emulator may be newer than the scheduler's.
      if (!::farm::emu::FindPlatform(p).ok()) {
        spec.warnings.push_back(absl::StrCat("platform ", Quote(p),
                                             " is not one of the documented platforms; the "
                                             "emulator will fail its jobs if it does not know it"));
      }
    }
  }
  return spec;
}

// The YAML text as a node, or the error naming where it is not a spec.
absl::StatusOr<YAML::Node> LoadSpecYaml(std::string_view yaml, const SpecLimits& limits) {
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
  return root;
}

}  // namespace

absl::StatusOr<pb::MatrixSpec> MatrixSpecFromYaml(std::string_view yaml, const SpecLimits& limits) {
  absl::StatusOr<YAML::Node> root = LoadSpecYaml(yaml, limits);
  if (!root.ok()) return root.status();
  Errors e;
  pb::MatrixSpec out;
  MapYaml(*root, e, &out);
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  return out;
}

absl::StatusOr<MatrixSpec> CheckMatrixSpec(const pb::MatrixSpec& spec, const SpecLimits& limits) {
  if (spec.ByteSizeLong() > limits.max_spec_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spec: ", spec.ByteSizeLong(), " bytes is more than the limit of ",
                     limits.max_spec_bytes, " bytes (--max-spec-bytes)"));
  }
  Errors e;
  return FinishSpec(spec, e);
}

absl::StatusOr<MatrixSpec> ParseMatrixSpec(std::string_view yaml, const SpecLimits& limits) {
  absl::StatusOr<YAML::Node> root = LoadSpecYaml(yaml, limits);
  if (!root.ok()) return root.status();
  // One pass reports every problem: what the mapping could not map and what
  // the typed checks find in the rest.
  Errors e;
  pb::MatrixSpec typed;
  MapYaml(*root, e, &typed);
  return FinishSpec(typed, e);
}

std::string MatrixSpecToYaml(const pb::MatrixSpec& spec) {
  const auto sorted = [](const google::protobuf::Map<std::string, std::string>& m) {
    return std::map<std::string, std::string>(m.begin(), m.end());
  };
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << spec.name();
  out << YAML::Key << "catalog" << YAML::Value << spec.catalog();
  out << YAML::Key << "platform" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& p : spec.platform()) out << p;
  out << YAML::EndSeq;
  if (spec.has_commit_range()) {
    out << YAML::Key << "commits" << YAML::Value
        << absl::StrCat(spec.commit_range().from(), "..", spec.commit_range().to());
  } else {
    out << YAML::Key << "commits" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& id : spec.commit_list().ids()) out << id;
    out << YAML::EndSeq;
  }
  out << YAML::Key << "modes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int m : spec.modes()) out << ModeName(static_cast<pb::IommuMode>(m));
  out << YAML::EndSeq;
  out << YAML::Key << "workloads" << YAML::Value << YAML::BeginSeq;
  for (const pb::Workload& w : spec.workloads()) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << w.name();
    if (!w.params().empty()) {
      out << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
      for (const auto& [k, v] : sorted(w.params())) out << YAML::Key << k << YAML::Value << v;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  if (spec.repeats() != 0) out << YAML::Key << "repeats" << YAML::Value << spec.repeats();
  if (spec.executor() != pb::EXECUTOR_UNSPECIFIED) {
    out << YAML::Key << "executor" << YAML::Value << ExecutorName(spec.executor());
  }
  if (spec.analysis().bisect() && !spec.analysis().has_confirm()) {
    out << YAML::Key << "analysis" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << "bisect" << YAML::Value << true << YAML::EndMap;
  }
  if (spec.analysis().has_confirm()) {
    const pb::AnalysisConfirm& c = spec.analysis().confirm();
    out << YAML::Key << "analysis" << YAML::Value << YAML::BeginMap;
    if (spec.analysis().bisect()) out << YAML::Key << "bisect" << YAML::Value << true;
    out << YAML::Key << "confirm" << YAML::Value << YAML::BeginMap;
    if (c.executor() != pb::EXECUTOR_UNSPECIFIED) {
      out << YAML::Key << "executor" << YAML::Value << ExecutorName(c.executor());
    }
    out << YAML::Key << "workload" << YAML::Value << YAML::BeginMap << YAML::Key << "name"
        << YAML::Value << c.workload().name();
    if (!c.workload().params().empty()) {
      out << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
      for (const auto& [k, v] : sorted(c.workload().params()))
        out << YAML::Key << k << YAML::Value << v;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
    if (!c.catalog().empty()) out << YAML::Key << "catalog" << YAML::Value << c.catalog();
    if (!c.platform().empty()) out << YAML::Key << "platform" << YAML::Value << c.platform();
    if (c.repeats() != 0) out << YAML::Key << "repeats" << YAML::Value << c.repeats();
    if (c.max_repeats() != 0) out << YAML::Key << "max_repeats" << YAML::Value << c.max_repeats();
    if (!c.metric().empty()) out << YAML::Key << "metric" << YAML::Value << c.metric();
    out << YAML::EndMap << YAML::EndMap;
  }
  if (spec.kind() == pb::JOB_KIND_CONFIRM) out << YAML::Key << "kind" << YAML::Value << "confirm";
  if (spec.kind() == pb::JOB_KIND_BISECT) out << YAML::Key << "kind" << YAML::Value << "bisect";
  if (spec.priority() != 0) out << YAML::Key << "priority" << YAML::Value << spec.priority();
  if (spec.seed() != 0) out << YAML::Key << "seed" << YAML::Value << spec.seed();
  if (!spec.set().empty()) {
    out << YAML::Key << "set" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : sorted(spec.set())) out << YAML::Key << k << YAML::Value << v;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
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
  for (const pb::CatalogCommit& c : catalog.commits()) index.emplace(c.id(), c.index());
  // The accumulated settings of the picked commits only, in one pass over
  // the catalog: a copy per catalog commit would be quadratic in a catalog
  // whose commits each set a key of their own.
  const auto with_settings =
      [&](std::vector<ResolvedCommit> picked) -> std::vector<ResolvedCommit> {
    std::map<int, std::vector<size_t>> at;
    for (size_t i = 0; i < picked.size(); ++i) at[picked[i].index].push_back(i);
    std::map<std::string, std::string> state;
    for (const pb::CatalogCommit& c : catalog.commits()) {
      if (at.empty()) break;
      for (const auto& [k, v] : c.set()) state[k] = v;
      auto it = at.find(c.index());
      if (it == at.end()) continue;
      for (size_t i : it->second) picked[i].settings = state;
      at.erase(it);
    }
    return picked;
  };
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
        out.push_back({c.id(), c.index(), {}});
      }
    }
    return with_settings(std::move(out));
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
    out.push_back({(*it)->first, (*it)->second, {}});
  }
  if (!e.empty()) return absl::InvalidArgumentError(e.Join());
  return with_settings(std::move(out));
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
                                  const std::vector<ResolvedCommit>& commits, int max_attempts,
                                  SpecSet set) {
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
            if (set == SpecSet::kInEveryJob) {
              for (const auto& [k, v] : spec.model_set) (*j.mutable_model_set())[k] = v;
            }
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
