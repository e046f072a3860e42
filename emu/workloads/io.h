// emu/workloads/io.h: the storage and network workloads of emu part 2
// (fio-nvme, iozone-nfsrdma, tcp-stream, nvmf-target) and what they need from
// the emulation core.
//
// A workload is sequential code per virtual CPU (Task) that does what the
// real stack does per I/O or per packet: CPU work charged to a symbol, DMA
// mapping through DmaPath (the kernel's dma_map_* entry points as the core
// models them for the run's platform, commit and mode), devices and links as
// DeviceQueue servers in virtual time. No workload carries a constant
// tuned to one seed: device and protocol figures are parameters with
// documented defaults, and every IOMMU cost comes from the platform cost
// table through DmaPath.
//
// Thread-safety: a workload run owns its Engine and runs on one thread.
// Ownership: RunIoWorkload borrows the DmaPath and the Engine.
#ifndef EMU_WORKLOADS_IO_H_
#define EMU_WORKLOADS_IO_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/engine/engine.h"
#include "emu/engine/stats.h"
#include "emu/engine/task.h"
#include "emu/iommu/dma_api.h"
#include "emu/model/irq_affinity.h"

namespace farm::emu {

// Workloads use the core's DmaDir (emu/dma_api.h).

// The DMA API as a workload sees it. The core's implementation charges the
// run's IOMMU mode (off/passthrough: dma-direct; strict; lazy) and code paths.
// `dev` indexes the workload's devices (IoWorkloadSpec::devices: 0 is the
// main one, e.g. the HCA for iozone-nfsrdma; nvmf-target maps for the NIC (0)
// and the SSD (1)). Handles are opaque to workloads.
class DmaPath {
 public:
  virtual ~DmaPath() = default;
  // dma_map_sg of `nents` page-sized, physically discontiguous segments.
  virtual Task<uint64_t> MapSg(Cpu& cpu, int dev, int nents, DmaDir dir) = 0;
  virtual Task<void> UnmapSg(Cpu& cpu, uint64_t handle) = 0;
  // dma_map_page / dma_map_single of `bytes` (rounded up to pages).
  virtual Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir) = 0;
  virtual Task<void> UnmapPage(Cpu& cpu, uint64_t handle) = 0;
  // The measured window starts (a workload CPU's clock crossed ramp_ms): the
  // core zeroes the run's counters and lock statistics once and forgets its
  // timer daemons' CPU accounting, as memcached does after its warm-up. Each
  // workload CPU resets its own accounting. REQUIRES: cpu.Sync() just before.
  virtual void StartMeasurement(Cpu& /*cpu*/) {}
};

// What the platform contributes besides the IOMMU: where devices sit and how
// completion interrupts are spread.
struct IoPlatform {
  std::string name;
  Topology topology;
  LineCosts line_costs;
  int device_node = 0;  // NUMA node of the NVMe / NIC / HCA
  // Default IRQ affinity of the device's I/O queues, in the --param
  // irq_affinity syntax (see irq_affinity.h); empty = spread per node.
  std::string irq_affinity;
};

// Result of one workload run, ready for the core's RunResult and for the
// tool formats.
struct IoRunReport {
  double throughput = 0;            // in `unit`
  std::string unit;                 // "IOPS", "MB/s", "Gb/s"
  RunningStats map_lat, unmap_lat;  // ns, per DMA map/unmap call
  LogHistogram map_hist, unmap_hist;
  Time virtual_ns = 0;
  std::map<std::string, double> metrics;  // extra named figures (per-CPU IOPS, ...)
  std::string fio_json;                   // --format fio-json (fio-nvme, nvmf-target)
  std::string iozone;                     // --format iozone (iozone-nfsrdma)
  std::string text;                       // human summary lines
};

// One run of a part-2 workload, split the way the core's run driver works:
// parameters are checked when the run is made, Setup adds virtual CPUs and
// starts their programs on an engine, the caller runs the engine, Finish
// turns the run into a report.
class IoRun {
 public:
  virtual ~IoRun() = default;
  // REQUIRES: called once; `engine` and `dma` outlive the run.
  virtual absl::Status Setup(Engine& engine, DmaPath& dma) = 0;
  // REQUIRES: engine.Run() returned OK after Setup.
  virtual IoRunReport Finish() = 0;
};

// Checks `params` (unknown or malformed ones are InvalidArgument errors naming
// the --param) and prepares a run of workload `name` on `platform`.
absl::StatusOr<std::unique_ptr<IoRun>> MakeIoRun(const std::string& name,
                                                 const std::map<std::string, std::string>& params,
                                                 const IoPlatform& platform);

// Creates the DmaPath for one engine run (after the workload added its CPUs).
using DmaPathFactory = std::function<std::unique_ptr<DmaPath>(Engine&)>;

struct IoWorkloadSpec {
  std::string name;         // "fio-nvme", ...
  std::string description;  // one line for `farm-emu list workloads`
  // Parameter name -> "default | meaning"; the default is the text before
  // " | " (empty = chosen by the workload, as the meaning says).
  std::vector<std::pair<std::string, std::string>> params;
  // Device kinds the workload maps for, in DmaPath `dev` order: "nic", "nvme".
  std::vector<std::string> devices;
};

// The four workloads, in listing order.
const std::vector<IoWorkloadSpec>& IoWorkloads();
bool IsIoWorkload(const std::string& name);

// MakeIoRun + a fresh engine (platform topology and line costs, `seed`) +
// Setup + Run + Finish: a whole run without the core's driver (tests, tools).
absl::StatusOr<IoRunReport> RunIoWorkload(const std::string& name,
                                          const std::map<std::string, std::string>& params,
                                          const IoPlatform& platform, const DmaPathFactory& dma,
                                          uint64_t seed);

// ---- helpers shared by the workloads (exposed for tests)

// "4k", "256K", "1m", "1g", "4096" -> bytes.
absl::StatusOr<uint64_t> ParseSize(const std::string& text);
// ParseCpuList ("0,4,32-35") is in emu/model/irq_affinity.h.

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_IO_H_
