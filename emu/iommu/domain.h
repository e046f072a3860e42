// emu/iommu/domain.h: one device's default DMA domain.
//
// DmaDomain is the state the DMA API (dma_api.h) and the deferred-flush
// policies (flush_queue.h) share for one device: the iommu_domain's page
// table and the lock io-pgtable callers took before 2c3d273eabe8, the
// device-side IOTLB, and the iommu_dma_cookie's iova_domain with the DMA
// mask that bounds it. FreeIova() returns a range to whichever allocator the
// model selects (iova.allocator, iova.dma_iommu_alloc).
//
// Thread-safety: engine thread only. Ownership: DmaApi owns its domains;
// a domain borrows Sim and owns its tree, table, IOTLB and lock.
#ifndef EMU_IOMMU_DOMAIN_H_
#define EMU_IOMMU_DOMAIN_H_

#include <cstdint>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/io_pgtable.h"
#include "emu/iommu/iova.h"
#include "emu/iommu/sim.h"

namespace farm::emu {

struct DmaDomain {
  //! How an unmapped range goes back to the allocator.
  enum class Free {
    kFreeIovaFast,     // free_iova_fast(): into the rcache
    kFreeIova,         // free_iova(): lookup and erase under iova_rbtree_lock
    kFindAndFreeIova,  // find_iova() then __free_iova(): the lock taken twice
  };
  //! Domain of device `id`; IOTLB geometry from the model.
  DmaDomain(Sim* sim, int id, int num_cpus, Free free);
  DmaDomain(const DmaDomain&) = delete;
  DmaDomain& operator=(const DmaDomain&) = delete;

  //! iommu_dma_free_iova() / intel_unmap()'s free, as `free` says.
  Task<void> FreeIova(Cpu& cpu, uint64_t pfn, uint64_t npages);

  const int id;
  IovaDomain iovad;
  IoPageTable pt;
  Iotlb tlb;
  SpinLock pgtbl_lock;
  int dma_bits = 64;
  //! The domain has a flush queue (lazy, IOMMU_DOMAIN_DMA_FQ): unmap defers
  //! invalidation and IOVA free to it; false = strict (IOMMU_DOMAIN_DMA).
  bool flush_queue = false;

 private:
  Task<void> FindAndFreeIova(Cpu& cpu, uint64_t pfn);
  const Free free_;
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_DOMAIN_H_
