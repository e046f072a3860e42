#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "bench/edivisive.h"
#include "bench/peer_protocol.h"

namespace farm::bench {
namespace {

std::vector<double> Noisy(int n, double level, double sd, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0, sd);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(level + noise(rng));
  return out;
}

TEST(EDivisiveTest, FindsAStepWhereItIsAndNothingInNoise) {
  std::mt19937_64 rng(7);
  std::vector<double> x = Noisy(30, 1000, 10, rng);
  const std::vector<double> after = Noisy(30, 950, 10, rng);
  x.insert(x.end(), after.begin(), after.end());
  const std::vector<int> found = EDivisive(x);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NEAR(found[0], 30, 1);
  EXPECT_TRUE(EDivisive(Noisy(60, 1000, 10, rng)).empty());
}

TEST(EDivisiveTest, TwoStepsAreTwoChangePoints) {
  std::mt19937_64 rng(8);
  std::vector<double> x;
  for (double level : {1000.0, 900.0, 1000.0}) {
    const std::vector<double> part = Noisy(25, level, 10, rng);
    x.insert(x.end(), part.begin(), part.end());
  }
  const std::vector<int> found = EDivisive(x);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_NEAR(found[0], 25, 1);
  EXPECT_NEAR(found[1], 50, 1);
}

TEST(PeerProtocolTest, SeriesRoundTripAndBadRowsAreNamed) {
  analyzer::Series s;
  s.points.push_back({0, "c0", {1000.5, 999.25}});
  s.points.push_back({8, "c8", {950}});
  const std::string csv = PeerSeriesCsv({s, s});
  absl::StatusOr<PeerSeries> back = ParsePeerSeriesCsv(csv);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  const auto& runs = back->at(1);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1], (std::pair<int, double>{0, 999.25}));
  EXPECT_EQ(runs[2], (std::pair<int, double>{8, 950}));

  EXPECT_EQ(ParsePeerSeriesCsv("trial,value\n").status().message(),
            "line 1: expected the header 'trial,commit_index,repeat,value'");
  EXPECT_EQ(ParsePeerChangesCsv("trial,commit_index\n0,x\n").status().message(),
            "data row 1: 'x' is not a number");
  EXPECT_EQ(ParsePeerChangesCsv("trial,commit_index\n0\n").status().message(), "line 2: '0'");
  absl::StatusOr<PeerChanges> changes = ParsePeerChangesCsv(PeerChangesCsv({{3, {8, 16}}}));
  ASSERT_TRUE(changes.ok());
  EXPECT_EQ(changes->at(3), (std::vector<int>{8, 16}));
}

// A change holds the culprit when it lies after the measured commit before
// the reported one and at or before it; a report between measured commits
// counts at the next one; every other report is a false alert.
TEST(PeerScoreTest, RecallAndFalseAlertsAreCountedAlike) {
  const std::vector<int> measured = {0, 8, 16, 24};
  PeerScore s;
  ScoreTrial(measured, 10, {16}, s);      // recalled
  ScoreTrial(measured, 10, {12, 16}, s);  // one change at 16: recalled, no false alert
  ScoreTrial(measured, 10, {8}, s);       // the wrong interval: false alert
  ScoreTrial(measured, -1, {0, 30}, s);   // no level before 0, none past 24: two false
  ScoreTrial(measured, -1, {}, s);
  EXPECT_EQ(s.trials, 5);
  EXPECT_EQ(s.recalled, 2);
  EXPECT_EQ(s.false_alerts, 3);
  EXPECT_DOUBLE_EQ(s.false_per100(), 100.0 * 3 / 20);
}

}  // namespace
}  // namespace farm::bench
