// emu/workloads/io_core.h: runs the part-2 workloads (workloads_io.h) on the
// emulation core: a core Platform, a resolved Model and an IOMMU Mode.
//
// CoreDmaPath adapts the core's DmaApi (dma_map_sg / dma_map_page for a
// device of the platform) to the workloads' DmaPath: it builds discontiguous
// scatterlists, keeps the mapping handles, and owns the per-run Sim and
// DmaApi (whose timer daemons it starts on the run's engine).
// Thread-safety: one run per thread; nothing is shared between runs.
#ifndef EMU_WORKLOADS_IO_CORE_H_
#define EMU_WORKLOADS_IO_CORE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/iommu/dma_api.h"
#include "emu/iommu/sim.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"
#include "emu/workloads/io.h"

namespace farm::emu {

// Totals the core reports besides the workload's own figures.
struct CoreRunExtras {
  Counters counters;                     // summed over the workload's engine runs
  std::array<Time, kNumSyms> profile{};  // busy ns per symbol, all CPUs
  uint64_t events = 0;
};

// The IoPlatform view of a core platform: topology, line costs from the
// model, the node of the workload's first device, and the default IRQ
// affinity (kunpeng920-smmuv3 carries the map John Garry printed for his
// Kunpeng 920 in seed 002; others spread queues per node).
IoPlatform IoPlatformFor(const Platform& platform, const LineCosts& line,
                         const std::string& workload);

// Indexes into platform.devices of the workload's device kinds (DmaPath dev).
std::vector<int> WorkloadDevices(const Platform& platform, const std::string& workload);

// DmaPath over a core DmaApi it does not own: builds discontiguous
// scatterlists of page-cache-like pages and keeps the mapping handles.
class DmaApiPath final : public DmaPath {
 public:
  // `sim` (optional): the run's Sim, for StartMeasurement.
  DmaApiPath(DmaApi* api, std::vector<int> devs, Sim* sim = nullptr);
  Task<uint64_t> MapSg(Cpu& cpu, int dev, int nents, DmaDir dir) override;
  Task<void> UnmapSg(Cpu& cpu, uint64_t handle) override;
  Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir) override;
  Task<void> UnmapPage(Cpu& cpu, uint64_t handle) override;
  void StartMeasurement(Cpu& cpu) override;

 private:
  struct Mapping {
    int dev = 0;
    DmaDir dir = DmaDir::kBidirectional;
    uint64_t dma = 0, size = 0;
    std::vector<SgSegment> segs;
  };
  uint64_t NewMapping(int dev, DmaDir dir);
  uint64_t NextPhys(uint64_t pages);

  DmaApi* api_;
  std::vector<int> devs_;
  Sim* sim_;
  std::deque<Mapping> maps_;  // index = handle (stable addresses); reused through free_
  std::vector<uint64_t> free_;
  uint64_t next_pfn_ = 0;
};

// Runs `workload` on the core. `extras` (optional) receives counters and the
// CPU profile.
absl::StatusOr<IoRunReport> RunIoOnCore(const std::string& workload,
                                        const std::map<std::string, std::string>& params,
                                        const Platform& platform, const Model& model, Mode mode,
                                        uint64_t seed, CoreRunExtras* extras = nullptr);

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_IO_CORE_H_
