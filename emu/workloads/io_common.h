// emu/workloads/io_common.h: what the storage and network workloads
// (fio-nvme, nvmf-target, iozone-nfsrdma, tcp-stream) share.
//
// They are sequential code per virtual CPU that does what the real stack does
// per I/O or per packet: CPU work charged to a symbol, DMA mapping of the I/O
// buffers (DmaMappings over the run's DmaPath), devices and links as
// DeviceQueue servers in virtual time. No workload carries a constant tuned
// to one seed: device and protocol figures are parameters with documented
// defaults, and every IOMMU cost comes from the platform cost table through
// the DmaPath.
//
// Thread-safety: engine thread only; one instance of anything here per run.
#ifndef EMU_WORKLOADS_IO_COMMON_H_
#define EMU_WORKLOADS_IO_COMMON_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "emu/engine/engine.h"
#include "emu/engine/stats.h"
#include "emu/engine/task.h"
#include "emu/iommu/dma_path.h"
#include "emu/model/platform.h"
#include "emu/workloads/tool_formats.h"
#include "emu/workloads/workload.h"

namespace farm::emu {

//! Index into platform.devices of the first device whose name starts with
//! `kind` ("nic", "nvme"); a platform without one uses its first device.
int DeviceIndex(const Platform& platform, absl::string_view kind);

//! InvalidArgument naming --param `param`=`n` when the platform has fewer
//! than `n` CPUs (one CPU per session / queue pair).
absl::Status CheckCpuCount(absl::string_view workload, absl::string_view param, int64_t n,
                           const Platform& platform);

//! The link_gbps parameter of a network workload: its value, or, when empty,
//! the line rate of platform device `dev` (DeviceSpec::link_gbps), or its
//! PCIe link's rate if that is lower (DeviceDmaBytesPerSec).
//! InvalidArgument for a value that is not a number in [0.1, 10000], or when
//! empty and the device has no link rate.
absl::StatusOr<double> LinkGbps(absl::string_view workload, const WorkloadParams& p,
                                const Platform& platform, int dev);

//! The link_gbps row of the network workloads' parameter tables.
inline constexpr absl::string_view kLinkGbpsMeaning =
    "line rate, Gb/s; empty = the platform NIC's (intel-vtd-2s12c 56, intel-vtd-snb16c 40, "
    "kunpeng920-smmuv3 100, arm-mmu500-8c 50)";

//! Every CPU of the platform, those of `device_node` first (in id order),
//! then the rest: where a driver binds queue pairs and where busy streams
//! land when placed near the device.
std::vector<int> CpusDeviceNodeFirst(const Platform& platform, int device_node);

//! Busy (non-idle) time a CPU spent, ns.
Time BusyTime(const Cpu& cpu);

//! The I/O buffers' mappings, as the block and network drivers keep them:
//! page-cache-like pages (discontiguous, so scatterlist segments never
//! merge), their scatterlists, and each mapping's DMA address. Handles are
//! opaque to the workloads and reused.
//! Ownership: borrows the DmaPath.
class DmaMappings {
 public:
  explicit DmaMappings(DmaPath* dma) : dma_(dma) {}
  //! dma_map_sg of `nents` page-sized, physically discontiguous segments
  //! for platform device `dev`.
  Task<uint64_t> MapSg(Cpu& cpu, int dev, int nents, DmaDir dir);
  Task<void> UnmapSg(Cpu& cpu, uint64_t handle);
  //! dma_map_page / dma_map_single of `bytes` (rounded up to pages).
  Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir);
  Task<void> UnmapPage(Cpu& cpu, uint64_t handle);
  DmaPath& dma() { return *dma_; }

 private:
  struct Mapping {
    int dev = 0;
    DmaDir dir = DmaDir::kBidirectional;
    uint64_t dma = 0, size = 0;
    std::vector<SgSegment> segs;
  };
  uint64_t NewMapping(int dev, DmaDir dir);
  uint64_t NextPhys(uint64_t pages);

  DmaPath* dma_;
  std::deque<Mapping> maps_;  // index = handle (stable addresses); reused through free_
  std::vector<uint64_t> free_;
  uint64_t next_pfn_ = 0;
};

//! The measured window of a run. Everything before `start` is warm-up (fio's
//! ramp_time, iperf3's --omit): queues fill, rcaches and flush queues reach
//! their cycle. The run stops at `end`. Throughput is the work the devices
//! did inside the window, each I/O or packet credited with the share of its
//! device service interval that falls in it: counting whole completions
//! instead makes a short run depend on where the window cuts the pipeline's
//! phase (a flush in progress at the edge, the first completions of a cold
//! start), which is not a property of the mode being measured. Shares are
//! summed as integer nanoseconds of service (every item of a workload's
//! device takes the same service time), so equal work gives bit-identical
//! throughput whatever order the items were counted in.
struct Window {
  Time start = 0, end = 0;
  //! Nanoseconds of the service interval [a, b) inside the window.
  Time Overlap(Time a, Time b) const {
    Time lo = a > start ? a : start, hi = b < end ? b : end;
    return hi > lo ? hi - lo : 0;
  }
  bool Contains(Time t) const { return t >= start && t < end; }
  double seconds() const { return static_cast<double>(end - start) / 1e9; }
};

//! The window of the `runtime_ms` (measured) and `ramp_ms` (warm-up before)
//! parameters.
Window ReadWindow(const WorkloadParams& p);

//! Called by a workload CPU right after `co_await cpu.Sync()`: the first time
//! its clock is inside the window (or past it), starts the DMA layer's
//! measurement and forgets this CPU's warm-up accounting. Returns true from
//! then on.
inline bool EnterWindow(const Window& win, Cpu& cpu, DmaPath& dma, bool& measuring) {
  if (!measuring && cpu.now() >= win.start) {
    measuring = true;
    if (win.start > 0) {
      dma.StartMeasurement(cpu);
      cpu.ResetAccounting();
    }
  }
  return measuring;
}

//! Latencies of the DMA map and unmap calls a workload measured.
struct DmaLatencies {
  RunningStats map, unmap;
  LogHistogram map_hist, unmap_hist;
  void RecordMap(Time ns) {
    map.Add(static_cast<double>(ns));
    map_hist.Add(static_cast<uint64_t>(ns));
  }
  void RecordUnmap(Time ns) {
    unmap.Add(static_cast<double>(ns));
    unmap_hist.Add(static_cast<uint64_t>(ns));
  }
  //! Fills the report's latencies and operations (= DMA maps measured).
  void Report(WorkloadReport& r) const;
};

//! fio's clat block of one job from its completion latencies.
FioLatencyOut FioLatency(const RunningStats& s, const LogHistogram& h);
//! One job's read or write section of fio's JSON, and its job_runtime.
void FillFioDirection(FioJobOut& fj, bool write, uint64_t ios, uint64_t bs, Time runtime,
                      const RunningStats& clat, const LogHistogram& hist);

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_IO_COMMON_H_
