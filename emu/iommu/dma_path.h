// emu/iommu/dma_path.h: the DMA API as a workload sees it, the one seam
// between the workloads and the DMA layer.
//
// A workload maps through a DmaPath the way a driver's dma_map_* calls go
// through its device's struct dma_map_ops: DmaApi (dma_api.h) implements it
// over the modelled IOMMU for the run's platform, commit and mode, and
// workload tests substitute fakes with fixed costs. `dev` indexes the
// platform's devices (Platform::devices). The workload owns its buffers and
// scatterlists and remembers what it mapped, as a driver does.
//
// Thread-safety: engine thread only. Ownership: the run driver owns the
// DmaPath; workloads borrow it for the run.
#ifndef EMU_IOMMU_DMA_PATH_H_
#define EMU_IOMMU_DMA_PATH_H_

#include <cstdint>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"

namespace farm::emu {

enum class DmaDir { kBidirectional = 0, kToDevice = 1, kFromDevice = 2 };

struct SgSegment {
  uint64_t phys;  // byte address
  uint64_t len;   // bytes
};

inline constexpr uint64_t kDmaMappingError = ~0ULL;

class DmaPath {
 public:
  virtual ~DmaPath() = default;

  //! dma_map_page_attrs(): returns the DMA address or kDmaMappingError.
  virtual Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t phys, uint64_t size, DmaDir dir) = 0;
  //! dma_unmap_page_attrs().
  virtual Task<void> UnmapPage(Cpu& cpu, int dev, uint64_t dma, uint64_t size, DmaDir dir) = 0;
  //! dma_map_sg_attrs(): the list is mapped contiguously; returns its DMA
  //! address or kDmaMappingError.
  virtual Task<uint64_t> MapSg(Cpu& cpu, int dev, const SgSegment* segs, int nsegs, DmaDir dir) = 0;
  //! dma_unmap_sg_attrs().
  virtual Task<void> UnmapSg(Cpu& cpu, int dev, uint64_t dma, const SgSegment* segs, int nsegs,
                             DmaDir dir) = 0;
  //! The device reads/writes [dma, dma+len). Returns the device-side
  //! translation time (IOTLB lookups and page walks; 0 without an IOMMU).
  virtual Time DeviceAccess(int /*dev*/, uint64_t /*dma*/, uint64_t /*len*/) { return 0; }
  //! dma_opt_mapping_size(): the largest mapping that stays on the fast
  //! path, in bytes; 0 = no limit (SIZE_MAX).
  virtual uint64_t OptMappingSize(int /*dev*/) const { return 0; }
  //! dma_set_mask(): the device's DMA mask, before any mapping.
  virtual void SetDmaBits(int /*dev*/, int /*bits*/) {}
  //! The measured window starts (a workload CPU crossed the end of its
  //! warm-up): the DMA layer zeroes the run's counters and lock statistics
  //! once and forgets its timer daemons' CPU accounting; each workload CPU
  //! resets its own. `cpu` must have just synchronised (co_await cpu.Sync()).
  virtual void StartMeasurement(Cpu& /*cpu*/) {}
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_DMA_PATH_H_
