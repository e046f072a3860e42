#include "lib/spec/spec_check.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/utf8.h"
#include "lib/iommu_mode/iommu_mode.h"
#include "lib/spec/field_errors.h"
#include "lib/spec/spec_yaml.h"
#include "lib/spec/table_checks.h"
#include "lib/stats/metric_roles.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"
#include "proto/kernel_params.h"
#include "proto/labels.h"
#include "proto/names.h"
#include "proto/try_commit.h"

namespace farm::spec {
bool HasControlCharacter(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

namespace {

// A list of names: non-empty entries, no duplicates.
void CheckNames(const google::protobuf::RepeatedPtrField<std::string>& names,
                const std::string& path, FieldErrors& e, std::vector<std::string>* out) {
  std::set<std::string> seen;
  for (int i = 0; i < names.size(); ++i) {
    const std::string p = names.size() == 1 ? path : absl::StrCat(path, "[", i, "]");
    const std::string& s = names[i];
    if (s.empty()) {
      e.AddIfNew(p, "empty");
      continue;
    }
    if (!seen.insert(s).second) {
      e.AddIfNew(absl::StrCat(path, "[", i, "]"), absl::StrCat("duplicate ", Quoted(s)));
      continue;
    }
    out->push_back(s);
  }
}

// Workload params: named, and a guest command line inside the allow-list.
void CheckParams(const google::protobuf::Map<std::string, std::string>& params,
                 const std::string& path, FieldErrors& e, std::map<std::string, std::string>* out) {
  for (const auto& [key, value] : params) {
    if (key.empty()) {
      e.AddIfNew(path, "empty parameter name");
      continue;
    }
    std::string refused;
    if (key == ::farm::proto::kKernelParamsKey) ::farm::proto::ParseKernelParams(value, &refused);
    if (!refused.empty()) e.AddIfNew(path + "." + key, refused);
    (*out)[key] = value;
  }
}

// name, catalog, platform.
void CheckIdentity(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.name().empty()) {
    e.AddIfNew("name", "required");
  } else if (in.name().size() > 200) {
    e.AddIfNew("name", "longer than 200 characters");
  } else if (HasControlCharacter(in.name())) {
    e.AddIfNew("name", "contains a control character (a name is printed on terminals)");
  }
  spec->name = in.name();
  if (in.catalog().empty()) e.AddIfNew("catalog", "required");
  spec->catalog = in.catalog();
  if (in.platform().empty()) {
    e.AddIfNew("platform", "required (a platform name or a list of them)");
  }
  CheckNames(in.platform(), "platform", e, &spec->platforms);
}

void CheckCommits(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  switch (in.commits_case()) {
    case pb::MatrixSpec::kCommitRange:
      spec->commit_range = true;
      spec->range_from = in.commit_range().from();
      spec->range_to = in.commit_range().to();
      if (spec->range_from.empty()) {
        e.AddIfNew("commits", "range start (commit_range.from) required");
      }
      if (spec->range_to.empty()) e.AddIfNew("commits", "range end (commit_range.to) required");
      break;
    case pb::MatrixSpec::kCommitList:
      if (in.commit_list().ids().empty()) e.AddIfNew("commits", "empty list");
      CheckNames(in.commit_list().ids(), "commits", e, &spec->commit_ids);
      break;
    default:
      e.AddIfNew("commits", "required (a range \"A..B\" or a list of commit ids)");
  }
}

void CheckModes(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.modes().empty()) {
    e.AddIfNew("modes", absl::StrCat("required (a list of: ", iommu_mode::WordList(), ")"));
  }
  std::set<int> seen_modes;
  for (int i = 0; i < in.modes_size(); ++i) {
    const std::string p = absl::StrCat("modes[", i, "]");
    const pb::IommuMode mode = in.modes(i);
    if (mode == pb::IOMMU_MODE_UNSPECIFIED || !pb::IommuMode_IsValid(mode)) {
      e.AddIfNew(in.modes_size() == 1 ? "modes" : p,
                 absl::StrCat("unknown mode ", static_cast<int>(mode), " (expected ",
                              iommu_mode::WordList(), ")"));
      continue;
    }
    if (!seen_modes.insert(mode).second) {
      e.AddIfNew(p, absl::StrCat("duplicate mode ", Quoted(::farm::proto::ModeName(mode))));
      continue;
    }
    spec->modes.push_back(mode);
  }
}

// `base` once per combination of the sweep's values (keys in order, the
// last varying fastest); `base` alone without a sweep.
std::vector<WorkloadSpec> ExpandSweep(const WorkloadSpec& base, const pb::Workload& w,
                                      const std::string& path, FieldErrors& e) {
  std::vector<WorkloadSpec> out{base};
  const std::map<std::string, pb::SweepValues> sweep(w.sweep().begin(), w.sweep().end());
  size_t combinations = 1;
  for (const auto& [key, values] : sweep) {
    const std::string field = absl::StrCat(path, ".params.", key);
    if (values.values().empty()) {
      e.AddIfNew(field, "empty sweep (at least one value)");
      return {};
    }
    if (w.params().count(key) != 0) {
      e.AddIfNew(field, "given both as a value and as a sweep");
      return {};
    }
    combinations *= static_cast<size_t>(values.values_size());
    if (combinations > kMaxSweepCombinations) {
      e.AddIfNew(path + ".params", absl::StrCat("the sweep expands into more than ",
                                                kMaxSweepCombinations, " runs of the workload"));
      return {};
    }
    std::vector<WorkloadSpec> next;
    for (const WorkloadSpec& partial : out) {
      for (const std::string& v : values.values()) {
        WorkloadSpec one = partial;
        one.params[key] = v;
        next.push_back(std::move(one));
      }
    }
    out = std::move(next);
  }
  return out;
}

void CheckWorkloads(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.workloads().empty()) e.AddIfNew("workloads", "required (a list of {name, params})");
  for (int i = 0; i < in.workloads_size(); ++i) {
    const std::string p = absl::StrCat("workloads[", i, "]");
    const pb::Workload& w = in.workloads(i);
    WorkloadSpec ws;
    if (w.name().empty()) e.AddIfNew(p + ".name", "required");
    ws.name = w.name();
    ws.path = p;
    CheckParams(w.params(), p + ".params", e, &ws.params);
    for (WorkloadSpec& one : ExpandSweep(ws, w, p, e)) spec->workloads.push_back(std::move(one));
  }
}

// The confirm step's run counts and its metric (fio's default from `rw`).
void CheckConfirmRuns(const pb::AnalysisConfirm& c, const std::string& p, FieldErrors& e,
                      ConfirmSpec& out) {
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
  // dma-map-bench reports a map and an unmap latency: which one stands for
  // a finding is the analyzer's choice, by the finding (RealConfirmMetric).
  if (out.metric.empty() && c.executor() != pb::EXECUTOR_UNSPECIFIED &&
      c.executor() != pb::EXECUTOR_DMA_MAP_BENCH) {
    e.AddIfNew(p + ".metric",
               "required unless fio's rw is read, randread, write or randwrite or the executor is "
               "dma-map-bench (\"metric/phase\" the tool reports, e.g. iops/read, "
               "throughput_kb_s/read or unmap_latency_mean)");
  }
  // The verdict reads the metric's direction from its name (latency up is
  // worse, throughput down is worse): a name that says neither cannot judge.
  if (!c.metric().empty() && ::farm::stats::MetricPolarity(c.metric().substr(
                                 0, c.metric().find('/'))) == ::farm::stats::Polarity::kUnknown) {
    e.AddIfNew(p + ".metric",
               absl::StrCat("\"", c.metric(),
                            "\" says neither higher nor lower is better (a throughput, iops, "
                            "bandwidth or a latency, e.g. unmap_latency_mean)"));
  }
}

// `analysis.confirm`: a real executor and a workload, on an emulator matrix.
void CheckConfirm(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  const pb::AnalysisConfirm& c = in.analysis().confirm();
  const std::string p = "analysis.confirm";
  ConfirmSpec& out = spec->confirm;
  out.enabled = true;
  if (in.executor() != pb::EXECUTOR_UNSPECIFIED && in.executor() != pb::EXECUTOR_EMULATOR) {
    e.AddIfNew(p, absl::StrCat("confirms an emulator matrix's findings on real kernels; this "
                               "matrix already runs ",
                               ::farm::proto::ExecutorName(in.executor())));
  }
  if (c.executor() == pb::EXECUTOR_UNSPECIFIED) {
    e.AddIfNew(p + ".executor", "required (fio, iozone or dma-map-bench)");
  } else if (!::farm::proto::IsRealExecutor(c.executor())) {
    e.AddIfNew(p + ".executor",
               absl::StrCat("unknown real executor ", static_cast<int>(c.executor()),
                            " (expected fio, iozone, dma-map-bench)"));
  }
  out.executor = c.executor();
  if (c.workload().name().empty()) {
    e.AddIfNew(p + ".workload.name", "required (the real workload, e.g. fio-nvme)");
  }
  out.workload.name = c.workload().name();
  CheckParams(c.workload().params(), p + ".workload.params", e, &out.workload.params);
  out.catalog = c.catalog();
  out.platform = c.platform();
  CheckConfirmRuns(c, p, e, out);
}

// repeats, executor, analysis, kind, priority, seed, set.
void CheckRun(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.repeats() < 0 || in.repeats() > 10000) {
    e.AddIfNew("repeats", absl::StrCat("must be between 1 and 10000, got ", in.repeats()));
  }
  spec->repeats = in.repeats() == 0 ? 1 : in.repeats();
  if (!pb::Executor_IsValid(in.executor())) {
    e.AddIfNew("executor", absl::StrCat("unknown executor ", static_cast<int>(in.executor()),
                                        " (expected emulator, fio, iozone)"));
  } else if (in.executor() == pb::EXECUTOR_KBUILD) {
    // Build jobs are the scheduler's: it makes one per kernel a real matrix needs.
    e.AddIfNew("executor",
               "kbuild jobs are made by the scheduler for real matrices; "
               "submit fio or iozone and the kernels are built first");
  }
  spec->executor =
      in.executor() == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR : in.executor();
  spec->bisect = in.analysis().bisect();
  if (in.analysis().has_confirm()) CheckConfirm(in, e, spec);
  if (!pb::JobKind_IsValid(in.kind()) || in.kind() == pb::JOB_KIND_BUILD) {
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

// `patch`: a unified diff on one commit of a real matrix.
void CheckPatch(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.patch().empty()) return;
  spec->patch = in.patch();
  if (!::farm::proto::IsRealExecutor(in.executor())) {
    e.AddIfNew("patch",
               "a patch is built into a kernel: executor fio, iozone or dma-map-bench (an "
               "emulator try job takes model keys instead: farmctl try --set KEY=VALUE)");
  }
  if (in.has_commit_range() || in.commit_list().ids_size() != 1) {
    e.AddIfNew("patch", "applies to one commit, the base: commits: [ID]");
  }
  const bool old_file =
      in.patch().rfind("--- ", 0) == 0 || in.patch().find("\n--- ") != std::string::npos;
  const bool new_file = in.patch().find("\n+++ ") != std::string::npos;
  if (!old_file || !new_file) {
    e.AddIfNew("patch", "not a unified diff (no '--- ' and '+++ ' file lines)");
  }
  if (std::string problem = ::farm::proto::PatchTextProblem(in.patch()); !problem.empty()) {
    e.AddIfNew("patch", problem);
  }
}

// `kernel_config`: the config a real matrix's kernels are built with.
void CheckKernelConfig(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  // The jobs' param kernel_config is the config's id, never a workload's.
  for (int i = 0; i < in.workloads_size(); ++i) {
    if (in.workloads(i).params().count(::farm::proto::kKernelConfigParam) > 0) {
      e.AddIfNew(absl::StrCat("workloads[", i, "].params.", ::farm::proto::kKernelConfigParam),
                 "set by the spec's kernel_config, not by a param");
    }
  }
  if (!in.has_kernel_config() || ::farm::proto::IsDefaultKernelConfig(in.kernel_config())) return;
  if (!::farm::proto::IsRealExecutor(in.executor())) {
    e.AddIfNew("kernel_config",
               "a kernel config is built into a kernel: executor fio, iozone or dma-map-bench");
  }
  for (const auto& [field, message] : ::farm::proto::CheckKernelConfig(in.kernel_config())) {
    e.Add(field, message);
  }
  spec->kernel_config = in.kernel_config();
  spec->kernel_config_id = ::farm::proto::KernelConfigId(in.kernel_config());
}

// `labels`: agent labels a real matrix's jobs need.
void CheckLabels(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  if (in.labels().empty()) return;
  if (!::farm::proto::IsRealExecutor(in.executor())) {
    e.AddIfNew("labels",
               "labels choose the hosts of real runs (executor fio, iozone or dma-map-bench); "
               "the emulator runs on any agent");
  }
  for (const auto& [key, value] : in.labels()) {
    if (absl::Status st = ::farm::proto::CheckLabel(key, value); !st.ok()) {
      e.AddIfNew("labels." + key, std::string(st.message()));
      continue;
    }
    spec->labels[key] = value;
  }
  if (in.labels().count(::farm::proto::kPlatformLabel) > 0) {
    e.AddIfNew("labels.platform", "the platform is the spec's own key: platform: NAME");
  }
}

// `accel`: the QEMU accelerator a real matrix's guests run under.
void CheckAccel(const pb::MatrixSpec& in, FieldErrors& e, MatrixSpec* spec) {
  for (int i = 0; i < in.workloads_size(); ++i) {
    if (in.workloads(i).params().count(::farm::proto::kAccelParam) > 0) {
      e.AddIfNew(absl::StrCat("workloads[", i, "].params.", ::farm::proto::kAccelParam),
                 "set by the spec's accel, not by a param");
    }
  }
  if (in.accel().empty()) return;
  if (!::farm::proto::IsRealExecutor(in.executor())) {
    e.AddIfNew("accel",
               "an accelerator runs a guest: executor fio, iozone or dma-map-bench (the "
               "emulator models its platform)");
  }
  const std::vector<std::string>& known = ::farm::proto::KnownAccels();
  if (std::find(known.begin(), known.end(), in.accel()) == known.end()) {
    e.AddIfNew("accel", absl::StrCat("unknown accelerator ", Quoted(in.accel()), " (expected ",
                                     absl::StrJoin(known, ", "), ")"));
    return;
  }
  spec->accel = in.accel();
}

// The field checks, then the tables, into the expansion's form; `e` may
// already hold what the YAML mapping could not map.
absl::StatusOr<MatrixSpec> FinishSpec(const pb::MatrixSpec& in, FieldErrors& e) {
  MatrixSpec spec;
  CheckIdentity(in, e, &spec);
  CheckCommits(in, e, &spec);
  CheckModes(in, e, &spec);
  CheckWorkloads(in, e, &spec);
  CheckRun(in, e, &spec);
  CheckPatch(in, e, &spec);
  CheckKernelConfig(in, e, &spec);
  CheckLabels(in, e, &spec);
  CheckAccel(in, e, &spec);
  CheckAgainstTables(spec, e);
  if (!e.empty()) return e.ToStatus();
  spec.warnings = PlatformWarnings(spec);
  return spec;
}

}  // namespace

absl::StatusOr<MatrixSpec> CheckMatrixSpec(const pb::MatrixSpec& spec, const SpecLimits& limits) {
  if (spec.ByteSizeLong() > limits.max_spec_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("spec: ", spec.ByteSizeLong(), " bytes is more than the limit of ",
                     limits.max_spec_bytes, " bytes (--max-spec-bytes)"));
  }
  FieldErrors e;
  return FinishSpec(spec, e);
}

absl::StatusOr<MatrixSpec> ParseMatrixSpec(std::string_view yaml, const SpecLimits& limits) {
  // One pass reports every problem: what the mapping could not map and what
  // the checks find in the rest.
  FieldErrors e;
  pb::MatrixSpec typed;
  if (absl::Status st = MapSpecYaml(yaml, limits, e, &typed); !st.ok()) return st;
  absl::StatusOr<MatrixSpec> spec = FinishSpec(typed, e);
  // The values were checked field by field; the text is stored whole.
  if (spec.ok() && !base::IsValidUtf8(yaml))
    return absl::InvalidArgumentError(
        "spec: bytes that are not UTF-8 outside every value (in a comment or a key?); save the "
        "spec as UTF-8");
  return spec;
}

}  // namespace farm::spec
