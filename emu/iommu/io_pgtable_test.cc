// Tests of the IO page table and the IOTLB.
#include "emu/iommu/io_pgtable.h"

#include "gtest/gtest.h"

namespace farm::emu {
namespace {

TEST(IoPageTable, MapTranslateUnmap) {
  IoPageTable pt;
  PtWork w = pt.Map(0x12345, 0x777, 3);
  EXPECT_EQ(w.ptes, 3);
  EXPECT_EQ(w.tables_allocated, 3);  // levels 1..3 below the root
  EXPECT_EQ(w.levels_walked, 4);
  EXPECT_EQ(pt.Translate(0x12345), 0x777u);
  EXPECT_EQ(pt.Translate(0x12347), 0x779u);
  EXPECT_EQ(pt.Translate(0x12348), IoPageTable::kNone);
  uint64_t n = 0;
  pt.Unmap(0x12345, 3, &n);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(pt.Translate(0x12345), IoPageTable::kNone);
  // Tables stay; a second map allocates none.
  EXPECT_EQ(pt.Map(0x12345, 1, 1).tables_allocated, 0);
}

TEST(IoPageTable, CrossingALeafTableRewalksAndCountsLines) {
  IoPageTable pt;
  PtWork w = pt.Map(510, 0, 4);  // 510,511 | 512,513
  EXPECT_EQ(w.levels_walked, 8);
  EXPECT_EQ(w.lines, 2 + 4);  // two PTE lines + four new tables
  EXPECT_EQ(w.ptes, 4);
}

TEST(Iotlb, HitsMissesAndInvalidation) {
  Iotlb tlb(8, 2);
  EXPECT_FALSE(tlb.Lookup(5));
  EXPECT_TRUE(tlb.Lookup(5));
  tlb.InvalidateRange(5, 1);
  EXPECT_FALSE(tlb.Lookup(5));
  EXPECT_TRUE(tlb.Lookup(5));
  tlb.InvalidateAll();
  EXPECT_FALSE(tlb.Lookup(5));
  EXPECT_EQ(tlb.hits(), 2u);
  EXPECT_EQ(tlb.misses(), 3u);
}

TEST(Iotlb, CapacityEvictsLru) {
  Iotlb tlb(4, 4);  // one set
  for (uint64_t p = 0; p < 4; ++p) tlb.Lookup(p);
  tlb.Lookup(0);    // 0 most recent
  tlb.Lookup(100);  // evicts 1
  EXPECT_TRUE(tlb.Lookup(0));
  EXPECT_FALSE(tlb.Lookup(1));
}

}  // namespace
}  // namespace farm::emu
