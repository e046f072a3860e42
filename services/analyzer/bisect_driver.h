// BisectDriver: moves one regression's bisect record a step further per
// Advance(), as the state machine of docs/analyzer.md:
//
//   confirm:  choose the confirmation's executor (once) -> submit the
//             round's interleaved matrices -> read the verdict when they are
//             terminal: suggestive -> next round (doubled repeats); not
//             reproduced -> done (REJECTED); confirmed -> CONFIRMED, and
//             done when the range is one commit or no bisect is wanted, else
//   (a mode change, BisectState::categorical: confirmed at once by the
//   effective modes its runs stated, then bisected on that mode, one run
//   per commit)
//   bisect:   (over the catalog's history graph when the range holds merges:
//             the suspects are the first bad's ancestors that are not the last
//             good's, BisectPlanner's second constructor)
//             read the pending step's values -> ask the planner for the next
//             commit and submit its step matrix -> finish (culprits) when the
//             planner is done or three steps in a row gave no value. A step
//             whose jobs all failed because the commit's kernel does not
//             build or does not boot on the host (proto/failure_marks.h) is
//             skipped (planner Skip, verdict "skip"), not a step without
//             value; a part that ends with only skipped commits before its
//             first bad names them all in its culprit's subject
//             ("first bad is one of: A B C (A B skipped: do not build or boot)").
//
// Every move is written with AnalyzerStore::SaveBisect (state, steps,
// culprits, regression columns) in one transaction; submissions carry the
// idempotency key analyzer/b<bisect id>/<seq>, so a move repeated after a
// crash submits nothing twice.
//
// Thread-compatible. The store and submitter are not owned and must outlive
// the driver.
#ifndef SERVICES_ANALYZER_BISECT_DRIVER_H_
#define SERVICES_ANALYZER_BISECT_DRIVER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "services/analyzer/bisect.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/clients.h"
#include "services/analyzer/groups.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

class BisectDriver final {
 public:
  // `priority`: extra priority of every submitted matrix within its band.
  // `groups` (not owned, may be null): a confirmed member of a regression
  // group bisects only when it leads it (groups.h); else it waits
  // (BisectPhase::kWait) and takes the leader's culprit.
  BisectDriver(AnalyzerStore* store, JobSubmitter* submitter, BisectOptions options, int priority,
               GroupGate* groups = nullptr);
  BisectDriver(const BisectDriver&) = delete;
  BisectDriver& operator=(const BisectDriver&) = delete;

  absl::Status Advance(const ActiveBisect& bisect);

  // Matrices submitted since construction.
  int submissions() const { return submissions_; }

 private:
  // One Advance(): the record as read, and the write it builds up.
  struct Move {
    int64_t bisect_id = 0;
    BisectState st;
    BisectUpdate u;
  };
  // The confirmation's cell and options, once its executor is chosen.
  struct ConfirmPlan {
    bool real = false;
    // The confirmation measured the finding's own series (an emulator
    // finding on the emulator, a real one by its own executor): its figures
    // are the regression's magnitude and the bisect's reference samples.
    bool own_series = true;
    SeriesSpec cell;
    BisectOptions options;
  };

  absl::Status AdvanceConfirmation(Move& m);
  // A mode change is confirmed by what its runs stated: CONFIRMED at once,
  // and the bisect measures both ends again as its references.
  absl::Status ConfirmModeChange(Move& m);
  absl::Status ChooseConfirmExecutor(Move& m);
  absl::StatusOr<std::string> WhyNotReal(const SeriesSpec& real,
                                         const std::vector<std::string>& commits,
                                         std::string* kernels);
  absl::StatusOr<ConfirmPlan> PlanConfirmation(const BisectState& st) const;
  absl::Status SubmitConfirmRounds(Move& m, const ConfirmPlan& plan);
  absl::Status RefuseRealConfirmation(Move& m, const absl::Status& refused);
  absl::Status JudgeConfirmation(Move& m, const ConfirmPlan& plan);
  // After a confirmed regression: done at once, or the planner set up.
  absl::Status StartBisection(Move& m, const Confirmation& c, bool own_series,
                              std::span<const double> good, std::span<const double> bad);

  // A waiting member: its group's turn, asked again.
  absl::Status AdvanceWaiting(Move& m);
  absl::Status FollowGroup(Move& m, const GroupTurn& turn);

  absl::Status AdvanceBisection(Move& m);
  // The commits of a step's matrix: the step's, and for a real series its
  // references around it.
  static std::vector<std::string> StepCommits(const SeriesSpec& series,
                                              const BisectPlanner& planner,
                                              const BisectRequest& req);
  // false while the pending step's matrices are not terminal.
  absl::StatusOr<bool> ReadStepValues(Move& m, BisectPlanner& planner);
  // The pending step gave no values: when every failed job of its matrices
  // failed because its commit's kernel did not build, the planner skips the
  // commit (true).
  absl::StatusOr<bool> SkipIfUnmeasurable(Move& m, BisectPlanner& planner);
  absl::Status SubmitStepMatrix(Move& m, const BisectPlanner& planner);
  void Finish(Move& m, const BisectPlanner& planner);

  absl::StatusOr<int64_t> Submit(Move& m, const SeriesSpec& cell, const std::string& what,
                                 const std::vector<std::string>& commits, int repeats,
                                 iommufarm::v1::JobKind kind);

  AnalyzerStore* store_;
  JobSubmitter* submitter_;
  const BisectOptions options_;
  const int priority_;
  GroupGate* const groups_;
  int submissions_ = 0;
};

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_BISECT_DRIVER_H_
