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

// Text diffs within the bound pass; a binary diff is named by its file, in
// either form git writes it, and a patch past the bound by its size.
TEST(TryCommitTest, BinaryDiffsAndPatchesOverTheBoundAreProblems) {
  const std::string text =
      "diff --git a/drivers/iommu/dma-iommu.c b/drivers/iommu/dma-iommu.c\n"
      "--- a/drivers/iommu/dma-iommu.c\n+++ b/drivers/iommu/dma-iommu.c\n@@ -1 +1 @@\n-a\n+b\n";
  EXPECT_EQ(PatchTextProblem(text), "");
  const std::string literal =
      "diff --git a/firmware/x.bin b/firmware/x.bin\nnew file mode 100644\n"
      "index 0000000..e69de29\nGIT binary patch\nliteral 3\nKcmZ?wNB{r;00031\n\nliteral 0\n"
      "HcmV?d00001\n";
  EXPECT_EQ(PatchTextProblem(text + literal),
            "a binary diff of firmware/x.bin: the farm applies text diffs only (a kernel patch "
            "for review changes source files)");
  const std::string plain =
      "diff --git a/logo.png b/logo.png\nindex 1..2 100644\n"
      "Binary files a/logo.png and b/logo.png differ\n";
  EXPECT_NE(PatchTextProblem(plain).find("a binary diff of logo.png:"), std::string::npos);
  // The words in a diff's text are not a binary diff.
  EXPECT_EQ(PatchTextProblem(text + "+Binary files are refused, they differ\n+\n"), "");

  std::string big = text;
  while (big.size() <= kMaxPatchBytes) big += "+/* padding */\n";
  EXPECT_EQ(PatchTextProblem(big), "the patch is " + std::to_string(big.size()) +
                                       " bytes, over the farm's bound of " +
                                       std::to_string(kMaxPatchBytes) + " bytes");
}

}  // namespace
}  // namespace farm::proto
