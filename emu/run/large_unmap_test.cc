// Large unmaps on the Arm SMMUs: how many invalidations a strict unmap of many
// pages costs, by the rules of arm-smmu.c (MMU-500), arm-smmu-v3.c and
// io-pgtable-arm.c (docs/fidelity.md, "Large unmaps on the Arm SMMUs"):
//  - a leaf entry is one invalidation by address (tlb_add_page): 4 KiB pages
//    one each, an aligned 2 MiB block one in all;
//  - a leaf table freed by an unmap that covers its whole 2 MiB is
//    invalidated 4 KiB at a time first (tlb_flush_walk), then freed;
//  - SMMUv3 with range invalidation (driver and IDR3.RIL) builds one command
//    per 5-bit chunk of the page count; past CMDQ_MAX_TLBI_OPS an SMMU
//    without it gets one ASID-wide TLBI.
#include <map>
#include <string>

#include "emu/run/run.h"
#include "gtest/gtest.h"

namespace farm::emu {
namespace {

RunResult MustRun(RunSpec s) {
  s.sets.emplace("noise.cv", "0");
  auto r = RunEmulation(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RunResult{};
}

RunSpec MapBench(const std::string& platform, int granule,
                 std::map<std::string, std::string> sets = {}) {
  RunSpec s;
  s.platform = platform;
  s.mode = "strict";
  s.workload = "dma-map-bench";
  s.params = {{"threads", "1"}, {"seconds", "0.002"}, {"granule", std::to_string(granule)}};
  s.sets = std::move(sets);
  return s;
}

// fio-nvme reads of `bs`; its buffers are physically contiguous but not
// 2 MiB-aligned, so a 2 MiB read is 512 4 KiB PTEs in one leaf table. The
// NVMe driver's clamp of a command to the IOVA cache's largest size (v6.4,
// nvme.clamp_dma_opt) is off, so one read is one mapping of all of it.
RunSpec FioLarge(const std::string& platform, const std::string& bs,
                 std::map<std::string, std::string> sets = {}) {
  RunSpec s;
  s.platform = platform;
  s.mode = "strict";
  s.workload = "fio-nvme";
  s.params = {{"bs", bs}, {"iodepth", "4"}, {"runtime_ms", "5"}};
  s.sets = std::move(sets);
  s.sets.emplace("group.nvme.type", "translated");
  s.sets.emplace("nvme.clamp_dma_opt", "false");
  return s;
}

double PerUnmap(const RunResult& r, uint64_t count) {
  const uint64_t unmaps = r.counters.dma_unmaps + r.counters.dma_unmap_sgs;
  return unmaps == 0 ? -1 : static_cast<double>(count) / static_cast<double>(unmaps);
}

TEST(LargeUnmap, Mmu500WritesOneTlbivalPerPageAndOneForABlock) {
  RunResult pages = MustRun(MapBench("arm-mmu500-8c", 256));
  RunResult block = MustRun(MapBench("arm-mmu500-8c", 512));
  EXPECT_DOUBLE_EQ(PerUnmap(pages, pages.counters.tlbi_va), 256);
  EXPECT_DOUBLE_EQ(PerUnmap(block, block.counters.tlbi_va), 1);
  EXPECT_EQ(pages.counters.tlb_flush_walks, 0u);
  EXPECT_EQ(block.counters.tlb_flush_walks, 0u);
  // Twice the bytes, 1/256 of the register writes.
  EXPECT_LT(block.unmap_latency.mean, pages.unmap_latency.mean / 4);
  std::printf("mmu500 dma-map-bench unmap: granule 256 %.0f ns, granule 512 (block) %.0f ns\n",
              pages.unmap_latency.mean, block.unmap_latency.mean);
}

TEST(LargeUnmap, Mmu500FreesTheLeafTableOfAWholeTwoMegabyteUnmapAfterAWalkFlush) {
  RunResult r = MustRun(FioLarge("arm-mmu500-8c", "2m"));
  ASSERT_GT(r.counters.dma_unmaps, 0u);
  EXPECT_DOUBLE_EQ(PerUnmap(r, r.counters.tlb_flush_walks), 1);
  EXPECT_EQ(r.counters.pgtables_freed, r.counters.tlb_flush_walks);
  // The walk flush is 512 TLBIVA writes; the emptied gather adds none.
  EXPECT_DOUBLE_EQ(PerUnmap(r, r.counters.tlbi_va), 512);
  // A walk's sync plus the gather's.
  EXPECT_DOUBLE_EQ(PerUnmap(r, r.counters.syncs), 2);
  RunResult half = MustRun(FioLarge("arm-mmu500-8c", "1m"));
  EXPECT_EQ(half.counters.tlb_flush_walks, 0u);
  EXPECT_DOUBLE_EQ(PerUnmap(half, half.counters.tlbi_va), 256);
}

TEST(LargeUnmap, SmmuV3WithoutRangeInvalidationSendsOneCommandPerPage) {
  RunResult r = MustRun(MapBench("kunpeng920-smmuv3", 256));
  EXPECT_DOUBLE_EQ(PerUnmap(r, r.counters.tlbi_va), 256);
  // 256 TLBIs in CMDQ_BATCH_ENTRIES batches of 64, the last with CMD_SYNC.
  EXPECT_DOUBLE_EQ(PerUnmap(r, r.counters.cmdq_commands), 257);
  RunResult block = MustRun(MapBench("kunpeng920-smmuv3", 512));
  EXPECT_DOUBLE_EQ(PerUnmap(block, block.counters.tlbi_va), 1);
  EXPECT_LT(block.unmap_latency.mean, r.unmap_latency.mean);
}

TEST(LargeUnmap, SmmuV3RangeInvalidationCoversFiveBitsOfThePageCountPerCommand) {
  const std::map<std::string, std::string> ril = {{"smmu.ril", "true"}};
  RunResult r256 = MustRun(MapBench("kunpeng920-smmuv3", 256, ril));
  EXPECT_DOUBLE_EQ(PerUnmap(r256, r256.counters.tlbi_va), 1);  // 1 << 8
  // 255 = 31 (scale 0) + 7 << 5 (scale 5): two commands.
  RunResult r255 = MustRun(MapBench("kunpeng920-smmuv3", 255, ril));
  EXPECT_DOUBLE_EQ(PerUnmap(r255, r255.counters.tlbi_va), 2);
  RunResult plain = MustRun(MapBench("kunpeng920-smmuv3", 255));
  EXPECT_DOUBLE_EQ(PerUnmap(plain, plain.counters.tlbi_va), 255);
  EXPECT_LT(r255.unmap_latency.mean, plain.unmap_latency.mean);
  // A kernel before 6a481a95d4c1 ignores the SMMU's RIL.
  std::map<std::string, std::string> old = ril;
  old.emplace("smmu.range_inv", "false");
  RunResult before = MustRun(MapBench("kunpeng920-smmuv3", 255, old));
  EXPECT_DOUBLE_EQ(PerUnmap(before, before.counters.tlbi_va), 255);
}

TEST(LargeUnmap, SmmuV3WalkFlushFallsBackToTheAsidPastMaxTlbiOps) {
  RunResult per_page = MustRun(FioLarge("kunpeng920-smmuv3", "2m"));
  ASSERT_GT(per_page.counters.dma_unmaps, 0u);
  EXPECT_DOUBLE_EQ(PerUnmap(per_page, per_page.counters.tlb_flush_walks), 1);
  EXPECT_DOUBLE_EQ(PerUnmap(per_page, per_page.counters.tlbi_va), 512);
  EXPECT_EQ(per_page.counters.inv_domain, 0u);
  RunResult asid = MustRun(FioLarge("kunpeng920-smmuv3", "2m", {{"smmu.max_tlbi_ops", "512"}}));
  EXPECT_EQ(asid.counters.tlbi_va, 0u);
  EXPECT_EQ(asid.counters.inv_domain, asid.counters.tlb_flush_walks);
  EXPECT_GT(asid.counters.inv_domain, 0u);
}

}  // namespace
}  // namespace farm::emu
