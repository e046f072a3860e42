#include "cli/compare.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/matrix.h"
#include "cli/number_format.h"
#include "cli/report.h"
#include "lib/base/file.h"
#include "lib/base/utf8.h"
#include "lib/kbuild/patch_series.h"
#include "lib/spec/spec_yaml.h"
#include "lib/stats/metric_roles.h"
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

// Which series were not compared on means, when any: their means and p
// are then Yuen's (20% trimmed).
std::string RobustNote(const std::vector<CompareRow>& rows) {
  int robust = 0;
  for (const CompareRow& r : rows) robust += r.method != "welch" ? 1 : 0;
  if (robust == 0) return "";
  return absl::StrCat(robust, " of ", rows.size(),
                      " series had outlying runs: compared by Yuen's 20% trimmed means (their "
                      "means and p are the trimmed ones)\n");
}

// The series' metric without its phase: what metric_roles judges.
std::string MetricName(const std::string& series_metric) {
  return series_metric.substr(0, series_metric.find('/'));
}

// Marks each row primary or not: per (platform, workload, params), the
// primary metrics among that cell's metrics.
void MarkPrimary(std::vector<CompareRow>& rows) {
  using Cell = std::tuple<std::string, std::string, std::string>;
  std::map<Cell, std::map<std::string, std::string>> seen;
  for (const CompareRow& r : rows)
    seen[{r.platform, r.workload, r.params}][MetricName(r.metric)] = r.unit;
  std::map<Cell, std::set<std::string>> primary;
  for (const auto& [cell, metrics] : seen) primary[cell] = stats::SelectPrimaryMetrics(metrics);
  for (CompareRow& r : rows)
    r.primary = primary[{r.platform, r.workload, r.params}].count(MetricName(r.metric)) > 0;
}

// Each row's mean over its series' `off` mean on the same side.
void MarkShareOfOff(std::vector<CompareRow>& rows) {
  using Series = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Series, const CompareRow*> off;
  for (const CompareRow& r : rows)
    if (r.mode == "off") off[{r.platform, r.workload, r.params, r.metric}] = &r;
  auto share = [](double v, double base) {
    return base != 0 && std::isfinite(base) ? v / base : std::numeric_limits<double>::quiet_NaN();
  };
  for (CompareRow& r : rows) {
    auto it = off.find({r.platform, r.workload, r.params, r.metric});
    if (r.mode == "off" || it == off.end()) continue;
    r.of_off_a = share(r.mean_a, it->second->mean_a);
    r.of_off_b = share(r.mean_b, it->second->mean_b);
  }
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

std::string ChangeIntervalText(const stats::Interval& ci) {
  if (!std::isfinite(ci.lo) || !std::isfinite(ci.hi)) return "-";
  return absl::StrCat(proto::RelativeChangeText(ci.lo), " .. ", proto::RelativeChangeText(ci.hi));
}

std::string ShareOfOffText(double share) {
  return std::isfinite(share) ? absl::StrFormat("%.1f%%", share * 100) : "-";
}

std::string WorkloadLabel(const CompareRow& r) {
  return r.params.empty() ? r.workload : absl::StrCat(r.workload, "{", r.params, "}");
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
    // The analyzer's choice of test by the runs' noise: Welch on means, or
    // Yuen's trimmed means where some run lies far outside the others.
    const stats::Comparison c = stats::CompareByNoise(va.v, vb.v, kLevel);
    const stats::TwoSampleResult& t = c.test;
    row.method = stats::TwoSampleMethodName(c.method);
    row.mean_a = t.mean_a;
    row.mean_b = t.mean_b;
    row.change = t.relative_change;
    row.p_value = t.p_value;
    row.ci = c.interval;
    row.changed = row.p_value < kAlpha &&
                  stats::JudgeMagnitude(row.ci, kMagnitude) != stats::MagnitudeCall::kBelow;
    row.half_a = ComputeMeanCi(va.v, kLevel).half_width;
    row.half_b = ComputeMeanCi(vb.v, kLevel).half_width;
    out.push_back(std::move(row));
  }
  // Modes in the kernel's order of cost (off, passthrough, strict, lazy),
  // not the alphabet's.
  auto order = [](const CompareRow& r) {
    return std::tie(r.platform, r.workload, r.params, r.metric);
  };
  std::stable_sort(out.begin(), out.end(), [&](const CompareRow& x, const CompareRow& y) {
    if (order(x) != order(y)) return order(x) < order(y);
    return proto::ModeFromName(x.mode) < proto::ModeFromName(y.mode);
  });
  MarkPrimary(out);
  MarkShareOfOff(out);
  return out;
}

std::string VerdictText(const CompareRow& r) {
  if (!r.changed) return "-";
  switch (stats::MetricPolarity(r.metric)) {
    case stats::Polarity::kHigherIsBetter:
      return r.change < 0 ? "worse" : "better";
    case stats::Polarity::kLowerIsBetter:
      return r.change > 0 ? "worse" : "better";
    case stats::Polarity::kUnknown:
      break;
  }
  return "changed";
}

std::string FormatCompareTable(const std::vector<CompareRow>& rows, const std::string& label_a,
                               const std::string& label_b, const std::vector<MonitorRow>& monitors,
                               bool all, const EnvironmentDiff& environment) {
  // The diffs that follow the series: monitors, then the IOMMU environment.
  std::string diffs =
      monitors.empty() ? std::string() : absl::StrCat("\n", FormatMonitorDiffTable(monitors));
  if (const std::string env = FormatEnvironmentDiffTable(environment); !env.empty()) {
    absl::StrAppend(&diffs, "\n", env);
  }
  if (rows.empty()) {
    return absl::StrCat("no series measured both in ", label_a, " and in ", label_b, "\n", diffs);
  }
  std::vector<std::vector<std::string>> cells;
  int headline = 0, headline_changed = 0, other_changed = 0;
  // The headline first, then (with `all`) the other series.
  for (bool primary : {true, false}) {
    for (const CompareRow& r : rows) {
      if (r.primary != primary) continue;
      (primary ? headline_changed : other_changed) += r.changed ? 1 : 0;
      headline += primary ? 1 : 0;
      if (!primary && !all) continue;
      cells.push_back({r.platform, WorkloadLabel(r), r.mode, r.metric, r.unit,
                       absl::StrCat(r.n_a, "/", r.n_b), FormatNumber(r.mean_a),
                       FormatNumber(r.mean_b), proto::RelativeChangeText(r.change),
                       ChangeIntervalText(r.ci), ShareOfOffText(r.of_off_a),
                       ShareOfOffText(r.of_off_b), VerdictText(r)});
    }
  }
  const int others = static_cast<int>(rows.size()) - headline;
  std::string counts = absl::StrCat(headline_changed, " of ", headline,
                                    " primary series changed (p < 0.01, interval reaching 3%)");
  if (others > 0) {
    absl::StrAppend(&counts, "; ", other_changed, " of ", others, " other series changed",
                    all ? "" : " (--all shows them)");
  }
  return absl::StrCat(
      "A: ", label_a, "\nB: ", label_b, "\n",
      RenderTable({"platform", "workload", "mode", "metric", "unit", "runs A/B", "mean A", "mean B",
                   "change", "95% interval", "A of off", "B of off", "verdict"},
                  cells),
      counts, "\n", RobustNote(rows), diffs);
}

std::string FormatCompareCsv(const std::vector<CompareRow>& rows,
                             const std::vector<MonitorRow>& monitors,
                             const EnvironmentDiff& environment) {
  std::string out =
      "platform,workload,params,metric,mode,unit,n_a,n_b,mean_a,mean_b,change,ci_lo,ci_hi,"
      "p_value,changed,primary,of_off_a,of_off_b\n";
  for (const CompareRow& r : rows) {
    absl::StrAppend(
        &out,
        absl::StrJoin(
            std::vector<std::string>{CsvField(r.platform), CsvField(r.workload), CsvField(r.params),
                                     CsvField(r.metric), r.mode, CsvField(r.unit),
                                     absl::StrCat(r.n_a), absl::StrCat(r.n_b),
                                     FormatExactNumber(r.mean_a), FormatExactNumber(r.mean_b),
                                     FormatExactNumber(r.change), FormatExactNumber(r.ci.lo),
                                     FormatExactNumber(r.ci.hi), FormatExactNumber(r.p_value),
                                     r.changed ? "true" : "false", r.primary ? "true" : "false",
                                     FormatExactNumber(r.of_off_a), FormatExactNumber(r.of_off_b)},
            ","),
        "\n");
  }
  if (!monitors.empty()) absl::StrAppend(&out, "\n", FormatMonitorDiffCsv(monitors));
  if (environment.groups > 0) absl::StrAppend(&out, "\n", FormatEnvironmentDiffCsv(environment));
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
                              const std::string& label_b, const std::vector<MonitorRow>& monitors,
                              const EnvironmentDiff& environment) {
  ReportData page;
  page.title = absl::StrCat("compare: ", label_a, " (A) vs ", label_b, " (B)");
  int changed = 0;
  ReportTable table;
  table.title = "Series measured on both sides";
  table.headers = {"platform", "workload", "metric", "mode",         "unit", "runs A/B",
                   "mean A",   "mean B",   "change", "95% interval", "p",    "verdict"};
  for (const CompareRow& r : rows) {
    changed += r.changed ? 1 : 0;
    const std::string workload = WorkloadLabel(r);
    table.rows.push_back(
        {r.platform, workload, r.metric, r.mode, r.unit, absl::StrCat(r.n_a, "/", r.n_b),
         FormatNumber(r.mean_a), FormatNumber(r.mean_b), proto::RelativeChangeText(r.change),
         ChangeIntervalText(r.ci), absl::StrFormat("%.2g", r.p_value), VerdictText(r)});
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
  page.tables.push_back(EnvironmentDiffTable(environment));
  return RenderReportHtml(page);
}

std::string FormatCompareJson(const std::vector<CompareRow>& rows, const std::string& label_a,
                              const std::string& label_b, const std::vector<MonitorRow>& monitors,
                              const EnvironmentDiff& environment) {
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
                      {"test", r.method},
                      {"changed", r.changed},
                      {"verdict", VerdictText(r)},
                      {"primary", r.primary},
                      {"of_off_a", finite(r.of_off_a)},
                      {"of_off_b", finite(r.of_off_b)}});
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
  nlohmann::json facts = nlohmann::json::array();
  for (const EnvironmentRow& r : environment.rows) {
    facts.push_back({{"platform", r.platform},
                     {"host", r.host},
                     {"mode", r.mode},
                     {"key", r.key},
                     {"a", r.a},
                     {"b", r.b}});
  }
  return nlohmann::json{{"a", label_a},
                        {"b", label_b},
                        {"series", series},
                        {"monitors", counters},
                        {"environment_groups", environment.groups},
                        {"environment", facts}}
             .dump(2) +
         "\n";
}

std::vector<pb::Result> AtCommit(const std::vector<pb::Result>& results,
                                 const std::string& commit) {
  if (commit.empty()) return results;
  std::vector<pb::Result> out;
  for (const pb::Result& r : results) {
    if (CommitIs(r.job().commit_id(), commit)) out.push_back(r);
  }
  return out;
}

namespace {

std::string SideLabel(int64_t matrix, const std::string& commit) {
  return commit.empty() ? absl::StrCat("matrix ", matrix)
                        : absl::StrCat(commit, " in matrix ", matrix);
}

void AddCompareCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    int64_t a = 0, b = 0;
    std::vector<std::string> commits;
    std::string format, html;
    bool all = false;
  };
  auto a = std::make_shared<Args>();
  auto* compare = app.add_subcommand(
      "compare",
      "compare two matrices, or two commits (of one matrix or of two), series by series: per "
      "platform, workload with its params, mode and metric the means, the change with its 95% "
      "interval (Welch on means; Yuen's trimmed means where runs lie far out, as the analyzer), "
      "each side's share of mode off, and the verdict (worse/better when p < 0.01 and the "
      "interval reaches 3%). The table shows each workload's primary metrics; --all every "
      "series (CSV and JSON always hold every series)");
  compare->add_option("A", a->a, "matrix id of side A")->required();
  compare->add_option("B", a->b, "matrix id of side B (default: A, with --commits)");
  compare->add_option("--commits", a->commits, "COMMIT_A COMMIT_B: compare these two commits")
      ->expected(2);
  compare->add_option("--html", a->html,
                      "also write one self-contained HTML page (the table and a plot per "
                      "series) to FILE");
  AddOutputOption(compare, &a->format, "table, csv or json");
  compare->add_flag("--all", a->all, "table: every series, not only the primary metrics");
  compare->callback([a] {
    if ((a->b == 0 || a->b == a->a) && a->commits.empty()) {
      throw CLI::ValidationError("compare", "give matrix B, or --commits COMMIT_A COMMIT_B");
    }
  });
  out->push_back({compare, [a](Commands& c) {
                    const bool by_commit = a->commits.size() == 2;
                    return RunCompare(c, a->a, a->b, by_commit ? a->commits[0] : "",
                                      by_commit ? a->commits[1] : "", ToFormat(a->format), a->html,
                                      a->all);
                  }});
}

void AddTryCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string spec;
    std::vector<std::string> set;
    std::string patch_commit, patch, format, html;
    bool all = false;
  };
  auto a = std::make_shared<Args>();
  auto* try_job = app.add_subcommand(
      "try",
      "a try job: base + patch in one command. SPEC names one commit, the base. --set "
      "KEY=VALUE (emulator model keys) runs a base and a patch matrix together, interleaved "
      "and with the same seeds; --patch-commit ID (a commit the kernel builder builds) runs "
      "one matrix of both commits; --patch FILE (a unified diff) runs one matrix of the base "
      "and the base with the patch applied, built by the farm's kernel builder (real "
      "executors). Waits, then prints compare's answer for patch vs base");
  try_job->add_option("SPEC", a->spec, "matrix spec YAML file ('-': standard input)")->required();
  auto* set_option =
      try_job->add_option("--set", a->set, "KEY=VALUE model key of the patch (repeatable)");
  auto* commit =
      try_job->add_option("--patch-commit", a->patch_commit, "the patch as a commit of the tree")
          ->excludes(set_option);
  try_job
      ->add_option("--patch", a->patch,
                   "the patch as a file (git diff / format-patch; '-': standard input), applied "
                   "on the base by the farm")
      ->excludes(set_option)
      ->excludes(commit);
  AddOutputOption(try_job, &a->format, "table, csv or json");
  try_job->add_option("--html", a->html,
                      "also write the answer as one self-contained HTML page (compare's) to FILE");
  try_job->add_flag("--all", a->all, "table: every series, not only the primary metrics");
  out->push_back({try_job, [a](Commands& c) {
                    std::map<std::string, std::string> set;
                    for (const std::string& kv : a->set) {
                      const size_t eq = kv.find('=');
                      if (eq == std::string::npos || eq == 0) {
                        std::cerr << "farmctl: try: --set " << kv << ": expected KEY=VALUE\n";
                        return 2;
                      }
                      set[kv.substr(0, eq)] = kv.substr(eq + 1);
                    }
                    return RunTry(c, a->spec, set, a->patch_commit, a->patch, ToFormat(a->format),
                                  a->html, a->all);
                  }});
}

}  // namespace

void AddCompareCommands(CLI::App& app, Subcommands* out) {
  AddCompareCommand(app, out);
  AddTryCommand(app, out);
}

int RunCompare(Commands& commands, int64_t matrix_a, int64_t matrix_b, const std::string& commit_a,
               const std::string& commit_b, OutputFormat format, const std::string& html_path,
               bool all) {
  if (matrix_b == 0) matrix_b = matrix_a;
  absl::StatusOr<std::vector<pb::Result>> a = commands.FetchResults(matrix_a, false);
  if (!a.ok()) return commands.Fail(absl::StrCat("GetResults ", matrix_a), a.status());
  absl::StatusOr<std::vector<pb::Result>> b =
      matrix_b == matrix_a ? a : commands.FetchResults(matrix_b, false);
  if (!b.ok()) return commands.Fail(absl::StrCat("GetResults ", matrix_b), b.status());
  const std::vector<pb::Result> side_a = AtCommit(*a, commit_a);
  const std::vector<pb::Result> side_b = AtCommit(*b, commit_b);
  const std::string label_a = SideLabel(matrix_a, commit_a);
  const std::string label_b = SideLabel(matrix_b, commit_b);
  for (const auto& [side, label] : {std::pair{&side_a, label_a}, {&side_b, label_b}}) {
    if (side->empty()) {
      return commands.Fail("compare", absl::NotFoundError(absl::StrCat("no results for ", label)));
    }
  }
  const std::vector<CompareRow> rows = CompareSides(side_a, side_b);
  const std::vector<MonitorRow> monitors = CompareMonitors(side_a, side_b);
  const EnvironmentDiff environment = CompareEnvironments(side_a, side_b);
  if (!html_path.empty()) {
    absl::Status written = base::WriteFile(
        html_path, FormatCompareHtml(rows, label_a, label_b, monitors, environment));
    if (!written.ok()) return commands.Fail(absl::StrCat("compare --html ", html_path), written);
  }
  commands.out() << (format == OutputFormat::kJson
                         ? FormatCompareJson(rows, label_a, label_b, monitors, environment)
                     : format == OutputFormat::kCsv
                         ? FormatCompareCsv(rows, monitors, environment)
                         : FormatCompareTable(rows, label_a, label_b, monitors, all, environment));
  return 0;
}

absl::Status CheckPatchText(std::string_view patch) {
  if (const size_t nul = patch.find('\0'); nul != std::string_view::npos)
    return absl::InvalidArgumentError(
        absl::StrCat("a NUL byte at offset ", nul,
                     ": a binary patch cannot be applied by the farm (text diffs only: "
                     "git diff without --binary)"));
  if (!base::IsValidUtf8(patch))
    return absl::InvalidArgumentError(
        "the patch is not UTF-8 text (a binary diff, or text in another encoding)");
  if (std::string problem = proto::PatchTextProblem(patch); !problem.empty())
    return absl::InvalidArgumentError(problem);
  return absl::OkStatus();
}

int RunTry(Commands& commands, const std::string& spec_path,
           const std::map<std::string, std::string>& set, const std::string& patch_commit,
           const std::string& patch_path, OutputFormat format, const std::string& html_path,
           bool all) {
  if (spec_path == "-" && patch_path == "-") {
    return commands.Fail("try", absl::InvalidArgumentError("SPEC and --patch cannot both be '-'"));
  }
  absl::StatusOr<std::string> yaml = ReadInputFile(spec_path);
  if (!yaml.ok()) return commands.Fail(absl::StrCat("try ", spec_path), yaml.status());
  std::string patch;
  if (!patch_path.empty()) {
    absl::StatusOr<std::string> text = ReadInputFile(patch_path);
    if (!text.ok()) return commands.Fail(absl::StrCat("try --patch ", patch_path), text.status());
    if (text->empty()) {
      return commands.Fail(absl::StrCat("try --patch ", patch_path),
                           absl::InvalidArgumentError("the patch is empty"));
    }
    // The patch travels inside the spec's YAML: a NUL would cut it there
    // and other bytes that are not text break the YAML around it.
    if (absl::Status binary = CheckPatchText(*text); !binary.ok())
      return commands.Fail(absl::StrCat("try --patch ", patch_path), binary);
    absl::StatusOr<std::vector<kbuild::SeriesPatch>> series = kbuild::SplitPatchSeries(*text);
    if (!series.ok())
      return commands.Fail(absl::StrCat("try --patch ", patch_path), series.status());
    if (series->size() > 1) {
      commands.err() << "try --patch " << patch_path << ": a series of " << series->size()
                     << " patches, applied in order\n";
    }
    patch = *std::move(text);
  }
  absl::StatusOr<TryPlan> plan = PlanTry(*yaml, set, patch_commit, patch);
  if (!plan.ok()) return commands.Fail(absl::StrCat("try ", spec_path), plan.status());
  // Both submitted before either is waited for: their jobs interleave.
  std::vector<int64_t> ids;
  for (const std::string& spec : plan->specs_yaml) {
    absl::StatusOr<pb::SubmitMatrixResponse> submitted =
        commands.SubmitSpec(spec, /*dry_run=*/false);
    if (!submitted.ok()) return commands.Fail("try: SubmitMatrix", submitted.status());
    ids.push_back(submitted->matrix().id());
    commands.err() << "matrix " << ids.back() << " \"" << submitted->matrix().name()
                   << "\": " << submitted->jobs_created() << " jobs\n";
  }
  std::string failures;
  for (int64_t id : ids) {
    absl::StatusOr<pb::MatrixProgress> done = commands.WaitForMatrix(
        id, [&commands](const pb::MatrixProgress& p) { commands.PrintProgress(p); });
    if (!done.ok()) return commands.Fail(absl::StrCat("try: WatchMatrix ", id), done.status());
    // A build that failed (a patch that does not apply or does not build)
    // leaves its jobs without results: say why before comparing.
    if (const pb::MatrixCounts& n = done->counts(); n.failed() + n.cancelled() > 0) {
      const std::string why = FetchFailures(commands, id, "  ");
      commands.err() << "try: matrix " << id << ": " << n.failed() << " of " << n.total()
                     << " jobs failed and " << n.cancelled() << " were cancelled:\n"
                     << why;
      absl::StrAppend(&failures, why);
    }
  }
  if (ids.size() == 2) return RunCompare(commands, ids[0], ids[1], "", "", format, html_path, all);
  if (!failures.empty()) {
    // No patch side at all: the answer is why, not compare's "no results".
    absl::StatusOr<std::vector<pb::Result>> results = commands.FetchResults(ids[0], false);
    if (results.ok() && AtCommit(*results, plan->patch_commit).empty()) {
      return commands.Fail(
          "try", absl::FailedPreconditionError(absl::StrCat("base + patch (", plan->patch_commit,
                                                            ") was not measured:\n", failures)));
    }
  }
  return RunCompare(commands, ids[0], 0, plan->base_commit, plan->patch_commit, format, html_path,
                    all);
}

}  // namespace farm::cli
