// Change-point detection over commit order and classification of changes.
//
// Method: binary segmentation. In a segment of a series, every split between
// two adjacent measured commits is tested with Welch's t-test (all repeats
// left vs right, Boost.Math Student's t; on the series' ranks when its noise
// has outliers, SeriesNoise); the split with the smallest p is
// kept when its p, multiplied by the number of splits tried (Bonferroni over
// the scan), is below the series' alpha. When no single split qualifies,
// every middle run of commits is tested against the rest of the segment (a
// regression that a later commit undoes, e.g. v5.10 good, v5.11 bad, v5.12
// fixed); each scan gets half the alpha. The parts are then searched again,
// so several change points in one series are found.
//
// Multiplicity across series: Benjamini-Hochberg at false discovery rate
// alpha over the series' whole-scan p-values (not Bonferroni over every
// series: a matrix has hundreds of series, and a family-wise bound over all
// of them costs most of the power at 3% shifts). The BH threshold is each
// series' alpha.
//
// Magnitude, measured between the neighbouring change points: a change point
// whose confidence interval (level interval_level) lies wholly under the
// magnitude threshold is real but too small and dropped (stats.h
// JudgeMagnitude); one whose point estimate reaches the threshold is
// reported; one whose point estimate misses it but whose interval reaches
// it is suggestive (a true change at the threshold measures below it half
// the time).
//
// Suggestive candidates, returned by DetectCandidates marked `suggestive`
// (DetectAll leaves them out): the interval case above, and a best split
// whose corrected p misses the series' alpha but is below suggestive_factor
// times it. The caller re-measures the two neighbouring commits with more
// repeats and decides on the interval (bisect.h EvaluateConfirmation).
// Improvements are reported as well as regressions.
//
// A series that cannot be judged (a non-finite sample, points out of order)
// is left out with its reason (SeriesFailure) and the others are judged: one
// bad series never stops the analysis of the rest. Every index the detector
// derives from a split is checked in every build, not only in test builds.
//
// Pure functions; thread-safe.
#ifndef SERVICES_ANALYZER_DETECT_H_
#define SERVICES_ANALYZER_DETECT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/analyzer/series.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {

struct DetectOptions {
  double magnitude = 0.03;  // minimal |relative change| reported
  double alpha = 0.01;      // family-wise significance before correction
  int min_samples_per_side = 2;
  int max_depth = 16;  // recursion guard
  // Confidence level of the relative-change interval the magnitude is
  // judged on.
  double interval_level = 0.99;
  // A best split whose corrected p is below suggestive_factor x the series'
  // alpha (but not below alpha) is a suggestive candidate (DetectCandidates).
  double suggestive_factor = 30;
  // Bulk top-up: a best split whose corrected p is below top_up_factor x
  // the series' alpha but that is not significant has the measured commits
  // of its range measured again (TopUpRequests) before candidates are
  // opened, until a commit holds max_top_up_factor x the series' bulk
  // repeats; 1 or less: no top-up.
  double top_up_factor = 1000;
  int max_top_up_factor = 4;
};

struct ChangePoint {
  SeriesKey key;
  Polarity polarity = Polarity::kUnknown;
  bool primary = true;      // Series.primary
  int last_good_index = 0;  // last measured commit before the change
  std::string last_good;
  int first_bad_index = 0;  // first measured commit after the change
  std::string first_bad;
  int segment_begin_index = 0;  // commit range the before/after means cover
  int segment_end_index = 0;    // (inclusive)
  double before = 0;
  double after = 0;
  double relative_change = 0;  // (after - before) / |before|
  double p_value = 1;          // scan-corrected (not series-corrected)
  bool regression = false;     // false: improvement
  // Interval (DetectOptions.interval_level) of relative_change.
  Interval interval;
  // Not significant at the series' alpha (only below suggestive_factor x
  // it), or under the magnitude by its point estimate with an interval
  // reaching it: to be re-measured with more repeats before it counts.
  bool suggestive = false;
};

// A series the detector left out, and why: a sample that is not finite,
// points out of commit order, or a split outside its segment (an internal
// error, checked in every build). The other series of the call are judged
// without it, at the alpha of those judged.
struct SeriesFailure {
  SeriesKey key;
  absl::Status status;
};

// Change points of one series; alpha_corrected is the per-series threshold.
// Only significant change points (none suggestive). An error when the
// series cannot be judged (SeriesFailure's reasons).
absl::StatusOr<std::vector<ChangePoint>> DetectChangePoints(const Series& series,
                                                            const DetectOptions& options,
                                                            double alpha_corrected);

// The shape of a series' run-to-run noise, over its commits' repeats
// (stats.h DiagnoseNoise). Where it calls for means (stats.h MethodFor:
// Gaussian and bimodal noise) the scan tests means (Welch, or the pooled
// within-commit contrast); under outliers it tests the series' ranks with
// the same contrasts (a rank test), and a change's size and interval come
// from Yuen's trimmed means of the two segments.
stats::NoiseDiagnosis SeriesNoise(const Series& series);

// The whole-scan p-value of a series: the best single split or middle run of
// the whole series, Bonferroni-corrected over the splits tried and the two
// scans. What Benjamini-Hochberg ranks across series.
double SeriesScanP(const Series& series, const DetectOptions& options);

// The per-series alpha for these series: the Benjamini-Hochberg threshold at
// false discovery rate options.alpha over their SeriesScanP, or alpha / m
// when BH rejects none; over the series that can be judged (the others, with
// their reasons, are appended to `failed` when it is given).
double SeriesAlpha(const std::vector<Series>& series, const DetectOptions& options,
                   std::vector<SeriesFailure>* failed = nullptr);

// All series at once with the per-series alpha of SeriesAlpha: significant
// change points and suggestive candidates (ChangePoint.suggestive). A series
// that cannot be judged is left out and appended to `failed` when given; this
// and the functions below never stop at one.
std::vector<ChangePoint> DetectCandidates(const std::vector<Series>& series,
                                          const DetectOptions& options,
                                          std::vector<SeriesFailure>* failed = nullptr);

// Where the bulk scan is suggestive at top_up_factor but nothing is
// significant there: each such split with the measured commits of its range
// that hold fewer than max_top_up_factor x the series' bulk repeats (the
// fewest values a commit of it holds). The caller measures those commits
// again (`repeats` each) and detects again: a change too small or too noisy
// for the bulk's repeats then reaches the significant or suggestive level on
// evidence the whole segment weighs, rather than being opened on five runs
// or lost.
struct TopUpRequest {
  ChangePoint at;                   // the suggestive split (its key names the series)
  std::vector<int> commit_indices;  // ascending
  std::vector<std::string> commit_ids;
  // Runs each: as many as the least measured of them holds (doubling it),
  // none taken past the cap.
  int repeats = 0;
};
std::vector<TopUpRequest> TopUpRequests(const std::vector<Series>& series,
                                        const DetectOptions& options,
                                        std::vector<SeriesFailure>* failed = nullptr);

// DetectCandidates without the suggestive ones.
std::vector<ChangePoint> DetectAll(const std::vector<Series>& series, const DetectOptions& options,
                                   std::vector<SeriesFailure>* failed = nullptr);

// kModeChanged: the effective IOMMU mode changed (mode_change.h).
enum class ChangeClass { kUnspecified, kIommu, kNotIommu, kModeChanged };
// "unspecified", "iommu", "not_iommu", "mode_changed"
const char* ChangeClassName(ChangeClass c);

struct ModeEffect {
  std::string mode;
  bool overhead = false;
  double before = 0;
  double after = 0;
  double relative_change = 0;
  double p_value = 1;
  bool significant = false;
};

// One candidate regression (or improvement): change points of all series of
// one (platform, workload) whose commit intervals overlap and agree in
// direction, merged. Its metric is a primary metric of the workload when one
// changed in the group (see PrimaryMetrics), so a throughput loss is named as
// such even when a latency moved more; then plain series before overhead
// ratios, higher-is-better before lower-is-better, the largest change. Its
// mode is the one with the largest change among the modes that changed (off
// when the class is NOT_IOMMU).
struct Finding {
  std::string platform;
  std::string workload;
  std::string params = "{}";  // SeriesKey.params
  std::string metric;
  std::string mode;
  bool overhead_series = false;
  ChangeClass change_class = ChangeClass::kUnspecified;
  bool regression = true;
  int last_good_index = 0;
  std::string last_good;
  int first_bad_index = 0;
  std::string first_bad;
  double magnitude = 0;  // relative change of the primary series
  double p_value = 1;
  Polarity polarity = Polarity::kUnknown;
  // `metric` is a primary metric of the workload. Secondary findings are
  // recorded and confirmed but ranked below: lower alert severity, no bisect
  // unless asked (AnalyzerOptions).
  bool primary_metric = true;
  std::vector<ModeEffect> per_mode;  // the finding's metric, every mode and overhead series
  std::vector<ChangePoint> change_points;
};

// Merges change points into findings and classifies them, using the series
// to measure every mode at the finding's interval. Ranked: primary-metric
// findings first, regressions before improvements, then by |magnitude|.
std::vector<Finding> Classify(const std::vector<ChangePoint>& change_points,
                              const std::vector<Series>& series, const DetectOptions& options);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_DETECT_H_
