#include "services/analyzer/groups.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

NewRegression Found(const std::string& platform, int lg, int fb) {
  NewRegression n;
  n.finding.platform = platform;
  n.finding.workload = "iozone";
  n.finding.metric = "throughput/write";
  n.finding.mode = "strict";
  n.finding.last_good_index = lg;
  n.finding.last_good = "c" + std::to_string(lg);
  n.finding.first_bad_index = fb;
  n.finding.first_bad = "c" + std::to_string(fb);
  n.finding.magnitude = -0.2;
  n.series_key = platform + std::to_string(lg);
  n.bisect_state_json = "{}";
  return n;
}

TEST(Groups, StrengthIsTheChangeOverItsIntervalsHalfWidth) {
  Finding f;
  f.magnitude = -0.2;
  ChangePoint wide, narrow;
  wide.relative_change = -0.2;
  wide.interval = {-0.4, 0.0};  // half width 0.2: strength 1
  narrow.relative_change = -0.1;
  narrow.interval = {-0.12, -0.08};  // half width 0.02: strength 5
  f.change_points = {wide};
  EXPECT_DOUBLE_EQ(Strength(f), 1);
  f.change_points = {wide, narrow};
  EXPECT_DOUBLE_EQ(Strength(f), 5);
  f.change_points = {};
  EXPECT_DOUBLE_EQ(Strength(f), 0.2);  // no interval: its size alone
  f.change_points = {narrow};
  f.change_class = ChangeClass::kModeChanged;  // stated by every run: it leads
  EXPECT_DOUBLE_EQ(Strength(f), kModeChangeStrength);
}

TEST(Groups, FindingsJoinAnOverlappingGroupElseOpenOne) {
  RegressionGroup open;
  open.id = 7;
  open.last_good_index = 10;
  open.first_bad_index = 20;
  std::vector<NewRegression> found = {Found("a", 15, 25), Found("b", 20, 30), Found("c", 22, 24),
                                      Found("d", 1, 40), Found("e", 30, 31)};
  AssignGroups({open}, {true, true, true, true, false}, found);
  EXPECT_EQ(found[0].group_id, 7);   // overlaps (10, 20]
  EXPECT_EQ(found[1].group_id, -1);  // (20, 30] does not overlap (15, 20]: opens one
  EXPECT_EQ(found[2].group_id, -1);  // joins the one b opened
  EXPECT_EQ(found[3].group_id, 7);   // the first that overlaps
  EXPECT_EQ(found[4].group_id, 0);   // not bisected: in none
  // b's group is (22, 24] after c joined: a range past it opens another.
  std::vector<NewRegression> more = {Found("f", 20, 30), Found("g", 24, 28)};
  AssignGroups({}, {true, true}, more);
  EXPECT_EQ(more[0].group_id, -1);
  EXPECT_EQ(more[1].group_id, -1);
}

RegressionGroup::Member Member(int64_t id, int state, double strength) {
  RegressionGroup::Member m;
  m.regression_id = id;
  m.state = state;
  m.strength = strength;
  return m;
}

TEST(Groups, TheLeaderIsTheStrongestStandingMember) {
  RegressionGroup g;
  g.members = {Member(1, pb::REGRESSION_STATE_CONFIRMED, 3),
               Member(2, pb::REGRESSION_STATE_REJECTED, 9),
               Member(3, pb::REGRESSION_STATE_SUSPECTED, 4)};
  EXPECT_EQ(GroupLeader(g), 3);
  g.members[2].state = pb::REGRESSION_STATE_FALSE_POSITIVE;
  EXPECT_EQ(GroupLeader(g), 1);
  g.members[0].state = pb::REGRESSION_STATE_REJECTED;
  EXPECT_EQ(GroupLeader(g), 0);
}

// Groups held in the test: what GroupGate reads and writes of a store.
class GroupsStore final : public AnalyzerStore {
 public:
  GroupsStore() {
    for (int i = 0; i < 40; ++i) commits.push_back({i, "c" + std::to_string(i), "", {}});
  }

  std::map<int64_t, RegressionGroup> groups;
  std::vector<CommitRow> commits;  // the catalog: c0..c39, a line unless a test says

  RegressionGroup::Member* Find(int64_t regression) {
    for (auto& [id, g] : groups) {
      for (RegressionGroup::Member& m : g.members) {
        if (m.regression_id == regression) return &m;
      }
    }
    return nullptr;
  }
  absl::StatusOr<RegressionGroup> GroupOf(int64_t regression) override {
    for (const auto& [id, g] : groups) {
      for (const RegressionGroup::Member& m : g.members) {
        if (m.regression_id == regression) return g;
      }
    }
    return absl::NotFoundError("in no group");
  }
  absl::Status SaveGroup(int64_t id, int64_t leader, const std::string& state,
                         const std::string& culprit) override {
    RegressionGroup& g = groups.at(id);
    g.leader_id = leader;
    g.state = state;
    g.culprit_id = culprit;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> SplitFromGroup(int64_t regression) override {
    for (auto& [id, g] : groups) {
      for (auto m = g.members.begin(); m != g.members.end(); ++m) {
        if (m->regression_id != regression) continue;
        RegressionGroup own;
        own.id = groups.rbegin()->first + 1;
        own.leader_id = regression;
        own.state = "bisecting";
        own.last_good_index = m->last_good_index;
        own.first_bad_index = m->first_bad_index;
        own.members = {*m};
        g.members.erase(m);
        groups[own.id] = own;
        return own.id;
      }
    }
    return absl::NotFoundError("no such regression");
  }

  // The rest is not GroupGate's.
  absl::StatusOr<std::vector<MatrixInfo>> MatricesToAnalyze() override { return No(); }
  absl::StatusOr<std::vector<MatrixInfo>> LatestAnalysedMatrices() override { return No(); }
  absl::StatusOr<std::vector<SampleRow>> Samples(const std::vector<int64_t>&) override {
    return No();
  }
  absl::StatusOr<std::vector<SampleRow>> HistorySamples(const std::string&, pb::Executor,
                                                        const std::vector<HistoryCell>&, int64_t,
                                                        int) override {
    return No();
  }
  absl::StatusOr<bool> MatricesTerminal(const std::vector<int64_t>&) override { return No(); }
  absl::StatusOr<std::vector<std::string>> FailureReasons(const std::vector<int64_t>&) override {
    return No();
  }
  absl::StatusOr<std::vector<CommitRow>> Commits(const std::string&, int lo, int hi) override {
    std::vector<CommitRow> out;
    for (int i = std::max(lo, 0); i <= hi && i < static_cast<int>(commits.size()); ++i) {
      out.push_back(commits[i]);
    }
    return out;
  }
  absl::StatusOr<SeriesSpec> Cell(int64_t, const std::string&, const std::string&,
                                  const std::string&) override {
    return No();
  }
  absl::StatusOr<std::vector<int64_t>> RecordAnalysis(int64_t, const std::string&,
                                                      const std::vector<NewRegression>&,
                                                      const std::vector<std::string>&) override {
    return No();
  }
  absl::Status RecordAnalysisFailure(int64_t, const std::string&) override { return No(); }
  absl::StatusOr<std::vector<ActiveBisect>> ActiveBisects() override { return No(); }
  absl::Status SaveBisect(const BisectUpdate&) override { return No(); }
  absl::StatusOr<std::vector<AlertWork>> AlertCandidates(absl::Duration) override { return No(); }
  absl::Status SetSilence(int64_t, const std::string&) override { return No(); }
  absl::Status MarkAlertSent(int64_t, bool, const std::string&, const std::string&) override {
    return No();
  }
  absl::StatusOr<OpenCounts> CountOpenRegressions() override { return No(); }
  absl::StatusOr<std::vector<FixCheckWork>> FixChecks() override { return No(); }
  absl::StatusOr<CommitRow> LatestCommit(const std::string&) override { return No(); }
  absl::StatusOr<std::vector<pb::KernelOffer>> LiveOffers(pb::Executor, absl::Duration) override {
    return No();
  }
  absl::StatusOr<std::vector<std::vector<pb::Capability>>> AgentCapabilities() override {
    return No();
  }
  absl::Status SaveFixCheck(int64_t, const std::string&, const std::string&, double,
                            const std::string&, const std::string&) override {
    return No();
  }
  absl::StatusOr<std::vector<RegressionGroup>> OpenGroups(const std::string&,
                                                          absl::Duration) override {
    return No();
  }

 private:
  static absl::Status No() { return absl::UnimplementedError("not the gate's"); }
};

RegressionGroup::Member Ranged(int64_t id, int state, double strength, int lg, int fb) {
  RegressionGroup::Member m = Member(id, state, strength);
  m.last_good_index = lg;
  m.last_good = "c" + std::to_string(lg);
  m.first_bad_index = fb;
  m.first_bad = "c" + std::to_string(fb);
  m.bisect_state = "running";
  return m;
}

// A group of three: the strongest bisects, the others wait; its culprit
// goes to the member whose range holds it, and the member whose range does
// not is split out and bisects.
class GroupGateTest : public ::testing::Test {
 protected:
  GroupTurn::Kind TurnOf(int64_t regression, int lg, int fb) {
    absl::StatusOr<GroupTurn> t =
        gate_.Turn(regression, {lg, "c" + std::to_string(lg)}, {fb, "c" + std::to_string(fb)});
    EXPECT_TRUE(t.ok()) << t.status();
    last_ = t.ok() ? *t : GroupTurn{};
    return last_.kind;
  }

  GroupsStore store_;
  GroupGate gate_{&store_};
  GroupTurn last_;
};

TEST_F(GroupGateTest, OneBisectNamesTheCulpritOfItsGroup) {
  RegressionGroup& g = store_.groups[1];
  g.id = 1;
  g.members = {Ranged(1, pb::REGRESSION_STATE_CONFIRMED, 4, 10, 20),
               Ranged(2, pb::REGRESSION_STATE_CONFIRMED, 9, 12, 18),  // the strongest
               Ranged(3, pb::REGRESSION_STATE_CONFIRMED, 2, 16, 30)};

  EXPECT_EQ(TurnOf(1, 10, 20), GroupTurn::Kind::kWait);
  EXPECT_EQ(last_.leader_id, 2);
  EXPECT_EQ(store_.groups[1].state, "open");
  EXPECT_EQ(TurnOf(2, 12, 18), GroupTurn::Kind::kBisect);
  EXPECT_EQ(store_.groups[1].state, "bisecting");
  EXPECT_EQ(store_.groups[1].leader_id, 2);
  EXPECT_EQ(TurnOf(2, 12, 18), GroupTurn::Kind::kBisect);  // asked again after a crash
  EXPECT_EQ(TurnOf(3, 16, 30), GroupTurn::Kind::kWait);

  // The leader's bisect ends at c16 (its range narrowed to (c15, c16]).
  RegressionGroup::Member* leader = store_.Find(2);
  leader->bisect_state = "done";
  leader->last_good_index = 15;
  leader->last_good = "c15";
  leader->first_bad_index = 16;
  leader->first_bad = "c16";
  leader->culprit_id = "c16";
  leader->culprit_subject = "subject 16";

  EXPECT_EQ(TurnOf(1, 10, 20), GroupTurn::Kind::kInherit);
  EXPECT_EQ(last_.culprit_id, "c16");
  EXPECT_EQ(last_.culprit_subject, "subject 16");
  EXPECT_EQ(last_.culprit_index, 16);
  EXPECT_EQ(last_.culprit_last_good.id, "c15");
  EXPECT_EQ(store_.groups[1].state, "culprit");
  EXPECT_EQ(store_.groups[1].culprit_id, "c16");

  // (c16, c30] does not hold c16: split into a group of its own, bisected.
  EXPECT_EQ(TurnOf(3, 16, 30), GroupTurn::Kind::kBisect);
  absl::StatusOr<RegressionGroup> own = store_.GroupOf(3);
  ASSERT_TRUE(own.ok());
  EXPECT_NE(own->id, 1);
  EXPECT_EQ(own->leader_id, 3);
  EXPECT_EQ(store_.groups[1].members.size(), 2u);

  BisectState st;
  st.expected_change = -0.2;
  BisectUpdate u;
  TurnOf(1, 10, 20);
  InheritCulprit(last_, st, u);
  EXPECT_EQ(st.phase, BisectPhase::kDone);
  EXPECT_EQ(u.bisect_state, "done");
  EXPECT_EQ(u.culprit_id, "c16");
  EXPECT_EQ(u.first_bad, "c16");
  EXPECT_EQ(u.last_good, "c15");
  ASSERT_EQ(u.culprits.size(), 1u);
  EXPECT_EQ(u.culprits[0].culprit.index, 16);
  EXPECT_EQ(u.culprits[0].culprit.relative_change, -0.2);
}

// In a history graph a commit listed between a member's ends may lie on a
// branch its first bad never merged: such a culprit is not the member's.
TEST_F(GroupGateTest, ACulpritOnABranchTheMemberNeverMergedIsNotInherited) {
  store_.commits[16].parents = {"c14"};  // c16 on a branch off c14, never merged
  store_.commits[17].parents = {"c15"};  // the line goes on from c15
  RegressionGroup& g = store_.groups[1];
  g.id = 1;
  g.members = {Ranged(1, pb::REGRESSION_STATE_CONFIRMED, 9, 14, 16),
               Ranged(2, pb::REGRESSION_STATE_CONFIRMED, 4, 10, 20),
               Ranged(3, pb::REGRESSION_STATE_CONFIRMED, 2, 12, 16)};
  EXPECT_EQ(TurnOf(1, 14, 16), GroupTurn::Kind::kBisect);
  RegressionGroup::Member* leader = store_.Find(1);
  leader->bisect_state = "done";
  leader->culprit_id = "c16";
  // (c12, c16] holds c16 (its first bad); (c10, c20] does not: c20's
  // history is c0..c15, c17..c20.
  EXPECT_EQ(TurnOf(3, 12, 16), GroupTurn::Kind::kInherit);
  EXPECT_EQ(TurnOf(2, 10, 20), GroupTurn::Kind::kBisect);
  EXPECT_NE(store_.GroupOf(2)->id, 1);
}

TEST_F(GroupGateTest, ARejectedLeaderHandsTheBisectOnAndAFailedOneToEveryMember) {
  RegressionGroup& g = store_.groups[1];
  g.id = 1;
  g.members = {Ranged(1, pb::REGRESSION_STATE_CONFIRMED, 4, 10, 20),
               Ranged(2, pb::REGRESSION_STATE_SUSPECTED, 9, 12, 18)};
  // The strongest is still being confirmed: the other waits for it.
  EXPECT_EQ(TurnOf(1, 10, 20), GroupTurn::Kind::kWait);
  store_.Find(2)->state = pb::REGRESSION_STATE_REJECTED;
  store_.Find(2)->bisect_state = "failed";
  EXPECT_EQ(TurnOf(1, 10, 20), GroupTurn::Kind::kBisect);
  EXPECT_EQ(store_.groups[1].leader_id, 1);

  // A leader whose bisect named nothing: every member bisects on its own.
  RegressionGroup& h = store_.groups[2];
  h.id = 2;
  h.members = {Ranged(3, pb::REGRESSION_STATE_CONFIRMED, 9, 10, 20),
               Ranged(4, pb::REGRESSION_STATE_CONFIRMED, 1, 10, 20)};
  EXPECT_EQ(TurnOf(3, 10, 20), GroupTurn::Kind::kBisect);
  EXPECT_EQ(TurnOf(4, 10, 20), GroupTurn::Kind::kWait);
  store_.Find(3)->bisect_state = "failed";
  EXPECT_EQ(TurnOf(4, 10, 20), GroupTurn::Kind::kBisect);
  EXPECT_EQ(store_.groups[2].state, "failed");

  // In no group: its own bisect.
  EXPECT_EQ(TurnOf(99, 1, 3), GroupTurn::Kind::kBisect);
  EXPECT_EQ(last_.group_id, 0);
}

AlertWork Work(int64_t id, int64_t group, int state, double strength, const std::string& mode) {
  AlertWork a;
  a.regression_id = id;
  a.group_id = group;
  a.state = state;
  a.strength = strength;
  a.platform = "p" + std::to_string(id);
  a.workload = "iozone";
  a.metric = "throughput/write";
  a.mode_name = mode;
  a.catalog = "c";
  a.magnitude = id == 2 ? -0.25 : -0.05;
  a.last_good = "c1";
  a.first_bad = "c9";
  return a;
}

TEST(Groups, OneAlertPerGroupForItsStrongestOpenMember) {
  const std::vector<AlertWork> work = {
      Work(1, 5, pb::REGRESSION_STATE_CONFIRMED, 3, "strict"),
      Work(2, 5, pb::REGRESSION_STATE_ACKNOWLEDGED, 9, "lazy"),
      Work(3, 5, pb::REGRESSION_STATE_CONFIRMED, 4, "lazy"),
      Work(4, 0, pb::REGRESSION_STATE_CONFIRMED, 1, "strict"),
  };
  const GroupAlertPlan plan = PlanGroupAlerts(work, AlertOptions{}, "2026-01-01T00:00:00Z");
  ASSERT_EQ(plan.alerts.size(), 1u);
  ASSERT_TRUE(plan.alerts.contains(3));  // confirmed before acknowledged, then strongest
  EXPECT_EQ(plan.quiet, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(plan.representative.at(5), 3);
  const Alert& alert = *plan.alerts.at(3);
  EXPECT_EQ(alert.labels.at("group_id"), "5");
  EXPECT_EQ(alert.labels.at("alert_group"), "group-5");
  EXPECT_EQ(alert.labels.at("members"), "3");
  EXPECT_EQ(alert.labels.at("severity"), "critical");  // member 2's -25%
  EXPECT_FALSE(alert.labels.contains("regression_id"));
  EXPECT_FALSE(alert.labels.contains("platform"));
  EXPECT_EQ(alert.annotations.at("cells"), "p1/iozone, p2/iozone, p3/iozone");
  EXPECT_EQ(alert.annotations.at("modes"), "lazy, strict");
  EXPECT_NE(alert.annotations.at("members").find("regression 2: p2 iozone throughput/write lazy"),
            std::string::npos)
      << alert.annotations.at("members");
  EXPECT_EQ(alert.annotations.at("summary").rfind("3 regressions of group 5: ", 0), 0u);
  EXPECT_TRUE(alert.ends_at.empty());

  // Every member closed: the member whose alert fired sends the resolution.
  std::vector<AlertWork> closed = work;
  for (AlertWork& a : closed) a.state = pb::REGRESSION_STATE_FIXED;
  closed[0].alert_exists = closed[0].alert_firing = true;
  const GroupAlertPlan resolved = PlanGroupAlerts(closed, AlertOptions{}, "2026-01-01T00:00:00Z");
  ASSERT_TRUE(resolved.alerts.contains(1));
  EXPECT_EQ(resolved.alerts.at(1)->ends_at, "2026-01-01T00:00:00Z");

  // Groups of one (5 and 6 here) keep their members' own alerts.
  const GroupAlertPlan alone =
      PlanGroupAlerts({work[0], Work(9, 6, pb::REGRESSION_STATE_CONFIRMED, 1, "strict")},
                      AlertOptions{}, "2026-01-01T00:00:00Z");
  EXPECT_FALSE(alone.Covers(9));
  EXPECT_TRUE(alone.alerts.empty());
  EXPECT_FALSE(alone.Covers(1));
}

}  // namespace
}  // namespace farm::analyzer
