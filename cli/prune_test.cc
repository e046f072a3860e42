// farmctl prune: the --older-than ages it takes and its report, the same
// rows for a dry run and a real one.
#include "cli/prune.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(ParsePruneAgeTest, DaysHoursAndRefusals) {
  EXPECT_EQ(*ParsePruneAge("180d"), absl::Hours(24 * 180));
  EXPECT_EQ(*ParsePruneAge("36h"), absl::Hours(36));
  EXPECT_EQ(*ParsePruneAge("90m"), absl::Minutes(90));
  EXPECT_FALSE(ParsePruneAge("180").ok());
  EXPECT_FALSE(ParsePruneAge("d").ok());
  EXPECT_FALSE(ParsePruneAge("-3d").ok());
  EXPECT_FALSE(ParsePruneAge("0h").ok());
}

pb::PruneResponse Report(bool dry_run) {
  pb::PruneResponse r;
  r.set_dry_run(dry_run);
  r.mutable_cutoff()->set_seconds(1700000000);
  r.mutable_pruned()->set_matrices(3);
  r.mutable_pruned()->set_jobs(12);
  r.mutable_pruned()->set_samples(24);
  r.mutable_pruned()->set_raw_bytes(1200);
  r.set_kept_for_regressions(2);
  r.add_kept_regression_matrices(4);
  r.add_kept_regression_matrices(9);
  r.set_kept_for_history(5);
  r.set_history_depth(100);
  r.set_batches(dry_run ? 0 : 3);
  return r;
}

TEST(FormatPruneReportTest, DryRunAndRealRunShareTheRows) {
  const std::string dry = FormatPruneReport(Report(true), OutputFormat::kTable);
  const std::string real = FormatPruneReport(Report(false), OutputFormat::kTable);
  EXPECT_NE(dry.find("dry run: matrices finished before 2023-11-14T22:13:20Z"), std::string::npos)
      << dry;
  EXPECT_NE(dry.find("would go"), std::string::npos) << dry;
  EXPECT_NE(real.find("(3 transactions)"), std::string::npos) << real;
  EXPECT_EQ(real.find("would go"), std::string::npos) << real;
  EXPECT_NE(real.find("2 (matrices 4 9)"), std::string::npos) << real;
  EXPECT_NE(real.find("kept: newest 100 of a series"), std::string::npos) << real;
  auto j = nlohmann::json::parse(FormatPruneReport(Report(false), OutputFormat::kJson));
  EXPECT_EQ(j["pruned"]["samples"], "24") << j.dump();  // proto JSON: int64 as a string
  EXPECT_EQ(j["kept_for_history"], "5") << j.dump();
}

}  // namespace
}  // namespace farm::cli
