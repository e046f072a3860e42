#include "services/analyzer/alerts.h"

#include <cmath>

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

std::string ModeLabel(const AlertWork& a) {
  return a.overhead ? a.mode_name + "/off" : a.mode_name;
}

std::map<std::string, std::string> Labels(const AlertWork& a, const std::string& severity) {
  std::map<std::string, std::string> labels = {
      {"alertname", "IommuPerfRegression"},
      {"platform", a.platform},
      {"catalog", a.catalog},
      {"workload", a.workload},
      {"mode", ModeLabel(a)},
      {"metric", a.metric},
      {"metric_rank", a.primary_metric ? "primary" : "secondary"},
      {"severity", severity},
      {"alert_group", AlertGroup(a)},
      {"regression_id", std::to_string(a.regression_id)}};
  if (const std::string p = ParamsLabel(a.params); !p.empty()) labels["params"] = p;
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

std::string AlertGroup(const AlertWork& a) {
  return a.culprit_id.empty() ? absl::StrCat(a.last_good, "..", a.first_bad) : a.culprit_id;
}

std::string ReproduceCommand(const AlertWork& a, int repeats) {
  if (a.bisect_state_json.empty()) return "";
  absl::StatusOr<BisectState> st = BisectStateFromJson(a.bisect_state_json);
  if (!st.ok()) return "";
  const pb::MatrixSpec spec =
      RerunSpec(st->series, absl::StrCat("reproduce regression ", a.regression_id), {a.last_good},
                repeats, pb::JOB_KIND_BULK, /*seed=*/0, /*priority=*/0);
  // A quoted delimiter: the shell expands nothing inside the spec.
  return absl::StrCat("farmctl try --patch-commit ", a.first_bad, " - <<'EOF'\n",
                      spec::MatrixSpecToYaml(spec), "\nEOF");
}

std::optional<Alert> BuildAlert(const AlertWork& a, const AlertOptions& options,
                                const std::string& now, const std::vector<int64_t>& group) {
  if (!a.primary_metric && options.secondary_severity == "none") return std::nullopt;
  const bool open = AlertFires(a.state);
  const std::string severity = !a.primary_metric                ? options.secondary_severity
                               : std::fabs(a.magnitude) >= 0.10 ? "critical"
                                                                : "warning";
  Alert alert;
  alert.labels = Labels(a, severity);
  const std::string culprit =
      a.culprit_id.empty() ? (a.bisect_done ? "unknown" : "bisecting") : a.culprit_id;
  const std::string params = ParamsLabel(a.params);
  alert.annotations = {
      {"summary", absl::StrCat(a.primary_metric ? "" : "secondary metric: ", a.workload,
                               params.empty() ? "" : "{" + params + "}", " ", a.metric, " ",
                               Percent(a.magnitude), " on ", a.platform, " (", ModeLabel(a), ")",
                               a.culprit_id.empty() ? "" : ", culprit " + a.culprit_id)},
      {"culprit", culprit},
      {"culprit_subject", a.culprit_subject},
      {"magnitude", Percent(a.magnitude)},
      {"last_good", a.last_good},
      {"first_bad", a.first_bad},
      {"bisect_steps", std::to_string(a.bisect_steps)},
      {"change_class", a.change_class == pb::CHANGE_CLASS_IOMMU       ? "iommu"
                       : a.change_class == pb::CHANGE_CLASS_NOT_IOMMU ? "not_iommu"
                                                                      : ""},
      {"catalog", a.catalog}};
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
