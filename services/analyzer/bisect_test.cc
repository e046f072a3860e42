#include "services/analyzer/bisect.h"

#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "services/analyzer/log.h"

namespace farm::analyzer {
namespace {

// The planner's mechanics at three first repeats doubled up to twelve (the
// steps below count runs; the deployed defaults are larger).
BisectOptions ThreeRepeats() {
  BisectOptions o;
  o.initial_repeats = 3;
  o.max_repeats = 12;
  return o;
}

TEST(ConfirmationTest, EachLookTestsAtAlphaOverTheLooks) {
  BisectOptions o;  // 8 repeats doubled up to 128: looks at 8, 16, 32, 64, 128
  EXPECT_EQ(ConfirmationLooks(o), 5);
  BisectOptions fixed = o;
  fixed.max_confirm_repeats = fixed.confirm_repeats;
  EXPECT_EQ(ConfirmationLooks(fixed), 1);
  // A 3.3% drop measured 8 times a side (t = 3.3) with p between alpha / 5
  // and alpha: significant for one look, not for five; undecided, so more
  // repeats.
  const std::vector<double> good{100, 102, 98, 101, 99, 103, 97, 100};
  const std::vector<double> bad{96.7, 98.7, 94.7, 97.7, 95.7, 99.7, 93.7, 96.7};
  const Confirmation one_look = EvaluateConfirmation(good, bad, -0.03, fixed);
  const Confirmation five_looks = EvaluateConfirmation(good, bad, -0.03, o);
  ASSERT_LT(five_looks.test.p_value, o.alpha);
  ASSERT_GE(five_looks.test.p_value, o.alpha / 5);
  EXPECT_TRUE(one_look.confirmed);
  EXPECT_FALSE(five_looks.confirmed);
  EXPECT_EQ(five_looks.decision, SampleDecision::kMoreRepeats);
}

// Simulated farm: commit c measures level * (1 + shift if c >= culprit) with
// relative noise of standard deviation cv: Gaussian, or bimodal (one of two
// modes at -/+0.9 cv, each with sd 0.436 cv, as bench/analyzer_trials.h).
class Oracle {
 public:
  Oracle(uint64_t seed, int culprit, double shift, double cv, bool bimodal = false)
      : rng_(seed), culprit_(culprit), shift_(shift), cv_(cv), bimodal_(bimodal) {}
  std::vector<double> Run(int commit, int repeats) {
    std::vector<double> v;
    for (int i = 0; i < repeats; ++i)
      v.push_back(1000 * (commit >= culprit_ ? 1 + shift_ : 1) * (1 + cv_ * Deviation()));
    runs_ += repeats;
    return v;
  }
  int runs() const { return runs_; }

 private:
  double Deviation() {
    if (!bimodal_) return noise_(rng_);
    return (mode_(rng_) ? -0.9 : 0.9) + 0.436 * noise_(rng_);
  }
  std::mt19937_64 rng_;
  std::normal_distribution<double> noise_{0, 1};
  std::bernoulli_distribution mode_{0.5};
  int culprit_;
  double shift_, cv_;
  bool bimodal_;
  int runs_ = 0;
};

std::vector<std::string> Ids(int lo, int hi) {
  std::vector<std::string> ids;
  for (int i = lo; i <= hi; ++i) ids.push_back("c" + std::to_string(i));
  return ids;
}

// Runs a bisect to the end, feeding the oracle's answers.
BisectPlanner RunBisect(Oracle& o, int lo, int hi, const BisectOptions& opt) {
  BisectPlanner p(Ids(lo, hi), lo, hi, opt);
  p.AddSamples(lo, o.Run(lo, opt.confirm_repeats));
  p.AddSamples(hi, o.Run(hi, opt.confirm_repeats));
  for (int guard = 0; guard < 1000 && p.Next().has_value(); ++guard) {
    const BisectRequest r = *p.Next();
    p.AddSamples(r.commit_index, o.Run(r.commit_index, r.repeats));
  }
  return p;
}

TEST(BisectTest, ConvergesToPlantedCommit) {
  BisectOptions opt;
  int weak = 0, steps = 0;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const int culprit = 1 + static_cast<int>(seed * 7 % 62);
    Oracle o(seed, culprit, -0.15, 0.02);
    const BisectPlanner p = RunBisect(o, 0, 63, opt);
    ASSERT_TRUE(p.Done());
    EXPECT_FALSE(p.Failed());
    EXPECT_EQ(p.FirstBadIndex(), culprit) << "seed " << seed;
    EXPECT_EQ(p.LastGoodIndex(), culprit - 1);
    EXPECT_EQ(p.CommitId(p.FirstBadIndex()), "c" + std::to_string(culprit));
    // 63 commits apart: 5 or 6 halvings, each ending in a clear verdict;
    // weak ones in between are retests with more repeats.
    int clear = 0;
    for (const auto& s : p.Steps()) {
      clear += s.verdict == "good" || s.verdict == "bad";
      weak += s.verdict.starts_with("weak");
    }
    EXPECT_GE(clear, 5);
    EXPECT_LE(clear, 6);
    steps += static_cast<int>(p.Steps().size());
  }
  // A 15% shift under 2% noise is mostly clear at the first 3 repeats.
  EXPECT_LT(weak * 5, steps);
}

// A step's first 6 runs of a commit against references of 32 runs each, 3%
// apart at CV 2%, under bimodal noise: 6 runs that fall mostly in one mode
// understate their variance, and Welch's test of them against 32 runs (its
// standard error and degrees of freedom mostly theirs) rejected at 1% about
// 3% of the time, and a bad commit was called clearly "good" (or a good one
// "bad") in 0.5% of these steps. Against the variance of all three samples
// the test keeps its level and the wrong clear verdicts about halve.
TEST(BisectTest, BimodalRunsRarelyMisleadAStep) {
  int wrong = 0;
  const int kSteps = 4000;
  for (uint64_t seed = 0; seed < kSteps; ++seed) {
    // A commit after the culprit (index 2), or before it.
    const bool is_bad = seed % 2 == 0;
    Oracle o(seed, 2, -0.03, 0.02, /*bimodal=*/true);
    const std::vector<double> good = o.Run(0, 32), bad = o.Run(4, 32);
    const Judgement j = JudgeCommit(good, bad, o.Run(is_bad ? 3 : 1, 6), 0.01);
    wrong += j.verdict == (is_bad ? "good" : "bad");
  }
  // 20 of these 4,000 with Welch's test, 11 against the pooled variance.
  EXPECT_LT(wrong, 15);
}

// Whole bisects of a 16-commit range (the quality bench's range of one
// measured commit either side) under bimodal noise, references of 32 runs
// (a confirmation that doubled twice): fewer wrong clear verdicts name the
// culprit more often, and fewer weak ones cost fewer runs.
TEST(BisectTest, NamesTheCulpritUnderBimodalNoise) {
  BisectOptions opt;
  opt.confirm_repeats = 32;  // the references' runs
  int exact = 0, runs = 0;
  const int kBisects = 600;
  for (uint64_t seed = 0; seed < kBisects; ++seed) {
    const int culprit = 1 + static_cast<int>(seed % 16);
    Oracle o(seed, culprit, -0.03, 0.02, /*bimodal=*/true);
    const BisectPlanner p = RunBisect(o, 0, 16, opt);
    ASSERT_TRUE(p.Done());
    exact += p.FirstBadIndex() == culprit;
    runs += p.RunsRequested();
  }
  // With Welch's test 570 of these 600 (95.0%) for 24,102 runs; against
  // the pooled variance 584 (97.3%) for 18,636.
  EXPECT_GE(exact, 580);
  EXPECT_LT(runs, 21000);
}

TEST(BisectTest, NoisyBisectRetestsWeakVerdicts) {
  BisectOptions opt;
  int weak_steps = 0, correct = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    Oracle o(seed, 20, -0.05, 0.04);
    const BisectPlanner p = RunBisect(o, 0, 40, opt);
    ASSERT_TRUE(p.Done());
    correct += p.FirstBadIndex() == 20;
    for (size_t i = 0; i < p.Steps().size(); ++i) {
      const auto& s = p.Steps()[i];
      if (!s.verdict.starts_with("weak")) continue;
      ++weak_steps;
      // A weak verdict is followed by a retest of the same commit with more
      // repeats, unless it was already at max_repeats.
      if (s.repeats < opt.max_repeats) {
        ASSERT_LT(i + 1, p.Steps().size());
        EXPECT_EQ(p.Steps()[i + 1].commit_index, s.commit_index);
        EXPECT_GT(p.Steps()[i + 1].repeats, s.repeats);
      }
    }
  }
  EXPECT_GT(weak_steps, 0);
  EXPECT_GE(correct, 21);  // >= 70% at a 5% shift under 4% noise (bench: accuracy)
}

TEST(BisectTest, AdjacentRangeIsDoneImmediately) {
  BisectPlanner p(Ids(4, 5), 4, 5, BisectOptions{});
  EXPECT_FALSE(p.Done());  // needs reference samples first
  p.AddSamples(4, std::vector<double>{1, 1.01, 0.99});
  p.AddSamples(5, std::vector<double>{2, 2.01, 1.99});
  EXPECT_TRUE(p.Done());
  EXPECT_EQ(p.FirstBadIndex(), 5);
  EXPECT_TRUE(p.Steps().empty());
}

TEST(BisectTest, PendingStepAndRequestAreRecorded) {
  BisectPlanner p(Ids(0, 8), 0, 8, ThreeRepeats());
  p.AddSamples(0, std::vector<double>{100, 101, 99});
  p.AddSamples(8, std::vector<double>{80, 81, 79});
  ASSERT_TRUE(p.Next().has_value());
  EXPECT_EQ(p.Next()->commit_index, 4);
  EXPECT_EQ(p.Next()->commit_id, "c4");
  EXPECT_EQ(p.Next()->repeats, 3);
  ASSERT_EQ(p.Steps().size(), 1u);
  EXPECT_EQ(p.Steps()[0].verdict, "pending");
}

TEST(BisectTest, JsonRoundTripResumesSameBisect) {
  BisectOptions opt;
  Oracle a(42, 37, -0.1, 0.02);
  Oracle b(42, 37, -0.1, 0.02);
  const BisectPlanner straight = RunBisect(a, 0, 99, opt);

  BisectPlanner p(Ids(0, 99), 0, 99, opt);
  p.AddSamples(0, b.Run(0, opt.confirm_repeats));
  p.AddSamples(99, b.Run(99, opt.confirm_repeats));
  for (int i = 0; i < 3; ++i) {
    const BisectRequest r = *p.Next();
    p.AddSamples(r.commit_index, b.Run(r.commit_index, r.repeats));
  }
  absl::StatusOr<BisectPlanner> restored = BisectPlanner::FromJson(p.ToJson());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->Next()->commit_index, p.Next()->commit_index);
  while (restored->Next().has_value()) {
    const BisectRequest r = *restored->Next();
    restored->AddSamples(r.commit_index, b.Run(r.commit_index, r.repeats));
  }
  EXPECT_EQ(restored->FirstBadIndex(), 37);
  EXPECT_EQ(restored->Steps().size(), straight.Steps().size());
  EXPECT_EQ(restored->RunsRequested(), straight.RunsRequested());
  EXPECT_FALSE(BisectPlanner::FromJson("{").ok());
}

TEST(BisectTest, RestoreWhileRetestPendingKeepsSteps) {
  // A weak verdict asked for more repeats; the state is saved and restored
  // before they arrive: the restored planner waits, it does not judge again.
  BisectOptions opt = ThreeRepeats();
  BisectPlanner p(Ids(0, 4), 0, 4, opt);
  p.AddSamples(0, std::vector<double>{100, 102, 98, 101, 99, 100, 101, 99});
  p.AddSamples(4, std::vector<double>{90, 92, 88, 91, 89, 90, 91, 89});
  ASSERT_EQ(p.Next()->commit_index, 2);
  p.AddSamples(2, std::vector<double>{95, 97, 93});  // halfway: weak
  ASSERT_TRUE(p.Next().has_value());
  ASSERT_EQ(p.Steps().size(), 2u);
  EXPECT_TRUE(p.Steps()[0].verdict.starts_with("weak"));
  EXPECT_EQ(p.Steps()[1].verdict, "pending");
  EXPECT_EQ(p.Steps()[1].repeats, 6);
  absl::StatusOr<BisectPlanner> r = BisectPlanner::FromJson(p.ToJson());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Steps().size(), 2u);
  EXPECT_EQ(r->Next()->commit_index, 2);
  EXPECT_EQ(r->Next()->repeats, 3);
  EXPECT_EQ(r->RunsRequested(), p.RunsRequested());
  // Partial delivery: only the missing runs are asked for again.
  r->AddSamples(2, std::vector<double>{96});
  EXPECT_EQ(r->Steps().size(), 2u);
  EXPECT_EQ(r->Next()->repeats, 2);
}

TEST(BisectTest, DeterministicModelNeedsNoRetest) {
  // Zero variance everywhere (emulator with identical repeats): the
  // position between the references decides at once.
  BisectPlanner p(Ids(0, 4), 0, 4, ThreeRepeats());
  p.AddSamples(0, std::vector<double>{100, 100, 100});
  p.AddSamples(4, std::vector<double>{10, 10, 10});
  p.AddSamples(2, std::vector<double>{40, 40, 40});  // 2/3 of the change: bad
  ASSERT_EQ(p.Next()->commit_index, 1);
  p.AddSamples(1, std::vector<double>{70, 70, 70});  // 1/3: good
  EXPECT_TRUE(p.Done());
  EXPECT_EQ(p.FirstBadIndex(), 2);
  ASSERT_EQ(p.Steps().size(), 2u);
  EXPECT_EQ(p.Steps()[0].verdict, "bad");
  EXPECT_EQ(p.Steps()[1].verdict, "good");
}

// Zero-variance samples of commit c when the change is at `culprit`.
std::vector<double> Level(int c, int culprit) {
  return std::vector<double>(3, c >= culprit ? 10.0 : 100.0);
}

TEST(BisectSkipTest, ASkippedMiddleCommitMakesItTestANeighbour) {
  BisectPlanner p(Ids(0, 8), 0, 8, ThreeRepeats());
  p.AddSamples(0, Level(0, 6));
  p.AddSamples(8, Level(8, 6));
  ASSERT_EQ(p.Next()->commit_index, 4);
  EXPECT_FALSE(p.Skip(0));  // a reference: nothing to judge against without it
  EXPECT_FALSE(p.Skip(8));
  ASSERT_TRUE(p.Skip(4));
  ASSERT_TRUE(p.Next().has_value());
  EXPECT_EQ(p.Next()->commit_index, 3);  // nearest the midpoint, earlier on a tie
  EXPECT_EQ(p.Next()->repeats, 3);
  ASSERT_EQ(p.Steps().size(), 2u);
  EXPECT_EQ(p.Steps()[0].verdict, "skip");
  EXPECT_EQ(p.Steps()[0].commit_id, "c4");
  EXPECT_EQ(p.Steps()[1].verdict, "pending");
  // c3 good: the range is 3..8, whose midpoint 5 is tested next (4 never again).
  p.AddSamples(3, Level(3, 6));
  ASSERT_EQ(p.Next()->commit_index, 5);
  p.AddSamples(5, Level(5, 6));
  ASSERT_EQ(p.Next()->commit_index, 6);
  p.AddSamples(6, Level(6, 6));
  ASSERT_TRUE(p.Done());
  EXPECT_FALSE(p.Failed());
  ASSERT_EQ(p.Culprits().size(), 1u);
  EXPECT_EQ(p.Culprits()[0].commit_id, "c6");
  EXPECT_TRUE(p.Culprits()[0].skipped.empty());
}

TEST(BisectSkipTest, OnlySkippedCommitsLeftEndsWithEveryCandidate) {
  BisectPlanner p(Ids(0, 8), 0, 8, ThreeRepeats());
  p.AddSamples(0, Level(0, 6));
  p.AddSamples(8, Level(8, 6));
  ASSERT_TRUE(p.Skip(4));
  p.AddSamples(3, Level(3, 6));  // good: 3..8
  ASSERT_EQ(p.Next()->commit_index, 5);
  p.AddSamples(5, Level(5, 6));  // good: 5..8
  ASSERT_EQ(p.Next()->commit_index, 6);
  ASSERT_TRUE(p.Skip(6));
  ASSERT_EQ(p.Next()->commit_index, 7);
  // Saved and restored with skips recorded: the same bisect goes on.
  absl::StatusOr<BisectPlanner> r = BisectPlanner::FromJson(p.ToJson());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->Next()->commit_index, 7);
  ASSERT_TRUE(r->Skip(7));
  ASSERT_TRUE(r->Done());
  EXPECT_FALSE(r->Failed());
  EXPECT_FALSE(r->Next().has_value());
  EXPECT_EQ(r->LastGoodIndex(), 5);
  EXPECT_EQ(r->FirstBadIndex(), 8);
  ASSERT_EQ(r->Culprits().size(), 1u);
  const Culprit c = r->Culprits()[0];
  EXPECT_EQ(c.last_good_index, 5);
  EXPECT_EQ(c.index, 8);
  EXPECT_EQ(c.skipped, (std::vector<int>{6, 7}));
  int skips = 0;
  for (const BisectStepRecord& s : r->Steps()) skips += s.verdict == "skip";
  EXPECT_EQ(skips, 3);
  absl::StatusOr<BisectPlanner> done = BisectPlanner::FromJson(r->ToJson());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->Culprits()[0].skipped, (std::vector<int>{6, 7}));
}

// Confirmed as what it is, not as "+0.0%".
TEST(ConfirmationTest, AChangeFromZeroIsConfirmedFromZero) {
  const std::vector<double> good(4, 0.0), bad = {5, 5, 5, 5};
  const Confirmation c = EvaluateConfirmation(good, bad, kFromZero, BisectOptions{});
  EXPECT_TRUE(c.confirmed);
  EXPECT_EQ(Percent(c.test.relative_change), "rose from 0");
}

TEST(ConfirmationTest, RealShiftConfirmedNoiseRejected) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n(0, 1);
  std::vector<double> good, bad, same;
  for (int i = 0; i < 8; ++i) {
    good.push_back(1000 * (1 + 0.02 * n(rng)));
    bad.push_back(800 * (1 + 0.02 * n(rng)));
    same.push_back(1000 * (1 + 0.02 * n(rng)));
  }
  BisectOptions opt;
  EXPECT_TRUE(EvaluateConfirmation(good, bad, -0.2, opt).confirmed);
  EXPECT_FALSE(EvaluateConfirmation(good, bad, +0.2, opt).confirmed);  // wrong direction
  EXPECT_FALSE(EvaluateConfirmation(good, same, -0.2, opt).confirmed);
}

// Two slow runs among the good reference's eight flip the sign of a small
// sample without making it significant: that asks for more repeats, where a
// difference significant the other way is rejected at once.
TEST(ConfirmationTest, TheOtherDirectionRejectsOnlyWhenSignificant) {
  const std::vector<double> good = {973, 983, 834, 1029, 990, 978, 857, 996};
  const std::vector<double> bad = {976, 986, 971, 987, 952, 951, 991, 958};
  const Confirmation flipped = EvaluateConfirmation(good, bad, -0.03, BisectOptions{});
  ASSERT_GT(flipped.test.relative_change, 0);
  EXPECT_EQ(flipped.decision, SampleDecision::kMoreRepeats);
  const std::vector<double> up = {1100, 1102, 1098, 1101, 1099, 1100, 1101, 1099};
  EXPECT_EQ(EvaluateConfirmation(bad, up, -0.03, BisectOptions{}).decision,
            SampleDecision::kReject);
}

// A change of just the magnitude whose interval at interval_level already
// lies under it is not rejected while a later look may still confirm it:
// the magnitude is judged at the looks' corrected level.
TEST(ConfirmationTest, TheMagnitudeIsJudgedAtTheLooksCorrectedLevel) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 1);
  BisectOptions opt;
  std::vector<double> good, bad;
  for (int i = 0; i < 32; ++i) {
    good.push_back(1000 * (1 + 0.02 * noise(rng)));
    bad.push_back(1000 * (1 - 0.03) * (1 + 0.02 * noise(rng)));
  }
  // Move the bad side so that the reported (99%) interval ends just under
  // the magnitude: its half width does not move with the shift.
  const Confirmation first = EvaluateConfirmation(good, bad, -0.03, opt);
  const double half = (first.interval.hi - first.interval.lo) / 2;
  const double mg = std::accumulate(good.begin(), good.end(), 0.0) / 32;
  const double mb = std::accumulate(bad.begin(), bad.end(), 0.0) / 32;
  for (double& v : bad) v += mg * (1 - (0.0295 - half)) - mb;
  const Confirmation c = EvaluateConfirmation(good, bad, -0.03, opt);
  ASSERT_LT(std::max(std::fabs(c.interval.lo), std::fabs(c.interval.hi)), opt.magnitude)
      << "the reported interval lies under the magnitude";
  EXPECT_NE(c.decision, SampleDecision::kReject);
}

TEST(BisectPlannerDeathTest, EmptyRangeAborts) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  EXPECT_DEATH(BisectPlanner(Ids(5, 5), 5, 5, BisectOptions{}),
               "first_bad_index > last_good_index: bisect range must have");
  EXPECT_DEATH(BisectPlanner(Ids(4, 6), 6, 4, BisectOptions{}), "first_bad > last_good");
}

TEST(ConfirmationTest, SuggestiveResultAsksForMoreRepeatsThenDecides) {
  BisectOptions opt;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 1);
  // A true 3% drop under 2.5% noise: 8+8 runs are often only suggestive.
  auto draw = [&](double level, int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(level * (1 + 0.025 * noise(rng)));
    return v;
  };
  int more = 0, confirmed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<double> good = draw(1000, opt.confirm_repeats);
    std::vector<double> bad = draw(970, opt.confirm_repeats);
    Confirmation c = EvaluateConfirmation(good, bad, -0.03, opt);
    int guard = 0;
    while (c.decision == SampleDecision::kMoreRepeats && ++guard < 10) {
      ++more;
      const int n = static_cast<int>(good.size());
      ASSERT_LT(n, opt.max_confirm_repeats);
      const auto g = draw(1000, n), b = draw(970, n);  // doubling
      good.insert(good.end(), g.begin(), g.end());
      bad.insert(bad.end(), b.begin(), b.end());
      c = EvaluateConfirmation(good, bad, -0.03, opt);
    }
    EXPECT_NE(c.decision, SampleDecision::kMoreRepeats);
    EXPECT_EQ(c.confirmed, c.decision == SampleDecision::kAccept);
    confirmed += c.confirmed;
  }
  EXPECT_GT(more, 0);
  EXPECT_GE(confirmed, 30);  // most are found once the repeats are doubled
  // A flat result is rejected without more runs.
  const std::vector<double> same{1000, 1001, 999, 1000};
  EXPECT_EQ(EvaluateConfirmation(same, same, -0.03, opt).decision, SampleDecision::kReject);
}

TEST(ConfirmationTest, MagnitudeOnTheIntervalNotThePointEstimate) {
  BisectOptions opt;
  // -2.8% measured, but with 1% noise the interval reaches -3%: confirmed.
  const std::vector<double> good{1000, 1010, 990, 1005, 995, 1012, 988, 1000};
  std::vector<double> bad;
  for (double v : good) bad.push_back(v * 0.972);
  std::swap(bad[0], bad[1]);
  const Confirmation c = EvaluateConfirmation(good, bad, -0.03, opt);
  EXPECT_LT(std::fabs(c.test.relative_change), opt.magnitude);
  EXPECT_GE(std::fabs(c.interval.lo), opt.magnitude);
  EXPECT_TRUE(c.confirmed);
  // -2% with almost no noise: the interval is all under 3%: rejected.
  std::vector<double> tight_good(8, 1000), tight_bad(8, 980);
  tight_good[0] = 1000.1;
  tight_bad[0] = 980.1;
  EXPECT_FALSE(EvaluateConfirmation(tight_good, tight_bad, -0.03, opt).confirmed);
}

// Two changes in one range: -8% at 10, then another -15% at 20 (as seed
// 000's c062db039f40 and c588072bba6b).
class TwoStepOracle {
 public:
  explicit TwoStepOracle(uint64_t seed) : rng_(seed) {}
  std::vector<double> Run(int commit, int repeats) {
    std::vector<double> v;
    const double level = 1000 * (commit >= 10 ? 0.92 : 1) * (commit >= 20 ? 0.85 : 1);
    for (int i = 0; i < repeats; ++i) v.push_back(level * (1 + 0.01 * noise_(rng_)));
    return v;
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> noise_{0, 1};
};

TEST(BisectTest, RangeWithTwoChangesNamesBothCulpritsWithShares) {
  BisectOptions opt;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    TwoStepOracle o(seed);
    BisectPlanner p(Ids(0, 32), 0, 32, opt);
    p.AddSamples(0, o.Run(0, opt.confirm_repeats));
    p.AddSamples(32, o.Run(32, opt.confirm_repeats));
    bool round_tripped = false;
    for (int guard = 0; guard < 1000 && p.Next().has_value(); ++guard) {
      const BisectRequest r = *p.Next();
      p.AddSamples(r.commit_index, o.Run(r.commit_index, r.repeats));
      // A restart in the middle of the second part resumes it.
      if (!round_tripped && !p.Culprits().empty() && p.Next().has_value()) {
        absl::StatusOr<BisectPlanner> back = BisectPlanner::FromJson(p.ToJson());
        ASSERT_TRUE(back.ok());
        p = *back;
        round_tripped = true;
      }
    }
    ASSERT_TRUE(p.Done());
    ASSERT_FALSE(p.Failed());
    const std::vector<Culprit> c = p.Culprits();
    ASSERT_EQ(c.size(), 2u) << "seed " << seed;
    EXPECT_EQ(c[0].index, 10) << "seed " << seed;
    EXPECT_EQ(c[0].commit_id, "c10");
    EXPECT_EQ(c[1].index, 20) << "seed " << seed;
    // Total 1000 -> 782: shares 80/218 and 138/218.
    EXPECT_NEAR(c[0].share, 80.0 / 218, 0.05);
    EXPECT_NEAR(c[1].share, 138.0 / 218, 0.05);
    EXPECT_NEAR(c[0].relative_change, -0.08, 0.015);
    EXPECT_NEAR(c[1].relative_change, -0.138, 0.015);
    // The bisect is named by the larger part.
    EXPECT_EQ(p.FirstBadIndex(), 20);
    EXPECT_EQ(p.LastGoodIndex(), 19);
    int splits = 0;
    for (const auto& s : p.Steps()) splits += s.verdict == "split";
    EXPECT_GE(splits, 1);
  }
}

TEST(BisectTest, SingleChangeHasOneCulpritWithTheWholeShare) {
  Oracle o(3, 17, -0.15, 0.02);
  const BisectPlanner p = RunBisect(o, 0, 40, BisectOptions{});
  ASSERT_TRUE(p.Done());
  const std::vector<Culprit> c = p.Culprits();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].index, 17);
  EXPECT_EQ(c[0].last_good_index, 16);
  EXPECT_DOUBLE_EQ(c[0].share, 1);
}

}  // namespace
}  // namespace farm::analyzer

namespace farm::analyzer {
namespace {

std::vector<double> Noisy(double mean, double cv, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(mean, mean * cv);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(d(rng));
  return v;
}

// A regression of -20%: a later commit at the old level is back, one still
// 20% (or 10%) down is not, a later commit better than the old level is
// back; at CV 1% with 8 repeats each (what the analyzer runs), 20 seeds.
TEST(FixCheckTest, BackOnlyAtTheOldLevel) {
  const BisectOptions o;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<double> good = Noisy(1000, 0.01, 8, seed);
    EXPECT_TRUE(JudgeFixCheck(good, Noisy(1000, 0.01, 8, seed + 100), -0.2, o).back) << seed;
    EXPECT_TRUE(JudgeFixCheck(good, Noisy(1050, 0.01, 8, seed + 100), -0.2, o).back) << seed;
    const FixCheck still = JudgeFixCheck(good, Noisy(800, 0.01, 8, seed + 200), -0.2, o);
    EXPECT_FALSE(still.back) << seed;
    EXPECT_NEAR(still.test.relative_change, -0.2, 0.03);
    EXPECT_FALSE(JudgeFixCheck(good, Noisy(900, 0.01, 8, seed + 300), -0.2, o).back) << seed;
  }
  // An improvement that went away is judged in its own direction.
  const std::vector<double> good = Noisy(1000, 0.01, 8, 7);
  EXPECT_FALSE(JudgeFixCheck(good, Noisy(1200, 0.01, 8, 8), +0.2, o).back);
  EXPECT_TRUE(JudgeFixCheck(good, Noisy(800, 0.01, 8, 8), +0.2, o).back);
}

}  // namespace
}  // namespace farm::analyzer
