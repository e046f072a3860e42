// BisectState: everything the analyzer keeps about one regression's
// confirmation and bisection between ticks, stored as the JSON value of
// analyzer_state 'bisect:<bisect id>' (the fix check reads its series and
// range too).
//
// The JSON keys are the field names below; rows written by any earlier
// analyzer read back (keys added later have defaults: confirm_round 0,
// confirm_note "", no confirm_by = executor not chosen yet, no mode_before /
// mode_after = a performance finding, no confirm_kernels, no bisect_series =
// the bisect runs the finding's series).
//
// Thread-compatible value type.
#ifndef SERVICES_ANALYZER_BISECT_STATE_H_
#define SERVICES_ANALYZER_BISECT_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "services/analyzer/rerun.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

// Stored as "confirm", "bisect", "wait", "done". kWait: confirmed, its
// bisect wanted, waiting for its regression group's leader (groups.h).
enum class BisectPhase { kConfirm, kBisect, kWait, kDone };

struct CommitRef {
  int index = 0;  // catalog index
  std::string id;
};

struct BisectState {
  SeriesSpec series;  // the emulated cell the finding is in (the bisect runs it)
  bool regression = true;
  double expected_change = 0;  // the detected relative change (its sign: the bad direction)
  CommitRef last_good;
  CommitRef first_bad;
  bool do_bisect = false;               // bisect once confirmed (else stop at confirmation)
  std::string metric_rank = "primary";  // "primary" | "secondary"
  std::vector<std::string> primary_metrics;
  BisectPhase phase = BisectPhase::kConfirm;
  // Submissions so far: the idempotency key and seed of the next one.
  int seq = 0;

  // Confirmation. real_confirm: the spec's analysis.confirm (primary-metric
  // findings only). confirm_by: the executor chosen before the first matrix
  // (UNSPECIFIED: not chosen yet), with the reason in confirm_note when the
  // real one could not be; confirm_series: the real cell when it confirms.
  std::optional<RealConfirm> real_confirm;
  iommufarm::v1::Executor confirm_by = iommufarm::v1::EXECUTOR_UNSPECIFIED;
  std::string confirm_note;
  std::optional<SeriesSpec> confirm_series;
  // Where the real confirmation's kernels come from: "offered" (a live
  // agent offered them when it started) or "built" (none did; a registered
  // agent builds the catalog for the platform's architecture, so the
  // scheduler's submit asked for builds). "" before or on the emulator.
  std::string confirm_kernels;
  int confirm_round = 0;                  // repeats doubled this many times
  std::vector<int64_t> confirm_matrices;  // every round's, in submission order

  // Bisection. planner_json: BisectPlanner::ToJson ("" before the bisect);
  // pending_*: the step matrices being waited for and the commit they run;
  // empty_rounds: consecutive steps that gave no value (3 fail the bisect);
  // step_matrix: the first matrix of each planner step.
  // bisect_series: the cell the bisect runs when it is not `series`: the
  // real cell of a real confirmation of an emulator finding (its steps run
  // on real kernels, built for them when nobody offers them).
  std::optional<SeriesSpec> bisect_series;
  std::string planner_json;
  std::vector<int64_t> pending_matrices;
  int pending_index = -1;
  int empty_rounds = 0;
  std::map<int, int64_t> step_matrix;
  std::map<std::string, std::string> culprit_subjects;  // commit id -> subject, in the range

  // A mode-change finding (mode_change.h): the effective modes before and
  // after ("lazy", "strict"). Its confirmation and bisect judge the effective
  // mode the runs state, not a performance threshold. Empty for a
  // performance finding.
  std::string mode_before;
  std::string mode_after;
  bool categorical() const { return !mode_after.empty(); }

  const SeriesSpec& BisectCell() const { return bisect_series ? *bisect_series : series; }

  bool real() const {
    return confirm_by != iommufarm::v1::EXECUTOR_UNSPECIFIED &&
           confirm_by != iommufarm::v1::EXECUTOR_EMULATOR;
  }
};

std::string BisectStateToJson(const BisectState& state);
// kInternal naming the key when the text is not a bisect state.
absl::StatusOr<BisectState> BisectStateFromJson(std::string_view json);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_BISECT_STATE_H_
