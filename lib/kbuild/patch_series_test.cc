#include "lib/kbuild/patch_series.h"

#include <gtest/gtest.h>

namespace farm::kbuild {
namespace {

constexpr char kDiff[] =
    "diff --git a/VERSION b/VERSION\n--- a/VERSION\n+++ b/VERSION\n@@ -1 +1 @@\n-6.1.0\n+6.1.1\n";

std::string Mail(const std::string& hash, const std::string& subject, const std::string& diff) {
  return "From " + hash +
         " Mon Sep 17 00:00:00 2001\nFrom: A Developer <dev@example.org>\n"
         "Date: Sat, 5 Dec 2026 10:00:00 +0000\nSubject: " +
         subject + "\n\nWhy it changes.\n\nSigned-off-by: A Developer <dev@example.org>\n---\n" +
         " VERSION | 2 +-\n 1 file changed\n\n" + diff + "-- \n2.39.5\n\n";
}

TEST(PatchSeriesTest, APlainDiffIsOnePatchWithoutASubject) {
  absl::StatusOr<std::vector<SeriesPatch>> s = SplitPatchSeries(kDiff);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].subject, "");
  EXPECT_EQ((*s)[0].text, std::string(kDiff) + "\n");
}

// git format-patch --cover-letter of two patches: the cover letter holds
// no diff and is skipped; the patches keep their order and subjects (a
// folded Subject unfolded).
TEST(PatchSeriesTest, AnMboxIsItsPatchesInOrderWithoutTheCoverLetter) {
  const std::string h1(40, 'a'), h2(40, 'b'), h0(40, '0');
  const std::string mbox =
      "From " + h0 +
      " Mon Sep 17 00:00:00 2001\nSubject: [PATCH 0/2] iommu: two\n\n*** BLURB HERE ***\n\n" +
      Mail(h1, "[PATCH 1/2] iommu/dma: first", kDiff) +
      Mail(h2, "[PATCH 2/2] iommu/dma: a subject folded\n over two lines", kDiff);
  absl::StatusOr<std::vector<SeriesPatch>> s = SplitPatchSeries(mbox);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].subject, "[PATCH 1/2] iommu/dma: first");
  EXPECT_EQ((*s)[1].subject, "[PATCH 2/2] iommu/dma: a subject folded over two lines");
  EXPECT_EQ((*s)[0].text.rfind("From " + h1, 0), 0u);
  EXPECT_NE((*s)[1].text.find("+6.1.1\n"), std::string::npos);
}

TEST(PatchSeriesTest, TextWithoutADiffIsRefused) {
  EXPECT_EQ(SplitPatchSeries("Subject: hello\n\nno diff here\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SplitPatchSeries("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::kbuild
