#include "proto/try_commit.h"

#include <gtest/gtest.h>

namespace farm::proto {
namespace {

TEST(TryCommitTest, IdIsTheBasePlusTwelveDigitsOfThePatchsSha256) {
  const std::string base = "f5caa960c7ef3d8c7a2f5a3f4b0e1d2c3b4a5968";
  // sha256("x\n") = 73cb3858a687...: the id keeps its first 12 digits.
  const std::string id = TryCommitId(base, "x\n");
  EXPECT_EQ(id, base + "+73cb3858a687");
  EXPECT_TRUE(IsTryCommit(id));
  EXPECT_EQ(TryBase(id), base);
  EXPECT_NE(TryCommitId(base, "y\n"), id);
}

TEST(TryCommitTest, OtherIdsAreNotTryCommits) {
  for (const char* id : {"v6.1", "f5caa960c7ef", "6.1.0-54-cloud-amd64", "a+b", "+73cb3858a687",
                         "v6.1+73CB3858A687", "v6.1+73cb3858a68"}) {
    EXPECT_FALSE(IsTryCommit(id)) << id;
    EXPECT_EQ(TryBase(id), id);
  }
}

}  // namespace
}  // namespace farm::proto
