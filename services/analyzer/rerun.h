// What a confirm / bisect / fix-check matrix re-runs: the cell of a finding
// (SeriesSpec), its values in a set of samples, the real-kernel confirmation
// of a spec's `analysis.confirm`, and the typed MatrixSpec the analyzer
// submits for it. Pure functions, no I/O.
//
// Thread-safety: stateless; every function may be called from any thread.
#ifndef SERVICES_ANALYZER_RERUN_H_
#define SERVICES_ANALYZER_RERUN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"
#include "services/analyzer/series.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

// The executor's name as the farm spells it ("emulator", "fio", "iozone");
// EXECUTOR_UNSPECIFIED (specs without one) ran on the emulator.
std::string ExecutorName(iommufarm::v1::Executor executor);

// Values of one series at one commit in a set of samples: the plain mode's
// values, or for an overhead series mode/off ratios paired per
// (matrix, repeat).
std::vector<double> SeriesValuesAt(const std::vector<SampleRow>& samples, const SeriesSpec& spec,
                                   const std::string& commit_id);

// `analysis.confirm` of a matrix spec: the confirmation step of its findings
// run as real jobs (docs/analyzer.md "Confirmation on real kernels").
struct RealConfirm {
  // fio, iozone or dma-map-bench
  iommufarm::v1::Executor executor = iommufarm::v1::EXECUTOR_UNSPECIFIED;
  std::string workload;
  std::string params_json = "{}";
  std::string catalog;   // "": the finding's
  std::string platform;  // "": the finding's
  int repeats = 3;       // per commit, first round
  int max_repeats = 3;   // doubling cap of a suggestive result
  std::string metric;    // Sample.metric; "" for dma-map-bench until a finding chooses
  std::string phase;     // Sample.phase
};

// The spec's analysis.confirm as the scheduler accepted it (the same
// defaults: 3 repeats, max_repeats = repeats, proto::DefaultConfirmMetric;
// a dma-map-bench confirm without a metric keeps it empty, for
// RealConfirmMetric); nullopt when it has none or it cannot be read.
std::optional<RealConfirm> RealConfirmFromSpecYaml(const std::string& spec_yaml);

// The metric a dma-map-bench confirmation compares when the spec names
// none, chosen by the finding (`finding_metric`, "metric" or
// "metric/phase"): a map or unmap figure of its own (map_latency_p99,
// avg_unmap_100ns ...) stands for map_latency_mean or unmap_latency_mean,
// the tool's two mean latencies; any other (the emulator's throughput) for
// the one of those two that moved more the finding's way between its commits
// in the emulator's own runs of its cell (`latency_change`: metric ->
// relative change, signed so that positive is the finding's way: a rise for
// a regression, a fall for an improvement; the ones measured). "" when that
// is ambiguous: neither moved that way by `min_change` (the detector's
// magnitude: less is noise).
std::string DmaMapBenchConfirmMetric(const std::string& finding_metric,
                                     const std::map<std::string, double>& latency_change,
                                     double min_change);

// The change a real confirmation expects of its metric, from an emulator
// finding of `emulated_change`: the same size, its sign the real metric's
// bad direction for a regression (latency up, throughput down:
// stats::MetricPolarity) and the good one for an improvement. A metric of
// unknown polarity keeps the emulator's sign.
double RealExpectedChange(const std::string& real_metric, bool regression, double emulated_change);

// Why `real` cannot have its kernels at `commits` built on demand: "" when a
// registered agent (`agent_capabilities`, one entry per agent) builds the
// cell's catalog for the architecture of its vm platform
// (proto::BuildOfferRuns, the rule the scheduler's PlanKernels applies at
// submit), else a sentence, e.g. "no registered agent builds catalog
// test-tree for x86_64".
std::string NotBuildable(
    const std::vector<std::vector<iommufarm::v1::Capability>>& agent_capabilities,
    const SeriesSpec& real);

// The cell the real confirmation of `emulated` runs: the real workload,
// executor and metric, the finding's mode (and off for an overhead series),
// no model settings.
SeriesSpec RealConfirmSpec(const SeriesSpec& emulated, const RealConfirm& c);

// Why `real` cannot run at `commits` on the offered kernels: "" when for
// every commit and mode of the cell some offer runs it (proto::FindOffer),
// else a sentence naming what is missing, e.g. "no agent offers a fio kernel
// for v6.1.190 in lazy".
std::string MissingKernels(const std::vector<iommufarm::v1::KernelOffer>& offers,
                           const SeriesSpec& real, const std::vector<std::string>& commits);

// The matrix spec of a confirm/bisect matrix re-running `spec` at `commits`
// (listed, in this order): the cell's mode (and off for an overhead series),
// its workload params and the spec's `set:` model settings.
iommufarm::v1::MatrixSpec RerunSpec(const SeriesSpec& spec, const std::string& name,
                                    const std::vector<std::string>& commits, int repeats,
                                    iommufarm::v1::JobKind kind, uint64_t seed, int priority);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_RERUN_H_
