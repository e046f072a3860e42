// emu/iommu/sim.h: the per-run context every model object is built against.
//
// Sim bundles the engine, the typed model (code paths and costs) and the run's
// counters, and keeps a registry of the spinlocks so lock contention can be
// reported by lock name. One Sim per run.
// Thread-safety: single-threaded, like the Engine. Ownership: Sim does not own
// the Engine or the locks it lists; model objects own their locks and must
// outlive reporting.
#ifndef EMU_IOMMU_SIM_H_
#define EMU_IOMMU_SIM_H_

#include <cstdint>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/model/model_config.h"

namespace farm::emu {

//! Event counters of one run (monotonic).
struct Counters {
  uint64_t dma_maps = 0, dma_unmaps = 0, dma_map_sgs = 0, dma_unmap_sgs = 0;
  // IOVA allocator.
  uint64_t rbtree_allocs = 0, rbtree_frees = 0, rbtree_nodes_visited = 0;
  uint64_t rbtree_alloc_failures = 0, max32_fast_fails = 0, find_iova = 0;
  uint64_t rcache_hits = 0, rcache_misses = 0, rcache_inserts = 0, rcache_insert_fails = 0;
  uint64_t depot_loads = 0, depot_stores = 0, depot_full_frees = 0, depot_trims = 0;
  uint64_t rcache_flushes = 0;
  // Page tables.
  uint64_t ptes_written = 0, ptes_cleared = 0, pgtables_allocated = 0, clflush_lines = 0;
  uint64_t iommu_map_calls = 0, write_buffer_flushes = 0;
  // Invalidation.
  uint64_t inv_range = 0, inv_domain = 0, inv_global = 0, syncs = 0;
  uint64_t qi_descriptors = 0, cmdq_commands = 0, cmdq_batches = 0;
  uint64_t cmdq_cmpxchg_attempts = 0, cmdq_cmpxchg_failures = 0;
  uint64_t tlb_sync_polls = 0, tlb_sync_timeouts = 0;
  // Address-based TLB invalidations (an MMU-500 TLBIVA/TLBIVAL write, an SMMUv3
  // TLBI_NH_VA command, a range one included), and io_pgtable_tlb_flush_walk()
  // calls with the leaf tables they free.
  uint64_t tlbi_va = 0, tlb_flush_walks = 0, pgtables_freed = 0;
  // Deferred flushing.
  uint64_t fq_queued = 0, fq_flushes = 0, fq_full_flushes = 0, fq_timer_flushes = 0;
  // Device side.
  uint64_t iotlb_hits = 0, iotlb_misses = 0, dma_faults = 0;
};

struct Sim {
  Engine* engine = nullptr;
  const Model* model = nullptr;
  Counters counters;
  std::vector<SpinLock*> locks;

  const Model& m() const { return *model; }
  void Register(SpinLock* l) { locks.push_back(l); }
  //! Zeroes the counters and lock statistics once, at the start of a
  //! measured window that follows a warm-up (later calls do nothing).
  void StartMeasurement() {
    if (measuring) return;
    measuring = true;
    counters = Counters{};
    for (SpinLock* l : locks) l->ResetStats();
  }
  bool measuring = false;
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_SIM_H_
