#include "services/analyzer/stats.h"

#include <gtest/gtest.h>

namespace farm::analyzer {
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

TEST(StatsTest, TooFewSamplesIsNotSignificant) {
  const std::vector<double> a{1};
  const std::vector<double> b{100, 101};
  EXPECT_DOUBLE_EQ(WelchTTest(a, b).p_value, 1);
}

}  // namespace
}  // namespace farm::analyzer
