// The matrix list in every --output format.
#include "cli/matrix.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(FormatMatrixListTest, TableCsvAndJson) {
  pb::Matrix m;
  m.set_id(7);
  m.set_name("smoke");
  m.set_state(pb::MATRIX_STATE_RUNNING);
  m.set_platform("intel-vtd-snb16c");
  m.mutable_counts()->set_total(18);
  m.mutable_counts()->set_succeeded(10);
  m.mutable_counts()->set_queued(6);
  m.mutable_counts()->set_leased(2);
  EXPECT_EQ(FormatMatrixList({}), "no matrices\n");
  const std::string table = FormatMatrixList({m});
  EXPECT_NE(table.find("smoke"), std::string::npos) << table;
  EXPECT_EQ(FormatMatrixList({m}, OutputFormat::kCsv),
            "id,name,state,jobs,succeeded,failed,pending,platform,created,submitter\n"
            "7,smoke,running,18,10,0,8,intel-vtd-snb16c,-,-\n");
  m.set_submitted_by("alice");
  EXPECT_NE(FormatMatrixList({m}).find("alice"), std::string::npos);
  EXPECT_NE(FormatMatrixDetail(m).find("submitted by: alice"), std::string::npos);
  auto j = nlohmann::json::parse(FormatMatrixList({m}, OutputFormat::kJson));
  ASSERT_EQ(j["matrices"].size(), 1u);
  EXPECT_EQ(j["matrices"][0]["name"], "smoke");
}

}  // namespace
}  // namespace farm::cli
