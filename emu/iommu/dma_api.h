// emu/iommu/dma_api.h: the kernel's streaming DMA API over the modelled IOMMU.
//
// DmaApi is the DmaPath (dma_path.h) workloads map through: dma_map_page /
// dma_unmap_page / dma_map_sg / dma_unmap_sg for a device, in one of four
// modes:
//  - off and passthrough: dma-direct (no IOVA, no page tables);
//  - strict: unmap clears PTEs, invalidates and waits, then frees the IOVA;
//  - lazy: unmap clears PTEs and hands invalidation + IOVA free to the
//    DeferredFlush policy fq.kind selects (flush_queue.h).
// The mode given is the one the kernel really runs, not the one asked for
// (emu/model/effective_mode.h); each DMA domain records whether it has a
// flush queue (DmaDomain::flush_queue).
// Per device there is one DMA domain (default domain, domain.h), used when
// the device is translated (Model::AttachOf); the others take dma-direct. One
// Invalidator (invalidation.h) serves the IOMMU unit.
//
// The VT-d private path (map_sg=intel-private on iommu.type=vtd) follows
// intel_map_page/intel_unmap/intel_map_sg; otherwise the dma-iommu path
// (iommu_dma_map_page, __iommu_map, iommu_dma_unmap_page).
//
// Timers (flush queue timeouts, depot trimming) run on daemon CPUs that
// StartDaemons() adds to the engine.
// Thread-safety: engine thread only. Ownership: owns the domains, the
// invalidator and the deferred-flush policy; borrows Sim and the Engine.
#ifndef EMU_IOMMU_DMA_API_H_
#define EMU_IOMMU_DMA_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/dma_path.h"
#include "emu/iommu/domain.h"
#include "emu/iommu/flush_queue.h"
#include "emu/iommu/invalidation.h"
#include "emu/iommu/sim.h"
#include "emu/model/platform.h"
#include "lib/iommu_mode/iommu_mode.h"

namespace farm::emu {

//! The farm's IOMMU modes; their words are iommu_mode::Word.
using Mode = iommu_mode::Mode;
//! "off" | "passthrough" | "strict" | "lazy"; InvalidArgument naming them
//! for any other word.
absl::StatusOr<Mode> ParseMode(const std::string& s);

class DmaApi final : public DmaPath {
 public:
  DmaApi(Sim* sim, Mode mode, std::vector<DeviceSpec> devices, int num_cpus);
  ~DmaApi() override;
  DmaApi(const DmaApi&) = delete;
  DmaApi& operator=(const DmaApi&) = delete;

  //! Adds the timer daemons the mode needs. Call once before Engine::Run().
  void StartDaemons(Engine& engine);

  // DmaPath (the kernel functions each models are named in dma_path.h).
  void SetDmaBits(int dev, int bits) override;
  //! iommu_dma_opt_mapping_size(): iova_rcache_range(), the largest size the
  //! rcache keeps; 0 for a device on dma-direct or VT-d's private dma_ops.
  uint64_t OptMappingSize(int dev) const override;
  Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t phys, uint64_t size, DmaDir dir) override;
  Task<void> UnmapPage(Cpu& cpu, int dev, uint64_t dma, uint64_t size, DmaDir dir) override;
  Task<uint64_t> MapSg(Cpu& cpu, int dev, const SgSegment* segs, int nsegs, DmaDir dir) override;
  Task<void> UnmapSg(Cpu& cpu, int dev, uint64_t dma, const SgSegment* segs, int nsegs,
                     DmaDir dir) override;
  Time DeviceAccess(int dev, uint64_t dma, uint64_t len) override;
  //! FARM_DCHECKs that `cpu` just synchronised.
  void StartMeasurement(Cpu& cpu) override;

  Mode mode() const { return mode_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  const DeviceSpec& device(int i) const { return devices_[i]; }
  //! Index of the named device, or -1.
  int FindDevice(const std::string& name) const;
  //! Totals over the domains' IOTLBs and trees, for reporting.
  uint64_t iotlb_hits() const;
  uint64_t iotlb_misses() const;
  uint64_t mapped_pages() const;

 private:
  bool IntelPrivate() const;
  //! dma-iommu's __alloc_iova() of before bb65a64c7285: alloc_iova() and
  //! __free_iova() on every map and unmap (iova.dma_iommu_alloc).
  bool DmaIommuAllocIova() const;
  uint64_t LimitPfn(const DmaDomain& d) const;
  Task<uint64_t> AllocIova(Cpu& cpu, DmaDomain& d, uint64_t npages);
  //! MapPage's rest once AllocIova waited: `alloc` not yet awaited.
  Task<uint64_t> MapPageAfterAlloc(Cpu& cpu, DmaDomain& d, Task<uint64_t> alloc, uint64_t phys,
                                   uint64_t npages);
  //! __iommu_map() and iotlb_sync_map for the allocated `pfn`; the mapping's
  //! address, or kDmaMappingError for pfn 0.
  Task<uint64_t> MapIova(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys, uint64_t npages);
  Task<uint64_t> MapIovaTail(Cpu& cpu, DmaDomain& d, Task<void> install, uint64_t pfn,
                             uint64_t npages, uint64_t addr, Task<void> sync = {});
  Task<void> FindIovaThenUnmap(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages);
  Task<uint64_t> AllocIova32First(Cpu& cpu, DmaDomain& d, uint64_t npages, uint64_t limit);
  //! `flush` = false leaves the VT-d clflush to the caller (one iotlb_sync_map
  //! over a whole scatterlist, 933fcd01e97e).
  Task<void> InstallPtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn, uint64_t npages,
                         bool flush = true);
  Task<void> InstallPtesLocked(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn,
                               uint64_t npages, bool flush);
  //! arm_lpae_init_pte(): a 2 MiB block replacing an emptied leaf table
  //! unmaps and frees that table first, with its walk flush.
  Task<void> FreeTablesThenFlush(Cpu& cpu, DmaDomain& d, PtWork w, bool flush);
  //! __domain_mapping / __arm_lpae_map: the PTEs, their walk and any new tables.
  PtWork WritePtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn, uint64_t npages);
  //! domain_flush_cache(): the VT-d clflush of the written PTE lines, when
  //! `flush` and the IOMMU is not coherent.
  void FlushPtes(Cpu& cpu, const PtWork& w, bool flush);
  //! What the unmap touched: its PTE lines follow a held pgtbl_lock, its
  //! freed leaf tables go to FreeTables, its leaves to the iotlb gather.
  PtWork ClearPtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages);
  //! The walk flush and free of each leaf table `w` let go.
  Task<void> FreeTables(Cpu& cpu, DmaDomain& d, const PtWork& w);
  //! Whether the driver serialises map/unmap on the domain's pgtbl_lock.
  bool PgtblLocked() const;
  //! __iommu_dma_unmap() after the IOVA lookup: iommu_unmap_fast() (the
  //! driver's unmap under pgtbl_lock where it has one), then the IOTLB sync
  //! and IOVA free, or the flush queue in lazy mode.
  Task<void> UnmapRange(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages);
  //! UnmapRange's rest when the pgtbl_lock waits, or a leaf table is freed.
  Task<void> UnmapRangeLocking(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages);
  Task<void> FreeTablesThenSync(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages, PtWork w,
                                bool locked);
  //! iommu_iotlb_sync() over the cleared leaves, the pgtbl_lock's release,
  //! then the IOVA free (strict), or queue_iova() (lazy).
  Task<void> IotlbSyncThenFree(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages,
                               const PtWork& w, bool locked);
  //! The strict unmap's end once the IOTLB is synced: the pgtbl_lock's
  //! release (when held), then iommu_dma_free_iova().
  static Task<void> FreeIovaAfterSync(const AfterIotlbSync& a, Cpu& cpu);
  //! IotlbSyncThenFree's rest once the 2 MiB blocks' `sync` waits: the 4 KiB
  //! leaves' sync (if any), the pgtbl_lock's release, the IOVA free.
  Task<void> IotlbSyncWait(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages, PtWork w,
                           bool locked, Task<void> sync);
  void CacheMaint(Cpu& cpu, Sym sym, uint64_t bytes);
  // The entry point's fixed body and the commit's measured instruction delta
  // (map or unmap side), then the dma_map_ops indirect call when it exists.
  void EntryCall(Cpu& cpu, Sym entry, bool map);
  Task<void> DepotLoop(Cpu& cpu);

  Sim* sim_;
  Mode mode_;
  std::vector<DeviceSpec> devices_;
  //! Per device: dma-direct (mode off/passthrough, identity group, or no
  //! IOMMU upstream) instead of its DMA domain.
  std::vector<bool> direct_;
  int num_cpus_;
  std::unique_ptr<Invalidator> inv_;
  std::vector<std::unique_ptr<DmaDomain>> domains_;
  std::unique_ptr<DeferredFlush> flush_;  // lazy mode only
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_DMA_API_H_
