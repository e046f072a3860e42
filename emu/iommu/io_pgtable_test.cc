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

TEST(IoPageTable, PagesOnlyFormatNeverUsesBlocks) {
  IoPageTable pt;
  PtWork w = pt.Map(512, 1024, 512);  // aligned iova, phys and length
  EXPECT_EQ(w.blocks, 0);
  EXPECT_EQ(w.ptes, 512);
  uint64_t n = 0;
  w = pt.Unmap(512, 512, &n);
  EXPECT_EQ(w.tables_freed, 0);
  EXPECT_EQ(w.ptes, 512);
  EXPECT_EQ(n, 512u);
}

TEST(IoPageTable, ArmLpaeMapsAnAlignedTwoMegabyteRunAsOneBlock) {
  IoPageTable pt(IoPageTable::Format::kArmLpae);
  PtWork w = pt.Map(1024, 4096, 512 + 3);  // one block, then three pages
  EXPECT_EQ(w.blocks, 1);
  EXPECT_EQ(w.ptes, 3);
  EXPECT_EQ(pt.mapped_pages(), 515u);
  EXPECT_EQ(pt.Translate(1024), 4096u);
  EXPECT_EQ(pt.Translate(1024 + 511), 4096u + 511);
  EXPECT_EQ(pt.Translate(1024 + 512), 4096u + 512);
  uint64_t n = 0;
  w = pt.Unmap(1024, 515, &n);
  EXPECT_EQ(w.blocks, 1);
  EXPECT_EQ(w.ptes, 3);
  EXPECT_EQ(w.tables_freed, 0);
  EXPECT_EQ(n, 515u);
  EXPECT_EQ(pt.Translate(1024), IoPageTable::kNone);
  EXPECT_EQ(pt.mapped_pages(), 0u);
}

TEST(IoPageTable, ArmLpaeUnalignedPhysUsesPagesAndAWholeChunkUnmapFreesTheTable) {
  IoPageTable pt(IoPageTable::Format::kArmLpae);
  PtWork w = pt.Map(1024, 4097, 1024);  // phys off the 2 MiB boundary
  EXPECT_EQ(w.blocks, 0);
  EXPECT_EQ(w.ptes, 1024);
  const size_t tables = pt.tables();
  uint64_t n = 0;
  w = pt.Unmap(1024, 1024, &n);
  EXPECT_EQ(w.tables_freed, 2);  // one flush_walk + free per 2 MiB chunk
  EXPECT_EQ(w.first_walk_pfn, 1024u);
  EXPECT_EQ(w.ptes, 0);
  EXPECT_EQ(n, 1024u);
  EXPECT_EQ(pt.tables(), tables - 2);
  EXPECT_EQ(pt.Translate(1024 + 7), IoPageTable::kNone);
  // The next map needs its leaf table again.
  EXPECT_EQ(pt.Map(1024, 4097, 1).tables_allocated, 1);
}

TEST(IoPageTable, ArmLpaePartialChunkUnmapKeepsTheTable) {
  IoPageTable pt(IoPageTable::Format::kArmLpae);
  pt.Map(1024, 4097, 256);
  uint64_t n = 0;
  PtWork w = pt.Unmap(1024, 256, &n);
  EXPECT_EQ(w.tables_freed, 0);
  EXPECT_EQ(w.ptes, 256);
  EXPECT_EQ(pt.Map(1024, 4097, 1).tables_allocated, 0);
}

TEST(IoPageTable, ArmLpaeBlockOverAnEmptiedTableFreesTheTable) {
  IoPageTable pt(IoPageTable::Format::kArmLpae);
  pt.Map(1024, 4097, 4);
  uint64_t n = 0;
  pt.Unmap(1024, 4, &n);
  PtWork w = pt.Map(1024, 4096, 512);  // arm_lpae_init_pte() over the table
  EXPECT_EQ(w.blocks, 1);
  EXPECT_EQ(w.tables_freed, 1);
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
