// The token list in every --output format.
#include "cli/tokens.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(FormatTokensTest, TableCsvAndJsonShareTheRows) {
  pb::ApiToken t;
  t.set_id(4);
  t.set_name("ci, nightly");
  t.set_role("submitter");
  t.mutable_created_at()->set_seconds(1700000000);
  t.set_revoked(true);
  const std::string table = FormatTokens({t});
  EXPECT_NE(table.find("ci, nightly"), std::string::npos) << table;
  EXPECT_NE(table.find("revoked"), std::string::npos) << table;
  EXPECT_NE(table.find("2023-11-14T22:13:20Z"), std::string::npos) << table;
  EXPECT_EQ(
      FormatTokens({t}, OutputFormat::kCsv),
      "id,name,role,created,state\n4,\"ci, nightly\",submitter,2023-11-14T22:13:20Z,revoked\n");
  auto j = nlohmann::json::parse(FormatTokens({t}, OutputFormat::kJson));
  ASSERT_EQ(j["tokens"].size(), 1u) << j.dump();
  EXPECT_EQ(j["tokens"][0]["name"], "ci, nightly");
  EXPECT_EQ(FormatTokens({}), "no tokens\n");
}

}  // namespace
}  // namespace farm::cli
