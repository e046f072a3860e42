#include "services/analyzer/bisect_driver.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/base/check.h"
#include "proto/catalog_dag.h"
#include "proto/failure_marks.h"
#include "proto/names.h"
#include "services/analyzer/log.h"
#include "services/analyzer/rerun.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

// How recently an agent must have sent a heartbeat for its kernel offers to
// count when the executor of a confirmation is chosen.
constexpr absl::Duration kLiveAgent = absl::Minutes(2);

// Per commit and round of a real matrix's own confirmation.
constexpr int kRealConfirmRepeats = 5;

// Seeds kept below 2^31 so every reader of the matrix's YAML takes them as
// plain integers.
uint64_t SubmissionSeed(int64_t bisect_id, int seq) {
  return (static_cast<uint64_t>(bisect_id) * 7919u + static_cast<uint64_t>(seq) * 104729u) %
             2000000000u +
         1;
}

// The subject of a culprit whose part ended with only skipped commits
// before its first bad: every commit that can be the first bad.
std::string OneOfSubject(const BisectPlanner& planner, const Culprit& c) {
  std::vector<std::string> skipped;
  for (int i : c.skipped) skipped.push_back(planner.CommitId(i));
  return absl::StrCat("first bad is one of: ", absl::StrJoin(skipped, " "), " ", c.commit_id, " (",
                      absl::StrJoin(skipped, " "), " skipped: do not build or boot)");
}

// Step 0 of a bisect: the confirmation, recorded at the first bad commit.
BisectUpdate::Step ConfirmStep(const BisectState& st, const std::string& verdict, int repeats,
                               const TwoSampleResult& test, int64_t matrix_id) {
  BisectUpdate::Step s;
  s.record = BisectStepRecord{0,       st.first_bad.index, st.first_bad.id, verdict,
                              repeats, test.mean_b,        test.p_value,    test.relative_change};
  s.matrix_id = matrix_id;
  s.executor = ExecutorName(st.confirm_by);
  return s;
}

// The kernels a real confirmation ran on, as its note ends.
std::string KernelsNote(const BisectState& st) {
  if (st.confirm_kernels == "built") return "; kernels built for it";
  if (st.confirm_kernels == "offered") return "; kernels offered";
  return "";
}

absl::Status Save(AnalyzerStore* store, BisectState& st, BisectUpdate& u) {
  u.state_json = BisectStateToJson(st);
  return store->SaveBisect(u);
}

}  // namespace

BisectDriver::BisectDriver(AnalyzerStore* store, JobSubmitter* submitter, BisectOptions options,
                           int priority, GroupGate* groups)
    : store_(store),
      submitter_(submitter),
      options_(std::move(options)),
      priority_(priority),
      groups_(groups) {}

absl::Status BisectDriver::Advance(const ActiveBisect& b) {
  absl::StatusOr<BisectState> st = BisectStateFromJson(b.state_json);
  if (!st.ok()) {
    return absl::Status(st.status().code(),
                        absl::StrCat("bisect ", b.bisect_id, ": ", st.status().message()));
  }
  Move m;
  m.bisect_id = b.bisect_id;
  m.st = *std::move(st);
  m.u.bisect_id = b.bisect_id;
  m.u.regression_id = b.regression_id;
  m.u.bisect_state = "running";
  m.u.last_good = m.st.last_good.id;
  m.u.first_bad = m.st.first_bad.id;
  if (m.st.phase == BisectPhase::kConfirm) {
    // A confirmation that started the bisect goes on to its first step in
    // the same move.
    const absl::Status s = AdvanceConfirmation(m);
    if (!s.ok() || m.st.phase != BisectPhase::kBisect) return s;
  }
  if (m.st.phase == BisectPhase::kWait) {
    const absl::Status s = AdvanceWaiting(m);
    if (!s.ok() || m.st.phase != BisectPhase::kBisect) return s;
  }
  if (m.st.phase != BisectPhase::kBisect) return absl::OkStatus();
  return AdvanceBisection(m);
}

// ------------------------------------------------------------ confirmation

absl::Status BisectDriver::AdvanceConfirmation(Move& m) {
  BisectState& st = m.st;
  if (st.categorical()) return ConfirmModeChange(m);
  if (st.confirm_by == pb::EXECUTOR_UNSPECIFIED) {
    if (absl::Status s = ChooseConfirmExecutor(m); !s.ok()) return s;
  }
  absl::StatusOr<ConfirmPlan> plan = PlanConfirmation(st);
  if (!plan.ok()) return plan.status();
  m.u.confirmed_by = ExecutorName(st.confirm_by);
  m.u.confirm_note = st.confirm_note;
  // Round r (0-based) of confirm_repeats matrices doubles the repeats of
  // both commits: round 0 runs 1 repeat per matrix, round r >= 1 runs
  // 2^(r-1), so after round r each commit has confirm_repeats * 2^r.
  const int per_round = std::max(1, plan->options.confirm_repeats);
  if (static_cast<int>(st.confirm_matrices.size()) < per_round * (st.confirm_round + 1)) {
    return SubmitConfirmRounds(m, *plan);
  }
  return JudgeConfirmation(m, *plan);
}

absl::Status BisectDriver::ConfirmModeChange(Move& m) {
  BisectState& st = m.st;
  st.confirm_by = st.series.executor;
  st.confirm_note =
      absl::StrCat("effective mode ", st.mode_before, " -> ", st.mode_after, " under requested ",
                   st.series.mode, ", as the runs stated it (a mode is not estimated)");
  m.u.confirmed_by = ExecutorName(st.confirm_by);
  m.u.confirm_note = st.confirm_note;
  BisectUpdate::Step step;
  step.record = BisectStepRecord{0, st.first_bad.index, st.first_bad.id, "confirmed", 0, 0, 0, 0};
  step.executor = ExecutorName(st.confirm_by);
  m.u.steps.push_back(step);
  m.u.regression_state = pb::REGRESSION_STATE_CONFIRMED;
  Log(absl::StrCat("bisect ", m.bisect_id, ": ", st.confirm_note, " between ", st.last_good.id,
                   " and ", st.first_bad.id));
  return StartBisection(m, Confirmation{}, /*own_series=*/false, {}, {});
}

// The executor of the confirmation, chosen once before its first matrix. A
// real matrix's finding is confirmed by its own executor on its own cell
// (its kernels are built on demand like its bisect steps'). An emulator
// finding: the spec's real executor when live agents offer kernels for both
// commits in every mode of the cell or a registered agent can build them
// (WhyNotReal), else the emulator (saying why). The emulator does not wait
// for kernels nobody can offer or build: a real confirmation that cannot run
// would hold the bisect forever.
absl::Status BisectDriver::ChooseConfirmExecutor(Move& m) {
  BisectState& st = m.st;
  st.confirm_by = pb::EXECUTOR_EMULATOR;
  st.confirm_note = "";
  if (proto::IsRealExecutor(st.series.executor)) {
    st.confirm_by = st.series.executor;
    st.confirm_series = st.series;
    Log(absl::StrCat("bisect ", m.bisect_id, ": confirmation by ", ExecutorName(st.confirm_by),
                     ", the matrix's own executor"));
    return absl::OkStatus();
  }
  if (!st.real_confirm.has_value() || !st.confirm_matrices.empty()) return absl::OkStatus();
  const RealConfirm& rc = *st.real_confirm;
  if (rc.metric.empty()) {
    st.confirm_note = absl::StrCat(
        "not confirmed on real kernels: analysis.confirm.metric is needed for a ",
        SeriesMetricName(st.series.metric, st.series.phase), " finding under ",
        ExecutorName(rc.executor),
        " (neither map_latency_mean nor unmap_latency_mean rose in the emulator's runs); "
        "confirmed on the emulator");
    Log(absl::StrCat("bisect ", m.bisect_id, ": ", st.confirm_note));
    return absl::OkStatus();
  }
  const SeriesSpec real = RealConfirmSpec(st.series, rc);
  absl::StatusOr<std::string> why_not =
      WhyNotReal(real, {st.last_good.id, st.first_bad.id}, &st.confirm_kernels);
  if (!why_not.ok()) return why_not.status();
  if (why_not->empty()) {
    st.confirm_by = rc.executor == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR : rc.executor;
    st.confirm_series = real;
  } else {
    st.confirm_note =
        absl::StrCat("not confirmed on real kernels: ", *why_not, "; confirmed on the emulator");
  }
  Log(absl::StrCat(
      "bisect ", m.bisect_id, ": confirmation by ", ExecutorName(st.confirm_by),
      st.real() ? absl::StrCat(" on kernels ", st.confirm_kernels) : " (" + *why_not + ")"));
  return absl::OkStatus();
}

// Offered or buildable: the kernels of `real` at `commits` are offered by a
// live agent, or else a registered agent builds the cell's catalog for its
// platform's architecture, so the scheduler's submit asks for the builds
// (scheduler/kernel_builds.h PlanKernels, the same rule). Sets
// st.confirm_kernels to "offered" or "built" through `kernels`; "" when the
// kernels can be had, else why not.
absl::StatusOr<std::string> BisectDriver::WhyNotReal(const SeriesSpec& real,
                                                     const std::vector<std::string>& commits,
                                                     std::string* kernels) {
  absl::StatusOr<std::vector<pb::KernelOffer>> offers =
      store_->LiveOffers(real.executor, kLiveAgent);
  if (!offers.ok()) return offers.status();
  const std::string missing = MissingKernels(*offers, real, commits);
  if (missing.empty()) {
    *kernels = "offered";
    return std::string();
  }
  absl::StatusOr<std::vector<std::vector<pb::Capability>>> agents = store_->AgentCapabilities();
  if (!agents.ok()) return agents.status();
  const std::string unbuildable = NotBuildable(*agents, real);
  if (unbuildable.empty()) {
    *kernels = "built";
    return std::string();
  }
  return absl::StrCat(missing, ", and ", unbuildable);
}

absl::StatusOr<BisectDriver::ConfirmPlan> BisectDriver::PlanConfirmation(
    const BisectState& st) const {
  ConfirmPlan plan;
  plan.real = st.real();
  plan.own_series = !plan.real || proto::IsRealExecutor(st.series.executor);
  plan.cell = st.series;
  plan.options = options_;
  if (!plan.real) return plan;
  if (!st.confirm_series.has_value()) {
    return absl::InternalError("bad state: a real confirmation without its cell");
  }
  plan.cell = *st.confirm_series;
  if (st.real_confirm.has_value()) {
    plan.options.confirm_repeats = st.real_confirm->repeats;
    plan.options.max_confirm_repeats = st.real_confirm->max_repeats;
  } else {
    // A real matrix's own confirmation: a guest boot a run, so fewer than
    // the emulator's, doubled at most twice.
    plan.options.confirm_repeats = kRealConfirmRepeats;
    plan.options.max_confirm_repeats = 4 * kRealConfirmRepeats;
  }
  return plan;
}

absl::Status BisectDriver::SubmitConfirmRounds(Move& m, const ConfirmPlan& plan) {
  BisectState& st = m.st;
  std::vector<int64_t>& cm = st.confirm_matrices;
  const int per_round = std::max(1, plan.options.confirm_repeats);
  // One matrix per round keeps last good and first bad interleaved in the
  // queue (same priority, ids in submission order).
  while (static_cast<int>(cm.size()) < per_round * (st.confirm_round + 1)) {
    const int r = static_cast<int>(cm.size()) / per_round;
    const int repeats = r == 0 ? 1 : 1 << (r - 1);
    absl::StatusOr<int64_t> id =
        Submit(m, plan.cell, absl::StrCat("confirm", cm.size() + 1),
               {st.last_good.id, st.first_bad.id}, repeats, pb::JOB_KIND_CONFIRM);
    if (!id.ok() && plan.real && cm.empty() && absl::IsInvalidArgument(id.status())) {
      return RefuseRealConfirmation(m, id.status());
    }
    if (!id.ok()) {
      // Keep what was submitted; the next tick goes on with the same keys.
      if (!cm.empty()) (void)Save(store_, st, m.u);
      return id.status();
    }
    cm.push_back(*id);
  }
  // No figures yet: a default test (means 0, p 1).
  m.u.steps.push_back(ConfirmStep(st, "pending", 2 * per_round * (1 << st.confirm_round),
                                  TwoSampleResult{}, cm.front()));
  m.u.confirm_matrix_id = cm.front();
  Log(absl::StrCat("bisect ", m.bisect_id, ": confirming ", st.last_good.id, " vs ",
                   st.first_bad.id, " with ", cm.size(), " interleaved rounds on ",
                   m.u.confirmed_by));
  return Save(store_, st, m.u);
}

// The scheduler refused the real cell (e.g. its catalog lacks a commit):
// the emulator confirms, the reason is kept.
absl::Status BisectDriver::RefuseRealConfirmation(Move& m, const absl::Status& refused) {
  BisectState& st = m.st;
  st.confirm_by = pb::EXECUTOR_EMULATOR;
  st.confirm_note =
      absl::StrCat("not confirmed on real kernels: the scheduler refused ",
                   "the real matrix: ", refused.message(), "; confirmed on the emulator");
  st.confirm_series.reset();
  st.confirm_kernels.clear();
  m.u.confirmed_by = ExecutorName(st.confirm_by);
  m.u.confirm_note = st.confirm_note;
  Log(absl::StrCat("bisect ", m.bisect_id, ": ", m.u.confirm_note));
  return Save(store_, st, m.u);
}

absl::Status BisectDriver::JudgeConfirmation(Move& m, const ConfirmPlan& plan) {
  BisectState& st = m.st;
  const std::vector<int64_t>& ids = st.confirm_matrices;
  m.u.confirm_matrix_id = ids.front();
  absl::StatusOr<bool> done = store_->MatricesTerminal(ids);
  if (!done.ok()) return done.status();
  if (!*done) return absl::OkStatus();
  absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples(ids);
  if (!samples.ok()) return samples.status();
  const std::vector<double> good = SeriesValuesAt(*samples, plan.cell, st.last_good.id);
  const std::vector<double> bad = SeriesValuesAt(*samples, plan.cell, st.first_bad.id);
  // A real tool's metric of an emulator finding has its own bad direction
  // (latency up where the emulator's throughput fell).
  const double expected =
      plan.own_series ? st.expected_change
                      : RealExpectedChange(plan.cell.metric, st.regression, st.expected_change);
  const Confirmation c = EvaluateConfirmation(good, bad, expected, plan.options);
  const int runs = static_cast<int>(std::min(good.size(), bad.size()));
  const std::string figures =
      absl::StrCat(Percent(c.test.relative_change), absl::StrFormat(" p=%.2g", c.test.p_value),
                   " (", good.size(), "+", bad.size(), " runs");
  if (c.decision == SampleDecision::kMoreRepeats) {
    // Suggestive, not conclusive: both commits again with doubled repeats.
    ++st.confirm_round;
    m.u.steps.push_back(ConfirmStep(st, "pending", runs, c.test, ids.front()));
    Log(absl::StrCat("bisect ", m.bisect_id, ": confirmation suggestive ", figures,
                     "), doubling the repeats"));
    return Save(store_, st, m.u);
  }
  const std::string verdict = c.confirmed ? "confirmed" : "not-reproduced";
  m.u.steps.push_back(ConfirmStep(st, verdict, runs, c.test, ids.front()));
  Log(absl::StrCat("bisect ", m.bisect_id, ": confirmation ", verdict, " ", figures, " on ",
                   m.u.confirmed_by, ")"));
  if (plan.real) {
    // The real figures, in the note; for an emulator finding the
    // regression's own magnitude stays the emulator's (another metric).
    const SeriesSpec& cell = plan.cell;
    m.u.confirm_note =
        absl::StrCat(m.u.confirmed_by, " on real kernels (", cell.platform, ", ", cell.workload,
                     "): ", cell.metric, cell.phase.empty() ? "" : "/" + cell.phase, " ", figures,
                     "): ", verdict, KernelsNote(st));
    st.confirm_note = m.u.confirm_note;
  }
  if (!c.confirmed) {
    st.phase = BisectPhase::kDone;
    m.u.bisect_state = "failed";
    m.u.regression_state = pb::REGRESSION_STATE_REJECTED;
    return Save(store_, st, m.u);
  }
  m.u.regression_state = pb::REGRESSION_STATE_CONFIRMED;
  if (plan.own_series) {
    m.u.magnitude = c.test.relative_change;
    m.u.p_value = c.test.p_value;
  }
  // Confirmed on real kernels: the bisect runs the same real cell, its
  // steps' kernels offered or built like the confirmation's, and the
  // confirmation's runs are its references. Over another catalog than the
  // finding's the commits' places differ: the bisect stays on the emulator.
  const bool real_bisect = plan.real && !plan.own_series && plan.cell.catalog == st.series.catalog;
  if (real_bisect) st.bisect_series = plan.cell;
  return StartBisection(m, c, plan.own_series || real_bisect, good, bad);
}

namespace {

// The commits a bisect of last_good..first_bad runs over, read from the
// catalog with their parents. A plain chain (every commit's parent the one
// before it, as in a catalog without parents) is bisected by midpoints over
// the ids; otherwise over the graph of the good end and the suspects: every
// ancestor of the first bad that is not an ancestor of the last good, as
// git bisect takes them.
struct BisectRange {
  bool graph = false;
  std::vector<std::string> chain_ids;  // last_good..first_bad, when not a graph
  std::vector<BisectCommit> commits;   // the good end and the suspects, for a graph
  int suspects = 0;                    // commits that can be the first bad
  std::map<std::string, std::string> subjects;
};

absl::StatusOr<BisectRange> ReadBisectRange(AnalyzerStore* store, const std::string& catalog,
                                            const CommitRef& lg, const CommitRef& fb,
                                            int64_t bisect_id) {
  absl::StatusOr<std::vector<CommitRow>> rows =
      store->Commits(catalog, 0, std::max(lg.index, fb.index));
  if (!rows.ok()) return rows.status();
  std::vector<std::string> ids;
  std::vector<std::vector<std::string>> parent_ids;
  for (size_t i = 0; i < rows->size(); ++i) {
    if ((*rows)[i].index != static_cast<int>(i)) {
      return absl::FailedPreconditionError(
          absl::StrCat("catalog ", catalog, " changed under bisect ", bisect_id));
    }
    ids.push_back((*rows)[i].id);
    parent_ids.push_back((*rows)[i].parents);
  }
  if (fb.index >= static_cast<int>(ids.size()) || lg.index >= static_cast<int>(ids.size()) ||
      fb.index < 0 || lg.index < 0 || ids[fb.index] != fb.id || ids[lg.index] != lg.id) {
    return absl::FailedPreconditionError(
        absl::StrCat("catalog ", catalog, " changed under bisect ", bisect_id));
  }
  const std::vector<std::vector<int>> parents = proto::ParentPositions(ids, parent_ids);
  const std::vector<bool> good = proto::Ancestors(parents, lg.index);
  const std::vector<bool> bad = proto::Ancestors(parents, fb.index);
  BisectRange r;
  bool chain = lg.index < fb.index;
  for (int i = 0; i <= fb.index; ++i) {
    const bool suspect = bad[i] && !good[i];
    r.suspects += suspect ? 1 : 0;
    const bool in_chain = i > lg.index && i <= fb.index;
    if (suspect != in_chain || (in_chain && parents[i] != std::vector<int>{i - 1})) chain = false;
  }
  for (int i = 0; i <= std::max(lg.index, fb.index); ++i) {
    const bool suspect = bad[i] && !good[i];
    if (!suspect && i != lg.index) continue;
    r.subjects[ids[i]] = (*rows)[i].subject;
    BisectCommit c{i, ids[i], {}};
    for (int p : parents[i])
      if ((bad[p] && !good[p]) || p == lg.index) c.parents.push_back(p);
    r.commits.push_back(std::move(c));
  }
  r.graph = !chain;
  if (chain) {
    for (int i = lg.index; i <= fb.index; ++i) r.chain_ids.push_back(ids[i]);
  }
  return r;
}

}  // namespace

absl::Status BisectDriver::StartBisection(Move& m, const Confirmation& c, bool own_series,
                                          std::span<const double> good,
                                          std::span<const double> bad) {
  BisectState& st = m.st;
  const CommitRef& lg = st.last_good;
  const CommitRef& fb = st.first_bad;
  absl::StatusOr<BisectRange> range =
      ReadBisectRange(store_, st.series.catalog, lg, fb, m.bisect_id);
  if (!range.ok()) return range.status();
  // The first bad is the only suspect: it is the culprit.
  const bool adjacent = range->suspects == 1;
  if (adjacent || !st.do_bisect) {
    st.phase = BisectPhase::kDone;
    m.u.bisect_state = "done";
    if (adjacent) {
      m.u.culprit_id = fb.id;
      m.u.culprit_subject = range->subjects[fb.id];
      m.u.culprits.push_back(
          BisectUpdate::CulpritRow{Culprit{lg.index,
                                           fb.index,
                                           fb.id,
                                           own_series ? c.test.relative_change : st.expected_change,
                                           1,
                                           {}},
                                   lg.id, m.u.culprit_subject});
    }
    return Save(store_, st, m.u);
  }
  if (groups_ != nullptr && st.phase == BisectPhase::kConfirm) {
    absl::StatusOr<GroupTurn> turn = groups_->Turn(m.u.regression_id, lg, fb);
    if (!turn.ok()) return turn.status();
    if (turn->kind != GroupTurn::Kind::kBisect) return FollowGroup(m, *turn);
  }
  if (range->graph) {
    Log(absl::StrCat("bisect ", m.bisect_id, ": ", range->suspects, " suspects in the history of ",
                     fb.id, " after ", lg.id, " (merges: bisected as git bisect does)"));
  }
  // The bisect runs its cell (BisectCell: the finding's series, or the real
  // cell that confirmed it). The confirmation's runs are its references when
  // they measured that cell; otherwise the planner measures its own.
  BisectOptions options = options_;
  options.categorical = st.categorical();
  BisectPlanner planner =
      range->graph ? BisectPlanner(std::move(range->commits), lg.index, fb.index, options)
                   : BisectPlanner(std::move(range->chain_ids), lg.index, fb.index, options);
  if (own_series) {
    planner.AddSamples(lg.index, good);
    planner.AddSamples(fb.index, bad);
  }
  st.phase = BisectPhase::kBisect;
  st.planner_json = planner.ToJson();
  st.culprit_subjects = std::move(range->subjects);
  return absl::OkStatus();
}

// ------------------------------------------------------------ group turn

absl::Status BisectDriver::AdvanceWaiting(Move& m) {
  if (groups_ == nullptr) return StartBisection(m, Confirmation{}, false, {}, {});
  absl::StatusOr<GroupTurn> turn = groups_->Turn(m.u.regression_id, m.st.last_good, m.st.first_bad);
  if (!turn.ok()) return turn.status();
  return FollowGroup(m, *turn);
}

// Leaving the wait for its own bisect, the member measures its references
// again: its confirmation's runs were judged a while ago.
absl::Status BisectDriver::FollowGroup(Move& m, const GroupTurn& turn) {
  switch (turn.kind) {
    case GroupTurn::Kind::kWait:
      if (m.st.phase == BisectPhase::kWait) return absl::OkStatus();
      m.st.phase = BisectPhase::kWait;
      Log(absl::StrCat("bisect ", m.bisect_id, ": waiting for regression ", turn.leader_id,
                       ", which bisects group ", turn.group_id));
      return Save(store_, m.st, m.u);
    case GroupTurn::Kind::kInherit:
      InheritCulprit(turn, m.st, m.u);
      Log(absl::StrCat("bisect ", m.bisect_id, ": culprit ", turn.culprit_id,
                       " inherited from regression ", turn.leader_id, " of group ", turn.group_id));
      return Save(store_, m.st, m.u);
    case GroupTurn::Kind::kBisect:
      break;
  }
  return StartBisection(m, Confirmation{}, false, {}, {});
}

// --------------------------------------------------------------- bisection

absl::Status BisectDriver::AdvanceBisection(Move& m) {
  BisectState& st = m.st;
  absl::StatusOr<BisectPlanner> planner = BisectPlanner::FromJson(st.planner_json);
  if (!planner.ok()) return planner.status();
  if (!st.pending_matrices.empty()) {
    absl::StatusOr<bool> read = ReadStepValues(m, *planner);
    if (!read.ok()) return read.status();
    if (!*read) return absl::OkStatus();
  }
  const bool stuck = st.empty_rounds >= 3;
  if (!planner->Done() && !stuck) {
    if (absl::Status s = SubmitStepMatrix(m, *planner); !s.ok()) return s;
  }
  st.planner_json = planner->ToJson();
  for (const BisectStepRecord& r : planner->Steps()) {
    BisectUpdate::Step s;
    s.record = r;
    if (auto it = st.step_matrix.find(r.step); it != st.step_matrix.end()) s.matrix_id = it->second;
    s.executor = ExecutorName(st.BisectCell().executor);
    m.u.steps.push_back(s);
  }
  if (planner->Done() || stuck) Finish(m, *planner);
  return Save(store_, st, m.u);
}

absl::StatusOr<bool> BisectDriver::ReadStepValues(Move& m, BisectPlanner& planner) {
  BisectState& st = m.st;
  if (st.pending_index < 0) {
    return absl::InternalError(
        absl::StrCat("bisect ", m.bisect_id, ": bad state: pending matrices without a commit"));
  }
  absl::StatusOr<bool> done = store_->MatricesTerminal(st.pending_matrices);
  if (!done.ok()) return done.status();
  if (!*done) return false;
  absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples(st.pending_matrices);
  if (!samples.ok()) return samples.status();
  // References run beside a real step (StepCommits) count first, so the
  // step is judged against them too.
  for (int ref : {planner.GoodReferenceIndex(), planner.BadReferenceIndex()}) {
    if (ref == st.pending_index) continue;
    const std::vector<double> beside =
        SeriesValuesAt(*samples, st.BisectCell(), planner.CommitId(ref));
    if (!beside.empty()) planner.AddSamples(ref, beside);
  }
  const std::vector<double> values =
      SeriesValuesAt(*samples, st.BisectCell(), planner.CommitId(st.pending_index));
  bool skipped = false;
  if (values.empty()) {
    absl::StatusOr<bool> s = SkipIfUnmeasurable(m, planner);
    if (!s.ok()) return s.status();
    skipped = *s;
  }
  if (!skipped) {
    // A skip is not a step without value: it does not count towards the three.
    st.empty_rounds = values.empty() ? st.empty_rounds + 1 : 0;
    planner.AddSamples(st.pending_index, values);
  }
  st.pending_matrices.clear();
  st.pending_index = -1;
  return true;
}

absl::StatusOr<bool> BisectDriver::SkipIfUnmeasurable(Move& m, BisectPlanner& planner) {
  const BisectState& st = m.st;
  absl::StatusOr<std::vector<std::string>> reasons = store_->FailureReasons(st.pending_matrices);
  if (!reasons.ok()) return reasons.status();
  const bool unmeasurable =
      !reasons->empty() && std::all_of(reasons->begin(), reasons->end(), [](const std::string& r) {
        return !proto::UnmeasurableMark(r).empty();
      });
  if (!unmeasurable || !planner.Skip(st.pending_index)) return false;
  const std::string& first = reasons->front();
  const bool unbuilt = proto::UnmeasurableMark(first) == proto::kBuildFailedMark;
  Log(absl::StrCat("bisect ", m.bisect_id, ": skipping ", planner.CommitId(st.pending_index),
                   unbuilt ? ", its kernel does not build (" : ", its kernel does not boot (",
                   unbuilt ? first.substr(first.find(proto::kBuildFailedMark)) : first, ")"));
  return true;
}

// A real step runs beside the references it is judged against, in one
// matrix whose rounds the scheduler interleaves in a random order per
// round, so a drift of the host lands on the step and its references alike
// (the emulator's runs do not drift: its steps run alone).
std::vector<std::string> BisectDriver::StepCommits(const SeriesSpec& series,
                                                   const BisectPlanner& planner,
                                                   const BisectRequest& req) {
  if (!proto::IsRealExecutor(series.executor)) return {req.commit_id};
  const int good = planner.GoodReferenceIndex(), bad = planner.BadReferenceIndex();
  if (req.commit_index == good || req.commit_index == bad) return {req.commit_id};
  return {planner.CommitId(good), req.commit_id, planner.CommitId(bad)};
}

absl::Status BisectDriver::SubmitStepMatrix(Move& m, const BisectPlanner& planner) {
  BisectState& st = m.st;
  const std::optional<BisectRequest> next = planner.Next();
  FARM_DCHECK(next.has_value(), "a planner not done asks for a run");
  const BisectRequest& req = *next;
  absl::StatusOr<int64_t> id =
      Submit(m, st.BisectCell(), absl::StrCat("step", planner.Steps().size()),
             StepCommits(st.BisectCell(), planner, req), req.repeats, pb::JOB_KIND_BISECT);
  if (!id.ok()) return id.status();
  st.pending_matrices.push_back(*id);
  st.pending_index = req.commit_index;
  if (!planner.Steps().empty()) st.step_matrix[planner.Steps().back().step] = *id;
  Log(absl::StrCat("bisect ", m.bisect_id, ": range ", planner.CommitId(planner.LastGoodIndex()),
                   "..", planner.CommitId(planner.FirstBadIndex()), ", testing ", req.commit_id,
                   " x", req.repeats, " (matrix ", *id, ")"));
  return absl::OkStatus();
}

void BisectDriver::Finish(Move& m, const BisectPlanner& planner) {
  BisectState& st = m.st;
  BisectUpdate& u = m.u;
  st.phase = BisectPhase::kDone;
  const bool ok = planner.Done() && !planner.Failed();
  u.bisect_state = ok ? "done" : "failed";
  u.last_good = planner.CommitId(planner.LastGoodIndex());
  u.first_bad = planner.CommitId(planner.FirstBadIndex());
  auto subject_of = [&](const std::string& id) {
    auto it = st.culprit_subjects.find(id);
    return it == st.culprit_subjects.end() ? std::string() : it->second;
  };
  std::string named;
  if (ok) {
    u.culprit_id = u.first_bad;
    u.culprit_subject = subject_of(u.culprit_id);
    for (const Culprit& c : planner.Culprits()) {
      const std::string subject =
          c.skipped.empty() ? subject_of(c.commit_id) : OneOfSubject(planner, c);
      if (c.index == planner.FirstBadIndex()) u.culprit_subject = subject;
      u.culprits.push_back(
          BisectUpdate::CulpritRow{c, planner.CommitId(c.last_good_index), subject});
      absl::StrAppend(&named, named.empty() ? "" : ", ", c.commit_id, " (",
                      Percent(c.relative_change), absl::StrFormat(", share %.0f%%", c.share * 100),
                      ")");
    }
  }
  if (u.culprits.size() > 1)
    Log(absl::StrCat("bisect ", m.bisect_id, ": ", u.culprits.size(), " culprits: ", named));
  Log(absl::StrCat("bisect ", m.bisect_id, ": ", u.bisect_state, ", first bad ", u.first_bad, " \"",
                   u.culprit_subject, "\" after ", planner.Steps().size(), " steps, ",
                   planner.RunsRequested(), " runs",
                   planner.UsedWeakVerdict() ? " (a weak verdict was acted on)" : ""));
}

absl::StatusOr<int64_t> BisectDriver::Submit(Move& m, const SeriesSpec& cell,
                                             const std::string& what,
                                             const std::vector<std::string>& commits, int repeats,
                                             pb::JobKind kind) {
  const int seq = m.st.seq;
  absl::StatusOr<int64_t> id = submitter_->Submit(
      RerunSpec(cell, absl::StrCat("analyzer-b", m.bisect_id, "-", what), commits, repeats, kind,
                SubmissionSeed(m.bisect_id, seq), priority_),
      absl::StrCat("analyzer/b", m.bisect_id, "/", seq));
  if (!id.ok()) return id.status();
  m.st.seq = seq + 1;
  ++submissions_;
  return id;
}

}  // namespace farm::analyzer
