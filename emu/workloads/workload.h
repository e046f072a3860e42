// emu/workloads/workload.h: the pluggable workload interface and registry.
//
// A workload is a program per virtual CPU that calls the DMA API the way a
// driver + application would, plus its parameters and its report. To add one:
// implement Workload, write a factory returning it, and append a WorkloadInfo
// to the list in workload.cc (AllWorkloads). The run driver calls, in order:
// Configure(params) -> Setup(ctx) (add CPUs, start programs) -> engine runs ->
// Report(result).
//
// Thread-safety: a Workload instance belongs to one run.
// Ownership: the run driver owns the Workload; the context's pointers are
// borrowed and outlive the run.
#ifndef EMU_WORKLOADS_WORKLOAD_H_
#define EMU_WORKLOADS_WORKLOAD_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "emu/engine/engine.h"
#include "emu/iommu/dma_api.h"
#include "emu/iommu/sim.h"
#include "emu/model/platform.h"
#include "emu/workloads/result.h"

namespace farm::emu {

struct WorkloadParamSpec {
  std::string name;
  std::string default_value;
  std::string description;
};

//! What a workload can use during Setup and while running.
struct WorkloadContext {
  Sim* sim = nullptr;
  Engine* engine = nullptr;
  DmaApi* dma = nullptr;
  const Platform* platform = nullptr;
  uint64_t seed = 0;
  //! Multiplier for workload-side costs (1 without noise; N(1, noise.cv)).
  double noise_factor = 1.0;
};

class Workload {
 public:
  virtual ~Workload() = default;
  //! Validates and stores parameters (already defaulted and checked for
  //! unknown names by the driver). Errors are InvalidArgument.
  virtual absl::Status Configure(const std::map<std::string, std::string>& params,
                                 const Platform& platform) = 0;
  //! Adds virtual CPUs to the engine and starts their programs.
  virtual absl::Status Setup(WorkloadContext& ctx) = 0;
  //! Fills throughput, latencies and extras after the run.
  virtual void Report(RunResult& result) const = 0;
  //! `--format kernel`: the real tool's output, or Unimplemented.
  virtual absl::StatusOr<std::string> FormatKernel(const RunResult& result) const;
};

struct WorkloadInfo {
  std::string name;
  std::string description;
  std::vector<WorkloadParamSpec> params;
  std::function<std::unique_ptr<Workload>()> make;
};

const std::vector<WorkloadInfo>& AllWorkloads();
//! NotFound lists the valid names.
absl::StatusOr<const WorkloadInfo*> FindWorkload(const std::string& name);
//! Fills defaults and rejects unknown parameter names.
absl::StatusOr<std::map<std::string, std::string>> ResolveWorkloadParams(
    const WorkloadInfo& info, const std::map<std::string, std::string>& given);

//! Typed access to resolved parameters with range-checked parsing.
class ParamReader {
 public:
  explicit ParamReader(const std::map<std::string, std::string>& p) : p_(p) {}
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t min, int64_t max) const;
  absl::StatusOr<double> Double(const std::string& name, double min, double max) const;
  std::string String(const std::string& name) const;

 private:
  const std::map<std::string, std::string>& p_;
};

// Factories of the built-in workloads.
std::unique_ptr<Workload> MakeDmaMapBench();
std::unique_ptr<Workload> MakeMemcached();
std::vector<WorkloadParamSpec> DmaMapBenchParams();
std::vector<WorkloadParamSpec> MemcachedParams();

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_WORKLOAD_H_
