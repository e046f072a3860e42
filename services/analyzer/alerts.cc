#include "services/analyzer/alerts.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/spec/spec_yaml.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/log.h"
#include "services/analyzer/rerun.h"
#include "services/analyzer/series.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

std::map<std::string, std::string> Labels(const AlertWork& a, const std::string& severity) {
  std::map<std::string, std::string> labels = {
      {"alertname", "IommuPerfRegression"},
      {"platform", a.platform},
      {"catalog", a.catalog},
      {"workload", a.workload},
      {"mode", AlertModeLabel(a)},
      {"metric", a.metric},
      {"metric_rank", a.primary_metric ? "primary" : "secondary"},
      {"severity", severity},
      {"alert_group", AlertGroup(a)},
      {"regression_id", std::to_string(a.regression_id)}};
  if (const std::string p = ParamsLabel(a.params); !p.empty()) labels["params"] = p;
  // Only a decay carries the label: the labels of a change's alert (its
  // identity in Alertmanager) stay as they were.
  if (a.kind == "decay") labels["kind"] = "decay";
  return labels;
}

std::string GroupText(const AlertWork& a, const std::vector<int64_t>& group) {
  const std::string what =
      a.culprit_id.empty() ? "the range " + AlertGroup(a) : "culprit " + a.culprit_id;
  return absl::StrCat(group.size(), " open regressions share ", what, ": ",
                      absl::StrJoin(group, ", "));
}

}  // namespace

bool AlertFires(int state) {
  return state == pb::REGRESSION_STATE_CONFIRMED || state == pb::REGRESSION_STATE_ACKNOWLEDGED;
}

std::string AlertModeLabel(const AlertWork& a) {
  return a.overhead ? a.mode_name + "/off" : a.mode_name;
}

std::string AlertGroup(const AlertWork& a) {
  if (a.kind == "decay") return "decay:" + a.first_bad;
  return a.culprit_id.empty() ? absl::StrCat(a.last_good, "..", a.first_bad) : a.culprit_id;
}

std::string ReproduceCommand(const AlertWork& a, int repeats) {
  // A decay is one commit's runs; comparing the commit with itself says
  // nothing (its note holds the series).
  if (a.bisect_state_json.empty() || a.kind == "decay") return "";
  absl::StatusOr<BisectState> st = BisectStateFromJson(a.bisect_state_json);
  if (!st.ok()) return "";
  const pb::MatrixSpec spec =
      RerunSpec(st->series, absl::StrCat("reproduce regression ", a.regression_id), {a.last_good},
                repeats, pb::JOB_KIND_BULK, /*seed=*/0, /*priority=*/0);
  // A quoted delimiter: the shell expands nothing inside the spec.
  return absl::StrCat("farmctl try --patch-commit ", a.first_bad, " - <<'EOF'\n",
                      spec::MatrixSpecToYaml(spec), "\nEOF");
}

namespace {

// A mode-change finding's modes (BisectState), or nullopt for a
// performance finding.
std::optional<std::pair<std::string, std::string>> ChangedModes(const AlertWork& a) {
  if (a.change_class != pb::CHANGE_CLASS_MODE_CHANGED || a.bisect_state_json.empty())
    return std::nullopt;
  absl::StatusOr<BisectState> st = BisectStateFromJson(a.bisect_state_json);
  if (!st.ok() || !st->categorical()) return std::nullopt;
  return std::make_pair(st->mode_before, st->mode_after);
}

// "effective IOMMU mode lazy -> strict (requested lazy): fio-nvme on P, culprit C".
std::string ModeChangeSummary(const AlertWork& a, const std::pair<std::string, std::string>& m) {
  const std::string params = ParamsLabel(a.params);
  return absl::StrCat("effective IOMMU mode ", m.first, " -> ", m.second, " (requested ",
                      a.mode_name, "): ", a.workload, params.empty() ? "" : "{" + params + "}",
                      " on ", a.platform, a.culprit_id.empty() ? "" : ", culprit " + a.culprit_id);
}

}  // namespace

std::optional<Alert> BuildAlert(const AlertWork& a, const AlertOptions& options,
                                const std::string& now, const std::vector<int64_t>& group) {
  const std::optional<std::pair<std::string, std::string>> modes = ChangedModes(a);
  if (!a.primary_metric && options.secondary_severity == "none") return std::nullopt;
  const bool open = AlertFires(a.state);
  // A kernel that silently runs another mode is as serious as the largest
  // performance loss: it changes what every figure of the cell means.
  const std::string severity = modes.has_value()                ? "critical"
                               : !a.primary_metric              ? options.secondary_severity
                               : std::fabs(a.magnitude) >= 0.10 ? "critical"
                                                                : "warning";
  Alert alert;
  alert.labels = Labels(a, severity);
  const bool decay = a.kind == "decay";
  const std::string culprit =
      decay                  ? "none: a decay within the runs of " + a.first_bad + ", not bisected"
      : a.culprit_id.empty() ? (a.bisect_done ? "unknown" : "bisecting")
                             : a.culprit_id;
  const std::string params = ParamsLabel(a.params);
  alert.annotations = {
      {"summary",
       absl::StrCat(a.primary_metric ? "" : "secondary metric: ", a.workload,
                    params.empty() ? "" : "{" + params + "}", " ", a.metric, " ",
                    Percent(a.magnitude), decay ? " within each run at " + a.first_bad : "", " on ",
                    a.platform, " (", AlertModeLabel(a), ")",
                    a.culprit_id.empty() ? "" : ", culprit " + a.culprit_id)},
      {"culprit", culprit},
      {"culprit_subject", a.culprit_subject},
      {"culprit_author", a.culprit_author},
      {"magnitude", Percent(a.magnitude)},
      {"last_good", a.last_good},
      {"first_bad", a.first_bad},
      {"bisect_steps", std::to_string(a.bisect_steps)},
      {"change_class", a.change_class == pb::CHANGE_CLASS_IOMMU          ? "iommu"
                       : a.change_class == pb::CHANGE_CLASS_NOT_IOMMU    ? "not_iommu"
                       : a.change_class == pb::CHANGE_CLASS_MODE_CHANGED ? "mode_changed"
                                                                         : ""},
      {"catalog", a.catalog}};
  if (modes.has_value()) {
    alert.annotations["summary"] = ModeChangeSummary(a, *modes);
    alert.annotations["magnitude"] = absl::StrCat(modes->first, " -> ", modes->second);
    alert.annotations["mode_before"] = modes->first;
    alert.annotations["mode_after"] = modes->second;
    alert.annotations["requested_mode"] = a.mode_name;
  }
  if (!a.primary_metrics.empty()) alert.annotations["primary_metrics"] = a.primary_metrics;
  // Every culprit of a range that held several changes; the culprit
  // annotation above stays the largest share so that rules and dashboards
  // keep working.
  if (!a.culprits.empty()) {
    std::vector<std::string> named;
    for (const AlertWork::NamedCulprit& c : a.culprits) {
      named.push_back(absl::StrFormat("%s (%.0f%%)", c.commit_id, 100.0 * c.share));
    }
    alert.annotations["culprits"] = absl::StrJoin(named, ", ");
  }
  if (group.size() > 1) alert.annotations["group"] = GroupText(a, group);
  if (const std::string r = ReproduceCommand(a, options.reproduce_repeats); !r.empty()) {
    alert.annotations["reproduce"] = r;
  }
  if (!options.report_url.empty()) {
    std::string base = options.report_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    alert.generator_url = absl::StrCat(base, "/regressions/", a.regression_id);
    alert.annotations["report"] = alert.generator_url;
  }
  alert.starts_at = a.starts_at;
  // A resolution is re-sent with the time it was first sent, so that every
  // copy tells Alertmanager the same thing.
  if (!open) alert.ends_at = a.ends_at.empty() ? now : a.ends_at;
  return alert;
}

Silence BuildSilence(const Alert& alert, int64_t regression_id, const std::string& now,
                     const std::string& ends) {
  Silence s;
  s.matchers = alert.labels;
  s.matchers.erase("severity");
  s.matchers.erase("alert_group");
  s.matchers.erase("members");  // a group alert's count moves as members join
  s.starts_at = now;
  s.ends_at = ends;
  s.created_by = "farm-analyzer";
  s.comment = absl::StrCat("regression ", regression_id, " acknowledged (farmctl regression mark ",
                           regression_id, " reopen removes this silence)");
  return s;
}

}  // namespace farm::analyzer
