// measured_costs: a catalog whose commits carry their own software cost,
// measured from their own built kernels.
//
// A commit of a user's tree that the emulator's catalog never described
// inherits its parent's model costs, so the emulator cannot see what the
// commit's code does. A real dma-map-bench matrix over the tree's commits,
// run in instruction-counted guests (tcg-icount: each guest instruction is
// 2^shift ns of guest time), measures it: the mean map and unmap latency of a
// commit over the reference commit's, divided by 2^shift, is the number of
// instructions its DMA API path executes beyond the reference's. The
// measured catalog is the source catalog with those deltas as each measured
// commit's `set:` (sw.map_delta_insns, sw.unmap_delta_insns); an emulator
// matrix over it charges them at each platform's time per instruction
// (cost.ps_per_insn, the per-platform factor), while the hardware costs
// (invalidation latency, command-queue contention, caches) stay the
// platform's model. A commit that was not measured inherits the one before
// it, as every catalog key does.
//
// Pure functions; thread-safe.
#ifndef CLI_MEASURED_COSTS_H_
#define CLI_MEASURED_COSTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

struct MeasuredCommit {
  double map_ns = 0, unmap_ns = 0;  // mean guest-time latency per call
  int runs = 0;
};

struct Measurement {
  uint32_t icount_shift = 0;
  std::map<std::string, MeasuredCommit> commits;  // by full commit id
};

// The `mode` runs of a real dma-map-bench matrix's results. Every run must be
// instruction-timed with one shift (FailedPrecondition naming the first that
// is not); NotFound when no run of `mode` has both latencies.
absl::StatusOr<Measurement> MeasureCommits(const std::vector<iommufarm::v1::Result>& results,
                                           iommufarm::v1::IommuMode mode);

// The catalog YAML of `source` named `name`, each measured commit's `set:`
// holding its instruction deltas over `reference` (a measured commit of
// `source`, full id or unique abbreviation of 7+ characters).
absl::StatusOr<std::string> MeasuredCatalogYaml(const iommufarm::v1::Catalog& source,
                                                const std::string& name, const Measurement& m,
                                                const std::string& reference);

// One line per measured commit, in catalog order: its runs and the
// instructions per map and unmap (latency / 2^shift).
std::string FormatMeasurement(const iommufarm::v1::Catalog& source, const Measurement& m);

}  // namespace farm::cli

#endif  // CLI_MEASURED_COSTS_H_
