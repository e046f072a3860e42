// emu/workloads/workload.h: the workload interface, the parameter tables and
// the registry.
//
// A workload is a program per virtual CPU that maps through the run's DmaPath
// (emu/iommu/dma_path.h) the way a driver and its application would, plus its
// parameters and its report. Each lives in one file (dma_map_bench.cc,
// memcached.cc, fio_nvme.cc, nvmf_target.cc, iozone_nfsrdma.cc,
// tcp_stream.cc) that defines:
//  - its parameter table, a constexpr array of WorkloadParam (name, type,
//    default, range or choices, meaning). The table alone drives
//    `farm-emu list workloads`, defaulting, the unknown-parameter error and
//    the type/range/choice checks (ValidateWorkloadParams, and every run);
//  - a Workload subclass, and a WorkloadInfo returned by a function that
//    AllWorkloads() (workload.cc) lists.
// The run driver (emu/run/run.h, RunEmulation) calls, once each and in this
// order: ResolveWorkloadParams -> Validate -> Configure(params, platform)
// (platform-dependent checks) -> Setup(ctx) (add CPUs, start programs) ->
// runs the engine -> Report(). Configure/Setup/Report FARM_DCHECK that order.
//
// Thread-safety: the registry and the tables are immutable; a Workload and
// its WorkloadParams belong to one run. Ownership: the run driver owns the
// Workload; the context's pointers are borrowed and outlive the run.
#ifndef EMU_WORKLOADS_WORKLOAD_H_
#define EMU_WORKLOADS_WORKLOAD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "emu/engine/engine.h"
#include "emu/engine/stats.h"
#include "emu/iommu/dma_path.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"

namespace farm::emu {

enum class ParamType {
  kInt,     // int64, inclusive [min, max]
  kDouble,  // finite double, inclusive [min, max]
  kSize,    // bytes: "4k", "256K", "1m", "1g", "4096" (ParseSize); > 0
  kChoice,  // one of `choices`
  kString,  // free text the workload checks itself
};

//! One row of a workload's parameter table.
struct WorkloadParam {
  absl::string_view name;
  ParamType type = ParamType::kString;
  //! "" for a kString means the workload chooses (the meaning says how).
  absl::string_view default_value;
  double min = 0, max = 0;  // kInt, kDouble
  //! kInt: the upper bound is the platform's CPU count (checked when the
  //! platform is known), not `max`.
  bool max_is_cpu_count = false;
  std::span<const absl::string_view> choices = {};  // kChoice
  absl::string_view meaning;                        // `farm-emu list workloads`
};

//! How a workload's parameter errors read, and what an empty value means.
enum class ParamStyle {
  //! "parameter NAME: 'VALUE' is not an integer"; an empty value is a value.
  kParameter,
  //! "WORKLOAD: --param NAME=VALUE: not an integer"; an empty value means
  //! the default.
  kDashParam,
};

class Workload;

struct WorkloadInfo {
  std::string name;
  std::string description;  // one line for `farm-emu list workloads`
  std::span<const WorkloadParam> params;
  ParamStyle style = ParamStyle::kParameter;
  std::unique_ptr<Workload> (*make)() = nullptr;
  //! Run-to-run coefficient of variation of the real tool's throughput, the
  //! run's noise.cv unless a spec sets one; 0 where no published repeats were
  //! found. Each workload file names its source (docs/fidelity.md lists them).
  double noise_cv = 0;
};

//! The parameters of one run: every table entry, given or defaulted, checked
//! by Validate() and then read typed.
class WorkloadParams {
 public:
  WorkloadParams(const WorkloadInfo& info, std::map<std::string, std::string> values);

  //! Type, range and choice of every value, in table order; the first error
  //! (InvalidArgument naming the parameter). With `platform`, bounds that are
  //! the platform's CPU count are checked too.
  absl::Status Validate(const Platform* platform);

  //! Values as given or defaulted (what a run reports as its params).
  const std::map<std::string, std::string>& values() const { return values_; }

  // Typed reads. REQUIRES (FARM_DCHECK): Validate() returned OK and `name`
  // is a table entry of that type.
  int64_t Int(absl::string_view name) const;
  double Double(absl::string_view name) const;
  uint64_t Size(absl::string_view name) const;
  //! kString and kChoice.
  const std::string& Str(absl::string_view name) const;

 private:
  struct Parsed {
    int64_t i = 0;
    double d = 0;
    uint64_t size = 0;
    std::string text;  // the value, or the default for an empty kDashParam value
  };
  const Parsed& Get(absl::string_view name, ParamType type) const;
  absl::Status Bad(const WorkloadParam& p, const std::string& value,
                   const std::string& parameter_why, const std::string& dash_why) const;

  const WorkloadInfo* info_;
  std::map<std::string, std::string> values_;
  std::vector<Parsed> parsed_;  // table order
  bool valid_ = false;
};

//! What a workload reports after the run; the driver adds the DMA layer's
//! and the engine's figures.
struct WorkloadReport {
  double throughput = 0;
  std::string throughput_unit;
  double throughput_per_cpu = 0;
  uint64_t operations = 0;  // map+unmap pairs, requests, DMA maps, ...
  uint64_t errors = 0;      // failed mappings
  LatencySummary map_latency, unmap_latency;
  std::map<std::string, double> extra;  // workload-specific figures
  //! The real tool's own output (--format kernel / fio-json / iozone), or "".
  std::string tool_output;
  //! What bounds the throughput, in words (--format text), or "".
  std::string limit;
  //! The throughput over the run: one figure per interval of virtual time
  //! (IntervalCounter), in throughput_unit; empty when the workload keeps
  //! none. A steady run's figures scatter around `throughput`; a run whose
  //! allocator ages falls from the first to the last.
  std::vector<double> interval_throughput;
  Time interval_ns = 0;  //!< length of each interval
};

//! Completions per interval of virtual time over [0, end): a run's
//! throughput over time, in kReportIntervals equal intervals (a fixed, small
//! number, so a run of any length reports the same shape). Single-threaded
//! (the engine thread); plain value.
class IntervalCounter {
 public:
  static constexpr int kReportIntervals = 20;
  //! Starts counting over [0, end); end > 0.
  void Reset(Time end);
  //! `n` completions at virtual time `t` (clamped into the last interval).
  void Add(Time t, uint64_t n = 1);
  //! Completions per second of each interval.
  std::vector<double> PerSecond() const;
  Time interval_ns() const { return interval_; }

 private:
  Time interval_ = 0;
  std::vector<uint64_t> counts_;
};

//! One repeat's run-to-run noise where it arises outside the IOMMU costs:
//! one multiplier per source, drawn once per run from the run seed, each
//! N(1, noise.cv) clamped to [0.5, 1.5]; all exactly 1 with noise.cv=0.
//! Workloads apply them in Setup to what they charge and wait out.
struct RunNoise {
  double cpu = 1.0;         //!< CPU work: the cost.* keys, the application, protocol, driver
  double device = 1.0;      //!< device work: the hw.* keys, service time per item, line rate
  double turnaround = 1.0;  //!< latencies waited out (device latency, round trip, server)

  //! Draws the three factors for a run (all 1 when cv <= 0).
  static RunNoise Draw(uint64_t seed, double cv);
  //! `t` scaled by `k`, unchanged for k == 1, at least 1 when `t` was.
  static Time Scale(Time t, double k);
};

//! What a workload can use during Setup and while running.
struct WorkloadContext {
  Engine* engine = nullptr;
  DmaPath* dma = nullptr;
  const Platform* platform = nullptr;
  const Model* model = nullptr;  // the run's resolved model (costs)
  uint64_t seed = 0;
  RunNoise noise;
};

class Workload {
 public:
  virtual ~Workload() = default;
  //! Reads the validated parameters and checks what depends on the
  //! platform. Errors are InvalidArgument.
  absl::Status Configure(const WorkloadParams& params, const Platform& platform);
  //! Adds virtual CPUs to the engine and starts their programs.
  absl::Status Setup(WorkloadContext& ctx);
  //! After the engine ran.
  WorkloadReport Report();

 private:
  virtual absl::Status DoConfigure(const WorkloadParams& params, const Platform& platform) = 0;
  virtual absl::Status DoSetup(WorkloadContext& ctx) = 0;
  virtual WorkloadReport DoReport() = 0;

  enum class Stage { kNew, kConfigured, kSetUp, kReported };
  Stage stage_ = Stage::kNew;
};

//! WorkloadInfo::make of a workload class W (default-constructible).
template <typename W>
std::unique_ptr<Workload> MakeWorkload() {
  return std::make_unique<W>();
}

//! Every workload, in listing order.
const std::vector<WorkloadInfo>& AllWorkloads();
//! NotFound lists the valid names.
absl::StatusOr<const WorkloadInfo*> FindWorkload(absl::string_view name);
//! Fills defaults and rejects unknown parameter names (InvalidArgument).
absl::StatusOr<WorkloadParams> ResolveWorkloadParams(
    const WorkloadInfo& info, const std::map<std::string, std::string>& given);
//! Submit-time check of a job's parameters without a platform: the workload
//! exists, every name is in its table, every value has the table's type,
//! range or choice. Platform-dependent limits (CPU and device counts) are
//! checked when the run is configured. Pure function.
absl::Status ValidateWorkloadParams(absl::string_view workload,
                                    const std::map<std::string, std::string>& params);

//! "4k", "256K", "1m", "1g", "4096" -> bytes (kSize parameters).
absl::StatusOr<uint64_t> ParseSize(const std::string& text);

// The workloads' registry entries (one per workload file).
WorkloadInfo DmaMapBenchWorkload();
WorkloadInfo MemcachedWorkload();
WorkloadInfo FioNvmeWorkload();
WorkloadInfo IozoneNfsRdmaWorkload();
WorkloadInfo TcpStreamWorkload();
WorkloadInfo NvmfTargetWorkload();

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_WORKLOAD_H_
