// Analyzer: the farm-analyzer engine. One Tick() does a full pass:
//   1. every bulk matrix whose jobs are all terminal and that was not yet
//      analysed: build its series over every analysed submission that
//      measured them, detect change points, and where a split is only
//      suggestive measure its commits again first (the top-up, top_up.h:
//      bulk matrices of the analyzer's own, whose analysis decides);
//      classify what is left, record suspected regressions (and
//      improvements) with a bisect record; a commit whose runs report
//      another effective IOMMU mode than the commit before it is a
//      mode_changed finding (mode_change.h), confirmed by what the runs
//      stated and bisected on the mode;
//   2. every running bisect: confirmation first (last good / first bad
//      re-run interleaved, one matrix per round; while the result is only
//      suggestive, another round doubling both commits' repeats; on real
//      kernels with the spec's `analysis.confirm` when live agents offer
//      them or a registered agent builds them, see RealConfirm; the bisect
//      then runs on real kernels too), then
//      bisection steps submitted as high-priority matrices through the
//      scheduler, down to every culprit of the range; every step, the
//      culprits and the planner state are written to PostgreSQL after each
//      move;
//   (regressions found together over overlapping ranges are one group, one
//   bisect of its strongest member and one alert: groups.h);
//   3. alerts: confirmed regressions are posted to Alertmanager and re-sent
//      every alert_resend while open; fixed / false-positive / ignored ones
//      resolved, and the resolution re-sent every alert_resend for
//      resolved_resend (an Alertmanager restarted in between still gets it);
//      an acknowledged regression gets an Alertmanager silence on its
//      alert's labels, expired when it is re-opened or closed; one failed
//      post does not stop the pass;
//   4. fix checks: a regression marked fixed has its last good commit and the
//      catalog's latest commit re-run together, and whether the latest is
//      back to the old level is recorded (regressions.fix_check);
//   Each analysed matrix's runs that carry their own series (the emulator's
//   throughput per interval) are also judged one commit at a time for a
//   fall within the run (decay.h): a `decay` finding, recorded confirmed
//   and alerted like a regression, never re-run or bisected;
//   5. the farm_regressions_open gauges (by metric rank); every analysed
//      matrix also updates the latest-result gauges (result_gauges.h).
// Findings are ranked (detect.h, series.h PrimaryMetrics): a regression of a
// workload's primary (throughput) metric alerts as warning/critical and is
// bisected; one of a secondary metric (latency, hit rate, CPU time ...) is
// recorded and confirmed, alerted at `alert.secondary_severity` (default info,
// routed so it does not page) and bisected only with `bisect_secondary`.
// All progress lives in PostgreSQL, so the process may be killed at any point
// and a new one continues: submissions carry idempotency keys derived from
// the bisect id and a persisted sequence number, so nothing is submitted
// twice and no result is lost.
// One matrix never stops the analysis of the others: a series the detector
// cannot judge (a non-finite sample) is skipped with a log line and named in
// the matrix's record, and a matrix whose analysis fails for a reason of its
// own (an internal error, an exception from a library) is logged, marked as
// failed analysis with the reason (shown by `farmctl status MATRIX`) and not
// read again; a database or scheduler that is away is retried next pass.
//
// Thread-compatible: one thread calls Tick(). Store/submitter/sink/gauge are
// not owned and must outlive the Analyzer.
#ifndef SERVICES_ANALYZER_ANALYZER_H_
#define SERVICES_ANALYZER_ANALYZER_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <prometheus/gauge.h>
#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "services/analyzer/alerts.h"
#include "services/analyzer/bisect.h"
#include "services/analyzer/bisect_driver.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/clients.h"
#include "services/analyzer/decay.h"
#include "services/analyzer/detect.h"
#include "services/analyzer/groups.h"
#include "services/analyzer/rerun.h"
#include "services/analyzer/result_gauges.h"
#include "services/analyzer/series.h"
#include "services/analyzer/store.h"
#include "services/analyzer/top_up.h"

namespace farm::analyzer {

// Per (platform, workload, params): the commits a matrix measured there.
using OwnCommits =
    std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>>;

struct AnalyzerOptions {
  DetectOptions detect;
  // The `decay` finding: a run's own series falling within it (decay.h).
  DecayOptions decay;
  BisectOptions bisect;
  // A matrix's series are extended with the newest this many other analysed
  // matrices that measured its cells (AnalyzerStore::HistorySamples).
  int history_matrices = 100;
  absl::Duration alert_resend = absl::Seconds(60);
  // How long a resolved alert keeps being re-sent (every alert_resend).
  absl::Duration resolved_resend = absl::Minutes(15);
  // Length of the silence of an acknowledged regression (expired earlier
  // when it is re-opened or closed).
  absl::Duration silence_for = absl::Hours(24 * 365);
  // Improvements are detected, confirmed and recorded; bisecting them costs
  // runs, so only on request.
  bool bisect_improvements = false;
  // Extra priority within the confirm/bisect bands of the scheduler.
  int priority = 0;
  // workload -> its primary metrics, replacing the derivation from samples.
  PrimaryOverrides primary_metrics;
  // What alerts carry (severity of secondary metrics, report link, ...).
  AlertOptions alert;
  // Bisect confirmed secondary-metric regressions too (costs runs).
  bool bisect_secondary = false;
  // Regression groups (groups.h): one bisect and one alert for the
  // regressions found together over overlapping ranges.
  GroupOptions groups;
};

// The open-regression gauges, one per metric rank, and the latest-result
// gauges fed by every analysed matrix; any may be null.
struct OpenGauges {
  prometheus::Gauge* primary = nullptr;
  prometheus::Gauge* secondary = nullptr;
  ResultGauges* results = nullptr;
};

// The regression's note recording its rank, e.g. "primary metric of
// iozone-nfsrdma" or "secondary metric: rcache_hit_rate is not a primary
// metric of iozone-nfsrdma (throughput, throughput_kb_s); alerted as info,
// not bisected".
std::string RankNote(const Finding& f, const std::set<std::string>& workload_primary,
                     const AnalyzerOptions& options);
// The note of a mode-change finding (mode_change.h): "mode_changed: the runs
// of B report effective mode strict where those of A report lazy, for
// requested lazy; bisected on the effective mode".
std::string ModeChangeNote(const Finding& f);

class Analyzer final {
 public:
  // `sink` and the gauges may be null (no alerts / no gauge).
  Analyzer(AnalyzerStore* store, JobSubmitter* submitter, AlertSink* sink, OpenGauges open,
           AnalyzerOptions options);
  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;

  // One pass. Keeps going after a failed item; returns the first error.
  // The first pass that reaches the store also restores the result gauges
  // from the latest analysed matrices, so a restarted analyzer's gauges are
  // not empty until new results come.
  absl::Status Tick();

  // Totals since start, for logs and tests.
  int matrices_analyzed() const { return matrices_analyzed_; }
  // Matrices marked as failed analysis by this analyzer.
  int matrices_failed() const { return matrices_failed_; }
  int submissions() const { return submissions_ + bisects_.submissions(); }

 private:
  // AnalyzeMatrix kept from the rest of the pass: a failure that would
  // recur (not a passing database or scheduler error) marks the matrix as
  // failed analysis with its reason (Matrix.analysis) so no pass reads it
  // again, and the pass goes on.
  absl::Status AnalyzeIsolated(const MatrixInfo& m);
  absl::Status AnalyzeMatrix(const MatrixInfo& m);
  // The series detection left out, logged once each with the matrix and the
  // reason and taken out of `series`, so classification never measures
  // them; as "<series>: <reason>" for the matrix's record.
  std::vector<std::string> Skipped(const MatrixInfo& m, const std::vector<SeriesFailure>& failed,
                                   std::vector<Series>& series);
  // Samples of the other analysed submissions that measured `own`'s cells.
  absl::StatusOr<std::vector<SampleRow>> HistoryOf(const MatrixInfo& m,
                                                   const std::vector<SampleRow>& own);
  absl::Status RestoreResultGauges();
  // The bulk's top-up of `m` (top_up.h): submits its matrices; returns the
  // requests they answer. `own`: the commits m measured, per cell.
  absl::StatusOr<std::vector<TopUpRequest>> TopUp(const MatrixInfo& m,
                                                  const std::vector<Series>& series,
                                                  const OwnCommits& own,
                                                  std::vector<SeriesFailure>* failed);
  // The regression row and bisect record of one finding of `m`, found in
  // `series`.
  absl::StatusOr<NewRegression> NewRegressionFor(const MatrixInfo& m, const Finding& f,
                                                 const PrimaryMetricMap& primary,
                                                 const std::vector<Series>& series);
  // The regression row of a decay within the runs of one commit of `m`:
  // confirmed by those runs, not re-run and not bisected.
  absl::StatusOr<NewRegression> NewDecayFor(const MatrixInfo& m, const DecayFinding& d,
                                            const PrimaryMetricMap& primary);
  absl::Status SendAlerts();
  absl::Status CheckFixes();
  absl::Status CheckFix(const FixCheckWork& w);
  absl::Status StartFixCheck(const FixCheckWork& w, const BisectState& bisect, int generation);
  absl::Status JudgeFix(const FixCheckWork& w, const BisectState& bisect,
                        const nlohmann::json& check_state);

  AnalyzerStore* store_;
  JobSubmitter* submitter_;
  AlertSink* sink_;
  OpenGauges open_;
  const AnalyzerOptions options_;
  int matrices_analyzed_ = 0;
  int matrices_failed_ = 0;
  bool result_gauges_restored_ = false;
  int submissions_ = 0;  // fix checks'; the bisects' are counted by bisects_
  GroupGate group_gate_;
  BisectDriver bisects_;
};

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_ANALYZER_H_
