#include "services/analyzer/mode_change.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/analyzer/bisect.h"

namespace farm::analyzer {
namespace {

constexpr double kStrict = 3, kLazy = 4;  // iommufarm.v1.IommuMode numbers

SampleRow ModeRow(int commit, double mode, const std::string& requested = "lazy") {
  SampleRow s;
  s.commit_index = commit;
  s.commit_id = "c" + std::to_string(commit);
  s.platform = "amd-genoa-2s96c";
  s.workload = "tcp-stream";
  s.mode = requested;
  s.metric = storage::kEffectiveModeMetric;
  s.value = mode;
  return s;
}

TEST(ModeChangeTest, AnotherEffectiveModeAtTheSameRequestIsAFinding) {
  std::vector<SampleRow> rows;
  for (int c : {0, 4, 8}) rows.push_back(ModeRow(c, c < 5 ? kLazy : kStrict));
  rows.push_back(ModeRow(0, kStrict, "strict"));
  rows.push_back(ModeRow(8, kStrict, "strict"));
  SampleRow throughput = ModeRow(8, 1e6);
  throughput.metric = "throughput";
  rows.push_back(throughput);
  const std::vector<Finding> found = DetectModeChanges(rows);
  ASSERT_EQ(found.size(), 1u);
  const Finding& f = found[0];
  EXPECT_EQ(f.change_class, ChangeClass::kModeChanged);
  EXPECT_STREQ(ChangeClassName(f.change_class), "mode_changed");
  EXPECT_EQ(f.mode, "lazy");
  EXPECT_EQ(f.metric, "effective_mode");
  EXPECT_EQ(f.last_good, "c4");
  EXPECT_EQ(f.first_bad, "c8");
  ASSERT_EQ(f.per_mode.size(), 1u);
  EXPECT_EQ(EffectiveModeName(f.per_mode[0].before), "lazy");
  EXPECT_EQ(EffectiveModeName(f.per_mode[0].after), "strict");
  EXPECT_TRUE(f.regression);
  EXPECT_TRUE(f.primary_metric);
}

TEST(ModeChangeTest, SteadyModesAndOtherTimingsAreNoFinding) {
  std::vector<SampleRow> rows;
  for (int c = 0; c < 6; ++c) rows.push_back(ModeRow(c, kLazy));
  // Another series (a guest timed otherwise) in another mode is no change.
  SampleRow other = ModeRow(3, kStrict);
  other.timing = "tcg";
  rows.push_back(other);
  EXPECT_TRUE(DetectModeChanges(rows).empty());
}

TEST(ModeChangeTest, TheMostCommonModeOfACommitCounts) {
  EXPECT_EQ(ModalValue(std::vector<double>{kLazy, kStrict, kLazy}), kLazy);
  EXPECT_EQ(ModalValue(std::vector<double>{kLazy, kStrict}), kStrict);  // tie: the lower
  EXPECT_EQ(ModalValue(std::vector<double>{}), 0);
}

TEST(ModeChangeTest, CategoricalBisectJudgesTheModeWithOneRunPerCommit) {
  // c0..c8, the mode flips at c5; the references are measured first.
  std::vector<std::string> ids;
  for (int i = 0; i <= 8; ++i) ids.push_back("c" + std::to_string(i));
  BisectOptions o;
  o.categorical = true;
  BisectPlanner p(ids, 0, 8, o);
  int runs = 0;
  while (p.Next().has_value()) {
    const BisectRequest r = *p.Next();
    EXPECT_EQ(r.repeats, 1) << r.commit_id;
    std::vector<double> v(r.repeats, r.commit_index >= 5 ? kStrict : kLazy);
    p.AddSamples(r.commit_index, v);
    ASSERT_LT(++runs, 20);
  }
  ASSERT_TRUE(p.Done());
  EXPECT_FALSE(p.Failed());
  EXPECT_EQ(p.FirstBadIndex(), 5);
  EXPECT_EQ(p.LastGoodIndex(), 4);
  for (const BisectStepRecord& s : p.Steps()) {
    EXPECT_EQ(s.verdict, s.commit_index >= 5 ? "bad" : "good") << s.commit_id;
    EXPECT_EQ(s.mean, s.commit_index >= 5 ? kStrict : kLazy);
  }
  const std::vector<Culprit> culprits = p.Culprits();
  ASSERT_EQ(culprits.size(), 1u);
  EXPECT_EQ(culprits[0].commit_id, "c5");
  EXPECT_EQ(culprits[0].share, 1);
  // The state survives a restart with its rule.
  absl::StatusOr<BisectPlanner> back = BisectPlanner::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->FirstBadIndex(), 5);
}

TEST(ModeChangeTest, ACategoricalValueIsNotAThreshold) {
  // A third mode at the midpoint is bad (not the good reference's), where a
  // numeric bisect would weigh its distance.
  std::vector<std::string> ids = {"c0", "c1", "c2"};
  BisectOptions o;
  o.categorical = true;
  BisectPlanner p(ids, 0, 2, o);
  p.AddSamples(0, std::vector<double>{kLazy});
  p.AddSamples(2, std::vector<double>{kStrict});
  p.AddSamples(1, std::vector<double>{2});  // passthrough
  ASSERT_TRUE(p.Done());
  EXPECT_EQ(p.FirstBadIndex(), 1);
}

}  // namespace
}  // namespace farm::analyzer
