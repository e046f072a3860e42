#include "cli/compare.h"

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/number_format.h"
#include "cli/report.h"
#include "lib/spec/spec_yaml.h"
#include "proto/names.h"
#include "proto/try_commit.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// The analyzer's defaults (docs/analyzer.md): alpha and magnitude.
constexpr double kAlpha = 0.01;
constexpr double kMagnitude = 0.03;
constexpr double kLevel = 0.95;

using Key = std::tuple<std::string, std::string, std::string, std::string, std::string>;

struct Values {
  std::string unit;
  std::vector<double> v;
};

// (platform, workload, params, metric, mode) -> the values of one side.
std::map<Key, Values> BySeries(const std::vector<pb::Result>& results) {
  std::map<Key, Values> out;
  for (const pb::Result& r : results) {
    const pb::Job& j = r.job();
    for (const pb::Sample& s : r.samples()) {
      if (!std::isfinite(s.value())) continue;
      const std::string metric =
          s.phase().empty() ? s.metric() : absl::StrCat(s.metric(), "/", s.phase());
      Values& values = out[{j.platform(), j.workload().name(), ParamsText(j.workload().params()),
                            metric, proto::ModeName(j.mode())}];
      values.unit = s.unit();
      values.v.push_back(s.value());
    }
  }
  return out;
}

std::string IntervalText(const stats::Interval& ci) {
  if (!std::isfinite(ci.lo) || !std::isfinite(ci.hi)) return "-";
  return absl::StrCat(proto::RelativeChangeText(ci.lo), " .. ", proto::RelativeChangeText(ci.hi));
}

}  // namespace

absl::StatusOr<TryPlan> PlanTry(const std::string& spec_yaml,
                                const std::map<std::string, std::string>& set,
                                const std::string& patch_commit, const std::string& patch) {
  if (!set.empty() + !patch_commit.empty() + !patch.empty() != 1) {
    return absl::InvalidArgumentError(
        "a try job's patch is one of --set KEY=VALUE..., --patch-commit ID and --patch FILE");
  }
  spec::SpecLimits unbounded;
  unbounded.max_spec_bytes = std::numeric_limits<size_t>::max();  // the scheduler's to bound
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(spec_yaml, unbounded);
  if (!spec.ok()) return spec.status();
  if (spec->has_commit_range() || spec->commit_list().ids_size() != 1) {
    return absl::InvalidArgumentError(
        "a try job's spec names one commit, the base (commits: [ID])");
  }
  TryPlan plan;
  plan.base_commit = spec->commit_list().ids(0);
  plan.patch_commit = patch_commit;
  const std::string name = spec->name();
  if (!patch.empty()) {
    // The scheduler resolves the base and adds its try commit.
    spec->set_patch(patch);
    plan.patch_commit = proto::TryCommitId(plan.base_commit, patch);
    spec->set_name(
        absl::StrCat(name, " (try ", plan.patch_commit.substr(plan.base_commit.size()), ")"));
    plan.specs_yaml.push_back(spec::MatrixSpecToYaml(*spec));
    return plan;
  }
  if (!patch_commit.empty()) {
    spec->mutable_commit_list()->add_ids(patch_commit);
    spec->set_name(absl::StrCat(name, " (try ", patch_commit, ")"));
    plan.specs_yaml.push_back(spec::MatrixSpecToYaml(*spec));
    return plan;
  }
  spec->set_name(absl::StrCat(name, " (try base)"));
  plan.specs_yaml.push_back(spec::MatrixSpecToYaml(*spec));
  for (const auto& [k, v] : set) (*spec->mutable_set())[k] = v;
  spec->set_name(absl::StrCat(name, " (try patch)"));
  plan.specs_yaml.push_back(spec::MatrixSpecToYaml(*spec));
  return plan;
}

bool CommitIs(std::string_view id, std::string_view wanted) {
  if (id == wanted) return true;
  if (proto::IsTryCommit(id) != proto::IsTryCommit(wanted)) return false;
  if (id.substr(proto::TryBase(id).size()) != wanted.substr(proto::TryBase(wanted).size())) {
    return false;  // another patch
  }
  const std::string_view base = proto::TryBase(id), abbreviation = proto::TryBase(wanted);
  return abbreviation.size() >= 7 && base.starts_with(abbreviation);
}

std::vector<CompareRow> CompareSides(const std::vector<pb::Result>& a,
                                     const std::vector<pb::Result>& b) {
  const std::map<Key, Values> left = BySeries(a), right = BySeries(b);
  std::vector<CompareRow> out;
  for (const auto& [key, va] : left) {
    auto it = right.find(key);
    if (it == right.end()) continue;
    const Values& vb = it->second;
    CompareRow row;
    std::tie(row.platform, row.workload, row.params, row.metric, row.mode) = key;
    row.unit = va.unit;
    row.n_a = static_cast<int64_t>(va.v.size());
    row.n_b = static_cast<int64_t>(vb.v.size());
    const stats::TwoSampleResult t = stats::WelchTTest(va.v, vb.v);
    row.mean_a = t.mean_a;
    row.mean_b = t.mean_b;
    row.change = t.relative_change;
    row.p_value = t.p_value;
    row.ci = stats::RelativeChangeInterval(va.v, vb.v, kLevel);
    row.changed = row.p_value < kAlpha &&
                  stats::JudgeMagnitude(row.ci, kMagnitude) != stats::MagnitudeCall::kBelow;
    row.half_a = ComputeMeanCi(va.v, kLevel).half_width;
    row.half_b = ComputeMeanCi(vb.v, kLevel).half_width;
    out.push_back(std::move(row));
  }
  return out;
}

std::string FormatCompareTable(const std::vector<CompareRow>& rows, const std::string& label_a,
                               const std::string& label_b,
                               const std::vector<MonitorRow>& monitors) {
  const std::string monitor_table =
      monitors.empty() ? std::string() : absl::StrCat("\n", FormatMonitorDiffTable(monitors));
  if (rows.empty()) {
    return absl::StrCat("no series measured both in ", label_a, " and in ", label_b, "\n",
                        monitor_table);
  }
  std::vector<std::vector<std::string>> cells;
  int changed = 0;
  for (const CompareRow& r : rows) {
    changed += r.changed ? 1 : 0;
    cells.push_back({r.platform, r.params.empty() ? r.workload : r.workload + "{" + r.params + "}",
                     r.metric, r.mode, r.unit, absl::StrCat(r.n_a, "/", r.n_b),
                     FormatNumber(r.mean_a), FormatNumber(r.mean_b),
                     proto::RelativeChangeText(r.change), IntervalText(r.ci),
                     absl::StrFormat("%.2g", r.p_value), r.changed ? "changed" : "-"});
  }
  return absl::StrCat("A: ", label_a, "\nB: ", label_b, "\n",
                      RenderTable({"platform", "workload", "metric", "mode", "unit", "runs A/B",
                                   "mean A", "mean B", "change", "95% interval", "p", "verdict"},
                                  cells),
                      changed, " of ", rows.size(),
                      " series changed (p < 0.01, interval reaching 3%)\n", monitor_table);
}

std::string FormatCompareCsv(const std::vector<CompareRow>& rows,
                             const std::vector<MonitorRow>& monitors) {
  std::string out =
      "platform,workload,params,metric,mode,unit,n_a,n_b,mean_a,mean_b,change,ci_lo,ci_hi,"
      "p_value,changed\n";
  for (const CompareRow& r : rows) {
    absl::StrAppend(
        &out,
        absl::StrJoin(
            std::vector<std::string>{
                CsvField(r.platform), CsvField(r.workload), CsvField(r.params), CsvField(r.metric),
                r.mode, CsvField(r.unit), absl::StrCat(r.n_a), absl::StrCat(r.n_b),
                FormatExactNumber(r.mean_a), FormatExactNumber(r.mean_b),
                FormatExactNumber(r.change), FormatExactNumber(r.ci.lo), FormatExactNumber(r.ci.hi),
                FormatExactNumber(r.p_value), r.changed ? "true" : "false"},
            ","),
        "\n");
  }
  if (!monitors.empty()) absl::StrAppend(&out, "\n", FormatMonitorDiffCsv(monitors));
  return out;
}

namespace {

// A side's mean as a plot point with its band (none for one run).
PlotPoint SidePoint(int32_t index, const std::string& label, int64_t n, double mean, double half) {
  const double h = std::isfinite(half) ? half : 0;
  return PlotPoint{index, label, n, mean, mean - h, mean + h};
}

}  // namespace

std::string FormatCompareHtml(const std::vector<CompareRow>& rows, const std::string& label_a,
                              const std::string& label_b, const std::vector<MonitorRow>& monitors) {
  ReportData page;
  page.title = absl::StrCat("compare: ", label_a, " (A) vs ", label_b, " (B)");
  int changed = 0;
  ReportTable table;
  table.title = "Series measured on both sides";
  table.headers = {"platform", "workload", "metric", "mode",         "unit", "runs A/B",
                   "mean A",   "mean B",   "change", "95% interval", "p",    "verdict"};
  for (const CompareRow& r : rows) {
    changed += r.changed ? 1 : 0;
    const std::string workload = r.params.empty() ? r.workload : r.workload + "{" + r.params + "}";
    table.rows.push_back(
        {r.platform, workload, r.metric, r.mode, r.unit, absl::StrCat(r.n_a, "/", r.n_b),
         FormatNumber(r.mean_a), FormatNumber(r.mean_b), proto::RelativeChangeText(r.change),
         IntervalText(r.ci), absl::StrFormat("%.2g", r.p_value), r.changed ? "changed" : "-"});
    Plot plot;
    plot.title = absl::StrCat(workload, " ", r.metric, " (", r.mode, ")");
    plot.y_label = r.unit;
    plot.axis = {{0, "A"}, {1, "B"}};
    plot.series.push_back(PlotSeries{r.mode,
                                     {SidePoint(0, "A", r.n_a, r.mean_a, r.half_a),
                                      SidePoint(1, "B", r.n_b, r.mean_b, r.half_b)}});
    page.plots.push_back(std::move(plot));
  }
  page.summary = absl::StrCat("A: ", label_a, "\nB: ", label_b, "\n", changed, " of ", rows.size(),
                              " series changed (p < 0.01, interval reaching 3%)");
  page.tables.push_back(std::move(table));
  page.tables.push_back(MonitorDiffTable(monitors));
  return RenderReportHtml(page);
}

std::string FormatCompareJson(const std::vector<CompareRow>& rows, const std::string& label_a,
                              const std::string& label_b, const std::vector<MonitorRow>& monitors) {
  nlohmann::json series = nlohmann::json::array();
  // An unbounded interval (fewer than two runs a side) is null, not inf.
  auto finite = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  for (const CompareRow& r : rows) {
    series.push_back({{"platform", r.platform},
                      {"workload", r.workload},
                      {"params", r.params},
                      {"metric", r.metric},
                      {"mode", r.mode},
                      {"unit", r.unit},
                      {"n_a", r.n_a},
                      {"n_b", r.n_b},
                      {"mean_a", finite(r.mean_a)},
                      {"mean_b", finite(r.mean_b)},
                      {"change", r.change},
                      {"ci_lo", finite(r.ci.lo)},
                      {"ci_hi", finite(r.ci.hi)},
                      {"p_value", r.p_value},
                      {"changed", r.changed}});
  }
  nlohmann::json counters = nlohmann::json::array();
  for (const MonitorRow& r : monitors) {
    counters.push_back({{"counter", r.counter},
                        {"runs_a", r.runs_a},
                        {"runs_b", r.runs_b},
                        {"mean_a", r.mean_a},
                        {"mean_b", r.mean_b},
                        {"change", r.change}});
  }
  return nlohmann::json{{"a", label_a}, {"b", label_b}, {"series", series}, {"monitors", counters}}
             .dump(2) +
         "\n";
}

}  // namespace farm::cli
