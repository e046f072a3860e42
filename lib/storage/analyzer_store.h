// AnalyzerStore: what farm-analyzer reads and writes in the farm's database,
// behind an interface so the engine (services/analyzer/analyzer.h) knows no
// SQL and links no database driver. Implementations: libpqxx
// (lib/storage/pg/pg_analyzer_store.h) and in memory
// (lib/storage/memory/memory_analyzer_store.h); the contract suite
// (lib/storage/contract/analyzer_store_contract.cc) holds both to the same
// behaviour.
//
// The schema is the scheduler's (lib/storage/pg/migrations.cc): the analyzer
// reads matrices, jobs, results, catalog_commits and agents (their kernel
// offers), and writes regressions, bisects, bisect_steps, bisect_culprits,
// alerts and analyzer_state. Enum columns hold iommufarm.v1 enum numbers
// (docs/analyzer.md describes the passes).
//
// Contract:
//  - Thread-safe (every call is its own transaction).
//  - Each mutating call is one transaction, so a crash leaves either the old
//    or the new state: detection results and the "matrix analysed" marker are
//    written together; a bisect's state, steps and regression row likewise.
//  - JSON values (state_json, params_json, annotations) read back equal as
//    JSON, not necessarily as text (PostgreSQL's jsonb normalises them).
//  - Errors: kUnavailable when the database is unreachable, kNotFound for
//    unknown ids, kAlreadyExists for a matrix analysed twice, kInternal
//    otherwise.
#ifndef LIB_STORAGE_ANALYZER_STORE_H_
#define LIB_STORAGE_ANALYZER_STORE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/storage/analyzer_rows.h"

namespace farm::storage {

struct MatrixInfo {
  int64_t id = 0;
  std::string catalog;
  bool analysis_bisect = false;
  iommufarm::v1::Executor executor = iommufarm::v1::EXECUTOR_EMULATOR;
  std::string spec_yaml;  // matrices.spec_yaml (its analysis.confirm)
};

struct CommitRow {
  int index = 0;
  std::string id;
  std::string subject;
  std::vector<std::string> parents;  // CatalogCommit.parents: empty = the previous commit
};

// What a series measured, apart from its metric and mode: the cells whose
// history a matrix's series extend.
struct HistoryCell {
  std::string platform;
  std::string workload;
  std::string params = "{}";  // SampleRow.params
};

// True when `s` is of one of `cells`.
inline bool InCells(const std::vector<HistoryCell>& cells, const SampleRow& s) {
  for (const HistoryCell& c : cells) {
    if (c.platform == s.platform && c.workload == s.workload && c.params == s.params) return true;
  }
  return false;
}

// The job cell a bisect re-runs: enough to write a matrix spec for it.
struct SeriesSpec {
  std::string catalog;
  std::string platform;
  std::string workload;
  std::string params_json = "{}";     // jobs.params of the bulk jobs
  std::string model_set_json = "{}";  // the matrix spec's `set:` (MatrixSpecSetJson)
  // The matrix spec's `labels:`: reruns of a real series go to agents
  // holding them, as the series' own runs did.
  std::string labels_json = "{}";
  // The matrix spec's `kernel_config:` (proto::EncodeKernelConfig); "" for
  // the default. A rerun builds its kernels with it again.
  std::string kernel_config;
  iommufarm::v1::Executor executor = iommufarm::v1::EXECUTOR_EMULATOR;
  std::string metric;  // Sample.metric
  std::string phase;   // Sample.phase
  std::string mode;    // "strict", ...
  bool overhead = false;
};

// What a regressions row records of a detected change: the analyzer's
// finding (services/analyzer/detect.h Finding) without the evidence it was
// derived from.
struct RegressionFinding {
  std::string platform;
  std::string workload;
  std::string params = "{}";  // canonical JSON (SampleRow.params)
  std::string metric;         // "metric" or "metric/phase"
  std::string mode;           // "strict", ...
  bool overhead_series = false;
  iommufarm::v1::ChangeClass change_class = iommufarm::v1::CHANGE_CLASS_UNSPECIFIED;
  bool regression = true;  // false: an improvement
  int last_good_index = 0;
  std::string last_good;
  int first_bad_index = 0;
  std::string first_bad;
  double magnitude = 0;  // relative change of the finding's series
  double p_value = 1;
  // The finding's metric in every mode (regressions.per_mode keeps the plain
  // modes; overhead ratios are not stored).
  struct ModeChange {
    std::string mode;
    bool overhead = false;
    double before = 0;
    double after = 0;
    double relative_change = 0;
    double p_value = 1;
  };
  std::vector<ModeChange> per_mode;
};

// A new regression (or improvement) and the bisect record that drives its
// confirmation.
struct NewRegression {
  RegressionFinding finding;
  std::string series_key;  // dedup: no second open regression with this key
  iommufarm::v1::RegressionState state = iommufarm::v1::REGRESSION_STATE_SUSPECTED;
  std::string metric_rank = "primary";       // regressions.metric_rank: "primary" | "secondary"
  std::vector<std::string> primary_metrics;  // regressions.primary_metrics (the workload's)
  std::string note;                          // regressions.note: a human sentence on the rank
  std::string bisect_state_json;             // analyzer_state 'bisect:<id>' (planner etc.)
  // regressions.kind: "change" (its bisect record runs: confirmation, then
  // bisection) or "decay" (the metric fell within the runs of one commit,
  // last_good == first_bad; decided by those runs, so its bisect record is
  // written done and nothing is re-run).
  std::string kind = "change";
  // Its regression group: > 0 an open group it joins (whose range is
  // narrowed to the overlap), < 0 a group this RecordAnalysis opens (the
  // findings with one negative number share it), 0 none. A finding skipped
  // as known opens or joins nothing.
  int64_t group_id = 0;
  double strength = 0;  // regressions.strength: its change over its noise
};

// A regression group (regression_groups): regressions found within the
// analyzer's group window whose commit ranges overlap. One bisect, of the
// leader, names the culprit of all; one alert stands for all.
struct RegressionGroup {
  int64_t id = 0;
  std::string catalog;
  absl::Time opened_at;  // the window starts here
  // The overlap of the members' (last good, first bad] ranges.
  int last_good_index = 0;
  std::string last_good;
  int first_bad_index = 0;
  std::string first_bad;
  int64_t leader_id = 0;  // the member bisected; 0 while none is
  // "open" (no member bisecting yet), "bisecting", "culprit" (the leader's
  // bisect named culprit_id), "failed" (it named none).
  std::string state = "open";
  std::string culprit_id;
  struct Member {
    int64_t regression_id = 0;
    int state = 0;  // iommufarm.v1.RegressionState
    double strength = 0;
    std::string last_good;
    int last_good_index = 0;
    std::string first_bad;
    int first_bad_index = 0;
    std::string bisect_state;  // bisects.state: "running", "done", "failed"
    std::string culprit_id;
    std::string culprit_subject;
  };
  std::vector<Member> members;  // in regression id order
};

// A bisect the analyzer is still driving.
struct ActiveBisect {
  int64_t bisect_id = 0;
  int64_t regression_id = 0;
  std::string state_json;
};

// One write of a bisect's progress.
struct BisectUpdate {
  int64_t bisect_id = 0;
  int64_t regression_id = 0;
  std::string state_json;
  std::string bisect_state;  // "running", "done", "failed"
  std::string last_good;
  std::string first_bad;
  std::string culprit_id;
  std::string culprit_subject;
  std::optional<iommufarm::v1::RegressionState> regression_state;  // new, if changed
  std::optional<double> magnitude;  // confirmed magnitude, if re-measured
  std::optional<double> p_value;
  // Every culprit when the bisect is done (bisect_culprits); written only
  // when non-empty, replacing what was there.
  struct CulpritRow {
    Culprit culprit;
    std::string last_good;
    std::string subject;
  };
  std::vector<CulpritRow> culprits;
  // Full list of step rows (step 0 = confirmation); upserted by step.
  struct Step {
    BisectStepRecord record;
    int64_t matrix_id = 0;
    // The executor the step's runs used (bisect_steps.executor, and
    // real_kernel for a real tool): "emulator", or a real tool on real
    // kernels ("dma-map-bench", "fio", "iozone"); "" leaves both as they are.
    std::string executor;
  };
  std::vector<Step> steps;
  // The confirmation step's executor ("emulator", "fio", "iozone"), its
  // first matrix and note (regressions.confirmed_by, confirm_matrix_id,
  // confirm_note); "" / 0 leave the columns as they are.
  std::string confirmed_by;
  int64_t confirm_matrix_id = 0;
  std::string confirm_note;
};

// What an alert is built from.
struct AlertWork {
  int64_t regression_id = 0;
  int state = 0;                // iommufarm.v1.RegressionState
  std::string kind = "change";  // regressions.kind
  bool bisect_done = false;
  std::string platform, workload, metric, mode_name, catalog;
  std::string params = "{}";  // regressions.params, canonical JSON
  bool overhead = false;
  int change_class = 0;
  double magnitude = 0;
  std::string last_good, first_bad, culprit_id, culprit_subject;
  std::string culprit_author;  // the culprit's catalog entry's author ('' unknown)
  // Every culprit of the bisect (bisect_culprits) with its share, in commit
  // order; culprit_id is the one with the largest share.
  struct NamedCulprit {
    std::string commit_id;
    double share = 0;
  };
  std::vector<NamedCulprit> culprits;
  int bisect_steps = 0;
  // regressions.metric_rank == "primary" (rows written before ranking
  // existed count as primary) and regressions.primary_metrics, comma-separated.
  bool primary_metric = true;
  std::string primary_metrics;
  bool alert_exists = false;
  bool alert_firing = false;
  std::string starts_at;                // RFC 3339, when an alert row exists
  std::string ends_at;                  // RFC 3339, once resolved (re-sent as it was)
  std::string silence_id;               // regressions.silence_id: Alertmanager's, or ""
  std::string labels_json = "{}";       // as last sent
  std::string annotations_json = "{}";  // as last sent
  double seconds_since_sent = 1e18;
  // analyzer_state 'bisect:<bisect id>' (the cell the finding is in, for
  // the alert's reproduce command); "" when the regression has no bisect.
  std::string bisect_state_json;
  int64_t group_id = 0;  // regressions.group_id, 0: none
  double strength = 0;   // regressions.strength
};

// A regression marked fixed whose re-measurement is pending or running.
struct FixCheckWork {
  int64_t regression_id = 0;
  std::string fix_check;          // "" (not started) or "checking"
  std::string bisect_state_json;  // analyzer_state 'bisect:<id>' (series, range)
  std::string check_state_json;   // analyzer_state 'fixcheck:<id>', "" if none
};

// How many matrices MatricesToAnalyze returns at most: one analyzer pass
// stays short, and the next pass takes the rest.
inline constexpr size_t kAnalyzeBatch = 20;

class AnalyzerStore {
 public:
  virtual ~AnalyzerStore() = default;
  // Bulk matrices whose jobs are all terminal and that were not analysed,
  // in id order, at most kAnalyzeBatch per call.
  virtual absl::StatusOr<std::vector<MatrixInfo>> MatricesToAnalyze() = 0;
  // For each (platform, workload) a bulk job measured, the newest analysed
  // bulk matrix that measured it; those matrices in id order, each once:
  // replayed oldest first they give the result gauges a restarted analyzer
  // had (every series from its latest analysed matrix).
  virtual absl::StatusOr<std::vector<MatrixInfo>> LatestAnalysedMatrices() = 0;
  // Every numeric sample of the accepted results (the latest attempt of
  // each succeeded job) of these matrices, in job order.
  virtual absl::StatusOr<std::vector<SampleRow>> Samples(const std::vector<int64_t>& matrices) = 0;
  // The same, of the bulk jobs of `executor` in `catalog` that measured one
  // of `cells`, in every analysed matrix but `except_matrix` whose spec's
  // `set:` is except_matrix's (other model keys measure something else):
  // the history a matrix's series extend, whichever submission measured it.
  // Of the newest `max_matrices` such matrices (by id), so the read stays
  // bounded as the farm's history grows.
  virtual absl::StatusOr<std::vector<SampleRow>> HistorySamples(
      const std::string& catalog, iommufarm::v1::Executor executor,
      const std::vector<HistoryCell>& cells, int64_t except_matrix, int max_matrices) = 0;
  // True when every job of every listed matrix is terminal.
  virtual absl::StatusOr<bool> MatricesTerminal(const std::vector<int64_t>& matrices) = 0;
  // jobs.failure_reason of every FAILED job of these matrices, in job id
  // order (why a step gave no values: e.g. its kernel did not build).
  virtual absl::StatusOr<std::vector<std::string>> FailureReasons(
      const std::vector<int64_t>& matrices) = 0;
  // Catalog commits with lo <= index <= hi, in order; kNotFound when none.
  virtual absl::StatusOr<std::vector<CommitRow>> Commits(const std::string& catalog, int lo,
                                                         int hi) = 0;
  // params / model_set / executor of a bulk job of the cell, for
  // resubmission; kNotFound when the matrix has no job of the cell. `params`
  // is the cell's workload params as SampleRow.params spells them: two
  // workloads of one name are two cells.
  virtual absl::StatusOr<SeriesSpec> Cell(int64_t matrix_id, const std::string& platform,
                                          const std::string& workload,
                                          const std::string& params) = 0;
  // Records the findings of a matrix and marks it analysed, atomically.
  // A finding joins (is skipped for) an open or ignored regression of the
  // same change: same catalog, platform, workload with its params, metric
  // and direction, and an overlapping commit range, whichever mode led it
  // (pooled with more submissions, another mode may show the change most);
  // or one whose series_key it has. `skipped_series` ("<series>: <reason>")
  // are the series the analysis left out, kept with the marker for
  // Matrix.analysis. Returns the ids of the bisects created.
  virtual absl::StatusOr<std::vector<int64_t>> RecordAnalysis(
      int64_t matrix_id, const std::string& catalog, const std::vector<NewRegression>& found,
      const std::vector<std::string>& skipped_series) = 0;
  // Marks a matrix whose analysis cannot finish (not for a passing database
  // error) as analysed with `reason`, so no pass reads it again; kAlreadyExists
  // when it is marked already.
  virtual absl::Status RecordAnalysisFailure(int64_t matrix_id, const std::string& reason) = 0;
  // Running bisects with their analyzer state, in bisect id order.
  virtual absl::StatusOr<std::vector<ActiveBisect>> ActiveBisects() = 0;
  // A person's triage (acknowledged, fixed, ...) is never overwritten by
  // update.regression_state.
  virtual absl::Status SaveBisect(const BisectUpdate& update) = 0;
  // Regressions that have, or should have, an alert: open ones, resolved
  // ones whose alert was resolved less than `resolved_window` ago (re-sent so
  // that an Alertmanager restart does not lose the resolution), and any with
  // a silence to remove.
  virtual absl::StatusOr<std::vector<AlertWork>> AlertCandidates(
      absl::Duration resolved_window) = 0;
  // Records the regression's Alertmanager silence ("": none).
  virtual absl::Status SetSilence(int64_t regression_id, const std::string& silence_id) = 0;
  // Records that the alert was posted (firing or resolved) with its content.
  virtual absl::Status MarkAlertSent(int64_t regression_id, bool firing,
                                     const std::string& labels_json,
                                     const std::string& annotations_json) = 0;
  // Confirmed or acknowledged regressions (direction regression), by the
  // rank of their metric.
  struct OpenCounts {
    int64_t primary = 0;
    int64_t secondary = 0;
  };
  virtual absl::StatusOr<OpenCounts> CountOpenRegressions() = 0;

  // Regressions marked fixed whose check (is a later commit back to the old
  // level?) is not finished, with their bisect's planner state.
  virtual absl::StatusOr<std::vector<FixCheckWork>> FixChecks() = 0;
  // The catalog's commit with the highest index; kNotFound when empty.
  virtual absl::StatusOr<CommitRow> LatestCommit(const std::string& catalog) = 0;
  // The kernel offers (proto::OffersFor) of the capability for `executor`
  // of every agent that sent a heartbeat within `live`, in agent id order.
  virtual absl::StatusOr<std::vector<iommufarm::v1::KernelOffer>> LiveOffers(
      iommufarm::v1::Executor executor, absl::Duration live) = 0;
  // The capabilities of every registered agent, connected or not (one entry
  // per agent, in agent id order): the agents the scheduler's submit plans
  // kernel builds with (scheduler/kernel_builds.h).
  virtual absl::StatusOr<std::vector<std::vector<iommufarm::v1::Capability>>>
  AgentCapabilities() = 0;
  // Writes the check's state (analyzer_state 'fixcheck:<regression>') and
  // the regression's fix_check columns in one transaction; a regression no
  // longer fixed (re-opened meanwhile) keeps its columns. A non-empty
  // `reopen_note` also re-opens the fixed regression (CONFIRMED, so its
  // alert fires again) and appends the note to its note, on a line of its
  // own.
  virtual absl::Status SaveFixCheck(int64_t regression_id, const std::string& fix_check,
                                    const std::string& commit, double change,
                                    const std::string& state_json,
                                    const std::string& reopen_note) = 0;

  // The groups of `catalog` opened no longer than `window` ago (by the
  // store's clock), with their members, in id order: those a new finding
  // may join.
  virtual absl::StatusOr<std::vector<RegressionGroup>> OpenGroups(const std::string& catalog,
                                                                  absl::Duration window) = 0;
  // The group of a regression, with its members; kNotFound when it is in
  // none.
  virtual absl::StatusOr<RegressionGroup> GroupOf(int64_t regression_id) = 0;
  // Records a group's leader (0: none), state and culprit.
  virtual absl::Status SaveGroup(int64_t group_id, int64_t leader_id, const std::string& state,
                                 const std::string& culprit_id) = 0;
  // Moves a regression out of its group into a new group of its own (its
  // range, opened now, itself the leader, state "bisecting"); returns the new
  // group's id. kNotFound for an unknown regression.
  virtual absl::StatusOr<int64_t> SplitFromGroup(int64_t regression_id) = 0;
};

// "off" <-> 1 ... (iommufarm.v1.IommuMode numbers); unknown -> 0 / "".
int ModeNumber(const std::string& mode);
std::string ModeName(int mode);
// A stored iommufarm.v1.Executor number; one outside the enum reads as
// EXECUTOR_UNSPECIFIED (the emulator).
iommufarm::v1::Executor ExecutorFromNumber(int number);
// The `set:` map of a matrix spec as a JSON object ("{}" when absent), what
// SeriesSpec.model_set_json carries: jobs.model_set also holds each commit's
// catalog settings, which must not be carried to other commits.
// kInvalidArgument when the YAML cannot be read.
absl::StatusOr<std::string> MatrixSpecSetJson(const std::string& spec_yaml);
// A map key of a matrix spec ("set", "labels") as a JSON object ("{}" when
// absent); kInvalidArgument when the YAML cannot be read.
absl::StatusOr<std::string> MatrixSpecMapJson(const std::string& spec_yaml, const char* key);
// What a series takes from its matrix's spec: model_set_json (its `set:`),
// labels_json (its `labels:`) and kernel_config (its `kernel_config:`).
absl::Status FillFromMatrixSpec(const std::string& spec_yaml, SeriesSpec* s);
// regressions.per_mode of a finding: its plain modes (no overhead ratios) as
// [{"mode": <IommuMode number>, "before", "after", "relative_change",
// "p_value"}], numbers to six significant digits.
std::string PerModeJson(const RegressionFinding& finding);

}  // namespace farm::storage

#endif  // LIB_STORAGE_ANALYZER_STORE_H_
