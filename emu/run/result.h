// emu/run/result.h: the outcome of one emulation run (what FormatJson prints):
// the workload's report (WorkloadReport) with the run's identity, the DMA
// layer's counters and locks, and the engine's profile and totals.
// Plain value type; copyable.
#ifndef EMU_RUN_RESULT_H_
#define EMU_RUN_RESULT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "emu/engine/stats.h"
#include "emu/iommu/sim.h"

namespace farm::emu {

struct ProfileEntry {
  std::string symbol;
  double percent = 0;  // of busy CPU time, all CPUs
  int64_t ns = 0;
};

struct LockReport {
  std::string name;  // several instances of a lock class are summed
  uint64_t acquisitions = 0;
  uint64_t contended = 0;
  int64_t wait_ns = 0;
};

struct RunResult {
  // Identity.
  std::string platform, kernel, mode, workload;
  // The mode the kernel really ran for `mode` (emu/model/effective_mode.h)
  // and what decided it, as a real run's HostFacts.iommu_mode/iommu_detail.
  std::string effective_mode, effective_detail;
  uint64_t seed = 0;
  std::map<std::string, std::string> params;  // resolved workload parameters
  // Headline.
  double throughput = 0;
  std::string throughput_unit;
  double throughput_per_cpu = 0;  // throughput / workload CPUs
  uint64_t operations = 0;        // map+unmap pairs, requests, ...
  uint64_t errors = 0;            // failed mappings
  LatencySummary map_latency, unmap_latency;
  // The throughput over the run, per interval of virtual time (a fixed
  // number of equal intervals), in throughput_unit; empty when the workload
  // keeps none (WorkloadReport::interval_throughput).
  std::vector<double> interval_throughput;
  int64_t interval_ns = 0;
  // Where CPU time went.
  std::vector<ProfileEntry> profile;  // descending
  double cpu_busy_percent = 0;        // busy / (busy + idle), workload CPUs
  // Mechanism counters.
  Counters counters;
  double rcache_hit_rate = 0;
  int64_t lock_wait_ns = 0;
  std::vector<LockReport> locks;
  uint64_t iotlb_hits = 0, iotlb_misses = 0;
  // Engine.
  int64_t virtual_ns = 0;
  uint64_t events = 0;
  uint64_t switches = 0;
  double wall_seconds = 0;  // host time; the only non-deterministic field
  // Resolved model keys.
  std::map<std::string, std::string> model;
  // Workload-specific figures.
  std::map<std::string, double> extra;
  // The real tool's output (dma_map_benchmark's three lines, fio JSON, the
  // iozone report), or "" when the workload has none.
  std::string kernel_output;
  // What bounds the throughput, in words, or "" (--format text only: the
  // JSON carries the numbers, and its golden files pin them).
  std::string limit;
};

}  // namespace farm::emu

#endif  // EMU_RUN_RESULT_H_
