// emu/run/run.h: one emulation run as a library call (used by farm-emu, the
// farm agent in-process, the fidelity and workload tests and emu_bench), and
// the output formats.
//
// RunEmulation is the one run driver: it resolves platform, kernel (commit
// settings), mode, workload parameters and `--set` overrides into a Model,
// builds the engine and the DMA API, runs the workload (emu/workloads/
// workload.h) and returns a RunResult. It is a pure function of its RunSpec
// except for RunResult::wall_seconds. Errors: InvalidArgument / NotFound for
// bad input (usage errors, an unreadable --catalog included),
// Internal for model failures.
// Thread-safety: reentrant; concurrent runs on different threads are
// independent (each owns its engine; coroutine frame pools are per thread).
#ifndef EMU_RUN_RUN_H_
#define EMU_RUN_RUN_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "emu/iommu/dma_path.h"
#include "emu/model/model_config.h"
#include "emu/run/result.h"

namespace farm::emu {

struct RunSpec {
  std::string platform;
  std::string kernel = "latest";
  std::string mode;
  std::string workload;
  std::map<std::string, std::string> params;  // --param k=v
  std::map<std::string, std::string> sets;    // --set key=value
  std::string catalog;                        // --catalog FILE
  uint64_t seed = 1;
  // Asked every Engine::kStopCheckSwitches switches; true ends the run with
  // kAborted (a wall-clock limit, a cancelled job). Unset: runs to the end.
  std::function<bool()> stop;
};

//! One run's spec without run-to-run noise (noise.cv=0): the model's mean
//! behaviour, bit for bit the same on every run, as fidelity rows compare.
RunSpec NoiseFreeSpec(const std::string& platform, const std::string& kernel,
                      const std::string& mode, const std::string& workload,
                      std::map<std::string, std::string> params);

//! Resolves the model keys for a spec (defaults -> platform -> kernel -> sets).
absl::StatusOr<ModelConfig> ResolveModel(const RunSpec& spec);

//! What the workload maps through instead of the run's DMA API: workload
//! tests pass fixed-cost fakes. The DMA API is still built and reported.
using DmaPathFactory = std::function<std::unique_ptr<DmaPath>()>;

absl::StatusOr<RunResult> RunEmulation(const RunSpec& spec,
                                       const DmaPathFactory& dma_path = nullptr);

//! JSON document (see docs/emulator.md "Output"); wall time is under "wall".
std::string FormatJson(const RunResult& r);
//! Human-readable summary.
std::string FormatText(const RunResult& r);
//! The workload's real-tool output (--format kernel, fio-json, iozone).
absl::StatusOr<std::string> FormatKernel(const RunResult& r);

}  // namespace farm::emu

#endif  // EMU_RUN_RUN_H_
