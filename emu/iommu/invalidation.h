// emu/iommu/invalidation.h: the IOMMU drivers' TLB-invalidation machinery.
//
// Invalidator is what the DMA layer calls for iotlb_sync_map, iotlb_sync
// (strict unmap), flush_iotlb_all (flush queues) and the VT-d global flush.
// Five implementations, each over real queue state in virtual time:
//  - VtdQi: the VT-d invalidation queue, qi_submit_sync() (drivers/iommu/intel/
//    dmar.c): descriptors plus a wait descriptor written under qi->q_lock, the
//    tail register written, then a spin on the wait descriptor's status; the
//    hardware consumes descriptors in order. Also iommu_flush_write_buffer().
//  - SmmuV3Cmdq: the cmdq (arm-smmu-v3.c) in both forms: before 587e6c10a7ce
//    arm_smmu_cmdq_issue_cmd() takes the cmdq spinlock per command and
//    arm_smmu_cmdq_issue_sync() holds it over the CMD_SYNC wait; from it on
//    arm_smmu_cmdq_issue_cmdlist(), lock-free: a cmpxchg loop on the shared
//    prod/cons word reserves slots, the first CPU to find OWNED clear becomes
//    owner, waits for the previous owner, clears OWNED with fetch_andnot
//    (gathering every slot reserved so far), waits for the valid bitmap and
//    writes PROD once; CMD_SYNC issuers poll for their sync. A range is one
//    TLBI_NH_VA per granule, or range commands (NUM/SCALE) where driver and
//    SMMU have range invalidation, or one TLBI_NH_ASID past
//    smmu.max_tlbi_ops (__arm_smmu_tlb_inv_range).
//    With smmu.sync_per_batch the SMMU performs a published batch's commands
//    and then one CMD_SYNC handshake for all of the batch's syncs, stalling
//    only that queue.
//  - Mmu500Tlb: arm-smmu.c TLBIVA/TLBIVAL register writes, one per granule
//    (arm_smmu_tlb_inv_range_s1: tlb_add_page per leaf, tlb_flush_walk over a
//    freed table's 2 MiB), TLBIASID for the whole context, and the
//    TLBSYNC/TLBSTATUS poll with exponential backoff (__arm_smmu_tlb_sync),
//    under cb_lock for the per-context sync of v4.14 (mmu500.tlb_sync),
//    unlocked before.
//  - Tegra241Cmdqv: NVIDIA's command-queue virtualisation in front of SMMUv3:
//    several SmmuV3Cmdq queues, one chosen per CPU (tegra241_cmdqv_get_cmdq),
//    sharing the SMMU's one command consumer; their CS_NONE CMD_SYNCs are
//    waited for by polling the CONS register.
//  - AmdIommu: the AMD-Vi command buffer, iommu_queue_command_sync() and
//    iommu_completion_wait() under iommu->lock, the semaphore poll inside or
//    outside the lock (amd.wait_unlocked).
// VT-d's flushes take the domain's cache_lock around qi_submit_sync() when
// vtd.cache_lock is set (cache_tag_flush_range, v6.10).
// Each also invalidates the device-side Iotlb of the domain when it runs.
//
// Thread-safety: engine thread only. Ownership: owns its locks and queue
// state; borrows Sim and the domains' Iotlbs.
#ifndef EMU_IOMMU_INVALIDATION_H_
#define EMU_IOMMU_INVALIDATION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/io_pgtable.h"
#include "emu/iommu/sim.h"

namespace farm::emu {

struct DmaDomain;

//! What a strict unmap does once its IOTLB sync is complete (the rest of
//! __iommu_dma_unmap() or intel_unmap(): the pgtbl_lock's release and the
//! IOVA free), as data and a plain function returning a Task, so that a sync
//! that waits can run it at its own end rather than return to a frame of the
//! caller's (Invalidator::InvalidateRangeThen).
struct AfterIotlbSync {
  Task<void> (*run)(const AfterIotlbSync&, Cpu&);
  DmaDomain* domain;
  uint64_t pfn;
  uint64_t npages;
  int dirty_lines;  // the pgtbl_lock's Unlock() argument
  bool locked;      // the pgtbl_lock is held
};

class Invalidator {
 public:
  virtual ~Invalidator() = default;
  //! iotlb_sync_map / __mapping_notify_one after installing PTEs.
  virtual Task<void> SyncMap(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) = 0;
  //! iommu_iotlb_sync for a range (strict unmap): invalidate and wait.
  //! `granule` is the gather's page size in 4 KiB pages: 1, or
  //! IoPageTable::kBlockPages for 2 MiB blocks (io-pgtable-arm only). npages 0
  //! is an empty gather.
  virtual Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                     uint64_t granule) = 0;
  //! InvalidateRange, then `after` once it is complete: the Task has run
  //! both. This default awaits a range that waits in a frame of its own;
  //! SMMUv3's lock-free cmdq runs `after` at the end of its own wait.
  virtual Task<void> InvalidateRangeThen(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                         uint64_t granule, const AfterIotlbSync& after);
  //! io_pgtable_tlb_flush_walk(): before __arm_lpae_unmap frees a leaf table,
  //! every 4 KiB of the table's range is invalidated and waited for, in
  //! strict and lazy mode alike (the table page is freed at once).
  virtual Task<void> FlushWalk(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) {
    return InvalidateRange(cpu, tlb, pfn, npages, 1);
  }
  //! flush_iotlb_all for a domain: invalidate and wait.
  virtual Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) = 0;
  //! A global flush (VT-d DMA_TLB_GLOBAL_FLUSH); defaults to a domain flush.
  virtual Task<void> InvalidateGlobal(Cpu& cpu, Iotlb& tlb) { return InvalidateDomain(cpu, tlb); }
  //! Symbol charged for the driver's unmap/map page-table work.
  virtual Sym map_sym() const = 0;
  virtual Sym unmap_sym() const = 0;
};

//! Creates the invalidator for the model's iommu.type. `max_cpus` is the
//! number of engine CPU slots (for per-CPU bookkeeping).
std::unique_ptr<Invalidator> MakeInvalidator(Sim* sim, int max_cpus);

}  // namespace farm::emu

#endif  // EMU_IOMMU_INVALIDATION_H_
