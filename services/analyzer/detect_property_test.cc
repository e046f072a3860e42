// Property test of the analyzer's pure core: detection, top-up, classification,
// confirmation and bisection driven over random series of every shape a
// matrix can give (1..n runs per commit, a single commit, constant values,
// steps, very large and very small magnitudes, every mode), checking what
// must hold whatever the data: no crash, every index a commit of the series,
// every range ordered, every figure finite or marked "not measured".
//
// Seeded: a failure prints its case number and seed, and
// FARM_PROPERTY_CASES=N runs N cases (bench/ runs many more).
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "services/analyzer/bisect.h"
#include "services/analyzer/detect.h"

namespace farm::analyzer {
namespace {

constexpr uint64_t kSeed = 20261205;

int Cases(int fallback) {
  const char* env = std::getenv("FARM_PROPERTY_CASES");
  const int n = env == nullptr ? 0 : std::atoi(env);
  return n > 0 ? n : fallback;
}

// One random series' shape.
struct Shape {
  int commits = 1;
  int max_runs = 1;     // runs per commit: 1..max_runs
  double level = 1000;  // far from 1 on purpose at times
  double cv = 0.02;     // 0: constant values
  int step_at = -1;     // commit position of a shift, -1 none
  double shift = 0;
  int commit_stride = 1;  // catalog indices between measured commits
};

Shape RandomShape(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Shape s;
  s.commits = pick(1, 3) == 1 ? pick(1, 3) : pick(2, 40);
  s.max_runs = pick(1, 4) == 1 ? 1 : pick(1, 12);
  const double levels[] = {1000, 1, 1e-200, 1e200, 3.5e7, 0.25};
  s.level = levels[pick(0, 5)] * (pick(0, 1) == 0 ? 1 : -1) * (pick(0, 4) == 0 ? -1 : 1);
  const double cvs[] = {0, 0.001, 0.02, 0.05, 0.3};
  s.cv = cvs[pick(0, 4)];
  if (pick(0, 2) != 0 && s.commits > 1) {
    s.step_at = pick(1, s.commits - 1);
    const double shifts[] = {-0.5, -0.1, -0.03, 0.03, 0.2, 3};
    s.shift = shifts[pick(0, 5)];
  }
  s.commit_stride = pick(1, 5);
  return s;
}

Series MakeSeries(const Shape& shape, const std::string& mode, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0, 1);
  std::uniform_int_distribution<int> runs(1, shape.max_runs);
  Series s;
  s.key = {"p", "w", "throughput", mode, false, "", "{}"};
  s.polarity = Polarity::kHigherIsBetter;
  for (int c = 0; c < shape.commits; ++c) {
    SeriesPoint p;
    p.commit_index = c * shape.commit_stride;
    p.commit_id = "c" + std::to_string(p.commit_index);
    const double level =
        shape.level * (shape.step_at >= 0 && c >= shape.step_at ? 1 + shape.shift : 1);
    for (int r = runs(rng); r > 0; --r) p.values.push_back(level * (1 + shape.cv * noise(rng)));
    s.points.push_back(std::move(p));
  }
  return s;
}

std::vector<Series> RandomMatrix(std::mt19937_64& rng) {
  const Shape shape = RandomShape(rng);
  std::vector<Series> out;
  for (const char* mode : {"off", "strict", "lazy", "passthrough"}) {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) continue;
    out.push_back(MakeSeries(shape, mode, rng));
  }
  return out;
}

bool IsCommitOf(const std::vector<Series>& series, const SeriesKey& key, int index,
                const std::string& id) {
  for (const Series& s : series) {
    if (!(s.key == key)) continue;
    for (const SeriesPoint& p : s.points)
      if (p.commit_index == index) return p.commit_id == id;
  }
  return false;
}

void CheckChangePoint(const std::vector<Series>& series, const ChangePoint& cp) {
  EXPECT_TRUE(IsCommitOf(series, cp.key, cp.last_good_index, cp.last_good));
  EXPECT_TRUE(IsCommitOf(series, cp.key, cp.first_bad_index, cp.first_bad));
  EXPECT_LT(cp.last_good_index, cp.first_bad_index);
  EXPECT_LE(cp.segment_begin_index, cp.last_good_index);
  EXPECT_LE(cp.first_bad_index, cp.segment_end_index);
  EXPECT_GE(cp.p_value, 0);
  EXPECT_LE(cp.p_value, 1);
}

void CheckTopUp(const std::vector<Series>& series, const TopUpRequest& r) {
  CheckChangePoint(series, r.at);
  EXPECT_GE(r.repeats, 1);
  ASSERT_EQ(r.commit_indices.size(), r.commit_ids.size());
  ASSERT_FALSE(r.commit_indices.empty());
  for (size_t i = 0; i < r.commit_indices.size(); ++i) {
    EXPECT_TRUE(IsCommitOf(series, r.at.key, r.commit_indices[i], r.commit_ids[i]));
    EXPECT_GE(r.commit_indices[i], r.at.last_good_index);
    EXPECT_LE(r.commit_indices[i], r.at.first_bad_index);
    if (i > 0) EXPECT_LT(r.commit_indices[i - 1], r.commit_indices[i]);
  }
}

TEST(DetectPropertyTest, AnyMatrixIsDetectedToppedUpAndClassifiedWithinItsCommits) {
  std::mt19937_64 rng(kSeed);
  const DetectOptions options;
  const int cases = Cases(600);
  for (int c = 0; c < cases; ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + " of seed " + std::to_string(kSeed));
    const std::vector<Series> series = RandomMatrix(rng);
    std::vector<SeriesFailure> failed;
    const std::vector<ChangePoint> cps = DetectCandidates(series, options, &failed);
    for (const SeriesFailure& f : failed) ADD_FAILURE() << f.key.ToString() << ": " << f.status;
    for (const ChangePoint& cp : cps) CheckChangePoint(series, cp);
    for (const TopUpRequest& r : TopUpRequests(series, options, &failed)) CheckTopUp(series, r);
    for (const ChangePoint& cp : DetectAll(series, options)) EXPECT_FALSE(cp.suggestive);
    for (const Finding& f : Classify(cps, series, options)) {
      EXPECT_LT(f.last_good_index, f.first_bad_index);
      for (const ModeEffect& e : f.per_mode) EXPECT_LE(e.p_value, 1) << e.mode;
    }
    if (HasFailure()) return;  // one case's trace is enough to read
  }
}

// A value that is not finite, or points out of commit order, leaves that
// series out with its reason; the others are judged as without it.
TEST(DetectPropertyTest, AnUnjudgeableSeriesIsLeftOutAndTheOthersKept) {
  std::mt19937_64 rng(kSeed + 1);
  const DetectOptions options;
  for (int c = 0; c < Cases(300); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    std::vector<Series> series = RandomMatrix(rng);
    if (series.empty() || series[0].points.empty()) continue;
    const std::vector<ChangePoint> before = DetectAll({series.begin() + 1, series.end()}, options);
    const double bad[] = {std::nan(""), INFINITY, -INFINITY};
    series[0].points.back().values.push_back(bad[c % 3]);
    std::vector<SeriesFailure> failed;
    const std::vector<ChangePoint> after = DetectAll(series, options, &failed);
    ASSERT_EQ(failed.size(), 1u);
    EXPECT_EQ(failed[0].key, series[0].key);
    EXPECT_EQ(failed[0].status.code(), absl::StatusCode::kInvalidArgument);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_EQ(after[i].key, before[i].key);
      EXPECT_EQ(after[i].first_bad, before[i].first_bad);
    }
    EXPECT_FALSE(DetectChangePoints(series[0], options, options.alpha).ok());
  }
}

std::vector<double> Runs(std::mt19937_64& rng, int n, double level, double cv) {
  std::normal_distribution<double> noise(0, 1);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(level * (1 + cv * noise(rng)));
  return v;
}

TEST(BisectPropertyTest, ConfirmationDecidesAnySamples) {
  std::mt19937_64 rng(kSeed + 2);
  const BisectOptions options;
  for (int c = 0; c < Cases(1000); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const Shape s = RandomShape(rng);
    const std::vector<double> good = Runs(rng, s.max_runs, s.level, s.cv);
    const std::vector<double> bad = Runs(rng, s.max_runs, s.level * (1 + s.shift), s.cv);
    const Confirmation k = EvaluateConfirmation(good, bad, s.shift == 0 ? -0.03 : s.shift, options);
    if (k.confirmed) EXPECT_EQ(k.decision, SampleDecision::kAccept);
    const FixCheck f = JudgeFixCheck(good, bad, -0.03, options);
    (void)f;
  }
}

// The planner, fed whatever a farm measures (any level, noise and step,
// and commits that do not build), ends within its step budget with every
// culprit inside the range it was given.
TEST(BisectPropertyTest, ThePlannerEndsInsideItsRange) {
  std::mt19937_64 rng(kSeed + 3);
  BisectOptions options;
  for (int c = 0; c < Cases(400); ++c) {
    SCOPED_TRACE("case " + std::to_string(c));
    const Shape s = RandomShape(rng);
    const int lo = std::uniform_int_distribution<int>(0, 20)(rng);
    const int hi = lo + std::uniform_int_distribution<int>(1, 60)(rng);
    const int culprit = std::uniform_int_distribution<int>(lo + 1, hi)(rng);
    std::vector<std::string> ids;
    for (int i = lo; i <= hi; ++i) ids.push_back("c" + std::to_string(i));
    BisectPlanner planner(ids, lo, hi, options);
    int moves = 0;
    while (!planner.Done() && planner.Next().has_value() && moves < 10000) {
      const BisectRequest r = *planner.Next();
      ASSERT_GE(r.commit_index, lo);
      ASSERT_LE(r.commit_index, hi);
      ASSERT_GE(r.repeats, 1);
      ++moves;
      if (r.commit_index != lo && r.commit_index != hi &&
          std::uniform_int_distribution<int>(0, 9)(rng) == 0 && planner.Skip(r.commit_index))
        continue;
      const double level = s.level * (r.commit_index >= culprit ? 1 + s.shift : 1);
      planner.AddSamples(r.commit_index, Runs(rng, r.repeats, level, s.cv));
    }
    EXPECT_LT(moves, 10000) << "the planner never ended";
    for (const Culprit& k : planner.Culprits()) {
      EXPECT_GT(k.index, lo);
      EXPECT_LE(k.index, hi);
      EXPECT_LT(k.last_good_index, k.index);
      EXPECT_EQ(planner.CommitId(k.index), k.commit_id);
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace farm::analyzer
