// emu/iommu/dma_api.h: the kernel's streaming DMA API over the modelled IOMMU.
//
// DmaApi is what workloads call: dma_map_page / dma_unmap_page / dma_map_sg /
// dma_unmap_sg for a device, in one of four modes:
//  - off and passthrough: dma-direct (no IOVA, no page tables);
//  - strict: unmap clears PTEs, invalidates and waits, then frees the IOVA;
//  - lazy: unmap clears PTEs and defers invalidation + IOVA free through the
//    flush mechanism selected by fq.kind (the 2008 VT-d global list, the v4.7
//    per-CPU lists, the v4.14+ per-CPU flush queue, the v6.7 single queue).
// Per device there is one DMA domain (default domain): an IovaDomain, an
// IoPageTable, a device-side Iotlb and the page-table lock used when
// iopgtable.lockless is false. One Invalidator serves the IOMMU unit.
//
// The VT-d private path (map_sg=intel-private on iommu.type=vtd) follows
// intel_map_page/intel_unmap/intel_map_sg; otherwise the dma-iommu path
// (iommu_dma_map_page, __iommu_map, iommu_dma_unmap_page).
//
// Timers (flush queue timeouts, depot trimming) run on daemon CPUs that
// StartDaemons() adds to the engine.
// Thread-safety: engine thread only. Ownership: owns domains, queues and the
// invalidator; borrows Sim and the Engine.
#ifndef EMU_IOMMU_DMA_API_H_
#define EMU_IOMMU_DMA_API_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/invalidation.h"
#include "emu/iommu/io_pgtable.h"
#include "emu/iommu/iova.h"
#include "emu/iommu/sim.h"
#include "emu/model/platform.h"

namespace farm::emu {

enum class Mode { kOff, kPassthrough, kStrict, kLazy };
//! "off" | "passthrough" | "strict" | "lazy".
absl::StatusOr<Mode> ParseMode(const std::string& s);
const char* ModeName(Mode m);

enum class DmaDir { kBidirectional = 0, kToDevice = 1, kFromDevice = 2 };

struct SgSegment {
  uint64_t phys;  // byte address
  uint64_t len;   // bytes
};

inline constexpr uint64_t kDmaMappingError = ~0ULL;

class DmaApi {
 public:
  DmaApi(Sim* sim, Mode mode, std::vector<DeviceSpec> devices, int num_cpus);
  ~DmaApi();
  DmaApi(const DmaApi&) = delete;
  DmaApi& operator=(const DmaApi&) = delete;

  //! Adds the timer daemons the mode needs. Call once before Engine::Run().
  void StartDaemons(Engine& engine);

  //! Overrides a device's DMA mask (dma_set_mask); before any mapping.
  void SetDmaBits(int dev, int bits);

  //! dma_map_page_attrs(): returns the DMA address or kDmaMappingError.
  Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t phys, uint64_t size, DmaDir dir);
  //! dma_unmap_page_attrs().
  Task<void> UnmapPage(Cpu& cpu, int dev, uint64_t dma, uint64_t size, DmaDir dir);
  //! dma_map_sg_attrs(): the list is mapped contiguously; returns its DMA
  //! address or kDmaMappingError.
  Task<uint64_t> MapSg(Cpu& cpu, int dev, const SgSegment* segs, int nsegs, DmaDir dir);
  //! dma_unmap_sg_attrs().
  Task<void> UnmapSg(Cpu& cpu, int dev, uint64_t dma, const SgSegment* segs, int nsegs, DmaDir dir);
  //! The device reads/writes [dma, dma+len): IOTLB lookups (and page walks on
  //! misses) on the device side. Returns device-side translation time.
  Time DeviceAccess(int dev, uint64_t dma, uint64_t len);

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
  struct Domain;
  struct FqEntry;
  struct FlushQueue;
  class Timers;

  bool IntelPrivate() const;
  uint64_t LimitPfn(const Domain& d) const;
  Task<uint64_t> AllocIova(Cpu& cpu, Domain& d, uint64_t npages);
  Task<void> FreeIova(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  //! `flush` = false leaves the VT-d clflush to the caller (one iotlb_sync_map
  //! over a whole scatterlist, 933fcd01e97e).
  Task<void> InstallPtes(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t phys_pfn, uint64_t npages,
                         bool flush = true);
  Task<void> ClearPtes(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  Task<void> UnmapRange(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  void CacheMaint(Cpu& cpu, Sym sym, uint64_t bytes);

  // Deferred flushing.
  Task<void> AddUnmapGlobal(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  Task<void> FlushUnmapsGlobal(Cpu& cpu);
  Task<void> AddUnmapPercpu(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  Task<void> FlushUnmapsPercpu(Cpu& cpu, int owner_cpu);
  Task<void> QueueIova(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages);
  Task<void> FqFlushIotlb(Cpu& cpu, Domain& d);
  Task<void> FqRingFree(Cpu& cpu, Domain& d, FlushQueue& fq);
  Task<void> FqFlushTimeout(Cpu& cpu, Domain& d);
  Task<void> OnTimer(Cpu& cpu, int timer);
  Task<void> TimerLoop(Cpu& cpu);
  Task<void> DepotLoop(Cpu& cpu);

  Sim* sim_;
  Mode mode_;
  std::vector<DeviceSpec> devices_;
  int num_cpus_;
  std::unique_ptr<Invalidator> inv_;
  std::vector<std::unique_ptr<Domain>> domains_;

  // 2008 VT-d global deferred list (add_unmap / flush_unmaps).
  struct DeferredEntry {
    Domain* domain;
    uint64_t pfn;
    uint64_t npages;
  };
  std::unique_ptr<SpinLock> async_umap_flush_lock_;
  std::vector<DeferredEntry> global_list_;
  bool global_timer_on_ = false;
  // v4.7 per-CPU deferred lists.
  struct PercpuDeferred;
  std::vector<std::unique_ptr<PercpuDeferred>> percpu_deferred_;

  // Timer daemon state: timer i fires at deadline_[i] (kNever when idle).
  std::vector<Time> deadline_;
  Cpu* timer_cpu_ = nullptr;
  bool timer_sleeping_ = false;
  void ArmTimer(int timer, Time deadline);
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_DMA_API_H_
