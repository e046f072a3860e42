#include "cli/gate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <boost/math/distributions/students_t.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/matrix.h"
#include "cli/number_format.h"
#include "cli/report.h"
#include "lib/base/file.h"
#include "lib/spec/spec_yaml.h"
#include "lib/stats/metric_roles.h"
#include "proto/names.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// Fewer runs per commit than this give no interval worth judging.
constexpr int64_t kMinRuns = 3;

double T95(double df) {
  return boost::math::quantile(boost::math::complement(boost::math::students_t(df), 0.025));
}

// Runs per commit after which the 95% interval's half width would be
// `needed`, if the measured spread holds: the half width is t(df) * s *
// sqrt(2 / n) for n runs a side (df about 2n - 2), so both the 1/sqrt(n)
// and the shrinking t quantile count.
int64_t FurtherRuns(int64_t n, double half, double needed) {
  if (n < kMinRuns || !std::isfinite(half)) return kMinRuns - std::min(n, kMinRuns) + 1;
  if (needed <= 0) return std::numeric_limits<int32_t>::max();
  auto half_at = [&](double m) {
    return half * (T95(2 * m - 2) / T95(2.0 * n - 2)) * std::sqrt(static_cast<double>(n) / m);
  };
  int64_t lo = n, hi = n + 1;  // half_at(lo) > needed >= half_at(hi), once hi is found
  while (half_at(static_cast<double>(hi)) > needed) {
    if (hi >= std::numeric_limits<int32_t>::max() / 2) return std::numeric_limits<int32_t>::max();
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (half_at(static_cast<double>(mid)) > needed ? lo : hi) = mid;
  }
  return hi - n;
}

GateRow Judge(const CompareRow& r, bool higher_is_better, double threshold) {
  GateRow g;
  g.compared = r;
  g.higher_is_better = higher_is_better;
  g.worse = higher_is_better ? -r.change : r.change;
  g.worse_ci = higher_is_better ? stats::Interval{-r.ci.hi, -r.ci.lo} : r.ci;
  const int64_t n = std::min(r.n_a, r.n_b);
  const bool measured =
      n >= kMinRuns && std::isfinite(g.worse_ci.lo) && std::isfinite(g.worse_ci.hi);
  if (measured && g.worse_ci.lo > 0 && g.worse >= threshold) {
    g.call = GateCall::kRegression;
  } else if (measured && g.worse_ci.hi < threshold) {
    g.call = GateCall::kPass;
  } else {
    g.call = GateCall::kInconclusive;
    // Deciding means the interval leaves the threshold behind (a pass), or
    // leaves no change behind with the point past the threshold.
    const double half = (g.worse_ci.hi - g.worse_ci.lo) / 2;
    const double needed = g.worse < threshold ? threshold - g.worse : g.worse;
    g.further_runs = FurtherRuns(n, half, needed);
  }
  return g;
}

const char* CallName(GateCall c) {
  switch (c) {
    case GateCall::kPass:
      return "pass";
    case GateCall::kRegression:
      return "REGRESSION";
    case GateCall::kInconclusive:
      return "inconclusive";
  }
  return "?";
}

std::string SeriesName(const CompareRow& r) {
  return absl::StrCat(r.platform, " ", WorkloadLabel(r), " ", r.metric, " ", r.mode);
}

std::string Summary(const GateAnswer& a, double threshold) {
  switch (a.exit_code) {
    case kGatePass:
      return absl::StrFormat("pass: no primary metric regressed by %g%% or more", threshold * 100);
    case kGateRegression:
      return absl::StrFormat("REGRESSION: a primary metric regressed by %g%% or more",
                             threshold * 100);
    case kGateInconclusive:
      return absl::StrCat("inconclusive: about ", a.further_runs,
                          " further runs per commit would decide it (--until-decided)");
  }
  return "no judged series";
}

}  // namespace

GateAnswer JudgeGate(const std::vector<CompareRow>& rows, double threshold) {
  GateAnswer answer;
  answer.compared = rows;
  for (const CompareRow& r : rows) {
    if (!r.primary) continue;
    const stats::Polarity p = stats::MetricPolarity(r.metric);
    if (p == stats::Polarity::kUnknown) continue;
    answer.rows.push_back(Judge(r, p == stats::Polarity::kHigherIsBetter, threshold));
  }
  if (answer.rows.empty()) {
    answer.exit_code = kGateInfrastructure;
    return answer;
  }
  bool regression = false, inconclusive = false;
  for (const GateRow& g : answer.rows) {
    regression |= g.call == GateCall::kRegression;
    inconclusive |= g.call == GateCall::kInconclusive;
    if (g.call == GateCall::kInconclusive)
      answer.further_runs = std::max(answer.further_runs, g.further_runs);
  }
  answer.exit_code = regression ? kGateRegression : inconclusive ? kGateInconclusive : kGatePass;
  return answer;
}

std::string FormatGateTable(const GateAnswer& answer, const std::string& base,
                            const std::string& candidate, double threshold, bool all) {
  std::vector<std::vector<std::string>> cells;
  for (const GateRow& g : answer.rows) {
    const CompareRow& r = g.compared;
    cells.push_back({r.platform, WorkloadLabel(r), r.mode, r.metric,
                     absl::StrCat(r.n_a, "/", r.n_b), FormatNumber(r.mean_a),
                     FormatNumber(r.mean_b), proto::RelativeChangeText(r.change),
                     ChangeIntervalText(r.ci), ShareOfOffText(r.of_off_a),
                     ShareOfOffText(r.of_off_b), CallName(g.call)});
  }
  std::string out = absl::StrCat(
      "base: ", base, "\ncandidate: ", candidate, "\n",
      RenderTable({"platform", "workload", "mode", "metric", "runs", "base", "candidate", "change",
                   "95% interval", "base of off", "candidate of off", "verdict"},
                  cells),
      Summary(answer, threshold), "\n");
  if (all) {
    absl::StrAppend(&out, "\nevery series (not judged unless above):\n",
                    FormatCompareTable(answer.compared, base, candidate, {}, /*all=*/true));
  }
  return out;
}

std::string FormatGateJson(const GateAnswer& answer, const std::string& base,
                           const std::string& candidate, double threshold,
                           const std::string& infrastructure_error) {
  nlohmann::json j;
  j["base"] = base;
  j["candidate"] = candidate;
  j["threshold"] = threshold;
  j["exit_code"] = infrastructure_error.empty() ? answer.exit_code : kGateInfrastructure;
  j["verdict"] = infrastructure_error.empty() ? Summary(answer, threshold) : "infrastructure";
  if (!infrastructure_error.empty()) j["error"] = infrastructure_error;
  if (answer.exit_code == kGateInconclusive) j["further_runs"] = answer.further_runs;
  j["series"] = nlohmann::json::array();
  for (const GateRow& g : answer.rows) {
    const CompareRow& r = g.compared;
    nlohmann::json row = {{"platform", r.platform}, {"workload", r.workload},
                          {"params", r.params},     {"metric", r.metric},
                          {"mode", r.mode},         {"unit", r.unit},
                          {"runs_base", r.n_a},     {"runs_candidate", r.n_b},
                          {"mean_base", r.mean_a},  {"mean_candidate", r.mean_b},
                          {"change", r.change},     {"higher_is_better", g.higher_is_better},
                          {"test", r.method},       {"verdict", CallName(g.call)}};
    if (std::isfinite(r.ci.lo) && std::isfinite(r.ci.hi)) {
      row["change_interval"] = {r.ci.lo, r.ci.hi};
    }
    if (g.call == GateCall::kInconclusive) row["further_runs"] = g.further_runs;
    j["series"].push_back(std::move(row));
  }
  return j.dump(2) + "\n";
}

std::string FormatGateJunit(const GateAnswer& answer, double threshold,
                            const std::string& infrastructure_error) {
  int failures = 0, skipped = 0;
  std::string cases;
  for (const GateRow& g : answer.rows) {
    const CompareRow& r = g.compared;
    const std::string what =
        absl::StrCat(proto::RelativeChangeText(r.change), " (95%: ", ChangeIntervalText(r.ci), ")");
    absl::StrAppend(&cases, "    <testcase classname=\"", HtmlEscape(r.platform), "\" name=\"",
                    HtmlEscape(SeriesName(r)), "\">");
    if (g.call == GateCall::kRegression) {
      ++failures;
      absl::StrAppend(&cases, "<failure message=\"regressed ", HtmlEscape(what),
                      absl::StrFormat(", threshold %g%%", threshold * 100), "\"/>");
    } else if (g.call == GateCall::kInconclusive) {
      ++skipped;
      absl::StrAppend(&cases, "<skipped message=\"inconclusive ", HtmlEscape(what), "; about ",
                      g.further_runs, " further runs per commit\"/>");
    }
    absl::StrAppend(&cases, "</testcase>\n");
  }
  int errors = 0;
  if (!infrastructure_error.empty()) {
    ++errors;
    absl::StrAppend(&cases,
                    "    <testcase classname=\"farmctl gate\" name=\"infrastructure\"><error "
                    "message=\"",
                    HtmlEscape(infrastructure_error), "\"/></testcase>\n");
  }
  const size_t tests = answer.rows.size() + errors;
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n",
                      "  <testsuite name=\"farmctl gate\" tests=\"", tests, "\" failures=\"",
                      failures, "\" errors=\"", errors, "\" skipped=\"", skipped, "\">\n", cases,
                      "  </testsuite>\n</testsuites>\n");
}

absl::StatusOr<std::string> PlanGateSpec(const std::string& spec_yaml, const std::string& base,
                                         const std::string& candidate, int repeats) {
  spec::SpecLimits unbounded;
  unbounded.max_spec_bytes = std::numeric_limits<size_t>::max();  // the scheduler's to bound
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(spec_yaml, unbounded);
  if (!spec.ok()) return spec.status();
  if (!spec->patch().empty()) {
    return absl::InvalidArgumentError(
        "a gate compares two commits of the catalog; a spec with a patch is a try job (farmctl "
        "try)");
  }
  if (base == candidate) {
    return absl::InvalidArgumentError("--base and --candidate are the same commit");
  }
  spec->clear_commit_range();
  spec->mutable_commit_list()->clear_ids();
  spec->mutable_commit_list()->add_ids(base);
  spec->mutable_commit_list()->add_ids(candidate);
  spec->set_name(absl::StrCat(spec->name(), " (gate ", candidate, " vs ", base, ")"));
  if (repeats > 0) spec->set_repeats(repeats);
  return spec::MatrixSpecToYaml(*spec);
}

namespace {

// One round of the gate: its matrix submitted, waited for and read.
// Errors are the farm's failures to answer, for exit 3.
absl::StatusOr<std::vector<pb::Result>> MeasureRound(Commands& c, const GateArgs& a,
                                                     const std::string& yaml, int repeats) {
  absl::StatusOr<std::string> spec = PlanGateSpec(yaml, a.base, a.candidate, repeats);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<pb::SubmitMatrixResponse> submitted = c.SubmitSpec(*spec, /*dry_run=*/false);
  if (!submitted.ok()) {
    return absl::Status(submitted.status().code(),
                        absl::StrCat("SubmitMatrix: ", submitted.status().message()));
  }
  const int64_t id = submitted->matrix().id();
  c.err() << "matrix " << id << " \"" << submitted->matrix().name()
          << "\": " << submitted->jobs_created() << " jobs\n";
  absl::StatusOr<pb::MatrixProgress> done =
      c.WaitForMatrix(id, [&c](const pb::MatrixProgress& p) { c.PrintProgress(p); });
  if (!done.ok()) {
    return absl::Status(done.status().code(),
                        absl::StrCat("WatchMatrix ", id, ": ", done.status().message()));
  }
  const pb::MatrixCounts& n = done->counts();
  if (n.failed() > 0 || n.cancelled() > 0) {
    return absl::AbortedError(absl::StrCat(
        "matrix ", id, ": ", n.failed(), " of ", n.total(), " jobs failed and ", n.cancelled(),
        " were cancelled (farmctl status ", id, "):\n", FetchFailures(c, id, "  ")));
  }
  return c.FetchResults(id, /*include_raw=*/false);
}

// Measures until decided (or once), judging after each round.
absl::StatusOr<GateAnswer> MeasureAndJudge(Commands& c, const GateArgs& a,
                                           const std::string& yaml) {
  const double threshold = a.threshold_pct / 100;
  std::vector<pb::Result> results;
  int spent = 0, repeats = 0;  // 0: the spec's own repeats
  for (;;) {
    absl::StatusOr<std::vector<pb::Result>> round = MeasureRound(c, a, yaml, repeats);
    if (!round.ok()) return round.status();
    results.insert(results.end(), round->begin(), round->end());
    const std::vector<pb::Result> base = AtCommit(results, a.base);
    const std::vector<pb::Result> candidate = AtCommit(results, a.candidate);
    if (base.empty() || candidate.empty()) {
      return absl::NotFoundError(
          absl::StrCat("no results for ", base.empty() ? a.base : a.candidate));
    }
    GateAnswer answer = JudgeGate(CompareSides(base, candidate), threshold);
    if (answer.exit_code == kGateInfrastructure) {
      return absl::NotFoundError("no primary metric of known direction measured at both commits");
    }
    if (answer.exit_code != kGateInconclusive || !a.until_decided || spent >= a.budget) {
      return answer;
    }
    repeats = static_cast<int>(std::min<int64_t>(answer.further_runs, a.budget - spent));
    spent += repeats;
    c.err() << "inconclusive: " << repeats << " further runs per commit (" << spent << " of "
            << a.budget << " of the budget)\n";
  }
}

}  // namespace

int RunGate(Commands& c, const GateArgs& a) {
  const double threshold = a.threshold_pct / 100;
  // Unwritable --junit is found before anything runs.
  if (!a.junit_path.empty()) {
    if (absl::Status st = base::WriteFile(a.junit_path, ""); !st.ok()) {
      c.err() << "farmctl: gate: infrastructure: --junit " << a.junit_path << ": " << st.message()
              << "\n";
      return kGateInfrastructure;
    }
  }
  absl::StatusOr<std::string> yaml = ReadInputFile(a.spec_path);
  absl::StatusOr<GateAnswer> answer =
      yaml.ok() ? MeasureAndJudge(c, a, *yaml) : absl::StatusOr<GateAnswer>(yaml.status());
  const std::string error = answer.ok()
                                ? ""
                                : absl::StrCat(absl::StatusCodeToString(answer.status().code()),
                                               ": ", answer.status().message());
  const GateAnswer shown = answer.ok() ? *answer : GateAnswer{};
  if (!error.empty()) c.err() << "farmctl: gate: infrastructure: " << error << "\n";
  if (a.format == OutputFormat::kJson) {
    c.out() << FormatGateJson(shown, a.base, a.candidate, threshold, error);
  } else if (answer.ok()) {
    c.out() << FormatGateTable(shown, a.base, a.candidate, threshold, a.all);
  }
  if (!a.junit_path.empty()) {
    if (absl::Status st = base::WriteFile(a.junit_path, FormatGateJunit(shown, threshold, error));
        !st.ok()) {
      c.err() << "farmctl: gate: infrastructure: --junit " << a.junit_path << ": " << st.message()
              << "\n";
      return kGateInfrastructure;
    }
  }
  return answer.ok() ? shown.exit_code : kGateInfrastructure;
}

void AddGateCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    GateArgs gate;
    std::string format;
  };
  auto a = std::make_shared<Args>();
  auto* gate = app.add_subcommand(
      "gate",
      "for CI: measure SPEC's cells at --base and --candidate (one matrix, interleaved) and "
      "exit 0 when no primary metric regressed by --threshold or more (every 95% interval rules "
      "it out), 1 on a regression (significant and at least the threshold), 2 when "
      "inconclusive (with the further runs per commit that would decide; --until-decided "
      "spends them within --budget), 3 when the farm could not answer (unreachable, unknown "
      "commit, failed jobs, no results, unwritable --junit; also a usage error)");
  gate->add_option("SPEC", a->gate.spec_path,
                   "matrix spec YAML file ('-': standard input); its commits are replaced by "
                   "the two")
      ->required();
  gate->add_option("--base", a->gate.base, "the commit to compare against")->required();
  gate->add_option("--candidate", a->gate.candidate, "the commit under test")->required();
  gate->add_option("--threshold", a->gate.threshold_pct,
                   "the smallest change for the worse, in percent, that fails the gate")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 1000.0));
  gate->add_flag("--until-decided", a->gate.until_decided,
                 "when inconclusive, submit the further runs it needs and judge again, within "
                 "--budget");
  gate->add_option("--budget", a->gate.budget,
                   "further runs per commit --until-decided may spend in all")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  gate->add_option("--junit", a->gate.junit_path,
                   "also write JUnit XML to FILE: a test case per judged series");
  AddOutputOption(gate, &a->format, "table or json");
  gate->add_flag("--all", a->gate.all,
                 "table: also every series of the comparison, not only the judged ones");
  gate->callback([a] {
    if (ToFormat(a->format) == OutputFormat::kCsv) {
      throw CLI::ValidationError("--output", "gate writes table or json");
    }
  });
  out->push_back({gate,
                  [a](Commands& c) {
                    GateArgs args = a->gate;
                    args.format = ToFormat(a->format);
                    return RunGate(c, args);
                  },
                  kGateInfrastructure});
}

}  // namespace farm::cli
