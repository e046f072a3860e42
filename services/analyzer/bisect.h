// Bisection planner and confirmation check: pure state machines, no I/O.
//
// The planner holds the commit range [last_good, first_bad] of one series
// (catalog indices), reference samples of both ends, and every sample
// measured inside the range. It asks for runs (Next()), is fed their values
// (AddSamples()), and records each judgement as a step with its evidence.
//   * the midpoint of the current range is measured with few repeats first;
//   * it is judged against both references (two-sample tests: on Gaussian
//     or bimodal noise its mean against each reference's, with the run-to-run
//     variance pooled over the three samples; and its position between the
//     two references' location estimates; JudgeCommit): "good"/"bad" when
//     clear, otherwise a
//     weak verdict that triggers more repeats of the same commit (doubling up
//     to max_repeats); only at max_repeats is a weak verdict acted on, and it
//     stays marked "weak-*" in the record;
//     (with no run-to-run variance at all the position alone decides: a
//     commit is bad when more than half of the change is present);
//   * a commit significantly different from both references, with at least
//     the magnitude on either side of it, means the range holds more than
//     one change (verdict "split"): the range is split there and each part
//     is bisected to its own first bad commit, against its own references
//     (the part's ends); several culprits are reported, each with its share
//     of the total change;
//   * a commit that cannot be measured (its kernel does not build) is
//     skipped, as `git bisect skip` does (verdict "skip"): it is never a
//     candidate again, and the untested commit nearest the midpoint is
//     measured instead (the earlier one on a tie);
//   * a categorical series (BisectOptions::categorical: the effective
//     IOMMU mode) is judged by equality with the good reference, one run
//     per commit;
//   * a range stops when its last good and first bad are adjacent catalog
//     commits, or when only skipped commits lie between them (the first bad
//     is then one of those or the range's first bad); the bisect is done when
//     every range has stopped.
// Over a history graph (a catalog with merges: the second constructor) the
// steps are chosen as `git bisect` chooses them: the suspects are the
// ancestors of the current first bad that are not ancestors of a commit
// judged good, and the commit measured next is the suspect whose ancestors
// among the suspects best halve them (the earlier in catalog order on a tie).
// A culprit can then be a commit inside a merged branch, or the merge itself
// when both of its parents are good. Where the range is a plain chain the
// first constructor's midpoint rule applies, which picks the same commits.
// The whole state round-trips through JSON so a restarted analyzer resumes
// exactly where it stopped.
//
// Thread-compatible: one owner at a time. Copyable value type.
#ifndef SERVICES_ANALYZER_BISECT_H_
#define SERVICES_ANALYZER_BISECT_H_

#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/storage/analyzer_rows.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {

struct BisectOptions {
  int initial_repeats = 6;
  int max_repeats = 48;
  int confirm_repeats = 8;
  double alpha = 0.01;
  double magnitude = 0.03;
  int max_steps = 64;
  // Adaptive confirmation (EvaluateConfirmation): an undecided result is
  // re-run with doubled repeats per commit up to max_confirm_repeats; the
  // magnitude is judged on the interval at interval_level.
  int max_confirm_repeats = 128;
  double interval_level = 0.99;
  // The series is categorical (the effective IOMMU mode, mode_change.h):
  // every run states its value exactly, so one run judges a commit, which
  // is good when its most common value is the good reference's and bad
  // otherwise; no test, no weak verdicts, no split.
  bool categorical = false;
};

// A step's judgement and a culprit are the rows the store writes
// (bisect_steps, bisect_culprits).
using storage::BisectStepRecord;
using storage::Culprit;

// A commit of a bisect over a history graph: catalog index, id, and the
// catalog indices of its parents among the bisect's commits.
struct BisectCommit {
  int index = 0;
  std::string id;
  std::vector<int> parents;
};

struct BisectRequest {
  int commit_index = 0;
  std::string commit_id;
  int repeats = 0;  // additional runs wanted
};

class BisectPlanner {
 public:
  // commit_ids: catalog ids of indices last_good..first_bad, in order
  // (commit_ids.front() is last_good). REQUIRES: first_bad > last_good
  // (FARM_DCHECK).
  BisectPlanner(std::vector<std::string> commit_ids, int last_good_index, int first_bad_index,
                BisectOptions options);
  // Over a history graph: `commits` are the good end and every ancestor of
  // the bad end that is not one of the good end (the bad end included),
  // each with its parents among them. REQUIRES: both ends among `commits`
  // and good_index != bad_index (FARM_DCHECK).
  BisectPlanner(std::vector<BisectCommit> commits, int good_index, int bad_index,
                BisectOptions options);

  // Adds measured values of a commit in the range (references included) and
  // advances as far as the evidence allows.
  void AddSamples(int commit_index, std::span<const double> values);
  // The commit cannot be measured (its kernel does not build): records a
  // "skip" step, never proposes it again, and advances. Only a commit strictly
  // inside the current range can be skipped (a reference cannot: there would
  // be nothing to judge against); false, and nothing changed, otherwise.
  bool Skip(int commit_index);

  // The runs needed next; nullopt when done.
  std::optional<BisectRequest> Next() const { return pending_; }
  bool Done() const { return done_; }
  bool Failed() const { return failed_; }
  // The culprit with the largest share when done (the range being bisected
  // before that).
  int LastGoodIndex() const { return lo_; }
  int FirstBadIndex() const { return hi_; }
  // The references the current part's steps are judged against.
  int GoodReferenceIndex() const { return good_ref_; }
  int BadReferenceIndex() const { return bad_ref_; }
  // Every culprit found, in commit order; one unless the range was split.
  std::vector<Culprit> Culprits() const;
  const std::string& CommitId(int index) const;
  // True when some verdict on the path was weak (acted on at max_repeats).
  bool UsedWeakVerdict() const { return used_weak_; }
  const std::vector<BisectStepRecord>& Steps() const { return steps_; }
  // Number of runs requested so far (references excluded).
  int RunsRequested() const { return runs_requested_; }

  std::string ToJson() const;
  static absl::StatusOr<BisectPlanner> FromJson(const std::string& json);

 private:
  BisectPlanner() = default;
  void Advance();
  // Asks for the runs a reference still lacks; false when both have enough.
  bool RequestReferences();
  // The commit of the current range to measure next: the one nearest its
  // midpoint that is not skipped (over a graph: the best halving suspect);
  // -1 when none is left.
  int Candidate() const;
  int GraphCandidate() const;
  // Over a graph: the ancestors of `of` among the bisect's commits (itself
  // included), and the suspects, ancestors of hi_ but of no known good.
  std::set<int> AncestorsOf(int of) const;
  std::set<int> Suspects() const;
  // Over a graph: the last good of a culprit at hi_ (its first parent when
  // that is known good, the good reference when its parents are before the
  // range, else the last commit judged good).
  int GraphLastGood() const;
  // Judges `index` from its samples and moves the range's bounds; false
  // when it asked for runs instead (pending_ set).
  bool JudgeAndMove(int index);
  // JudgeAndMove's rule for a categorical series, once `index` has its runs.
  void JudgeByValue(int index);
  // The last step when it is still "pending".
  const BisectStepRecord* OpenStep() const;
  // The pending step at `index`, added when the open one is not at it.
  BisectStepRecord& OpenStepAt(int index);
  // Asks for `more` runs of `index`, which has `have` samples.
  void RequestRuns(int index, int have, int more);
  const std::vector<double>& SamplesOf(int index) const;
  // The current range has stopped: records its culprit, moves to the next
  // part; false when none is left.
  bool FinishRange();

  // A part of the range still to bisect: references and current bounds.
  struct Part {
    int good_ref = 0;
    int bad_ref = 0;
    int lo = 0;
    int hi = 0;
    std::vector<int> goods;  // over a graph: the commits known good at its start
  };

  BisectOptions options_;
  int base_ = 0;  // catalog index of commit_ids_[0]
  std::vector<std::string> commit_ids_;
  int good_ref_ = 0;  // catalog indices of the reference commits
  int bad_ref_ = 0;
  int lo_ = 0;
  int hi_ = 0;
  std::map<int, std::vector<double>> samples_;
  std::set<int> skipped_;  // catalog indices that cannot be measured
  std::vector<BisectStepRecord> steps_;
  std::optional<BisectRequest> pending_;
  bool done_ = false;
  bool failed_ = false;
  bool used_weak_ = false;
  int runs_requested_ = 0;
  std::vector<Part> parts_;  // parts waiting, bisected after the current one
  std::vector<Culprit> culprits_;
  // Over a history graph (graph_ true): its commits by catalog index, the
  // whole bisect's ends, the commits known good in the current part and
  // those it started with.
  bool graph_ = false;
  std::map<int, BisectCommit> graph_commits_;
  int graph_good_ = 0;
  int graph_bad_ = 0;
  std::set<int> goods_;
  std::set<int> part_goods_;
};

// Judges one commit's samples against the good and bad references.
struct Judgement {
  std::string verdict;  // "good", "bad", "weak-good", "weak-bad"
  double position = 0;  // 0 = at good mean, 1 = at bad mean
  TwoSampleResult vs_good;
  TwoSampleResult vs_bad;
};
Judgement JudgeCommit(std::span<const double> good, std::span<const double> bad,
                      std::span<const double> x, double alpha);

// The confirmation step: last good and first bad re-run interleaved with
// more repeats. Confirmed when the difference is significant and in the
// expected direction (sign of expected_relative_change) and its interval
// reaches the magnitude threshold. Rejected when the interval lies under the
// magnitude, when the difference is significant the other way, or when
// max_confirm_repeats per commit leave it undecided; otherwise (the other
// direction without significance included: a run far off in a few repeats
// flips a small sample's sign) it asks for more repeats (kMoreRepeats:
// double them); see DecideWithRepeats.
// How many times a confirmation may judge its data: at confirm_repeats and at
// each doubling up to max_confirm_repeats. Each look decides at alpha / looks
// (Bonferroni over the looks), both ways: the test at alpha / looks, so that
// sampling until decided keeps the false-confirmation rate of one candidate
// under alpha, and the magnitude on the interval at 1 - (1 - interval_level)
// / looks, so that a change of just the magnitude is not rejected as smaller
// more often for having been looked at several times. The Confirmation's
// interval is the one at interval_level.
int ConfirmationLooks(const BisectOptions& options);

// The comparison is the one the two samples' noise calls for (stats.h
// CompareByNoise: Welch on means, Yuen's trimmed means under outliers); so
// is a fix check's, and a bisect step's (JudgeCommit, from the noise of the
// references and the commit together), whose means are compared against the
// variance pooled over the three (stats.h PooledContrast).
struct Confirmation {
  bool confirmed = false;
  stats::TwoSampleMethod method = stats::TwoSampleMethod::kWelch;
  SampleDecision decision = SampleDecision::kReject;
  TwoSampleResult test;
  Interval interval;
};
Confirmation EvaluateConfirmation(std::span<const double> good, std::span<const double> bad,
                                  double expected_relative_change, const BisectOptions& options);

// Is a regression marked fixed back to its old level? `good` are repeats of
// its last good commit, `later` of a later commit, re-run together;
// `regression_change` the confirmed change (its sign is the bad direction).
// Not back when `later` is still significantly worse than `good` (p < alpha,
// same direction) by an interval that reaches the magnitude; back otherwise
// (a later commit within the magnitude of the old level, or better).
struct FixCheck {
  bool back = false;
  TwoSampleResult test;  // good vs later; relative_change: later vs good mean
  Interval interval;
};
FixCheck JudgeFixCheck(std::span<const double> good, std::span<const double> later,
                       double regression_change, const BisectOptions& options);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_BISECT_H_
