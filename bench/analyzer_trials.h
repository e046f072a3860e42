// The simulated farm and the trials bench/analyzer_quality prints and
// bench/analyzer_recall_floor_test.cc holds to a floor: seeded series over a
// 97-commit catalog (every 8th commit measured, 5 repeats), a planted
// multiplicative shift at a random commit or none, noise of one of four
// shapes (Noise), run through the analyzer's pipeline (top-up, detection,
// adaptive confirmation, bisect; analyzer_quality.cc's header describes it)
// and through a plain adjacent t-test baseline, false alerts counted the way
// triage records them.
//
// Pure functions over their own random streams (every cell draws its trials'
// seeds from `master`); thread-compatible, no shared state.
#ifndef BENCH_ANALYZER_TRIALS_H_
#define BENCH_ANALYZER_TRIALS_H_

#include <optional>
#include <random>
#include <string_view>

#include "services/analyzer/bisect.h"
#include "services/analyzer/detect.h"

namespace farm::bench {

inline constexpr int kCatalog = 97;  // catalog commits 0..96; 0 and 96 are measured
inline constexpr int kStride = 8;    // the bulk matrix measures every 8th commit
inline constexpr int kRepeats = 5;
inline constexpr int kMeasured = (kCatalog + kStride - 1) / kStride;

// The noise each run draws, all with the same standard deviation (cv of the
// level) except where said:
//   gaussian: N(0, cv);
//   outliers: gaussian, and 2% of runs 8 cv slower (a run disturbed by
//             another tenant, a migration, a daemon waking up);
//   bimodal:  one of two modes at -/+0.9 cv, equally likely, each with
//             sd 0.44 cv (which of two cache or NUMA placements a boot got);
//   drift:    gaussian, and the level drifting down 2% over the catalog
//             (0.17% per measured commit: a slow change no commit made).
enum class Noise { kGaussian, kOutliers, kBimodal, kDrift };
inline constexpr Noise kNoises[] = {Noise::kGaussian, Noise::kOutliers, Noise::kBimodal,
                                    Noise::kDrift};
const char* NoiseName(Noise n);
std::optional<Noise> ParseNoise(std::string_view name);  // NoiseName's inverse

// One trial's bulk series: every kStride-th commit, kRepeats runs each,
// a shift of `shift` from commit `culprit` on (-1: none) under `kind` noise,
// drawn from a stream seeded by `rng`.
analyzer::Series BulkSeries(std::mt19937_64& rng, int culprit, double shift, double cv, Noise kind);
// A culprit as the trials plant it: any commit after the first (the first
// measured commit is the baseline).
int RandomCulprit(std::mt19937_64& rng);

// False alerts over noise-only series with one CV and noise shape: per 100
// measured commits for the analyzer and the baseline, the analyzer's extra
// runs and its candidates (before confirmation) per trial.
struct NoiseCell {
  double per100 = 0, per100_base = 0, runs_per_trial = 0, candidates_per_trial = 0;
};
NoiseCell MeasureNoise(std::mt19937_64& master, int trials, double cv, Noise kind,
                       const analyzer::DetectOptions& dopt, const analyzer::BisectOptions& bopt);

// A planted shift at a random commit, `trials` times: the share of trials
// with a confirmed change whose range holds the culprit (recall), with a
// candidate holding it before confirmation, the baseline's recall, the
// share of bisects naming the culprit exactly and the runs per detection.
struct ShiftCell {
  double recall = 0, candidate_recall = 0, baseline_recall = 0, bisect_exact = 0,
         runs_per_detection = 0;
};
ShiftCell MeasureShift(std::mt19937_64& master, int trials, double shift, double cv, Noise kind,
                       const analyzer::DetectOptions& dopt, const analyzer::BisectOptions& bopt);

}  // namespace farm::bench

#endif  // BENCH_ANALYZER_TRIALS_H_
