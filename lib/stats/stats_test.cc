#include "lib/stats/stats.h"

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

namespace farm::stats {
namespace {

TEST(StatsTest, MeanAndVariance) {
  const std::vector<double> x{1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(Mean(x), 3);
  EXPECT_DOUBLE_EQ(Variance(x), 2.5);
  EXPECT_DOUBLE_EQ(Variance(std::vector<double>{7}), 0);
}

// Reference: R t.test(1:5, c(2,4,6,8,10)) -> t = -1.8974, df = 5.8824, p = 0.1075.
TEST(StatsTest, WelchMatchesReference) {
  const std::vector<double> a{1, 2, 3, 4, 5};
  const std::vector<double> b{2, 4, 6, 8, 10};
  const TwoSampleResult r = WelchTTest(a, b);
  EXPECT_NEAR(r.statistic, 1.8974, 1e-3);
  EXPECT_NEAR(r.p_value, 0.1075, 2e-3);
  EXPECT_DOUBLE_EQ(r.relative_change, 1.0);
}

// Reference: R wilcox.test(1:5, 6:10, exact=FALSE, correct=TRUE) -> p = 0.01219.
TEST(StatsTest, MannWhitneyMatchesReference) {
  const std::vector<double> a{1, 2, 3, 4, 5};
  const std::vector<double> b{6, 7, 8, 9, 10};
  const TwoSampleResult r = MannWhitneyTest(a, b);
  EXPECT_NEAR(r.p_value, 0.01219, 2e-4);
  EXPECT_GT(r.statistic, 0);
}

TEST(StatsTest, ConstantSamplesDecideByMeans) {
  const std::vector<double> a{5, 5, 5};
  const std::vector<double> same{5, 5, 5};
  const std::vector<double> other{6, 6, 6};
  EXPECT_DOUBLE_EQ(WelchTTest(a, same).p_value, 1);
  EXPECT_DOUBLE_EQ(WelchTTest(a, other).p_value, 0);
}

// Values near the double's range overflow the variances: the tests answer
// "no evidence" (or the interval is unbounded) instead of Boost throwing on
// NaN degrees of freedom.
TEST(StatsTest, OverflowingVariancesGiveNoEvidenceNotAnException) {
  const std::vector<double> a{1e200, -1e200, 3e200}, b{2e200, -2e200, 1e200};
  const TwoSampleResult w = WelchTTest(a, b);
  EXPECT_GE(w.p_value, 0);
  EXPECT_LE(w.p_value, 1);
  const TwoSampleResult c = ContrastFromSummary(3, 1e300, 3, -1e300, INFINITY, 4);
  EXPECT_EQ(c.p_value, 1);
  const Interval i = RelativeChangeInterval(a, b, 0.99);
  EXPECT_FALSE(std::isnan(i.lo) && std::isnan(i.hi));
}

TEST(StatsTest, TooFewSamplesIsNotSignificant) {
  const std::vector<double> a{1};
  const std::vector<double> b{100, 101};
  EXPECT_DOUBLE_EQ(WelchTTest(a, b).p_value, 1);
}

// Reference: R t.test(1:3, 4:6, var.equal = TRUE) -> t = -3.6742, df = 4,
// p = 0.02131 (pooled variance 1).
TEST(StatsTest, ContrastWithPooledVarianceMatchesStudent) {
  const TwoSampleResult r = ContrastFromSummary(3, 2, 3, 5, 1, 4);
  EXPECT_NEAR(r.statistic, 3.6742, 1e-3);
  EXPECT_NEAR(r.p_value, 0.02131, 2e-4);
  // More degrees of freedom for the same variance: a smaller p.
  EXPECT_LT(ContrastFromSummary(3, 2, 3, 5, 1, 40).p_value, r.p_value);
  EXPECT_EQ(ContrastFromSummary(3, 2, 3, 5, 0, 4).p_value, 0);
  EXPECT_EQ(ContrastFromSummary(3, 2, 3, 2, 0, 4).p_value, 1);
}

TEST(StatsTest, PoolWithinVarianceMatchesHandComputation) {
  // {1, 2, 3}: variance 1 on 2 df; {10, 14}: 8 on 1; {5}: nothing.
  const std::vector<double> a{1, 2, 3}, b{10, 14}, c{5};
  const std::span<const double> groups[] = {a, b, c};
  const PooledVariance p = PoolWithinVariance(groups);
  EXPECT_DOUBLE_EQ(p.df, 3);
  EXPECT_DOUBLE_EQ(p.variance, 10.0 / 3);
  // Over two groups it is Student's equal-variance t-test.
  const std::span<const double> two[] = {a, b};
  const TwoSampleResult r = PooledContrast(a, b, PoolWithinVariance(two));
  const double se = std::sqrt((2 * 1 + 1 * 8) / 3.0 * (1.0 / 3 + 1.0 / 2));
  EXPECT_NEAR(r.statistic, (12 - 2) / se, 1e-9);
  EXPECT_DOUBLE_EQ(r.relative_change, 5);
  const std::span<const double> none[] = {c};
  EXPECT_EQ(PoolWithinVariance(none).df, 0);
}

// 6 runs against 32 of the same level under bimodal noise (two modes at
// -/+0.9 sd, each 0.436 sd wide), tested at 1%: Welch's test leans on the 6
// runs' variance, which is small whenever they fall mostly in one mode, and
// rejects about 3% of the time; the contrast against the variance pooled
// with a second reference of 32 runs (a bisect step's three samples) keeps
// its level.
TEST(StatsTest, PooledContrastKeepsItsLevelUnderBimodalNoise) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  std::bernoulli_distribution mode(0.5);
  auto runs = [&](int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i)
      v.push_back(1000 + 20 * ((mode(rng) ? -0.9 : 0.9) + 0.436 * normal(rng)));
    return v;
  };
  int welch = 0, pooled = 0;
  const int kDraws = 20000;
  for (int t = 0; t < kDraws; ++t) {
    const std::vector<double> ref = runs(32), other = runs(32), x = runs(6);
    const std::span<const double> groups[] = {ref, other, x};
    welch += WelchTTest(ref, x).p_value < 0.01;
    pooled += PooledContrast(ref, x, PoolWithinVariance(groups)).p_value < 0.01;
  }
  EXPECT_GT(welch, kDraws * 2 / 100);
  EXPECT_LT(pooled, kDraws * 15 / 1000);
}

// Hand-computed: a = 1..5 (mean 3, var 2.5), b = 2,4,..,10 (mean 6, var 10):
// se = sqrt(2.5/5 + 10/5) = 1.5811, Welch df = 5.8824, qt(0.975, 5.8824) =
// 2.4594 (R), so the difference 3 +- 3.8886 over |mean a| = 3 is
// 1 +- 1.2962.
TEST(StatsTest, RelativeChangeIntervalMatchesHandComputation) {
  const std::vector<double> a{1, 2, 3, 4, 5};
  const std::vector<double> b{2, 4, 6, 8, 10};
  const Interval ci = RelativeChangeInterval(a, b, 0.95);
  EXPECT_NEAR(ci.lo, 1 - 1.2962, 2e-3);
  EXPECT_NEAR(ci.hi, 1 + 1.2962, 2e-3);
  const Interval wide = RelativeChangeInterval(a, b, 0.99);
  EXPECT_LT(wide.lo, ci.lo);
  EXPECT_GT(wide.hi, ci.hi);
  // Too few values: nothing is known.
  const Interval none = RelativeChangeInterval(std::vector<double>{1}, b, 0.95);
  EXPECT_TRUE(std::isinf(none.lo) && std::isinf(none.hi));
}

TEST(StatsTest, AChangeFromZeroHasNoRelativeSize) {
  const std::vector<double> zero = {0, 0, 0};
  const std::vector<double> some = {4, 5, 6};
  EXPECT_EQ(WelchTTest(zero, some).relative_change, kFromZero);
  const std::vector<double> below = {-1, -2, -3};
  EXPECT_EQ(WelchTTest(zero, below).relative_change, -kFromZero);
  EXPECT_EQ(WelchTTest(zero, zero).relative_change, 0);
  const Interval up = RelativeChangeInterval(zero, some, 0.95);
  EXPECT_EQ(JudgeMagnitude(up, 0.03), MagnitudeCall::kAbove);
  EXPECT_EQ(JudgeMagnitude(RelativeChangeInterval(zero, zero, 0.95), 0.03), MagnitudeCall::kBelow);
}

TEST(StatsTest, MagnitudeIsJudgedOnTheInterval) {
  // Clearly at least 3%.
  EXPECT_EQ(JudgeMagnitude({-0.05, -0.04}, 0.03), MagnitudeCall::kAbove);
  // A true 3% change measured at -2.8%: the point estimate misses the
  // threshold, the interval reaches it.
  EXPECT_EQ(JudgeMagnitude({-0.035, -0.021}, 0.03), MagnitudeCall::kReaches);
  // Real but small: every plausible value is under 3%.
  EXPECT_EQ(JudgeMagnitude({-0.025, -0.01}, 0.03), MagnitudeCall::kBelow);
  EXPECT_EQ(JudgeMagnitude({-0.01, 0.02}, 0.03), MagnitudeCall::kBelow);
  // Straddling zero but reaching -4%.
  EXPECT_EQ(JudgeMagnitude({-0.04, 0.01}, 0.03), MagnitudeCall::kReaches);
  EXPECT_EQ(JudgeMagnitude({0.031, 0.05}, 0.03), MagnitudeCall::kAbove);
}

// Hand-computed Benjamini-Hochberg examples at q = 0.05.
TEST(StatsTest, BenjaminiHochbergMatchesHandComputation) {
  // m = 5, lines k q / m = .01 .02 .03 .04 .05; sorted p .005 .01 .03 .04 .2:
  // the first four are under their lines, .2 is not: threshold .04.
  const std::vector<double> p1{0.01, 0.04, 0.03, 0.005, 0.2};
  EXPECT_NEAR(BenjaminiHochbergThreshold(p1, 0.05), 0.04, 1e-12);
  EXPECT_EQ(BenjaminiHochberg(p1, 0.05), (std::vector<bool>{true, true, true, true, false}));
  // Step-up: p_(1) = .02 misses its line .0167, but p_(3) = .03 <= .05, so
  // all three are rejected (Bonferroni at .05/3 would reject none).
  const std::vector<double> p2{0.03, 0.02, 0.025};
  EXPECT_NEAR(BenjaminiHochbergThreshold(p2, 0.05), 0.05, 1e-12);
  EXPECT_EQ(BenjaminiHochberg(p2, 0.05), (std::vector<bool>{true, true, true}));
  // m = 4, lines .0125 .025 .0375 .05: .001 .013 .014 pass, .5 does not.
  const std::vector<double> p3{0.5, 0.014, 0.001, 0.013};
  EXPECT_NEAR(BenjaminiHochbergThreshold(p3, 0.05), 0.0375, 1e-12);
  EXPECT_EQ(BenjaminiHochberg(p3, 0.05), (std::vector<bool>{false, true, true, true}));
  // Nothing under any line.
  const std::vector<double> p4{0.3, 0.6};
  EXPECT_EQ(BenjaminiHochbergThreshold(p4, 0.05), 0);
  EXPECT_EQ(BenjaminiHochberg(p4, 0.05), (std::vector<bool>{false, false}));
}

TEST(StatsTest, AdaptiveRepeatDecision) {
  const double alpha = 0.01;
  // Significant and reaching the magnitude: accepted at once.
  EXPECT_EQ(DecideWithRepeats(0.001, MagnitudeCall::kReaches, alpha, 8, 128),
            SampleDecision::kAccept);
  EXPECT_EQ(DecideWithRepeats(0.001, MagnitudeCall::kAbove, alpha, 8, 128),
            SampleDecision::kAccept);
  // Undecided, however weak p is: more repeats until the cap, then rejected.
  EXPECT_EQ(DecideWithRepeats(0.05, MagnitudeCall::kReaches, alpha, 8, 128),
            SampleDecision::kMoreRepeats);
  EXPECT_EQ(DecideWithRepeats(0.5, MagnitudeCall::kReaches, alpha, 8, 128),
            SampleDecision::kMoreRepeats);
  EXPECT_EQ(DecideWithRepeats(0.05, MagnitudeCall::kAbove, alpha, 64, 128),
            SampleDecision::kMoreRepeats);
  EXPECT_EQ(DecideWithRepeats(0.05, MagnitudeCall::kReaches, alpha, 128, 128),
            SampleDecision::kReject);
  // Real or not but confidently under the magnitude: no repeats can change
  // that.
  EXPECT_EQ(DecideWithRepeats(1e-9, MagnitudeCall::kBelow, alpha, 8, 128), SampleDecision::kReject);
  EXPECT_EQ(DecideWithRepeats(0.5, MagnitudeCall::kBelow, alpha, 8, 128), SampleDecision::kReject);
  EXPECT_STREQ(SampleDecisionName(SampleDecision::kMoreRepeats), "more-repeats");
}

// Hand-computed after Yuen's test as Wilcox's yuen() (WRS) computes it, at
// 20% trimming: a = 1..9, 100 and b = 11..20 (n 10, g 2, h 6). Trimmed means
// 5.5 and 15.5; winsorized a = 3 3 3 4 5 6 7 8 8 8 and b alike, sum of
// squares 42.5, variance 4.7222; d = 9 x 4.7222 / (6 x 5) = 1.41667 a side;
// t = 10 / sqrt(2.8333) = 5.9409 on df (2.8333)^2 / (2 x 1.41667^2 / 5) = 10.
// Student's t tables at df 10: two-sided 0.001 at 4.587, 0.0001 at 6.211, so
// 1e-4 < p < 1e-3; the 95% interval is 10 +- 2.228 x 1.68325 = 10 +- 3.7503,
// over |5.5|: 1.81818 +- 0.68187. Welch's t on the same values sees the 100:
// mean 14.5 against 15.5, p far above 0.05.
TEST(StatsTest, YuenMatchesHandComputation) {
  const std::vector<double> a{1, 2, 3, 4, 5, 6, 7, 8, 9, 100};
  const std::vector<double> b{11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  EXPECT_DOUBLE_EQ(TrimmedMean(a, 0.2), 5.5);
  EXPECT_NEAR(WinsorizedVariance(a, 0.2), 42.5 / 9, 1e-12);
  const TwoSampleResult y = YuenTest(a, b);
  EXPECT_DOUBLE_EQ(y.mean_a, 5.5);
  EXPECT_DOUBLE_EQ(y.mean_b, 15.5);
  EXPECT_NEAR(y.statistic, 5.9409, 1e-4);
  EXPECT_GT(y.p_value, 1e-4);
  EXPECT_LT(y.p_value, 1e-3);
  EXPECT_NEAR(y.relative_change, 10 / 5.5, 1e-12);
  const Interval ci = YuenRelativeChangeInterval(a, b, 0.95);
  EXPECT_NEAR(ci.lo, 1.81818 - 0.68187, 1e-3);
  EXPECT_NEAR(ci.hi, 1.81818 + 0.68187, 1e-3);
  EXPECT_GT(WelchTTest(a, b).p_value, 0.05);
  // No trimming is Welch's test.
  EXPECT_NEAR(YuenTest(a, b, 0).p_value, WelchTTest(a, b).p_value, 1e-12);
  // Too few values left after trimming: no evidence.
  EXPECT_EQ(YuenTest(std::vector<double>{1}, b).p_value, 1);
}

// The order statistic of the Hodges-Lehmann interval is one more than the
// Mann-Whitney critical value (the largest u with P(U <= u) <= alpha / 2).
// At 0.05 two-sided, n1 = n2 = 5..10, the published tables give 2 5 8 13 17
// 23; at 0.01, counting the null distribution exactly in integers with Mann
// and Whitney's recursion f(m, n, u) = f(m - 1, n, u - n) + f(m, n - 1, u)
// gives 0 2 4 7 11 16. The normal approximation lands within one of them.
TEST(StatsTest, HodgesLehmannRankMatchesTables) {
  const int at05[] = {2, 5, 8, 13, 17, 23};
  const int at01[] = {0, 2, 4, 7, 11, 16};
  for (int n = 5; n <= 10; ++n) {
    EXPECT_EQ(HodgesLehmannRank(n, n, 0.95, true), at05[n - 5] + 1) << n;
    EXPECT_EQ(HodgesLehmannRank(n, n, 0.99, true), at01[n - 5] + 1) << n;
    EXPECT_NEAR(HodgesLehmannRank(n, n, 0.95, false), at05[n - 5] + 1, 1) << n;
  }
}

// Hand-computed: a = 1..5, b = 6..10. The 25 differences b - a are 1..9 with
// counts 1 2 3 4 5 4 3 2 1: median 5 (the Hodges-Lehmann shift); the 95%
// interval takes the 3rd and 23rd (C = 3 above): 2 and 8; over the median
// of a, 3: 2/3 .. 8/3, the shift 5/3.
TEST(StatsTest, HodgesLehmannMatchesHandComputation) {
  const std::vector<double> a{1, 2, 3, 4, 5};
  const std::vector<double> b{6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(HodgesLehmannShift(a, b), 5);
  const Interval ci = HodgesLehmannRelativeInterval(a, b, 0.95);
  EXPECT_NEAR(ci.lo, 2.0 / 3, 1e-12);
  EXPECT_NEAR(ci.hi, 8.0 / 3, 1e-12);
  const TwoSampleResult r = RankShiftTest(a, b);
  EXPECT_DOUBLE_EQ(r.mean_a, 3);
  EXPECT_DOUBLE_EQ(r.mean_b, 8);
  EXPECT_NEAR(r.relative_change, 5.0 / 3, 1e-12);
  EXPECT_NEAR(r.p_value, 0.01219, 2e-4);  // MannWhitneyMatchesReference
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{4, 1, 3, 2}), 2.5);
}

// Groups of repeats like the farm's (13 commits x 10 runs, seeded): Gaussian
// noise is told Gaussian, one run 8 sds off is an outlier, runs at two
// levels are bimodal; in most seeds, since the diagnosis is a test too (an
// outlier drawn 8 sds off may land closer).
TEST(StatsTest, DiagnoseNoiseTellsTheShapes) {
  int right[3] = {0, 0, 0};
  constexpr int kSeeds = 50;
  for (int seed = 0; seed < kSeeds; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> z(0, 1);
    std::bernoulli_distribution coin(0.5);
    std::vector<std::vector<double>> gaussian(13), outlier(13), bimodal(13);
    for (int g = 0; g < 13; ++g) {
      for (int i = 0; i < 10; ++i) {
        gaussian[g].push_back(100 + z(rng));
        outlier[g].push_back(100 + z(rng) - (g == 6 && i == 3 ? 8 : 0));
        bimodal[g].push_back(100 + (coin(rng) ? 0.9 : -0.9) + 0.436 * z(rng));
      }
    }
    auto shape = [](const std::vector<std::vector<double>>& groups) {
      std::vector<std::span<const double>> s(groups.begin(), groups.end());
      return DiagnoseNoise(s).shape;
    };
    right[0] += shape(gaussian) == NoiseShape::kGaussian;
    right[1] += shape(outlier) == NoiseShape::kOutliers;
    right[2] += shape(bimodal) == NoiseShape::kBimodal;
  }
  EXPECT_GE(right[0], kSeeds * 9 / 10);
  EXPECT_GE(right[1], kSeeds - 2);
  EXPECT_GE(right[2], kSeeds * 9 / 10);
  // Too few residuals to tell: Gaussian, the means' test.
  const std::vector<double> few{1, 2, 50};
  const std::span<const double> one[] = {few};
  EXPECT_EQ(DiagnoseNoise(one).shape, NoiseShape::kGaussian);
  EXPECT_EQ(MethodFor(NoiseShape::kOutliers), TwoSampleMethod::kYuen);
  EXPECT_EQ(MethodFor(NoiseShape::kBimodal), TwoSampleMethod::kWelch);
  EXPECT_EQ(MethodFor(NoiseShape::kGaussian), TwoSampleMethod::kWelch);
  EXPECT_STREQ(NoiseShapeName(NoiseShape::kBimodal), "bimodal");
  EXPECT_STREQ(TwoSampleMethodName(TwoSampleMethod::kYuen), "yuen");
}

// A 3% drop over 16 runs a side with one run 40% slow on the good side:
// Welch on means misses it (the outlier drags the good mean down and its
// variance up), the comparison the noise calls for (Yuen) finds it.
TEST(StatsTest, CompareByNoiseSeesThroughAnOutlier) {
  std::vector<double> good, bad;
  for (int i = 0; i < 16; ++i) {
    const double wobble = (i % 4 - 1.5) * 4;  // +-6, sd about 4.6 (0.5%)
    good.push_back(1000 + wobble);
    bad.push_back(970 + wobble);
  }
  good[5] = 600;
  const Comparison c = CompareByNoise(good, bad, 0.99);
  EXPECT_EQ(c.method, TwoSampleMethod::kYuen);
  EXPECT_LT(c.test.p_value, 1e-6);
  EXPECT_NEAR(c.test.relative_change, -0.03, 1e-3);
  EXPECT_EQ(JudgeMagnitude(c.interval, 0.03), MagnitudeCall::kReaches);
  EXPECT_GT(WelchTTest(good, bad).p_value, 0.01);
}

}  // namespace
}  // namespace farm::stats
