// The shared formatting: statistics, tables, the progress line, --output.
#include "cli/format.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cli/agents.h"
#include "cli/matrix.h"
#include "cli/number_format.h"

namespace farm::cli {
namespace {

TEST(ComputeMeanCiTest, StudentTNotNormal) {
  // n = 5, sd = sqrt(2.5): t(0.975, 4) = 2.7764451 (tables), not 1.96.
  MeanCi ci = ComputeMeanCi({1, 2, 3, 4, 5});
  EXPECT_EQ(ci.n, 5);
  EXPECT_DOUBLE_EQ(ci.mean, 3.0);
  EXPECT_NEAR(ci.stddev, std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(ci.half_width, 2.7764451 * std::sqrt(2.5) / std::sqrt(5.0), 1e-6);
}

TEST(ComputeMeanCiTest, TwoValuesUseOneDegreeOfFreedom) {
  // t(0.975, 1) = 12.7062047.
  MeanCi ci = ComputeMeanCi({1, 3});
  EXPECT_DOUBLE_EQ(ci.mean, 2.0);
  EXPECT_NEAR(ci.half_width, 12.7062047, 1e-6);
}

TEST(ComputeMeanCiDeathTest, ConfidenceOutsideTheOpenUnitIntervalAborts) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  EXPECT_GT(ComputeMeanCi({1, 2, 3}, 0.5).half_width, 0);
  for (double bad : {0.0, 1.0, -0.5, 95.0}) {
    EXPECT_DEATH(ComputeMeanCi({1, 2, 3}, bad), "confidence level outside \\(0, 1\\)")
        << "confidence " << bad;
  }
}

TEST(ComputeMeanCiTest, OneValueHasNoInterval) {
  MeanCi ci = ComputeMeanCi({42});
  EXPECT_EQ(ci.n, 1);
  EXPECT_DOUBLE_EQ(ci.mean, 42);
  EXPECT_TRUE(std::isnan(ci.half_width));
}

TEST(ComputeMeanCiTest, EmptyIsNan) {
  MeanCi ci = ComputeMeanCi({});
  EXPECT_EQ(ci.n, 0);
  EXPECT_TRUE(std::isnan(ci.mean));
}

TEST(ComputeMeanCiTest, ConstantValuesHaveZeroWidth) {
  MeanCi ci = ComputeMeanCi({7, 7, 7});
  EXPECT_DOUBLE_EQ(ci.half_width, 0);
}

TEST(FormatProgressLineTest, CountsRateAndEta) {
  pb::MatrixProgress p;
  p.set_matrix_id(9);
  p.set_state(pb::MATRIX_STATE_RUNNING);
  p.mutable_counts()->set_total(100);
  p.mutable_counts()->set_succeeded(40);
  p.mutable_counts()->set_failed(2);
  p.set_jobs_per_second(4.2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 9 running: 42/100 done, 2 failed, 4.2 jobs/s, ETA 14s");
  p.mutable_eta()->set_seconds(125);
  EXPECT_EQ(FormatProgressLine(p),
            "matrix 9 running: 42/100 done, 2 failed, 4.2 jobs/s, ETA 2m05s");
  p.set_done(true);
  p.set_state(pb::MATRIX_STATE_FAILED);
  EXPECT_EQ(FormatProgressLine(p), "matrix 9 failed: 42/100 done, 2 failed, 4.2 jobs/s");
}

// A matrix waiting for its kernel: the running build's phase, objects of
// the last cold build's, elapsed and time left, after the counts.
TEST(FormatProgressLineTest, ARunningBuildFollowsTheCounts) {
  pb::MatrixProgress p;
  p.set_matrix_id(12);
  p.set_state(pb::MATRIX_STATE_RUNNING);
  p.mutable_counts()->set_total(40);
  p.mutable_counts()->set_queued(40);
  p.mutable_counts()->set_waiting_for_build(40);
  pb::JobProgress* b = p.add_building();
  b->set_commit_id("3e9b66c84c73d9fa21e2ed8a1e06a7c1a0f3e0b2");
  b->set_platform("x86_64");
  b->set_phase("compile");
  b->set_objects(1234);
  b->set_expected_objects(2100);
  b->mutable_elapsed()->set_seconds(372);
  b->mutable_remaining()->set_seconds(240);
  EXPECT_EQ(FormatProgressLine(p),
            "matrix 12 running: 0/40 done, 0 failed, 40 waiting for kernel build, no job finished "
            "yet; building 3e9b66c84c73 x86_64: compile 1,234/~2,100 objects, 6m12s, ~4m00s left");
  // An incremental build has no estimate; after compile, no time left.
  b->set_expected_objects(0);
  b->clear_remaining();
  b->set_phase("link");
  b->set_objects(3);
  *p.add_building() = *b;
  EXPECT_EQ(FormatBuildProgress(*b), "building 3e9b66c84c73 x86_64: link 3 objects, 6m12s");
  EXPECT_NE(FormatProgressLine(p).find("6m12s; and 1 more builds"), std::string::npos);
  b->set_phase("config");
  b->set_objects(0);
  EXPECT_EQ(FormatBuildProgress(*b), "building 3e9b66c84c73 x86_64: config, 6m12s");
}

TEST(GroupThousandsTest, CommasEveryThreeDigits) {
  EXPECT_EQ(GroupThousands(0), "0");
  EXPECT_EQ(GroupThousands(999), "999");
  EXPECT_EQ(GroupThousands(1000), "1,000");
  EXPECT_EQ(GroupThousands(1234567), "1,234,567");
  EXPECT_EQ(GroupThousands(-12345), "-12,345");
}

TEST(RenderTableTest, PadsColumns) {
  EXPECT_EQ(RenderTable({"a", "bb"}, {{"xxx", "y"}}), "a    bb\nxxx  y\n");
}

TEST(JobsPerSecondTest, FinishedOverElapsed) {
  EXPECT_DOUBLE_EQ(JobsPerSecond(18, 4.0), 4.5);
  EXPECT_EQ(JobsPerSecond(18, 0.0), 0.0);
  EXPECT_EQ(JobsPerSecond(0, 3.0), 0.0);
  // Not measurable yet: one job, or less than a second.
  EXPECT_EQ(JobsPerSecond(1, 5.0), 0.0);
  EXPECT_EQ(JobsPerSecond(3, 0.4), 0.0);
  EXPECT_DOUBLE_EQ(JobsPerSecond(2, 1.0), 2.0);
}

TEST(FormatProgressLineTest, FinalLineShowsTheMeasuredRate) {
  pb::MatrixProgress p;
  p.set_matrix_id(3);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.set_done(true);
  p.mutable_counts()->set_total(18);
  p.mutable_counts()->set_succeeded(18);
  p.set_jobs_per_second(JobsPerSecond(18, 4.0));
  EXPECT_EQ(FormatProgressLine(p), "matrix 3 completed: 18/18 done, 0 failed, 4.5 jobs/s");
}

TEST(FormatProgressLineTest, AShortMatrixEndsWithCountsOnly) {
  pb::MatrixProgress p;
  p.set_matrix_id(4);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.set_done(true);
  p.mutable_counts()->set_total(4);
  p.mutable_counts()->set_succeeded(4);
  p.set_jobs_per_second(JobsPerSecond(4, 0.3));  // farmctl's final line
  EXPECT_EQ(FormatProgressLine(p), "matrix 4 completed: 4/4 done, 0 failed");
}

TEST(FormatProgressLineTest, NoRateYetIsSaidNotPrintedAsZero) {
  pb::MatrixProgress p;
  p.set_matrix_id(5);
  p.set_state(pb::MATRIX_STATE_RUNNING);
  p.mutable_counts()->set_total(2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 running: 0/2 done, 0 failed, no job finished yet");
  p.mutable_counts()->set_succeeded(1);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 running: 1/2 done, 0 failed, rate not measured yet");
  p.set_jobs_per_second(1.0 / 240);  // a real kernel job every four minutes
  EXPECT_EQ(FormatProgressLine(p),
            "matrix 5 running: 1/2 done, 0 failed, 0.25 jobs/min, ETA 4m00s");
  p.set_done(true);
  p.set_jobs_per_second(0);
  p.set_state(pb::MATRIX_STATE_COMPLETED);
  p.mutable_counts()->set_succeeded(2);
  EXPECT_EQ(FormatProgressLine(p), "matrix 5 completed: 2/2 done, 0 failed");
}

TEST(ParseOutputFormatTest, AcceptsTheListedNamesOnly) {
  EXPECT_EQ(OutputFormatNames(), (std::vector<std::string>{"table", "csv", "json"}));
  EXPECT_EQ(*ParseOutputFormat("table"), OutputFormat::kTable);
  EXPECT_EQ(*ParseOutputFormat("csv"), OutputFormat::kCsv);
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  absl::StatusOr<OutputFormat> bad = ParseOutputFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("table, csv, json"), std::string::npos) << bad.status();
}

TEST(PrintableTest, ControlCharactersOfServerTextAreEscaped) {
  // A name that would clear the screen and retitle the terminal.
  pb::Agent a;
  a.set_name(
      "lab\x1b[2J\x1b]0;owned\x07\xc2\x9b"
      "31m\x7f-\xc3\xa9");
  a.set_agent_id(3);
  const std::string table = FormatAgents({a}, OutputFormat::kTable);
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_EQ(table.find("\xc2\x9b"), std::string::npos) << table;
  EXPECT_NE(table.find("lab\\x1b[2J\\x1b]0;owned\\x07\\u009b31m\\x7f-\xc3\xa9"), std::string::npos)
      << table;
  pb::Matrix m;
  m.set_name("m\nfake line");
  EXPECT_EQ(FormatMatrixDetail(m).rfind("matrix 0 m\\x0afake line\n", 0), 0u);
  m.set_analysis("failed: \x1b[31mred");
  EXPECT_NE(FormatMatrixDetail(m).find("  analysis:  failed: \\x1b[31mred\n"), std::string::npos);
}

// farmctl's one-line (or several-line) errors: a server message quoting a
// name keeps its lines but loses its escape sequences.
TEST(PrintableTest, ErrorMessagesKeepTheirLinesAndLoseTheirEscapes) {
  EXPECT_EQ(PrintableLines("spec:\n  name: \x1b[2Jx\n  modes: bad"),
            "spec:\n  name: \\x1b[2Jx\n  modes: bad");
  EXPECT_EQ(PrintableLines(""), "");
  EXPECT_EQ(PrintableLines("a\n"), "a\n");
}

// One human form at every size: four significant digits, an SI prefix
// from 10,000 up, rounding carried into the next prefix.
TEST(FormatNumberTest, FourDigitsAndAnSiPrefixFromTenThousand) {
  EXPECT_EQ(FormatNumber(29.666), "29.67");
  EXPECT_EQ(FormatNumber(0.99531), "0.9953");
  EXPECT_EQ(FormatNumber(2112), "2112");
  EXPECT_EQ(FormatNumber(9999.4), "9999");
  EXPECT_EQ(FormatNumber(20006), "20.01k");
  EXPECT_EQ(FormatNumber(793660), "793.7k");
  EXPECT_EQ(FormatNumber(999950), "1.000M");
  EXPECT_EQ(FormatNumber(1745410), "1.745M");
  EXPECT_EQ(FormatNumber(-4097005145), "-4.097G");
  EXPECT_EQ(FormatNumber(2.5e13), "25.00T");
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(std::nan("")), "-");
  EXPECT_EQ(FormatNumber(1e-5), "1e-05");
}

}  // namespace
}  // namespace farm::cli
