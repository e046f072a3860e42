#include "scheduler/catalog_yaml.h"

#include <gtest/gtest.h>

namespace farm::scheduler {
namespace {

TEST(CatalogYamlTest, ParsesAndResolves) {
  auto c = ParseCatalogYaml(R"(
catalog: linux-iommu
description: ignored extra key
commits:
  - id: v4.6
    subject: "Linux 4.6"
    set: {iova.allocator: rbtree, fq.kind: intel-global}
  - id: 9257b4a206fc
    subject: "iommu/iova: introduce per-cpu caching to iova allocation"
    set: {iova.allocator: rcache}
  - id: v4.7
)",
                            "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "linux-iommu");
  ASSERT_EQ(c->commits_size(), 3);
  EXPECT_EQ(c->commits(1).index(), 1);
  ResolveCatalog(&*c);
  EXPECT_EQ(c->commits(2).resolved().at("iova.allocator"), "rcache");
  EXPECT_EQ(c->commits(2).resolved().at("fq.kind"), "intel-global");
  EXPECT_EQ(c->commits(0).resolved().at("iova.allocator"), "rbtree");
}

TEST(CatalogYamlTest, ErrorsNameFileAndPath) {
  auto c =
      ParseCatalogYaml("catalog: x\ncommits:\n  - id: a\n  - id: a\n  - subject: s\n", "mine.yaml");
  ASSERT_FALSE(c.ok());
  const std::string m(c.status().message());
  EXPECT_NE(m.find("mine.yaml: commits[1].id: duplicate \"a\""), std::string::npos) << m;
  EXPECT_NE(m.find("mine.yaml: commits[2].id: required"), std::string::npos) << m;
  EXPECT_FALSE(ParseCatalogYaml("commits: []", "f").ok());
}

}  // namespace
}  // namespace farm::scheduler
