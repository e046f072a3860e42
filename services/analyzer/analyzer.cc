#include "services/analyzer/analyzer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "lib/spec/spec_yaml.h"
#include "proto/try_commit.h"
#include "services/analyzer/alerts.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/log.h"
#include "services/analyzer/mode_change.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

using json = nlohmann::json;

// The firing alert as last sent, resolved, when `alert` carries other labels
// (the bisect moved its group, or it gained a label): Alertmanager knows an
// alert by its labels, so the old one would otherwise fire until it timed out.
std::optional<Alert> Relabelled(const AlertWork& a, const Alert& alert, const std::string& now) {
  if (!a.alert_exists || !a.alert_firing) return std::nullopt;
  const json sent = json::parse(a.labels_json, nullptr, false);
  if (!sent.is_object() || sent.empty() || sent == json(alert.labels)) return std::nullopt;
  Alert old;
  try {
    old.labels = sent.get<std::map<std::string, std::string>>();
    const json annotations = json::parse(a.annotations_json, nullptr, false);
    if (annotations.is_object()) old.annotations = annotations.get<decltype(old.annotations)>();
  } catch (const json::exception&) {
    return std::nullopt;  // not string-valued: not an alert this analyzer sent
  }
  old.starts_at = a.starts_at;
  old.ends_at = now;
  return old;
}

static_assert(static_cast<int>(ChangeClass::kUnspecified) == pb::CHANGE_CLASS_UNSPECIFIED &&
              static_cast<int>(ChangeClass::kIommu) == pb::CHANGE_CLASS_IOMMU &&
              static_cast<int>(ChangeClass::kNotIommu) == pb::CHANGE_CLASS_NOT_IOMMU &&
              static_cast<int>(ChangeClass::kModeChanged) == pb::CHANGE_CLASS_MODE_CHANGED);

// What the store records of a finding: its regressions row, without the
// change points it was merged from.
RegressionFinding StoredFinding(const Finding& f) {
  RegressionFinding r;
  r.platform = f.platform;
  r.workload = f.workload;
  r.params = f.params;
  r.metric = f.metric;
  r.mode = f.mode;
  r.overhead_series = f.overhead_series;
  r.change_class = static_cast<pb::ChangeClass>(f.change_class);
  r.regression = f.regression;
  r.last_good_index = f.last_good_index;
  r.last_good = f.last_good;
  r.first_bad_index = f.first_bad_index;
  r.first_bad = f.first_bad;
  r.magnitude = f.magnitude;
  r.p_value = f.p_value;
  for (const ModeEffect& e : f.per_mode) {
    r.per_mode.push_back({e.mode, e.overhead, e.before, e.after, e.relative_change, e.p_value});
  }
  return r;
}

// Runs one unit of a pass (a matrix, a bisect) so that an exception from a
// library it calls (Boost.Math on a domain error, an allocation) becomes
// that unit's error instead of the service's end.
absl::Status Guarded(const std::function<absl::Status()>& step) {
  try {
    return step();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("exception: ", e.what()));
  }
}

// A database or scheduler that is away for a moment: the matrix is tried
// again next pass. Any other failure is the matrix's own and would recur.
bool PassingFailure(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAlreadyExists:  // another analyzer recorded it first
      return true;
    default:
      return false;
  }
}

// The emulator's map and unmap mean latencies in the finding's cell: their
// relative change between its commits, positive the finding's way (a rise
// for a regression), for DmaMapBenchConfirmMetric.
std::map<std::string, double> LatencyChanges(const std::vector<Series>& series, const Finding& f) {
  std::map<std::string, double> out;
  for (const Series& s : series) {
    const SeriesKey& k = s.key;
    if (k.platform != f.platform || k.workload != f.workload || k.params != f.params ||
        k.mode != f.mode || k.overhead != f.overhead_series ||
        (k.metric != "map_latency_mean" && k.metric != "unmap_latency_mean"))
      continue;
    double good = 0, bad = 0;
    for (const SeriesPoint& p : s.points) {
      if (p.values.empty()) continue;
      if (p.commit_id == f.last_good) good = Mean(p.values);
      if (p.commit_id == f.first_bad) bad = Mean(p.values);
    }
    if (good <= 0 || bad <= 0) continue;
    out[k.metric] = (f.regression ? 1 : -1) * (bad / good - 1);
  }
  return out;
}

}  // namespace

std::string ModeChangeNote(const Finding& f) {
  const ModeEffect& e = f.per_mode.front();
  return absl::StrCat("mode_changed: the runs of ", f.first_bad, " report effective mode ",
                      EffectiveModeName(e.after), " where those of ", f.last_good, " report ",
                      EffectiveModeName(e.before), ", for requested ", f.mode,
                      "; bisected on the effective mode");
}

std::string RankNote(const Finding& f, const std::set<std::string>& workload_primary,
                     const AnalyzerOptions& options) {
  if (f.primary_metric) return absl::StrCat("primary metric of ", f.workload);
  const bool alerted = options.alert.secondary_severity != "none";
  return absl::StrCat("secondary metric: ", f.metric.substr(0, f.metric.find('/')),
                      " is not a primary metric of ", f.workload, " (",
                      absl::StrJoin(workload_primary, ", "), "); ",
                      alerted ? "alerted as " + options.alert.secondary_severity : "not alerted",
                      options.bisect_secondary ? "" : ", not bisected");
}

Analyzer::Analyzer(AnalyzerStore* store, JobSubmitter* submitter, AlertSink* sink, OpenGauges open,
                   AnalyzerOptions options)
    : store_(store),
      submitter_(submitter),
      sink_(sink),
      open_(open),
      options_(std::move(options)),
      group_gate_(store),
      bisects_(store, submitter, options_.bisect, options_.priority,
               options_.groups.window > absl::ZeroDuration() ? &group_gate_ : nullptr) {}

absl::Status Analyzer::Tick() {
  absl::Status first = absl::OkStatus();
  auto note = [&](const absl::Status& s, const std::string& what) {
    if (s.ok()) return;
    Log(what + ": " + s.ToString());
    if (first.ok()) first = s;
  };
  if (!result_gauges_restored_ && open_.results != nullptr) {
    note(RestoreResultGauges(), "restoring result gauges");
  }
  absl::StatusOr<std::vector<MatrixInfo>> todo = store_->MatricesToAnalyze();
  note(todo.status(), "listing matrices");
  if (todo.ok()) {
    for (const MatrixInfo& m : *todo) note(AnalyzeIsolated(m), absl::StrCat("matrix ", m.id));
  }
  absl::StatusOr<std::vector<ActiveBisect>> active = store_->ActiveBisects();
  note(active.status(), "listing bisects");
  if (active.ok()) {
    for (const ActiveBisect& b : *active)
      note(Guarded([&] { return bisects_.Advance(b); }), absl::StrCat("bisect ", b.bisect_id));
  }
  note(SendAlerts(), "alerts");
  note(CheckFixes(), "fix checks");
  if (open_.primary != nullptr || open_.secondary != nullptr) {
    absl::StatusOr<AnalyzerStore::OpenCounts> open = store_->CountOpenRegressions();
    note(open.status(), "counting regressions");
    if (open.ok() && open_.primary != nullptr)
      open_.primary->Set(static_cast<double>(open->primary));
    if (open.ok() && open_.secondary != nullptr)
      open_.secondary->Set(static_cast<double>(open->secondary));
  }
  return first;
}

absl::Status Analyzer::AnalyzeIsolated(const MatrixInfo& m) {
  const absl::Status st = Guarded([&] { return AnalyzeMatrix(m); });
  if (st.ok() || PassingFailure(st)) return st;
  ++matrices_failed_;
  Log(absl::StrCat("matrix ", m.id, ": analysis failed, marked and not retried: ", st.ToString()));
  const absl::Status marked = store_->RecordAnalysisFailure(m.id, st.ToString());
  if (!marked.ok() && marked.code() != absl::StatusCode::kAlreadyExists) return marked;
  return st;
}

absl::Status Analyzer::RestoreResultGauges() {
  absl::StatusOr<std::vector<MatrixInfo>> latest = store_->LatestAnalysedMatrices();
  if (!latest.ok()) return latest.status();
  for (const MatrixInfo& m : *latest) {  // oldest first: each series ends at its newest
    absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples({m.id});
    if (!samples.ok()) return samples.status();
    open_.results->Update(m.catalog, BuildSeries(*samples, false, options_.primary_metrics));
  }
  result_gauges_restored_ = true;
  Log(absl::StrCat("result gauges restored from ", latest->size(), " analysed matrices"));
  return absl::OkStatus();
}

namespace {

// The series a bisect re-measures: the cell's, with the matrix's catalog
// where the cell names none, and `metric` ("metric" or "metric/phase") in
// `mode`.
SeriesSpec BisectSeries(const SeriesSpec& cell, const std::string& catalog,
                        const std::string& metric, const std::string& mode) {
  SeriesSpec s = cell;
  if (s.catalog.empty()) s.catalog = catalog;
  const size_t slash = metric.find('/');
  s.metric = metric.substr(0, slash);
  s.phase = slash == std::string::npos ? "" : metric.substr(slash + 1);
  s.mode = mode;
  return s;
}

// The cells `samples` measured, each with the commits it measured there.
OwnCommits CommitsByCell(const std::vector<SampleRow>& samples) {
  OwnCommits out;
  for (const SampleRow& s : samples) out[{s.platform, s.workload, s.params}].insert(s.commit_id);
  return out;
}

// A change point on either side of which `own` measured a commit of its
// cell: a change the matrix shows, alone or against the history.
bool Involves(const ChangePoint& cp, const OwnCommits& own) {
  auto it = own.find({cp.key.platform, cp.key.workload, cp.key.params});
  return it != own.end() &&
         (it->second.count(cp.last_good) != 0 || it->second.count(cp.first_bad) != 0);
}

// A try job's base + patch (proto/try_commit.h) has no place of its own in
// the catalog's order: it is compared with its base, never a series point.
void DropTryCommits(std::vector<SampleRow>& rows) {
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [](const SampleRow& r) { return proto::IsTryCommit(r.commit_id); }),
             rows.end());
}

// The changes of effective mode in `all` next to a commit `own` measured: a
// commit that changed the mode its kernel runs is a finding of its own,
// whatever the figures did.
std::vector<Finding> OwnModeChanges(const std::vector<SampleRow>& all, const OwnCommits& own) {
  std::vector<Finding> out;
  for (Finding& f : DetectModeChanges(all)) {
    auto it = own.find({f.platform, f.workload, f.params});
    if (it == own.end() || (!it->second.contains(f.last_good) && !it->second.contains(f.first_bad)))
      continue;
    out.push_back(std::move(f));
  }
  return out;
}

// A suggestive change point a top-up re-measures: a request of its series
// holds one of its two commits.
bool ToppedUp(const ChangePoint& cp, const std::vector<TopUpRequest>& topped) {
  for (const TopUpRequest& r : topped) {
    if (!(r.at.key == cp.key)) continue;
    for (const std::string& id : r.commit_ids) {
      if (id == cp.last_good || id == cp.first_bad) return true;
    }
  }
  return false;
}

// The matrix's analysis for its top-ups: what it asked of its findings.
pb::MatrixAnalysis AnalysisOf(const MatrixInfo& m) {
  pb::MatrixAnalysis a;
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(m.spec_yaml, spec::SpecLimits{});
  if (spec.ok()) a = spec->analysis();
  a.set_bisect(m.analysis_bisect);
  return a;
}

}  // namespace

absl::StatusOr<std::vector<TopUpRequest>> Analyzer::TopUp(const MatrixInfo& m,
                                                          const std::vector<Series>& series,
                                                          const OwnCommits& own,
                                                          std::vector<SeriesFailure>* failed) {
  // The primary metrics only: what users bisect on is worth the runs.
  std::vector<Series> primary;
  for (const Series& s : series) {
    if (s.primary) primary.push_back(s);
  }
  std::vector<TopUpRequest> requests = TopUpRequests(primary, options_.detect, failed);
  requests.erase(std::remove_if(requests.begin(), requests.end(),
                                [&](const TopUpRequest& r) { return !Involves(r.at, own); }),
                 requests.end());
  const std::vector<TopUpMatrix> matrices = GroupTopUps(requests);
  const pb::MatrixAnalysis analysis = AnalysisOf(m);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const TopUpMatrix& t = matrices[i];
    absl::StatusOr<SeriesSpec> cell = store_->Cell(m.id, t.platform, t.workload, t.params);
    if (!cell.ok()) return cell.status();
    if (cell->catalog.empty()) cell->catalog = m.catalog;
    const int index = static_cast<int>(i);
    absl::StatusOr<int64_t> id =
        submitter_->Submit(TopUpSpec(t, *cell, analysis, m.id, index, options_.priority),
                           absl::StrCat("analyzer/t", m.id, "/", index + 1));
    if (!id.ok()) return id.status();
    ++submissions_;
    Log(absl::StrCat("matrix ", m.id, ": topping up ", t.platform, " ", t.workload,
                     t.params == "{}" ? "" : absl::StrCat("{", ParamsLabel(t.params), "}"), " ",
                     t.mode, t.overhead ? "/off" : "", " at ", absl::StrJoin(t.commits, " "), " x",
                     t.repeats, " (matrix ", *id,
                     "), suggestive: ", absl::StrJoin(t.splits, ", ")));
  }
  return requests;
}

absl::StatusOr<std::vector<SampleRow>> Analyzer::HistoryOf(const MatrixInfo& m,
                                                           const std::vector<SampleRow>& own) {
  std::vector<HistoryCell> cells;
  for (const auto& [cell, commits] : CommitsByCell(own)) {
    cells.push_back({std::get<0>(cell), std::get<1>(cell), std::get<2>(cell)});
  }
  if (cells.empty()) return std::vector<SampleRow>{};
  return store_->HistorySamples(m.catalog, m.executor, cells, m.id, options_.history_matrices);
}

std::vector<std::string> Analyzer::Skipped(const MatrixInfo& m,
                                           const std::vector<SeriesFailure>& failed,
                                           std::vector<Series>& series) {
  std::set<SeriesKey> keys;
  std::vector<std::string> out;
  for (const SeriesFailure& f : failed) {
    if (!keys.insert(f.key).second) continue;
    out.push_back(absl::StrCat(f.key.ToString(), ": ", f.status.message()));
    Log(absl::StrCat("matrix ", m.id, ": series ", f.key.ToString(),
                     " skipped: ", f.status.ToString()));
  }
  std::erase_if(series, [&](const Series& s) { return keys.contains(s.key); });
  return out;
}

absl::Status Analyzer::AnalyzeMatrix(const MatrixInfo& m) {
  absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples({m.id});
  if (!samples.ok()) return samples.status();
  DropTryCommits(*samples);
  if (open_.results != nullptr) {
    open_.results->Update(m.catalog, BuildSeries(*samples, false, options_.primary_metrics));
  }
  const PrimaryMetricMap primary = PrimaryMetrics(*samples, options_.primary_metrics);
  // Each series is judged over every analysed submission that measured it,
  // ordered by the commits' places in the catalog: a matrix of one new
  // commit is a change against the history. Only changes next to a commit
  // this matrix measured are its findings; the others were the findings of
  // the matrices that measured them.
  absl::StatusOr<std::vector<SampleRow>> history = HistoryOf(m, *samples);
  if (!history.ok()) return history.status();
  std::vector<SampleRow> all = *std::move(history);
  DropTryCommits(all);
  const size_t history_rows = all.size();
  all.insert(all.end(), samples->begin(), samples->end());
  std::vector<Series> series = BuildSeries(all, false, options_.primary_metrics);
  const auto own = CommitsByCell(*samples);
  std::vector<SeriesFailure> failed;
  absl::StatusOr<std::vector<TopUpRequest>> topped = TopUp(m, series, own, &failed);
  if (!topped.ok()) return topped.status();
  // Suggestive candidates are recorded as suspected too: their confirmation
  // re-runs both commits with doubled repeats until the evidence decides;
  // those being topped up wait for the top-up's analysis instead.
  std::vector<ChangePoint> cps = DetectCandidates(series, options_.detect, &failed);
  const std::vector<std::string> skipped = Skipped(m, failed, series);
  cps.erase(std::remove_if(cps.begin(), cps.end(),
                           [&](const ChangePoint& cp) {
                             return !Involves(cp, own) || (cp.suggestive && ToppedUp(cp, *topped));
                           }),
            cps.end());
  std::vector<Finding> findings = OwnModeChanges(all, own);
  for (Finding& f : Classify(cps, series, options_.detect)) findings.push_back(std::move(f));

  std::vector<NewRegression> found;
  for (const Finding& f : findings) {
    absl::StatusOr<NewRegression> n = NewRegressionFor(m, f, primary, series);
    if (!n.ok()) return n.status();
    found.push_back(*std::move(n));
  }
  // Groups gather findings between commits; a decay is a finding of one
  // commit's runs and stays on its own.
  if (absl::Status s =
          GroupFindings(*store_, m, findings, options_.bisect_secondary, options_.groups, found);
      !s.ok())
    return s;
  // A run's own series is judged on the matrix's own samples only: a decay
  // belongs to the runs that showed it.
  const std::vector<DecayFinding> decays = FindDecays(*samples, primary, options_.decay);
  for (const DecayFinding& d : decays) {
    absl::StatusOr<NewRegression> n = NewDecayFor(m, d, primary);
    if (!n.ok()) return n.status();
    found.push_back(*std::move(n));
  }
  absl::StatusOr<std::vector<int64_t>> bisects =
      store_->RecordAnalysis(m.id, m.catalog, found, skipped);
  if (!bisects.ok()) return bisects.status();
  ++matrices_analyzed_;
  Log(absl::StrCat("matrix ", m.id, " analysed: ", samples->size(), " samples (and ", history_rows,
                   " of other submissions), ", series.size(), " series, ", findings.size(),
                   " findings, ", decays.size(), " decays, ", bisects->size(), " new bisects, ",
                   topped->size(), " splits topped up",
                   skipped.empty() ? "" : absl::StrCat(", ", skipped.size(), " series skipped")));
  return absl::OkStatus();
}

absl::StatusOr<NewRegression> Analyzer::NewRegressionFor(const MatrixInfo& m, const Finding& f,
                                                         const PrimaryMetricMap& primary,
                                                         const std::vector<Series>& series) {
  absl::StatusOr<SeriesSpec> cell = store_->Cell(m.id, f.platform, f.workload, f.params);
  if (!cell.ok()) return cell.status();
  auto pm = primary.find({f.platform, f.workload});
  const std::set<std::string> workload_primary =
      pm == primary.end() ? std::set<std::string>{} : pm->second;
  NewRegression n;
  n.finding = StoredFinding(f);
  n.series_key = absl::StrCat(f.platform, "|", f.workload, f.params == "{}" ? "" : f.params, "|",
                              f.metric, "|", f.mode, f.overhead_series ? "/off" : "", "|",
                              f.last_good, "|", f.first_bad);
  n.state = pb::REGRESSION_STATE_SUSPECTED;  // until confirmed
  n.metric_rank = f.primary_metric ? "primary" : "secondary";
  n.primary_metrics.assign(workload_primary.begin(), workload_primary.end());
  const bool mode_change = f.change_class == ChangeClass::kModeChanged;
  n.note = mode_change ? ModeChangeNote(f) : RankNote(f, workload_primary, options_);
  const bool suggestive =
      !mode_change && std::all_of(f.change_points.begin(), f.change_points.end(),
                                  [](const ChangePoint& cp) { return cp.suggestive; });
  if (suggestive) n.note += "; suggestive (confirmed with more repeats before it counts)";

  BisectState st;
  st.series = BisectSeries(*cell, m.catalog, f.metric, f.mode);
  st.series.overhead = f.overhead_series;
  st.regression = f.regression;
  st.expected_change = f.magnitude;
  st.last_good = CommitRef{f.last_good_index, f.last_good};
  st.first_bad = CommitRef{f.first_bad_index, f.first_bad};
  st.do_bisect = m.analysis_bisect && (f.regression || options_.bisect_improvements) &&
                 (f.primary_metric || options_.bisect_secondary);
  st.metric_rank = n.metric_rank;
  st.primary_metrics = n.primary_metrics;
  if (mode_change) {
    st.mode_before = EffectiveModeName(f.per_mode.front().before);
    st.mode_after = EffectiveModeName(f.per_mode.front().after);
  } else if (f.primary_metric) {
    // A real tool's metric stands for a primary metric only: secondary
    // findings are confirmed on the emulator.
    st.real_confirm = RealConfirmFromSpecYaml(m.spec_yaml);
    if (st.real_confirm.has_value() && st.real_confirm->metric.empty()) {
      st.real_confirm->metric =
          DmaMapBenchConfirmMetric(f.metric, LatencyChanges(series, f), options_.detect.magnitude);
    }
  }
  n.bisect_state_json = BisectStateToJson(st);
  Log(absl::StrCat("matrix ", m.id, ": ", f.primary_metric ? "" : "secondary-metric ",
                   f.regression ? "regression" : "improvement", " ", f.platform, " ", f.workload,
                   f.params == "{}" ? "" : absl::StrCat("{", ParamsLabel(f.params), "}"), " ",
                   f.metric, " ", f.mode, f.overhead_series ? "/off" : "", " ",
                   Percent(f.magnitude), " between ", f.last_good, " and ", f.first_bad, " (",
                   ChangeClassName(f.change_class), ", p=", absl::StrFormat("%.2g", f.p_value),
                   suggestive ? ", suggestive" : "", ")"));
  return n;
}

absl::StatusOr<NewRegression> Analyzer::NewDecayFor(const MatrixInfo& m, const DecayFinding& d,
                                                    const PrimaryMetricMap& primary) {
  const SeriesKey& k = d.key;
  absl::StatusOr<SeriesSpec> cell = store_->Cell(m.id, k.platform, k.workload, k.params);
  if (!cell.ok()) return cell.status();
  auto pm = primary.find({k.platform, k.workload});
  NewRegression n;
  n.kind = "decay";
  RegressionFinding& f = n.finding;
  f.platform = k.platform;
  f.workload = k.workload;
  f.params = k.params;
  f.metric = k.metric;
  f.mode = k.mode;
  f.regression = true;
  f.last_good_index = f.first_bad_index = d.commit_index;
  f.last_good = f.first_bad = d.commit_id;
  // The metric's own change over the run: a throughput's fall is negative,
  // a latency's rise positive, as a change finding's magnitude is.
  const double sign =
      MetricPolarity(k.metric.substr(0, k.metric.find('/'))) == Polarity::kLowerIsBetter ? -1 : 1;
  f.magnitude = sign * d.verdict.line.relative_change;
  f.p_value = d.verdict.trend.p_falling;
  // The series' first and last interval as the line gives them.
  const double start = d.verdict.line.intercept;
  const double end = start + d.verdict.line.slope * static_cast<double>(d.series.size() - 1);
  f.per_mode.push_back({k.mode, false, sign * start, sign * end, f.magnitude, f.p_value});
  n.series_key =
      absl::StrCat("decay|", k.platform, "|", k.workload, k.params == "{}" ? "" : k.params, "|",
                   k.metric, "|", k.mode, "|", d.commit_id);
  // The runs are the evidence: every repeat of the commit went into the
  // median series, so there is nothing to re-run before telling anyone.
  n.state = pb::REGRESSION_STATE_CONFIRMED;
  n.metric_rank = d.primary ? "primary" : "secondary";
  if (pm != primary.end()) n.primary_metrics.assign(pm->second.begin(), pm->second.end());
  n.note = DecayNote(d);
  BisectState st;
  st.series = BisectSeries(*cell, m.catalog, k.metric, k.mode);
  st.regression = true;
  st.expected_change = f.magnitude;
  st.last_good = st.first_bad = CommitRef{d.commit_index, d.commit_id};
  st.do_bisect = false;
  st.metric_rank = n.metric_rank;
  st.primary_metrics = n.primary_metrics;
  n.bisect_state_json = BisectStateToJson(st);
  Log(absl::StrCat("matrix ", m.id, ": decay ", k.platform, " ", k.workload,
                   k.params == "{}" ? "" : absl::StrCat("{", ParamsLabel(k.params), "}"), " ",
                   k.mode, " at ", d.commit_id, ": ", n.note));
  return n;
}

absl::Status Analyzer::SendAlerts() {
  if (sink_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<AlertWork>> work = store_->AlertCandidates(options_.resolved_resend);
  if (!work.ok()) return work.status();
  const absl::Time now_time = absl::Now();
  auto rfc3339 = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
  };
  const std::string now = rfc3339(now_time);
  // One failed post (Alertmanager briefly away, one bad alert) must not keep
  // the others from going out: each is retried on the next pass.
  absl::Status first = absl::OkStatus();
  auto keep = [&](const absl::Status& s, int64_t id, const char* what) {
    if (s.ok()) return true;
    Log(absl::StrCat("regression ", id, ": ", what, ": ", s.ToString()));
    if (first.ok()) first = s;
    return false;
  };
  // The open regressions of each alert group (one catalog's culprit or
  // range) of the regressions alerted on their own; those in a regression
  // group of two or more have their group's alert (groups.h).
  const GroupAlertPlan grouped = PlanGroupAlerts(*work, options_.alert, now);
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> groups;
  for (const AlertWork& a : *work) {
    if (AlertFires(a.state) && !grouped.Covers(a.regression_id))
      groups[{a.catalog, AlertGroup(a)}].push_back(a.regression_id);
  }
  for (const AlertWork& a : *work) {
    const bool open = AlertFires(a.state);
    const bool acknowledged = a.state == pb::REGRESSION_STATE_ACKNOWLEDGED;
    std::optional<Alert> built =
        !grouped.Covers(a.regression_id)
            ? BuildAlert(a, options_.alert, now, groups[{a.catalog, AlertGroup(a)}])
        : grouped.alerts.contains(a.regression_id) ? grouped.alerts.at(a.regression_id)
                                                   : std::nullopt;
    if (!a.silence_id.empty() && (!acknowledged || !built.has_value())) {
      // Re-opened or closed: the silence goes, so the alert (or its
      // resolution) is seen again.
      if (!keep(sink_->ExpireSilence(a.silence_id), a.regression_id, "expiring its silence"))
        continue;
      if (!keep(store_->SetSilence(a.regression_id, ""), a.regression_id, "recording")) continue;
      Log(absl::StrCat("silence ", a.silence_id, " of regression ", a.regression_id, " expired"));
    }
    if (!built.has_value()) {
      // A member its group's alert stands for: an alert it fired as the
      // group's representative before is now the new representative's (and
      // resolved when the group's labels moved meanwhile).
      if (grouped.quiet.contains(a.regression_id) && a.alert_firing) {
        const std::optional<Alert>& current =
            grouped.alerts.at(grouped.representative.at(a.group_id));
        const std::optional<Alert> old =
            current.has_value() ? Relabelled(a, *current, now) : std::nullopt;
        if (old.has_value() && !keep(sink_->Post({*old}), a.regression_id, "resolving")) continue;
        keep(store_->MarkAlertSent(a.regression_id, false, a.labels_json, a.annotations_json),
             a.regression_id, "recording");
      }
      continue;
    }
    Alert& alert = *built;
    if (acknowledged && a.silence_id.empty()) {
      absl::StatusOr<std::string> id = sink_->CreateSilence(
          BuildSilence(alert, a.regression_id, now, rfc3339(now_time + options_.silence_for)));
      if (!keep(id.status(), a.regression_id, "silencing")) continue;
      if (!keep(store_->SetSilence(a.regression_id, *id), a.regression_id, "recording")) {
        // Not recorded: expire it rather than leave one nobody removes.
        (void)sink_->ExpireSilence(*id);
        continue;
      }
      Log(absl::StrCat("alert of regression ", a.regression_id, " silenced (acknowledged): ", *id));
    }
    if (!open && !a.alert_exists) continue;  // closed before it was ever alerted
    // Re-sent every alert_resend -- while open, and for resolved_resend once
    // resolved -- and at once when its content or state changed.
    const std::optional<Alert> relabelled = Relabelled(a, alert, now);
    const bool changed = relabelled.has_value() ||
                         json::parse(a.annotations_json, nullptr, false) != json(alert.annotations);
    const bool state_changed = a.alert_firing != open;
    if (!changed && !state_changed &&
        a.seconds_since_sent < absl::ToDoubleSeconds(options_.alert_resend))
      continue;
    std::vector<Alert> post = {alert};
    if (relabelled.has_value()) post.insert(post.begin(), *relabelled);
    if (!keep(sink_->Post(post), a.regression_id, "posting its alert")) continue;
    if (!keep(store_->MarkAlertSent(a.regression_id, open, json(alert.labels).dump(),
                                    json(alert.annotations).dump()),
              a.regression_id, "recording its alert"))
      continue;
    if (state_changed || !a.alert_exists) {
      Log(absl::StrCat("alert ", open ? "firing" : "resolved", " for regression ", a.regression_id,
                       ": ", alert.annotations["summary"]));
    }
  }
  return first;
}

absl::Status Analyzer::CheckFixes() {
  absl::StatusOr<std::vector<FixCheckWork>> work = store_->FixChecks();
  if (!work.ok()) return work.status();
  absl::Status first = absl::OkStatus();
  for (const FixCheckWork& w : *work) {
    absl::Status s = CheckFix(w);
    if (!s.ok()) {
      Log(absl::StrCat("fix check of regression ", w.regression_id, ": ", s.ToString()));
      if (first.ok()) first = s;
    }
  }
  return first;
}

absl::Status Analyzer::CheckFix(const FixCheckWork& w) {
  absl::StatusOr<BisectState> bisect = BisectStateFromJson(w.bisect_state_json);
  if (!bisect.ok()) return bisect.status();
  try {
    const json st = w.check_state_json.empty() ? json::object() : json::parse(w.check_state_json);
    if (w.fix_check.empty()) return StartFixCheck(w, *bisect, st.value("generation", 0));
    return JudgeFix(w, *bisect, st);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unreadable state: ", e.what()));
  }
}

// Not started, or fixed again after a re-open: a new generation, so its
// idempotency key asks for a new matrix. The old level is the last good
// commit of the range as detected: before every culprit of it.
absl::Status Analyzer::StartFixCheck(const FixCheckWork& w, const BisectState& bisect,
                                     int generation) {
  const SeriesSpec& spec = bisect.series;
  const std::string& lg = bisect.last_good.id;
  absl::StatusOr<CommitRow> latest = store_->LatestCommit(spec.catalog);
  if (!latest.ok()) return latest.status();
  json next = {{"generation", generation + 1}, {"commit", latest->id}};
  if (latest->index <= bisect.first_bad.index) {
    Log(absl::StrCat("fix check of regression ", w.regression_id, ": no commit after ",
                     bisect.first_bad.id, " in catalog ", spec.catalog));
    return store_->SaveFixCheck(w.regression_id, "no-later-commit", "", 0, next.dump(), "");
  }
  const int repeats = std::max(2, options_.bisect.confirm_repeats);
  const uint64_t seed =
      (static_cast<uint64_t>(w.regression_id) * 15485863u + (generation + 1) * 32452843u) %
          2000000000u +
      1;
  absl::StatusOr<int64_t> id = submitter_->Submit(
      RerunSpec(spec, absl::StrCat("analyzer-r", w.regression_id, "-fixcheck"), {lg, latest->id},
                repeats, pb::JOB_KIND_CONFIRM, seed, options_.priority),
      absl::StrCat("analyzer/f", w.regression_id, "/", generation + 1));
  if (!id.ok()) return id.status();
  ++submissions_;
  next["matrix"] = *id;
  Log(absl::StrCat("fix check of regression ", w.regression_id, ": re-running ", lg, " and ",
                   latest->id, " x", repeats, " (matrix ", *id, ")"));
  return store_->SaveFixCheck(w.regression_id, "checking", latest->id, 0, next.dump(), "");
}

// Throws nlohmann::json::exception on a check state without its matrix.
absl::Status Analyzer::JudgeFix(const FixCheckWork& w, const BisectState& bisect, const json& st) {
  const SeriesSpec& spec = bisect.series;
  const std::string& lg = bisect.last_good.id;
  const int64_t matrix = st.at("matrix").get<int64_t>();
  const std::string later = st.at("commit").get<std::string>();
  absl::StatusOr<bool> done = store_->MatricesTerminal({matrix});
  if (!done.ok()) return done.status();
  if (!*done) return absl::OkStatus();
  absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples({matrix});
  if (!samples.ok()) return samples.status();
  const std::vector<double> good = SeriesValuesAt(*samples, spec, lg);
  const std::vector<double> after = SeriesValuesAt(*samples, spec, later);
  if (good.size() < 2 || after.size() < 2) {
    return absl::FailedPreconditionError(absl::StrCat("matrix ", matrix, " gave ", good.size(),
                                                      " + ", after.size(), " values for ", lg,
                                                      " and ", later));
  }
  FixCheck f = JudgeFixCheck(good, after, bisect.expected_change, options_.bisect);
  if (bisect.categorical()) f.back = ModalValue(after) == ModalValue(good);
  const std::string verdict = f.back ? "back" : "not-back";
  Log(absl::StrCat("fix check of regression ", w.regression_id, ": ", later, " is ", verdict, " (",
                   Percent(f.test.relative_change), " vs ", lg,
                   absl::StrFormat(", p=%.2g", f.test.p_value), ")"));
  // Not back: the fix did not hold at the latest commit, so the regression
  // is open again (its alert fires) and its note says why.
  const std::string reopen =
      f.back ? ""
             : absl::StrCat("re-opened by the fix check: ", later, " is not back (",
                            Percent(f.test.relative_change), " vs last good ", lg,
                            absl::StrFormat(", p=%.2g", f.test.p_value), ")");
  if (!reopen.empty()) Log(absl::StrCat("regression ", w.regression_id, " ", reopen));
  return store_->SaveFixCheck(w.regression_id, verdict, later, f.test.relative_change, st.dump(),
                              reopen);
}

}  // namespace farm::analyzer
