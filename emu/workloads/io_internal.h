// emu/workloads/io_internal.h: parameter handling shared by the part-2
// workloads (not part of the emu API). Single-threaded helpers.
#ifndef EMU_WORKLOADS_IO_INTERNAL_H_
#define EMU_WORKLOADS_IO_INTERNAL_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "emu/workloads/io.h"

namespace farm::emu::internal {

// Typed access to --param values with errors naming the parameter; every
// key read is remembered so CheckAllUsed() can reject typos.
class Params {
 public:
  Params(std::string workload, const std::map<std::string, std::string>& values)
      : workload_(std::move(workload)), values_(values) {}

  absl::StatusOr<int64_t> Int(const std::string& key, int64_t def, int64_t min, int64_t max);
  absl::StatusOr<double> Double(const std::string& key, double def, double min, double max);
  absl::StatusOr<uint64_t> Size(const std::string& key, uint64_t def);
  absl::StatusOr<std::string> Choice(const std::string& key, const std::string& def,
                                     const std::vector<std::string>& choices);
  std::string Str(const std::string& key, const std::string& def);
  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  // Error naming every --param that no reader asked for.
  absl::Status CheckAllUsed() const;

 private:
  absl::Status Bad(const std::string& key, const std::string& why) const;
  std::string workload_;
  std::map<std::string, std::string> values_;
  std::set<std::string> used_;
};

// The first error among a workload's parsed parameters, else the error for
// any --param no reader asked for, else OK.
absl::Status ParamsOk(const Params& p, std::initializer_list<absl::Status> parsed);

// InvalidArgument naming --param `param`=`n` when the platform has fewer
// than `n` CPUs (one CPU per session / queue pair).
absl::Status CheckCpuCount(const std::string& workload, const std::string& param, int64_t n,
                           const IoPlatform& platform);

// Every CPU of the platform, those of the device's node first (in id
// order), then the rest: where a driver binds queue pairs and where busy
// streams land when placed near the device.
std::vector<int> CpusDeviceNodeFirst(const IoPlatform& platform);

// The measured window of a run. Everything before `start` is warm-up (fio's
// ramp_time, iperf3's --omit): queues fill, rcaches and flush queues reach
// their cycle. The run stops at `end`. Throughput is the work the devices
// did inside the window, each I/O or packet credited with the share of its
// device service interval that falls in it: counting whole completions
// instead makes a short run depend on where the window cuts the pipeline's
// phase (a flush in progress at the edge, the first completions of a cold
// start), which is not a property of the mode being measured. Shares are
// summed as integer nanoseconds of service (every item of a workload's
// device takes the same service time), so equal work gives bit-identical
// throughput whatever order the items were counted in.
struct Window {
  Time start = 0, end = 0;
  // Nanoseconds of the service interval [a, b) inside the window.
  Time Overlap(Time a, Time b) const {
    Time lo = a > start ? a : start, hi = b < end ? b : end;
    return hi > lo ? hi - lo : 0;
  }
  bool Contains(Time t) const { return t >= start && t < end; }
  double seconds() const { return static_cast<double>(end - start) / 1e9; }
};

// Called by a workload CPU at a synchronised point: the first time its clock
// is inside the window (or past it), starts the core's measurement and
// forgets this CPU's warm-up accounting. Returns true from then on.
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

// Reads `ramp_ms` and `runtime_ms` (with the workload's default run time)
// into a window; errors name the parameter.
absl::StatusOr<Window> ReadWindow(Params& p, double default_runtime_ms, double default_ramp_ms);

// Records one DMA call's latency into the report.
inline void RecordMap(IoRunReport& r, Time ns) {
  r.map_lat.Add(static_cast<double>(ns));
  r.map_hist.Add(static_cast<uint64_t>(ns));
}
inline void RecordUnmap(IoRunReport& r, Time ns) {
  r.unmap_lat.Add(static_cast<double>(ns));
  r.unmap_hist.Add(static_cast<uint64_t>(ns));
}

// Busy (non-idle) time a CPU spent, ns.
Time BusyTime(const Cpu& cpu);

absl::StatusOr<std::unique_ptr<IoRun>> MakeIozoneNfsRdma(Params& p, const IoPlatform& platform);
absl::StatusOr<std::unique_ptr<IoRun>> MakeFioNvme(Params& p, const IoPlatform& platform);
absl::StatusOr<std::unique_ptr<IoRun>> MakeNvmfTarget(Params& p, const IoPlatform& platform);
absl::StatusOr<std::unique_ptr<IoRun>> MakeTcpStream(Params& p, const IoPlatform& platform);

}  // namespace farm::emu::internal

#endif  // EMU_WORKLOADS_IO_INTERNAL_H_
