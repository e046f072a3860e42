// Decay within runs: the `decay` finding.
//
// Every other finding compares runs of different commits; a run whose
// metric falls as it goes on (the IOVA allocator aging over a long run:
// the rcache depot growing, the rbtree walked further, docs/analyzer.md
// "Decay within a run") is one number like any other there, a little low.
// A sample that carries its run's series (SampleRow.intervals: the
// emulator's throughput per interval of virtual time) is judged here on its
// own: the runs of one cell (platform, workload and params, metric, mode,
// timing) at one commit are reduced to their per-interval median series
// (stats::MedianSeries, which one odd run does not move), and that series
// decays when stats::JudgeDecay says so: Mann-Kendall finds a falling trend
// (a rising one for a lower-is-better metric) at p < alpha, and the
// Theil-Sen line falls by at least the magnitude from the first interval to
// the last and by more than three times the residuals' scatter.
//
// Pure functions over sample rows; thread-safe.
#ifndef SERVICES_ANALYZER_DECAY_H_
#define SERVICES_ANALYZER_DECAY_H_

#include <string>
#include <vector>

#include "lib/stats/trend.h"
#include "services/analyzer/series.h"

namespace farm::analyzer {

struct DecayOptions {
  double magnitude = 0.05;  // the fall over the run, of its start
  double alpha = 0.01;      // Mann-Kendall, one-sided
  // Fewest intervals a run's series needs to be judged.
  int min_intervals = 5;
};

struct DecayFinding {
  SeriesKey key;  // overhead is false: a ratio has no series of its own
  int commit_index = 0;
  std::string commit_id;
  bool primary = true;          // a primary metric of its workload (PrimaryMetrics)
  int runs = 0;                 // runs whose series were judged
  std::vector<double> series;   // the per-interval median, as measured
  stats::DecayVerdict verdict;  // on the series, negated for a lower-is-better metric
};

// The decays among `samples` (one matrix's own), in cell and commit order.
// Samples without a series, with fewer than min_intervals intervals, or of a
// metric of unknown polarity are not judged.
std::vector<DecayFinding> FindDecays(const std::vector<SampleRow>& samples,
                                     const PrimaryMetricMap& primary, const DecayOptions& options);

// "throughput fell 29.0% over the run (Theil-Sen, first to last of 10
// intervals), Mann-Kendall p=2.8e-07, 3 runs; median per interval: 30820
// 30060 ... 21890"
std::string DecayNote(const DecayFinding& d);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_DECAY_H_
