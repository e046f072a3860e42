// Tests of the IOVA allocator algorithms (drivers/iommu/iova.c semantics).
#include "emu/iommu/iova.h"

#include <set>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"
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

// The rcache's depot when one CPU frees what another allocated (a queue's
// IRQ CPU unmapping what the submitting CPU mapped, with nothing reallocated
// on the freeing CPU): 37 magazines' worth of single pages freed on CPU 0.
// Time a CPU on node 1 spends in free_iova() of a range that a CPU on node 0
// (`remote`) or the freeing CPU itself allocated, the node-0 CPU having held
// iova_rbtree_lock last either way; with `find_first`, find_iova() +
// __free_iova() (intel_unmap() of v4.6), timing both.
Time FreeCost(bool remote, bool find_first) {
  const Platform* p = *FindPlatform("intel-vtd-snb16c");
  Model m = *Model::From(*ModelConfig().Apply(p->settings));
  Engine e(p->topology, m.line, 1);
  Sim sim;
  sim.engine = &e;
  sim.model = &m;
  IovaDomain d(&sim, "t", 1, 16);
  Cpu& other = e.AddCpu(0);
  Cpu& self = e.AddCpu(8);
  uint64_t own = 0, theirs = 0;
  Time cost = 0;
  auto other_cpu = [&](Cpu& c) -> Task<void> {
    c.Idle(1000);
    theirs = co_await d.AllocIova(c, 1, (1ULL << 20) - 1, true);
  };
  auto self_cpu = [&](Cpu& c) -> Task<void> {
    own = co_await d.AllocIova(c, 1, (1ULL << 20) - 1, true);
    c.Idle(kNsPerMs);
    co_await c.Sync();
    const uint64_t pfn = remote ? theirs : own;
    Time t0 = c.now();
    if (find_first) {
      co_await d.FindIova(c, pfn);
      co_await d.FreeFoundIova(c, pfn);
    } else {
      co_await d.FreeIova(c, pfn);
    }
    cost = c.now() - t0;
  };
  e.Start(other, other_cpu(other));
  e.Start(self, self_cpu(self));
  EXPECT_TRUE(e.Run().ok());
  EXPECT_NE(own, 0u);
  EXPECT_NE(theirs, 0u);
  return cost;
}

// The struct iova another CPU allocated comes from that CPU's cache: freeing
// it costs one line transfer more than freeing one's own (here across the
// sockets), once per find_iova() + __free_iova() pair.
TEST(IovaRbtree, FreeingAnotherCpusRangePullsItsStructIova) {
  const Platform* p = *FindPlatform("intel-vtd-snb16c");
  Model m = *Model::From(*ModelConfig().Apply(p->settings));
  EXPECT_EQ(FreeCost(true, false) - FreeCost(false, false), m.line.remote);
  EXPECT_EQ(FreeCost(true, true) - FreeCost(false, true), m.line.remote);
}

struct DepotRun {
  uint64_t stores = 0, full_frees = 0, trims = 0;
  size_t tree_after_frees = 0, tree_after_trims = 0;
  uint64_t cached_after_frees = 0, cached_after_trims = 0;
};

DepotRun FreeOnAnotherCpu(const char* depot) {
  const Platform* p = *FindPlatform("kunpeng920-smmuv3");
  ModelConfig cfg = *ModelConfig().Apply(p->settings);
  cfg = *cfg.Apply({{"iova.rcache.depot", depot},
                    {"iova.rcache.mag_size", "128"},
                    {"iova.rcache.max_global_mags", "32"}});
  Model m = *Model::From(cfg);
  Engine e(p->topology, m.line, 1);
  Sim sim;
  sim.engine = &e;
  sim.model = &m;
  constexpr int kCpus = 2;
  constexpr int kPfns = 37 * 128;
  IovaDomain d(&sim, "t", 1, kCpus);
  std::vector<uint64_t> pfns;
  DepotRun r;
  Cpu& alloc_cpu = e.AddCpu(1);
  Cpu& free_cpu = e.AddCpu(0);
  auto alloc = [&](Cpu& c) -> Task<void> {
    for (int i = 0; i < kPfns; ++i)
      pfns.push_back(co_await d.AllocIovaFast(c, 1, ~0ULL >> 16, true));
  };
  auto free_then_trim = [&](Cpu& c) -> Task<void> {
    c.Idle(kNsPerSec);  // after every allocation
    co_await c.Sync();
    for (uint64_t pfn : pfns) co_await d.FreeIovaFast(c, pfn, 1);
    r.tree_after_frees = d.tree_size();
    r.cached_after_frees = d.CachedPfns();
    // iova_depot_work_func() (the list depot only) runs, rescheduling
    // itself, until the depot is down to num_online_cpus magazines.
    if (m.depot == DepotKind::kList) {
      for (int i = 0; i < 40; ++i) co_await d.DepotWork(c);
    }
    r.tree_after_trims = d.tree_size();
    r.cached_after_trims = d.CachedPfns();
  };
  e.Start(alloc_cpu, alloc(alloc_cpu));
  e.Start(free_cpu, free_then_trim(free_cpu));
  EXPECT_TRUE(e.Run().ok());
  EXPECT_EQ(pfns.size(), static_cast<size_t>(kPfns));
  r.stores = sim.counters.depot_stores;
  r.full_frees = sim.counters.depot_full_frees;
  r.trims = sim.counters.depot_trims;
  return r;
}

// Before v6.7 the depot holds MAX_GLOBAL_MAGS magazines; past that a CPU with
// both magazines full frees its loaded one into the rbtree (128 erases under
// iova_rbtree_lock), and nothing trims what the depot keeps.
TEST(IovaRcache, BoundedDepotFreesWholeMagazinesWhenFull) {
  DepotRun r = FreeOnAnotherCpu("bounded");
  EXPECT_EQ(r.stores, 32u);
  EXPECT_EQ(r.full_frees, 3u);
  EXPECT_EQ(r.trims, 0u);
  // Loaded + previous + 32 depot magazines stay cached, in the tree.
  EXPECT_EQ(r.cached_after_frees, (2 + 32) * 128u);
  EXPECT_EQ(r.tree_after_frees, r.cached_after_frees);
  EXPECT_EQ(r.tree_after_trims, r.tree_after_frees);
  EXPECT_EQ(r.cached_after_trims, r.cached_after_frees);
}

// From v6.7 the depot is a list that takes every full magazine and the
// delayed work trims it, one magazine a run, to num_online_cpus magazines.
TEST(IovaRcache, ListDepotGrowsThenTrimsToTheOnlineCpus) {
  DepotRun r = FreeOnAnotherCpu("list");
  EXPECT_EQ(r.stores, 35u);
  EXPECT_EQ(r.full_frees, 0u);
  EXPECT_EQ(r.cached_after_frees, 37 * 128u);
  EXPECT_EQ(r.trims, 35u - 2u);
  EXPECT_EQ(r.cached_after_trims, (2 + 2) * 128u);
  EXPECT_EQ(r.tree_after_trims, r.cached_after_trims);
}

}  // namespace
}  // namespace farm::emu
