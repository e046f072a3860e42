// The IOVA allocator's slow paths end to end: which sizes and which kernels
// reach alloc_iova() under iova_rbtree_lock instead of the per-CPU rcache
// (dma-map-bench's granule, dma-iommu before bb65a64c7285, fio-nvme's large
// block sizes), and what that costs.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emu/run/run.h"
#include "gtest/gtest.h"

namespace farm::emu {
namespace {

RunResult MustRun(const RunSpec& s) {
  auto r = RunEmulation(s);
  EXPECT_TRUE(r.ok()) << s.platform << " " << s.kernel << ": " << r.status();
  return r.ok() ? *r : RunResult{};
}

RunResult MapBench(const std::string& platform, const std::string& kernel, int granule,
                   std::map<std::string, std::string> sets = {}) {
  // Long enough for a few dozen loops at 1024 pages; noise-free, so every
  // figure is the model's mean.
  RunSpec s =
      NoiseFreeSpec(platform, kernel, "strict", "dma-map-bench",
                    {{"threads", "1"}, {"seconds", "0.004"}, {"granule", std::to_string(granule)}});
  for (auto& [k, v] : sets) s.sets[k] = v;
  return MustRun(s);
}

int64_t LockWait(const RunResult& r, const std::string& name) {
  for (const LockReport& l : r.locks) {
    if (l.name == name) return l.wait_ns;
  }
  return 0;
}

// One platform of each IOMMU driver the DMA API reaches through dma-iommu
// or VT-d's path.
const char* const kPlatforms[] = {"kunpeng920-smmuv3", "arm-mmu500-8c", "intel-vtd-2s12c",
                                  "amd-genoa-2s96c"};

// dma_map_benchmark -g N maps N pages with one dma_map_single(): every page
// is a PTE written and, in strict mode, invalidated, so the cost of a map
// and of an unmap never falls as the granule grows -- short of 2 MiB, which
// the Arm io-pgtable maps as one block where the run is aligned
// (large_unmap_test.cc), so the sweep stops below it.
TEST(IovaPaths, GranuleSweepCostGrowsWithTheGranule) {
  for (const char* p : kPlatforms) {
    double prev_map = 0, prev_unmap = 0, prev_tput = 1e300;
    for (int g = 1; g <= 256; g *= 2) {
      RunResult r = MapBench(p, "latest", g);
      ASSERT_GT(r.operations, 0u) << p << " g=" << g;
      EXPECT_GE(r.map_latency.mean, prev_map) << p << " g=" << g;
      EXPECT_GE(r.unmap_latency.mean, prev_unmap) << p << " g=" << g;
      EXPECT_LT(r.throughput, prev_tput) << p << " g=" << g;
      prev_map = r.map_latency.mean;
      prev_unmap = r.unmap_latency.mean;
      prev_tput = r.throughput;
    }
  }
}

// alloc_iova_fast() caches sizes whose order is below IOVA_RANGE_CACHE_MAX_SIZE
// (6: up to 32 pages); from 33 pages every map walks the rbtree under
// iova_rbtree_lock and every unmap erases from it. The step moves with the
// limit (iova.rcache.max_order, which John Garry's 2021 series proposed to
// make configurable).
TEST(IovaPaths, GranuleSweepStepsWhereTheRcacheStopsCaching) {
  for (const char* p : kPlatforms) {
    for (int order : {6, 8}) {
      const int last_cached = 1 << (order - 1);
      std::map<std::string, std::string> sets = {{"iova.rcache.max_order", std::to_string(order)}};
      RunResult in = MapBench(p, "latest", last_cached, sets);
      RunResult out = MapBench(p, "latest", last_cached + 1, sets);
      // The first map of a cold cache walks the tree; every later one hits.
      EXPECT_LE(in.counters.rbtree_allocs, 2u) << p << " order " << order;
      EXPECT_GE(in.counters.rcache_hits + 2, in.counters.dma_maps) << p << " order " << order;
      EXPECT_EQ(out.counters.rcache_hits, 0u) << p << " order " << order;
      EXPECT_EQ(out.counters.rbtree_allocs, out.counters.dma_maps) << p << " order " << order;
      EXPECT_GE(out.counters.rbtree_frees + 1, out.counters.dma_unmaps) << p << " order " << order;
    }
  }
}

// One page more costs one more PTE to write; the page that takes the size
// out of the rcache costs the rbtree walk and insert under iova_rbtree_lock
// on top: a map's cost steps at 32 -> 33 pages by more than a page's slope,
// and the unmap (an erase under the same lock) does not get cheaper.
TEST(IovaPaths, GranuleSweepCostStepsAtTheRcacheLimit) {
  for (const char* p : kPlatforms) {
    RunResult g31 = MapBench(p, "latest", 31);
    RunResult g32 = MapBench(p, "latest", 32);
    RunResult g33 = MapBench(p, "latest", 33);
    const double slope = g32.map_latency.mean - g31.map_latency.mean;
    const double step = g33.map_latency.mean - g32.map_latency.mean;
    EXPECT_GT(step, 2 * slope) << p << ": map 31->32 " << slope << " ns, 32->33 " << step << " ns";
    EXPECT_GE(g33.unmap_latency.mean, g32.unmap_latency.mean) << p;
  }
}

// Before bb65a64c7285 dma-iommu's __alloc_iova() called alloc_iova() for
// every map and __iommu_dma_unmap() find_iova() + __free_iova() for every
// unmap; from it on both go through the per-CPU rcache.
TEST(IovaPaths, DmaIommuUsesTheRcacheFromBb65a64c7285) {
  for (const char* p : {"arm-mmu500-8c", "kunpeng920-smmuv3"}) {
    RunResult before = MapBench(p, "v4.11", 1);
    RunResult after = MapBench(p, "bb65a64c7285", 1);
    ASSERT_GT(before.counters.dma_maps, 10u);
    EXPECT_EQ(before.model.at("iova.dma_iommu_alloc"), "alloc_iova");
    EXPECT_EQ(after.model.at("iova.dma_iommu_alloc"), "alloc_iova_fast");
    EXPECT_EQ(before.counters.rbtree_allocs, before.counters.dma_maps) << p;
    EXPECT_EQ(before.counters.find_iova, before.counters.dma_unmaps) << p;
    EXPECT_EQ(before.counters.rbtree_frees, before.counters.dma_unmaps) << p;
    EXPECT_EQ(before.counters.rcache_hits, 0u) << p;
    EXPECT_LE(after.counters.rbtree_allocs, 2u) << p;
    EXPECT_EQ(after.counters.find_iova, 0u) << p;
    EXPECT_GT(after.throughput, before.throughput) << p;
  }
  // VT-d's private path and AMD's own DMA ops never went through dma-iommu's
  // __alloc_iova(): the key does not move them.
  for (const char* p : {"intel-vtd-2s12c", "amd-genoa-2s96c"}) {
    RunResult a = MapBench(p, "v4.11", 1, {{"iova.dma_iommu_alloc", "alloc_iova_fast"}});
    RunResult b = MapBench(p, "v4.11", 1, {{"iova.dma_iommu_alloc", "alloc_iova"}});
    EXPECT_EQ(a.throughput, b.throughput) << p;
    EXPECT_EQ(a.counters.rbtree_allocs, b.counters.rbtree_allocs) << p;
  }
}

RunResult Fio(const std::string& kernel, const std::string& mode,
              std::map<std::string, std::string> params,
              std::map<std::string, std::string> sets = {}) {
  params.insert({{"bs", "256k"}, {"devices", "4"}, {"runtime_ms", "10"}, {"ramp_ms", "10"}});
  RunSpec s = NoiseFreeSpec("amd-genoa-2s96c", kernel, mode, "fio-nvme", params);
  for (auto& [k, v] : sets) s.sets[k] = v;
  return MustRun(s);
}

// fio at bs=256k on an NVMe of MDTS 4 MiB: before 3710e2b056cb every I/O is
// one command and one 64-page IOVA, above the rcache's 32 pages: each map is
// an alloc_iova() and each free (the flush queue's, in lazy mode) a
// free_iova(), all under the domain's one iova_rbtree_lock, whose waits grow
// with the jobs. From 3710e2b056cb the block layer splits the I/O into
// 128 KiB commands whose IOVAs the rcache keeps. An NVMe of MDTS 128 KiB
// splits them the same way without the clamp (the commit message's note).
TEST(IovaPaths, FioLargeBlocksGoToTheRbtreeUntilTheNvmeClamp) {
  RunResult one = Fio("v6.3", "lazy", {{"numjobs", "1"}});
  RunResult many = Fio("v6.3", "lazy", {{"numjobs", "16"}});
  RunResult clamped = Fio("3710e2b056cb", "lazy", {{"numjobs", "16"}});
  RunResult small_mdts = Fio("v6.3", "lazy", {{"numjobs", "16"}, {"mdts_kb", "128"}});
  ASSERT_GT(many.counters.dma_maps, 100u);
  EXPECT_EQ(many.counters.rbtree_allocs, many.counters.dma_maps);
  EXPECT_EQ(many.counters.rcache_hits, 0u);
  const int64_t wait_one = LockWait(one, "iova_rbtree_lock");
  const int64_t wait_many = LockWait(many, "iova_rbtree_lock");
  EXPECT_GT(wait_many, 10 * (wait_one + 1000))
      << "1 job " << wait_one << " ns, 16 jobs " << wait_many << " ns";
  for (const RunResult* r : {&clamped, &small_mdts}) {
    // Two 32-page commands per I/O, nearly all served by the rcache.
    EXPECT_EQ(r->counters.dma_maps, 2 * many.counters.dma_maps);
    EXPECT_GT(r->counters.rcache_hits, 9 * r->counters.rbtree_allocs);
    EXPECT_LT(LockWait(*r, "iova_rbtree_lock"), wait_many / 20);
    EXPECT_LT(r->unmap_latency.mean, many.unmap_latency.mean);
    EXPECT_LT(r->cpu_busy_percent, many.cpu_busy_percent);
  }
  // Without an IOMMU the clamp does nothing: dma-direct has no optimal size.
  RunResult pt_before = Fio("v6.3", "passthrough", {{"numjobs", "16"}});
  RunResult pt_after = Fio("3710e2b056cb", "passthrough", {{"numjobs", "16"}});
  EXPECT_EQ(pt_before.counters.dma_maps, pt_after.counters.dma_maps);
  EXPECT_EQ(pt_before.throughput, pt_after.throughput);
}

}  // namespace
}  // namespace farm::emu
