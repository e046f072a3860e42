#include "lib/spec/spec_yaml.h"

#include <map>
#include <set>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/iommu_mode/iommu_mode.h"
#include "lib/spec/table_checks.h"
#include "lib/spec/yaml_document.h"
#include "lib/spec/yaml_limits.h"
#include "lib/spec/yaml_reader.h"
#include "proto/names.h"

namespace farm::spec {
namespace {

// The YAML text as a node, or the error naming why it is not a spec.
absl::StatusOr<YAML::Node> LoadSpecYaml(std::string_view yaml, const SpecLimits& limits) {
  if (yaml.size() > limits.max_spec_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spec: ", yaml.size(), " bytes is more than the limit of ",
                     limits.max_spec_bytes, " bytes (--max-spec-bytes)"));
  }
  if (absl::Status st = CheckYamlText(yaml); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat("spec: ", st.message()));
  if (absl::Status st = CheckYamlExpansion(yaml, YamlExpansionLimits{}); !st.ok()) return st;
  if (absl::Status st = CheckYamlDocument(yaml); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat("spec: ", st.message()));
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

// A list of scalar values to sweep, as `threads: [1, 16, 64]` gives them.
void MapSweep(const YAML::Node& n, const std::string& path, FieldErrors& e, pb::SweepValues* out) {
  if (n.size() == 0) {
    e.Add(path, "empty list (a sweep needs at least one value)");
    return;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i].IsScalar()) {
      out->add_values(n[i].Scalar());
    } else {
      e.Add(absl::StrCat(path, "[", i, "]"), "expected a scalar");
    }
  }
}

// `params: {key: scalar or list}`; `params:` with nothing after it means
// none. A list is the value of a param that takes one (ParamTakesAList) and
// a sweep of values for any other; with EXECUTOR_UNSPECIFIED every list is
// a value (no sweeps).
void MapParams(const YAML::Node& params, const std::string& path, pb::Executor executor,
               FieldErrors& e, pb::Workload* out) {
  if (params.IsNull()) return;
  if (!params.IsMap()) {
    e.Add(path, absl::StrCat("expected a map, got ", KindOf(params)));
    return;
  }
  for (auto it = params.begin(); it != params.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (it->second.IsSequence() && executor != pb::EXECUTOR_UNSPECIFIED &&
        !ParamTakesAList(executor, out->name(), key)) {
      MapSweep(it->second, path + "." + key, e, &(*out->mutable_sweep())[key]);
      continue;
    }
    std::string value;
    if (GetParamValue(it->second, path + "." + key, e, &value))
      (*out->mutable_params())[key] = value;
  }
}

// A workload: `{name, params}`, or its name alone.
void MapWorkload(const YAML::Node& w, const std::string& path, pb::Executor executor,
                 FieldErrors& e, pb::Workload* out) {
  if (w.IsScalar()) {
    GetString(w, path, e, out->mutable_name());
    return;
  }
  if (!w.IsMap()) {
    e.Add(path, absl::StrCat("expected {name, params}, got ", KindOf(w)));
    return;
  }
  CheckKeys(w, path, {"name", "params"}, e);
  if (w["name"]) GetString(w["name"], path + ".name", e, out->mutable_name());
  if (w["params"]) MapParams(w["params"], path + ".params", executor, e, out);
}

// `commits: A..B`, one id, or a list of ids.
void MapCommits(const YAML::Node& c, FieldErrors& e, pb::MatrixSpec* out) {
  if (!c.IsScalar()) {
    GetStringList(c, "commits", e, out->mutable_commit_list()->mutable_ids());
    return;
  }
  const std::string s = c.Scalar();
  const auto dots = s.find("..");
  if (dots != std::string::npos) {
    pb::CommitRange* r = out->mutable_commit_range();
    r->set_from(std::string(absl::StripAsciiWhitespace(s.substr(0, dots))));
    r->set_to(std::string(absl::StripAsciiWhitespace(s.substr(dots + 2))));
    if (r->from().empty() || r->to().empty() || r->to().find("..") != std::string::npos) {
      e.Add("commits", absl::StrCat("bad range ", Quoted(s), " (expected \"A..B\")"));
    }
  } else if (s.empty()) {
    e.Add("commits", "empty");
  } else {
    out->mutable_commit_list()->add_ids(s);
  }
}

// `modes: [off, strict]` or one mode.
void MapModes(const YAML::Node& m, FieldErrors& e, pb::MatrixSpec* out) {
  std::vector<YAML::Node> items;
  if (m.IsScalar()) {
    items.push_back(m);
  } else if (m.IsSequence() && m.size() > 0) {
    for (size_t i = 0; i < m.size(); ++i) items.push_back(m[i]);
  } else {
    e.Add("modes", absl::StrCat("expected a non-empty list of: ", iommu_mode::WordList()));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string p = m.IsScalar() ? "modes" : absl::StrCat("modes[", i, "]");
    pb::IommuMode mode = pb::IOMMU_MODE_UNSPECIFIED;
    if (!items[i].IsScalar()) {
      e.Add(p, absl::StrCat("expected a mode name, got ", KindOf(items[i])));
    } else {
      const std::string name = items[i].Scalar();
      mode = ::farm::proto::ModeFromName(name);
      if (mode == pb::IOMMU_MODE_UNSPECIFIED) {
        e.Add(p, absl::StrCat("unknown mode ", Quoted(name), " (expected ", iommu_mode::WordList(),
                              ")"));
      }
    }
    out->add_modes(mode);  // keeps the index; the typed check skips it
  }
}

void MapWorkloads(const YAML::Node& w, pb::Executor executor, FieldErrors& e, pb::MatrixSpec* out) {
  if (!w.IsSequence() || w.size() == 0) {
    e.Add("workloads", absl::StrCat("expected a non-empty list of {name, params}, got ",
                                    w.IsSequence() ? "an empty list" : KindOf(w)));
    return;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    MapWorkload(w[i], absl::StrCat("workloads[", i, "]"), executor, e, out->add_workloads());
  }
}

// An executor name; `real_only` for analysis.confirm, which runs a real tool.
pb::Executor MapExecutor(const YAML::Node& n, const std::string& path, bool real_only,
                         FieldErrors& e) {
  std::string name;
  if (!GetString(n, path, e, &name)) return pb::EXECUTOR_UNSPECIFIED;
  const pb::Executor ex = ::farm::proto::ExecutorFromName(name);
  if (real_only && !::farm::proto::IsRealExecutor(ex)) {
    e.Add(path, absl::StrCat("unknown real executor ", Quoted(name),
                             " (expected fio, iozone, dma-map-bench)"));
  } else if (ex == pb::EXECUTOR_UNSPECIFIED || ex == pb::EXECUTOR_KBUILD) {
    e.Add(path, absl::StrCat("unknown executor ", Quoted(name),
                             " (expected emulator, fio, iozone, dma-map-bench)"));
  }
  return ex;
}

// `analysis.confirm: {executor, workload: {name, params}, catalog, platform,
// repeats, max_repeats, metric}`.
void MapConfirm(const YAML::Node& c, FieldErrors& e, pb::AnalysisConfirm* out) {
  const std::string p = "analysis.confirm";
  if (!c.IsMap()) {
    e.Add(p, absl::StrCat("expected a map like {executor: fio, workload: {name, params}}, got ",
                          KindOf(c)));
    return;
  }
  CheckKeys(c, p,
            {"executor", "workload", "catalog", "platform", "repeats", "max_repeats", "metric"}, e);
  if (c["executor"]) out->set_executor(MapExecutor(c["executor"], p + ".executor", true, e));
  // One run to compare: its lists are values, never sweeps.
  if (c["workload"]) {
    MapWorkload(c["workload"], p + ".workload", pb::EXECUTOR_UNSPECIFIED, e,
                out->mutable_workload());
  }
  if (c["catalog"]) GetString(c["catalog"], p + ".catalog", e, out->mutable_catalog());
  if (c["platform"]) GetString(c["platform"], p + ".platform", e, out->mutable_platform());
  if (c["metric"]) GetString(c["metric"], p + ".metric", e, out->mutable_metric());
  int64_t v = 0;
  // Two runs per commit at least: a t-test needs a variance on each side.
  if (c["repeats"] && GetInt(c["repeats"], p + ".repeats", e, 2, 100, &v)) {
    out->set_repeats(static_cast<int32_t>(v));
  }
  if (c["max_repeats"] && GetInt(c["max_repeats"], p + ".max_repeats", e, 2, 1000, &v)) {
    out->set_max_repeats(static_cast<int32_t>(v));
  }
}

// `analysis: {bisect, confirm}`.
void MapAnalysis(const YAML::Node& a, FieldErrors& e, pb::MatrixSpec* out) {
  if (!a.IsMap()) {
    e.Add("analysis", absl::StrCat("expected a map like {bisect: true}, got ", KindOf(a)));
    return;
  }
  CheckKeys(a, "analysis", {"bisect", "confirm"}, e);
  bool bisect = false;
  if (a["bisect"] && GetBool(a["bisect"], "analysis.bisect", e, &bisect)) {
    out->mutable_analysis()->set_bisect(bisect);
  }
  if (a["confirm"]) MapConfirm(a["confirm"], e, out->mutable_analysis()->mutable_confirm());
}

void MapKind(const YAML::Node& n, FieldErrors& e, pb::MatrixSpec* out) {
  std::string k;
  if (!GetString(n, "kind", e, &k)) return;
  if (k == "bulk") {
    out->set_kind(pb::JOB_KIND_BULK);
  } else if (k == "confirm") {
    out->set_kind(pb::JOB_KIND_CONFIRM);
  } else if (k == "bisect") {
    out->set_kind(pb::JOB_KIND_BISECT);
  } else {
    e.Add("kind", absl::StrCat("unknown kind ", Quoted(k), " (expected bulk, confirm, bisect)"));
  }
}

// A map of scalars: `set: {model.key: scalar}`, `labels: {key: value}`.
void MapScalars(const YAML::Node& s, const std::string& field, const char* what, FieldErrors& e,
                google::protobuf::Map<std::string, std::string>* out) {
  if (!s.IsMap()) {
    e.Add(field, absl::StrCat("expected a map of ", what, ", got ", KindOf(s)));
    return;
  }
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (!it->second.IsScalar()) {
      e.Add(field + "." + key, absl::StrCat("expected a scalar, got ", KindOf(it->second)));
      continue;
    }
    (*out)[key] = it->second.Scalar();
  }
}

// `kernel_config: {base, base_text, fragments}`. A fragment is a file's path
// (farmctl reads it before submitting) or {name, text}, the form a stored
// spec keeps.
void MapKernelConfig(const YAML::Node& k, FieldErrors& e, pb::KernelConfig* out) {
  if (!k.IsMap()) {
    e.Add("kernel_config",
          absl::StrCat("expected a map like {base: tinyconfig, fragments: [f.config]}, got ",
                       KindOf(k)));
    return;
  }
  CheckKeys(k, "kernel_config", {"base", "base_text", "fragments"}, e);
  if (k["base"]) GetString(k["base"], "kernel_config.base", e, out->mutable_base());
  if (k["base_text"]) {
    GetString(k["base_text"], "kernel_config.base_text", e, out->mutable_base_text());
  }
  if (!k["fragments"]) return;
  const YAML::Node& fs = k["fragments"];
  if (!fs.IsSequence()) {
    e.Add("kernel_config.fragments", absl::StrCat("expected a list, got ", KindOf(fs)));
    return;
  }
  for (size_t i = 0; i < fs.size(); ++i) {
    const std::string path = absl::StrCat("kernel_config.fragments[", i, "]");
    pb::ConfigFragment* f = out->add_fragments();
    if (fs[i].IsScalar()) {
      f->set_name(fs[i].Scalar());
      continue;
    }
    if (!fs[i].IsMap()) {
      e.Add(path, absl::StrCat("expected a file name or {name, text}, got ", KindOf(fs[i])));
      continue;
    }
    CheckKeys(fs[i], path, {"name", "text"}, e);
    if (fs[i]["name"]) GetString(fs[i]["name"], path + ".name", e, f->mutable_name());
    if (fs[i]["text"]) GetString(fs[i]["text"], path + ".text", e, f->mutable_text());
  }
}

// The spec's top-level map onto the message, key by key.
void MapRoot(const YAML::Node& root, FieldErrors& e, pb::MatrixSpec* out) {
  CheckKeys(
      root, "",
      {"name", "catalog", "platform", "commits", "modes", "workloads", "repeats", "executor",
       "analysis", "priority", "seed", "set", "kind", "patch", "labels", "kernel_config", "accel"},
      e);
  if (root["name"]) GetString(root["name"], "name", e, out->mutable_name());
  if (root["catalog"]) GetString(root["catalog"], "catalog", e, out->mutable_catalog());
  if (root["platform"]) GetStringList(root["platform"], "platform", e, out->mutable_platform());
  if (root["commits"]) MapCommits(root["commits"], e, out);
  if (root["modes"]) MapModes(root["modes"], e, out);
  // Which params sweep depends on the executor's tables: read it first (its
  // own errors are reported below).
  pb::Executor executor = pb::EXECUTOR_EMULATOR;
  if (root["executor"] && root["executor"].IsScalar()) {
    const pb::Executor named = ::farm::proto::ExecutorFromName(root["executor"].Scalar());
    if (named != pb::EXECUTOR_UNSPECIFIED) executor = named;
  }
  if (root["workloads"]) MapWorkloads(root["workloads"], executor, e, out);
  int64_t v = 0;
  if (root["repeats"] && GetInt(root["repeats"], "repeats", e, 1, 10000, &v)) {
    out->set_repeats(static_cast<int32_t>(v));
  }
  if (root["executor"]) out->set_executor(MapExecutor(root["executor"], "executor", false, e));
  if (root["analysis"]) MapAnalysis(root["analysis"], e, out);
  if (root["kind"]) MapKind(root["kind"], e, out);
  if (root["priority"] && GetInt(root["priority"], "priority", e, -999, 999, &v)) {
    out->set_priority(static_cast<int32_t>(v));
  }
  uint64_t seed = 0;
  if (root["seed"] && GetUint64(root["seed"], "seed", e, &seed)) out->set_seed(seed);
  if (root["set"]) MapScalars(root["set"], "set", "model keys", e, out->mutable_set());
  if (root["labels"]) {
    MapScalars(root["labels"], "labels", "agent labels", e, out->mutable_labels());
  }
  if (root["patch"]) GetString(root["patch"], "patch", e, out->mutable_patch());
  if (root["kernel_config"])
    MapKernelConfig(root["kernel_config"], e, out->mutable_kernel_config());
  if (root["accel"]) GetString(root["accel"], "accel", e, out->mutable_accel());
}

// ------------------------------------------------------------ to YAML

// A literal block (`|`) reads back with exactly one final newline and
// cannot start with a space or a blank line, nor hold control characters;
// text it would change goes double quoted, so a patch keeps every byte (its
// try commit id is a hash of them).
bool LiteralBlockKeeps(const std::string& s) {
  if (s.empty() || s.back() != '\n' || s.ends_with("\n\n") || s[0] == ' ' || s[0] == '\n') {
    return false;
  }
  for (char c : s) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c)) && c != '\n') return false;
  }
  return true;
}

void EmitSortedMap(const google::protobuf::Map<std::string, std::string>& m, YAML::Emitter& out) {
  out << YAML::BeginMap;
  for (const auto& [k, v] : std::map<std::string, std::string>(m.begin(), m.end())) {
    out << YAML::Key << k << YAML::Value << v;
  }
  out << YAML::EndMap;
}

void EmitWorkload(const pb::Workload& w, YAML::Emitter& out) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << w.name();
  if (!w.params().empty() || !w.sweep().empty()) {
    // Scalars and sweeps in one map, keys sorted (a key is one or the other).
    std::set<std::string> keys;
    for (const auto& [k, v] : w.params()) keys.insert(k);
    for (const auto& [k, v] : w.sweep()) keys.insert(k);
    out << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
    for (const std::string& k : keys) {
      out << YAML::Key << k << YAML::Value;
      if (auto it = w.sweep().find(k); it != w.sweep().end()) {
        out << YAML::Flow << YAML::BeginSeq;
        for (const std::string& v : it->second.values()) out << v;
        out << YAML::EndSeq;
      } else {
        out << w.params().at(k);
      }
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

void EmitConfirm(const pb::AnalysisConfirm& c, YAML::Emitter& out) {
  out << YAML::BeginMap;
  if (c.executor() != pb::EXECUTOR_UNSPECIFIED) {
    out << YAML::Key << "executor" << YAML::Value << ::farm::proto::ExecutorName(c.executor());
  }
  out << YAML::Key << "workload" << YAML::Value;
  EmitWorkload(c.workload(), out);
  if (!c.catalog().empty()) out << YAML::Key << "catalog" << YAML::Value << c.catalog();
  if (!c.platform().empty()) out << YAML::Key << "platform" << YAML::Value << c.platform();
  if (c.repeats() != 0) out << YAML::Key << "repeats" << YAML::Value << c.repeats();
  if (c.max_repeats() != 0) out << YAML::Key << "max_repeats" << YAML::Value << c.max_repeats();
  if (!c.metric().empty()) out << YAML::Key << "metric" << YAML::Value << c.metric();
  out << YAML::EndMap;
}

void EmitAnalysis(const pb::MatrixSpec& spec, YAML::Emitter& out) {
  if (!spec.analysis().bisect() && !spec.analysis().has_confirm()) return;
  out << YAML::Key << "analysis" << YAML::Value;
  if (!spec.analysis().has_confirm()) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "bisect" << YAML::Value << true
        << YAML::EndMap;
    return;
  }
  out << YAML::BeginMap;
  if (spec.analysis().bisect()) out << YAML::Key << "bisect" << YAML::Value << true;
  out << YAML::Key << "confirm" << YAML::Value;
  EmitConfirm(spec.analysis().confirm(), out);
  out << YAML::EndMap;
}

// name, catalog, platform, commits, modes, workloads: what every spec has.
void EmitMatrix(const pb::MatrixSpec& spec, YAML::Emitter& out) {
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
  for (int m : spec.modes()) out << ::farm::proto::ModeName(static_cast<pb::IommuMode>(m));
  out << YAML::EndSeq;
  out << YAML::Key << "workloads" << YAML::Value << YAML::BeginSeq;
  for (const pb::Workload& w : spec.workloads()) EmitWorkload(w, out);
  out << YAML::EndSeq;
}

void EmitText(const std::string& text, YAML::Emitter& out) {
  out << (LiteralBlockKeeps(text) ? YAML::Literal : YAML::DoubleQuoted) << text;
}

// Fragments go as {name, text}: a stored spec carries what was built.
void EmitKernelConfig(const pb::KernelConfig& k, YAML::Emitter& out) {
  out << YAML::Key << "kernel_config" << YAML::Value << YAML::BeginMap;
  if (!k.base().empty()) out << YAML::Key << "base" << YAML::Value << k.base();
  if (!k.base_text().empty()) {
    out << YAML::Key << "base_text" << YAML::Value;
    EmitText(k.base_text(), out);
  }
  if (k.fragments_size() > 0) {
    out << YAML::Key << "fragments" << YAML::Value << YAML::BeginSeq;
    for (const pb::ConfigFragment& f : k.fragments()) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << f.name();
      out << YAML::Key << "text" << YAML::Value;
      EmitText(f.text(), out);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

}  // namespace

absl::Status MapSpecYaml(std::string_view yaml, const SpecLimits& limits, FieldErrors& e,
                         pb::MatrixSpec* out) {
  absl::StatusOr<YAML::Node> root = LoadSpecYaml(yaml, limits);
  if (!root.ok()) return root.status();
  CheckScalarText(*root, e);
  MapRoot(*root, e, out);
  return absl::OkStatus();
}

absl::StatusOr<pb::MatrixSpec> MatrixSpecFromYaml(std::string_view yaml, const SpecLimits& limits) {
  FieldErrors e;
  pb::MatrixSpec out;
  if (absl::Status st = MapSpecYaml(yaml, limits, e, &out); !st.ok()) return st;
  if (!e.empty()) return e.ToStatus();
  return out;
}

std::string MatrixSpecToYaml(const pb::MatrixSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  EmitMatrix(spec, out);
  if (spec.repeats() != 0) out << YAML::Key << "repeats" << YAML::Value << spec.repeats();
  if (spec.executor() != pb::EXECUTOR_UNSPECIFIED) {
    out << YAML::Key << "executor" << YAML::Value << ::farm::proto::ExecutorName(spec.executor());
  }
  EmitAnalysis(spec, out);
  if (spec.kind() == pb::JOB_KIND_CONFIRM) out << YAML::Key << "kind" << YAML::Value << "confirm";
  if (spec.kind() == pb::JOB_KIND_BISECT) out << YAML::Key << "kind" << YAML::Value << "bisect";
  if (spec.priority() != 0) out << YAML::Key << "priority" << YAML::Value << spec.priority();
  if (spec.seed() != 0) out << YAML::Key << "seed" << YAML::Value << spec.seed();
  if (!spec.patch().empty()) {
    out << YAML::Key << "patch" << YAML::Value
        << (LiteralBlockKeeps(spec.patch()) ? YAML::Literal : YAML::DoubleQuoted) << spec.patch();
  }
  if (spec.has_kernel_config()) EmitKernelConfig(spec.kernel_config(), out);
  if (!spec.accel().empty()) out << YAML::Key << "accel" << YAML::Value << spec.accel();
  if (!spec.set().empty()) {
    out << YAML::Key << "set" << YAML::Value;
    EmitSortedMap(spec.set(), out);
  }
  if (!spec.labels().empty()) {
    out << YAML::Key << "labels" << YAML::Value;
    EmitSortedMap(spec.labels(), out);
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace farm::spec
