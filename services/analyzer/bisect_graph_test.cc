// BisectPlanner over a history graph: the steps git bisect would take, the
// culprit inside a merged branch or the merge itself.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/analyzer/bisect.h"

namespace farm::analyzer {
namespace {

// A history: each commit's parents by index (parents first).
using Graph = std::vector<std::vector<int>>;

std::set<int> AncestorsIn(const Graph& g, int of) {
  std::set<int> seen = {of};
  std::vector<int> todo = {of};
  while (!todo.empty()) {
    const int c = todo.back();
    todo.pop_back();
    for (int p : g[c])
      if (seen.insert(p).second) todo.push_back(p);
  }
  return seen;
}

// The commits a bisect of good..bad runs over: good and every ancestor of
// bad that is not one of good's, with their parents (as the driver builds
// them from a catalog).
std::vector<BisectCommit> Commits(const Graph& g, int good, int bad) {
  const std::set<int> old = AncestorsIn(g, good);
  std::vector<BisectCommit> out;
  for (int c : AncestorsIn(g, bad)) {
    if (old.contains(c) && c != good) continue;
    out.push_back(BisectCommit{c, "c" + std::to_string(c), g[c]});
  }
  if (!AncestorsIn(g, bad).contains(good)) out.push_back({good, "c" + std::to_string(good), {}});
  return out;
}

// A model with no run-to-run noise: a commit is slow (1200) when the culprit
// is in its history, else 1000.
struct GraphRun {
  BisectPlanner planner;
  std::vector<int> tested;  // the commits measured, in order (references excluded)
};

GraphRun Bisect(const Graph& g, int good, int bad, int culprit,
                const std::set<int>& unbuildable = {}) {
  BisectOptions opt;
  GraphRun r{BisectPlanner(Commits(g, good, bad), good, bad, opt), {}};
  auto level = [&](int c) { return AncestorsIn(g, c).contains(culprit) ? 1200.0 : 1000.0; };
  for (int guard = 0; guard < 100 && r.planner.Next().has_value(); ++guard) {
    const BisectRequest q = *r.planner.Next();
    if (q.commit_index != good && q.commit_index != bad &&
        (r.tested.empty() || r.tested.back() != q.commit_index)) {
      r.tested.push_back(q.commit_index);
    }
    if (unbuildable.contains(q.commit_index)) {
      EXPECT_TRUE(r.planner.Skip(q.commit_index));
      continue;
    }
    r.planner.AddSamples(q.commit_index, std::vector<double>(q.repeats, level(q.commit_index)));
  }
  EXPECT_TRUE(r.planner.Done());
  EXPECT_FALSE(r.planner.Failed());
  return r;
}

// A chain: the graph planner takes the linear planner's midpoints.
TEST(BisectGraphTest, AChainIsBisectedByMidpointsAsBefore) {
  Graph chain = {{}};
  for (int i = 1; i <= 12; ++i) chain.push_back({i - 1});
  for (int culprit = 1; culprit <= 12; ++culprit) {
    const GraphRun r = Bisect(chain, 0, 12, culprit);
    EXPECT_EQ(r.planner.FirstBadIndex(), culprit);
    EXPECT_EQ(r.planner.LastGoodIndex(), culprit - 1);
    BisectPlanner linear(
        {"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12"}, 0, 12,
        BisectOptions{});
    std::vector<int> linear_tested;
    for (int guard = 0; guard < 100 && linear.Next().has_value(); ++guard) {
      const BisectRequest q = *linear.Next();
      if (q.commit_index != 0 && q.commit_index != 12) linear_tested.push_back(q.commit_index);
      linear.AddSamples(q.commit_index,
                        std::vector<double>(q.repeats, q.commit_index >= culprit ? 1200 : 1000));
    }
    EXPECT_EQ(r.tested, linear_tested) << "culprit " << culprit;
  }
}

// 0 - 1 - 2 ----------- 6      main line (6 merges the side branch)
//  \- 3 - 4 - 5 ------/       side branch
const Graph kOneMerge = {{}, {0}, {1}, {0}, {3}, {4}, {2, 5}};

TEST(BisectGraphTest, TheFirstStepBestHalvesTheSuspects) {
  // Suspects 1..6; each one's ancestors among them: 1:1 2:2 3:1 4:2 5:3
  // 6:6. Five is the only one that leaves three either way.
  BisectPlanner p(Commits(kOneMerge, 0, 6), 0, 6, BisectOptions{});
  p.AddSamples(0, std::vector<double>{1000, 1000, 1000});
  p.AddSamples(6, std::vector<double>{1200, 1200, 1200});
  ASSERT_TRUE(p.Next().has_value());
  EXPECT_EQ(p.Next()->commit_index, 5);
  EXPECT_EQ(p.Next()->commit_id, "c5");
}

TEST(BisectGraphTest, ACulpritInsideTheMergedBranchIsFound) {
  for (int culprit : {3, 4, 5}) {
    const GraphRun r = Bisect(kOneMerge, 0, 6, culprit);
    EXPECT_EQ(r.planner.FirstBadIndex(), culprit);
    const std::vector<Culprit> c = r.planner.Culprits();
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].commit_id, "c" + std::to_string(culprit));
    // Its last good is its parent on the branch (the fork point for the first).
    EXPECT_EQ(c[0].last_good_index, culprit == 3 ? 0 : culprit - 1);
    EXPECT_LE(r.tested.size(), 3u);
  }
}

TEST(BisectGraphTest, ACulpritOnTheMainLineIsFound) {
  for (int culprit : {1, 2}) {
    const GraphRun r = Bisect(kOneMerge, 0, 6, culprit);
    EXPECT_EQ(r.planner.FirstBadIndex(), culprit);
    // The side branch never held it: no step there after it tested good.
    EXPECT_EQ(r.planner.Culprits().front().last_good_index, culprit - 1);
  }
}

// Neither parent of the merge is slow, the merge is: the merge is the
// culprit, its last good the first parent.
TEST(BisectGraphTest, TheMergeItselfCanBeTheCulprit) {
  const GraphRun r = Bisect(kOneMerge, 0, 6, 6);
  EXPECT_EQ(r.planner.FirstBadIndex(), 6);
  EXPECT_EQ(r.planner.LastGoodIndex(), 2);
  // Both parents were measured good (or are ancestors of a good one).
  EXPECT_TRUE(std::find(r.tested.begin(), r.tested.end(), 5) != r.tested.end());
  EXPECT_TRUE(std::find(r.tested.begin(), r.tested.end(), 2) != r.tested.end());
}

// A good end on the side branch: the suspects are the main line and the
// merge (the side branch up to the good end is its history).
TEST(BisectGraphTest, AGoodEndOnTheSideBranch) {
  const GraphRun r = Bisect(kOneMerge, 4, 6, 1);
  EXPECT_EQ(r.planner.FirstBadIndex(), 1);
  for (int t : r.tested) EXPECT_TRUE(t == 1 || t == 2 || t == 5) << t;
}

// scripts/make-test-kernel-tree's history as import-git lists it: main's
// nine commits (0..8), the topic branch forked from 7 (9, 10, 11) and the
// merge (12) of 11 into 8. From the fork to the merge with the regression at
// 10: 10 first (bad), then 9 (good).
TEST(BisectGraphTest, TheTestTreesMergedBranch) {
  Graph tree = {{}};
  for (int i = 1; i <= 8; ++i) tree.push_back({i - 1});
  tree.push_back({7});
  tree.push_back({9});
  tree.push_back({10});
  tree.push_back({8, 11});
  const GraphRun r = Bisect(tree, 7, 12, 10);
  EXPECT_EQ(r.tested, (std::vector<int>{10, 9}));
  EXPECT_EQ(r.planner.FirstBadIndex(), 10);
  EXPECT_EQ(r.planner.LastGoodIndex(), 9);
}

// Criss-cross: 3 and 4 each merge 1 and 2, the other way round; 5 merges
// both.
//   0 - 1 - 3 - 5
//    \    X    /
//     - 2 - 4 -
const Graph kCrissCross = {{}, {0}, {0}, {1, 2}, {2, 1}, {3, 4}};

TEST(BisectGraphTest, CrissCrossMergesFindEveryCulprit) {
  for (int culprit = 1; culprit <= 5; ++culprit) {
    const GraphRun r = Bisect(kCrissCross, 0, 5, culprit);
    EXPECT_EQ(r.planner.FirstBadIndex(), culprit) << "culprit " << culprit;
    EXPECT_LE(r.tested.size(), 3u) << "culprit " << culprit;
  }
}

TEST(BisectGraphTest, ASkippedCommitIsNeverTestedAgainAndNamedWhenItCouldBeTheCulprit) {
  // 5 does not build: the next best suspect is tested instead.
  const GraphRun r = Bisect(kOneMerge, 0, 6, 4, {5});
  EXPECT_EQ(r.planner.FirstBadIndex(), 4);
  EXPECT_EQ(std::count(r.tested.begin(), r.tested.end(), 5), 1);
  // 4 does not build and is the culprit: its child 5 is the first bad found,
  // one of 4 and 5.
  const GraphRun unbuilt = Bisect(kOneMerge, 0, 6, 4, {4});
  const std::vector<Culprit> c = unbuilt.planner.Culprits();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].index, 5);
  EXPECT_EQ(c[0].skipped, std::vector<int>{4});
}

TEST(BisectGraphTest, JsonRoundTripResumesOnTheGraph) {
  BisectPlanner p(Commits(kOneMerge, 0, 6), 0, 6, BisectOptions{});
  p.AddSamples(0, std::vector<double>{1000, 1000, 1000});
  p.AddSamples(6, std::vector<double>{1200, 1200, 1200});
  ASSERT_EQ(p.Next()->commit_index, 5);
  p.AddSamples(5, std::vector<double>{1000, 1000, 1000});  // 5 good: 1, 2 or 6 left
  absl::StatusOr<BisectPlanner> back = BisectPlanner::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->Next().has_value());
  EXPECT_EQ(back->Next()->commit_index, p.Next()->commit_index);
  EXPECT_EQ(back->CommitId(3), "c3");
  EXPECT_EQ(back->ToJson(), p.ToJson());
}

}  // namespace
}  // namespace farm::analyzer
