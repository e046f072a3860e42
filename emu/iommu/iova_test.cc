// Tests of the IOVA allocator algorithms (drivers/iommu/iova.c semantics).
#include "emu/iommu/iova.h"

#include <set>

#include "gtest/gtest.h"

namespace farm::emu {
namespace {

TEST(IovaRbtree, AllocatesTopDownBelowTheLimitSizeAligned) {
  IovaDomain d(nullptr, "t", 1, 1);
  int visited = 0;
  const uint64_t limit = 1ULL << 20;  // 4 GiB in 4 KiB pfns (exclusive)
  uint64_t a = d.AllocAndInsertRangeLocked(1, limit, true, &visited);
  uint64_t b = d.AllocAndInsertRangeLocked(1, limit, true, &visited);
  uint64_t c = d.AllocAndInsertRangeLocked(4, limit, true, &visited);
  EXPECT_EQ(a, limit - 1);
  EXPECT_EQ(b, limit - 2);
  EXPECT_EQ(c % 4, 0u);
  EXPECT_LT(c + 3, b);
  EXPECT_EQ(d.tree_size(), 3u);
  // The cached32 node follows the last allocation: the walk stays short.
  EXPECT_EQ(d.cached32_node().pfn_lo, c);
}

TEST(IovaRbtree, FreeAboveCachedNodeMovesItUpAndSpaceIsReused) {
  IovaDomain d(nullptr, "t", 1, 1);
  int v = 0;
  const uint64_t limit = 1ULL << 20;
  std::vector<uint64_t> pfns;
  for (int i = 0; i < 100; ++i) pfns.push_back(d.AllocAndInsertRangeLocked(1, limit, true, &v));
  ASSERT_TRUE(d.RemoveLocked(pfns[10], &v));
  // __cached_rbnode_delete_update: the freed node is above cached32.
  EXPECT_GT(d.cached32_node().pfn_lo, pfns[10]);
  uint64_t again = d.AllocAndInsertRangeLocked(1, limit, true, &v);
  EXPECT_EQ(again, pfns[10]);
  EXPECT_FALSE(d.RemoveLocked(12345, &v));
}

TEST(IovaRbtree, Max32AllocSizeFastFailAndResetOnFree) {
  IovaDomain d(nullptr, "t", 1, 1);
  int v = 0;
  const uint64_t limit = 64;  // a tiny 32-bit space: pfns 1..63
  uint64_t big = d.AllocAndInsertRangeLocked(32, limit, true, &v);
  EXPECT_EQ(big, 32u);
  EXPECT_EQ(d.AllocAndInsertRangeLocked(32, limit, true, &v), 0u);  // only 1..31 left
  EXPECT_EQ(d.max32_alloc_size(), 32u);
  int before = v;
  EXPECT_EQ(d.AllocAndInsertRangeLocked(64, limit, true, &v), 0u);
  EXPECT_EQ(v, before);  // fast fail: no node visited
  ASSERT_TRUE(d.RemoveLocked(big, &v));
  EXPECT_EQ(d.max32_alloc_size(), d.dma_32bit_pfn());
  EXPECT_EQ(d.AllocAndInsertRangeLocked(32, limit, true, &v), 32u);
}

TEST(IovaRbtree, RetryFromLimitFindsSpaceAboveTheCachedNode) {
  IovaDomain d(nullptr, "t", 1, 1);
  int v = 0;
  const uint64_t limit = 1024;
  std::vector<uint64_t> pfns;
  while (true) {
    uint64_t p = d.AllocAndInsertRangeLocked(1, limit, true, &v);
    if (!p) break;
    pfns.push_back(p);
  }
  EXPECT_EQ(pfns.size(), 1023u);  // pfns 1..1023
  // Free one near the top; the cached node is at the bottom.
  ASSERT_TRUE(d.RemoveLocked(1000, &v));
  EXPECT_EQ(d.AllocAndInsertRangeLocked(1, limit, true, &v), 1000u);
}

TEST(IovaRbtree, FragmentationMakesTheWalkLong) {
  IovaDomain d(nullptr, "t", 1, 1);
  int v = 0;
  const uint64_t limit = 1ULL << 20;
  std::vector<uint64_t> pfns;
  for (int i = 0; i < 2000; ++i) pfns.push_back(d.AllocAndInsertRangeLocked(1, limit, true, &v));
  // Free every other single page near the top: 1-page holes.
  for (int i = 0; i < 1000; i += 2) ASSERT_TRUE(d.RemoveLocked(pfns[i], &v));
  // A 2-page aligned request cannot use any 1-page hole: the walk goes
  // linear through them (EiovaR's pathology), unlike a 1-page request.
  int v1 = 0;
  d.AllocAndInsertRangeLocked(2, limit, true, &v1);
  EXPECT_GT(v1, 10);
}

}  // namespace
}  // namespace farm::emu
