#include "proto/catalog_dag.h"

#include <gtest/gtest.h>

namespace farm::proto {
namespace {

namespace pb = ::iommufarm::v1;

pb::Catalog Make(const std::vector<std::pair<std::string, std::vector<std::string>>>& commits) {
  pb::Catalog c;
  for (const auto& [id, parents] : commits) {
    pb::CatalogCommit* cc = c.add_commits();
    cc->set_id(id);
    cc->set_index(c.commits_size() - 1);
    for (const std::string& p : parents) cc->add_parents(p);
  }
  return c;
}

TEST(CatalogDagTest, WithoutParentsAListIsLinear) {
  const pb::Catalog c = Make({{"a", {}}, {"b", {}}, {"c", {}}});
  const auto parents = ParentPositions(c);
  EXPECT_TRUE(IsLinear(parents));
  EXPECT_EQ(parents[2], std::vector<int>{1});
  EXPECT_EQ(Ancestors(parents, 1), (std::vector<bool>{true, true, false}));
}

// base - m1 ------- merge
//    \- s1 - s2 -/
TEST(CatalogDagTest, ASideBranchDoesNotInheritTheMainLine) {
  pb::Catalog c = Make({{"base", {"outside"}},
                        {"m1", {"base"}},
                        {"s1", {"base"}},
                        {"s2", {"s1"}},
                        {"merge", {"m1", "s2"}}});
  (*c.mutable_commits(0)->mutable_set())["k"] = "0";
  (*c.mutable_commits(1)->mutable_set())["k"] = "main";
  (*c.mutable_commits(3)->mutable_set())["j"] = "side";
  const auto parents = ParentPositions(c);
  EXPECT_FALSE(IsLinear(parents));
  EXPECT_TRUE(parents[0].empty());  // its parent is outside the catalog
  EXPECT_EQ(parents[4], (std::vector<int>{1, 3}));
  EXPECT_EQ(Ancestors(parents, 3), (std::vector<bool>{true, false, true, true, false}));
  EXPECT_EQ(SettingsAt(c, parents, 3),
            (std::map<std::string, std::string>{{"j", "side"}, {"k", "0"}}));
  EXPECT_EQ(SettingsAt(c, parents, 4),
            (std::map<std::string, std::string>{{"j", "side"}, {"k", "main"}}));
}

TEST(CatalogDagTest, AParentAfterItsChildIsLeftOut) {
  const pb::Catalog c = Make({{"a", {}}, {"b", {"c"}}, {"c", {"a"}}});
  const auto parents = ParentPositions(c);
  EXPECT_TRUE(parents[1].empty());
  EXPECT_EQ(parents[2], std::vector<int>{0});
}

}  // namespace
}  // namespace farm::proto
