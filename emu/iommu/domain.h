// emu/iommu/domain.h: one device's default DMA domain.
//
// DmaDomain is the state the DMA API (dma_api.h) and the deferred-flush
// policies (flush_queue.h) share for one device: the iommu_domain's page
// table and the lock io-pgtable callers took before 2c3d273eabe8, the
// device-side IOTLB, and the iommu_dma_cookie's iova_domain with the DMA
// mask that bounds it. FreeIova() returns a range to whichever allocator the
// model selects (iova.allocator).
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
  //! Domain of device `id`; IOTLB geometry and allocator from the model.
  DmaDomain(Sim* sim, int id, int num_cpus);
  DmaDomain(const DmaDomain&) = delete;
  DmaDomain& operator=(const DmaDomain&) = delete;

  //! iommu_dma_free_iova(): free_iova_fast() into the rcache, or
  //! __free_iova() into the rbtree where the rbtree is the only allocator.
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
  const bool rbtree_only_;
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_DOMAIN_H_
