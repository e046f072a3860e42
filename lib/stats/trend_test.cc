#include "lib/stats/trend.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace farm::stats {
namespace {

constexpr double kMagnitude = 0.05;
constexpr double kAlpha = 0.01;

// Twenty intervals (the emulator's IntervalCounter::kReportIntervals) of a
// run at level 1000 falling linearly by `fall` of it over the run, each with
// Gaussian noise of `cv`.
std::vector<double> Run(uint64_t seed, double fall, double cv, int n = 20) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, 1);
  std::vector<double> x(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const double level = 1000 * (1 - fall * i / (n - 1));
    x[static_cast<size_t>(i)] = level * (1 + cv * z(rng));
  }
  return x;
}

int DecaysOf(double fall, double cv, int seeds, int outlier_at = -1, double outlier = 1) {
  int decays = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::vector<double> x = Run(static_cast<uint64_t>(seed), fall, cv);
    if (outlier_at >= 0) x[static_cast<size_t>(outlier_at)] *= outlier;
    decays += JudgeDecay(x, kMagnitude, kAlpha).decays;
  }
  return decays;
}

// Exact null distribution: a strictly falling run of n is the one ordering
// of n! with S = -n(n-1)/2.
TEST(TrendTest, MannKendallExactTails) {
  const MannKendallResult three = MannKendall(std::vector<double>{3, 2, 1});
  EXPECT_EQ(three.s, -3);
  EXPECT_NEAR(three.p_falling, 1.0 / 6, 1e-12);
  EXPECT_NEAR(three.p_rising, 1.0, 1e-12);
  const MannKendallResult ten = MannKendall(std::vector<double>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(ten.s, -45);
  EXPECT_NEAR(ten.p_falling, 1.0 / 3628800, 1e-15);
  // n = 4, S = 4 (one inversion of six pairs): orderings with at most one
  // inversion are 1 + 3 of 24; only the fully rising one has S > 4.
  const MannKendallResult four = MannKendall(std::vector<double>{1, 3, 2, 4});
  EXPECT_EQ(four.s, 4);
  EXPECT_NEAR(four.p_rising, 4.0 / 24, 1e-12);
  EXPECT_NEAR(four.p_falling, 23.0 / 24, 1e-12);
}

// With ties: the normal approximation, variance (4*3*13 - 2*1*9) / 18,
// continuity-corrected, computed by hand here with erfc.
TEST(TrendTest, MannKendallTiesUseTheCorrectedVariance) {
  const MannKendallResult r = MannKendall(std::vector<double>{3, 3, 2, 1});
  EXPECT_EQ(r.s, -5);
  const double sd = std::sqrt((4.0 * 3 * 13 - 2.0 * 1 * 9) / 18);
  EXPECT_NEAR(r.p_falling, 0.5 * std::erfc(-((-5.0 + 1) / sd) / std::sqrt(2.0)), 1e-9);
  EXPECT_DOUBLE_EQ(MannKendall(std::vector<double>{5, 5, 5, 5}).p_falling, 1);
  EXPECT_DOUBLE_EQ(MannKendall(std::vector<double>{2, 1}).p_falling, 1);
}

TEST(TrendTest, TheilSenFitsALineAndIgnoresOneOutlier) {
  const TheilSenLine line = TheilSen(std::vector<double>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_DOUBLE_EQ(line.slope, -1);
  EXPECT_DOUBLE_EQ(line.intercept, 10);
  EXPECT_DOUBLE_EQ(line.relative_change, -0.9);
  EXPECT_DOUBLE_EQ(line.noise, 0);
  // One interval far off moves neither the slope nor the level.
  const TheilSenLine off = TheilSen(std::vector<double>{10, 9, 8, 7, 6, 5, 4, 3, 2, -50});
  EXPECT_DOUBLE_EQ(off.slope, -1);
  EXPECT_DOUBLE_EQ(off.intercept, 10);
}

TEST(TrendTest, SteadyRunsDoNotDecay) {
  EXPECT_EQ(DecaysOf(0, 0.01, 200), 0);
  // Perfectly flat: no trend at all.
  EXPECT_FALSE(JudgeDecay(std::vector<double>(10, 41600), kMagnitude, kAlpha).decays);
}

TEST(TrendTest, NoisySteadyRunsDoNotDecay) {
  // CV 5% per interval: as noisy as the magnitude itself. The trend test
  // alone would call about alpha of them (2 of 200); a binomial bound.
  EXPECT_LE(DecaysOf(0, 0.05, 200), 5);
}

TEST(TrendTest, DecayingRunsDecay) {
  EXPECT_EQ(DecaysOf(0.20, 0.01, 200), 200);
  EXPECT_GE(DecaysOf(0.20, 0.03, 200), 190);
  // The emulator's aged run: 30820 .. 21890 per interval.
  const std::vector<double> aged{30820, 30060, 28960, 27240, 26100,
                                 25180, 24270, 23250, 22630, 21890};
  const DecayVerdict v = JudgeDecay(aged, kMagnitude, kAlpha);
  EXPECT_TRUE(v.decays);
  EXPECT_NEAR(v.line.relative_change, -0.30, 0.02);
}

TEST(TrendTest, AFallUnderTheMagnitudeOrInsideTheNoiseIsNoDecay) {
  // Significant but small: 2% over the run with CV 0.1%.
  EXPECT_EQ(DecaysOf(0.02, 0.001, 100), 0);
  // A 6% fall in a run whose intervals scatter 10%: not told from its noise.
  EXPECT_LE(DecaysOf(0.06, 0.10, 100), 5);
}

TEST(TrendTest, OneOutlierNeitherMakesNorHidesADecay) {
  // A steady run with its last interval at half: a stall, not a decay.
  EXPECT_EQ(DecaysOf(0, 0.01, 200, /*outlier_at=*/9, /*outlier=*/0.5), 0);
  // A steady run with its first interval 50% high (a warm cache).
  EXPECT_EQ(DecaysOf(0, 0.01, 200, /*outlier_at=*/0, /*outlier=*/1.5), 0);
  // A decaying run with its last interval back at the start's level.
  EXPECT_EQ(DecaysOf(0.20, 0.01, 200, /*outlier_at=*/9, /*outlier=*/1.25), 200);
}

// The trend test decides where the line alone would not: four strictly
// falling intervals are one ordering of 24 (p = 0.042), too likely by chance
// at alpha 0.01, however far they fall; five are one of 120 (p = 0.0083).
TEST(TrendTest, ATrendNeedsEnoughIntervalsToBeSignificant) {
  EXPECT_FALSE(JudgeDecay(std::vector<double>{100, 90, 80, 70}, kMagnitude, kAlpha).decays);
  EXPECT_TRUE(JudgeDecay(std::vector<double>{100, 90, 80, 70, 60}, kMagnitude, kAlpha).decays);
}

TEST(TrendTest, MedianSeriesIgnoresOneOddRun) {
  const std::vector<std::vector<double>> runs = {{10, 9, 8}, {11, 9, 7, 100}, {0, 0, 0}};
  EXPECT_EQ(MedianSeries(runs), (std::vector<double>{10, 9, 7}));
  EXPECT_TRUE(MedianSeries({}).empty());
}

}  // namespace
}  // namespace farm::stats
