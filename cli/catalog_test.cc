// The catalog views in every --output format.
#include "cli/catalog.h"

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

pb::Catalog CatalogWithCommits(const std::string& name, int commits) {
  pb::Catalog c;
  c.set_name(name);
  c.set_source("file:" + name + ".yaml");
  for (int i = 0; i < commits; ++i) {
    pb::CatalogCommit* cc = c.add_commits();
    cc->set_index(i);
    cc->set_id("v" + std::to_string(i));
  }
  return c;
}

TEST(FormatCatalogListTest, CountsCommitsInEveryFormat) {
  const std::vector<pb::Catalog> cats = {CatalogWithCommits("linux-iommu", 12),
                                         CatalogWithCommits("a,b", 0)};
  const std::string table = FormatCatalogList(cats);
  std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << table;
  EXPECT_EQ(lines[0].rfind("name", 0), 0u) << table;
  EXPECT_NE(lines[1].find("linux-iommu  12"), std::string::npos) << table;
  EXPECT_EQ(FormatCatalogList(cats, OutputFormat::kCsv),
            "name,commits,source,loaded\n"
            "linux-iommu,12,file:linux-iommu.yaml,-\n"
            "\"a,b\",0,\"file:a,b.yaml\",-\n");
  auto j = nlohmann::json::parse(FormatCatalogList(cats, OutputFormat::kJson));
  ASSERT_EQ(j["catalogs"].size(), 2u);
  EXPECT_EQ(j["catalogs"][0]["name"], "linux-iommu");
  EXPECT_EQ(j["catalogs"][0]["commits"].size(), 12u);
}

TEST(FormatCatalogTest, TableCsvAndJson) {
  pb::Catalog c;
  c.set_name("linux-iommu");
  c.set_source("builtin");
  pb::CatalogCommit* commit = c.add_commits();
  commit->set_index(0);
  commit->set_id("v5.11");
  commit->set_subject("Linux 5.11");
  (*commit->mutable_set())["iommu.flush"] = "fq";
  const std::string table = FormatCatalog(c);
  EXPECT_EQ(table.rfind("catalog linux-iommu (builtin), 1 commits\n", 0), 0u) << table;
  EXPECT_NE(table.find("iommu.flush=fq"), std::string::npos) << table;
  EXPECT_EQ(FormatCatalog(c, OutputFormat::kCsv),
            "#,id,subject,set\n0,v5.11,Linux 5.11,iommu.flush=fq\n");
  auto j = nlohmann::json::parse(FormatCatalog(c, OutputFormat::kJson));
  EXPECT_EQ(j["name"], "linux-iommu");
  EXPECT_EQ(j["commits"][0]["set"]["iommu.flush"], "fq");
}

}  // namespace
}  // namespace farm::cli
