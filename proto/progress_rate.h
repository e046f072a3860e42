// proto/progress_rate.h: when a matrix's progress may carry a rate
// (MatrixProgress.jobs_per_second, and the ETA derived from it). A rate is
// measured over at least kRateMinJobs finished jobs and kRateMinSeconds of
// wall time; below either it is noise (one job over a fraction of a second),
// so the scheduler's watch stream and farmctl's own final line send none and
// the progress line shows only the counts.
//
// Pure functions; thread-safe.
#ifndef PROTO_PROGRESS_RATE_H_
#define PROTO_PROGRESS_RATE_H_

#include <cstdint>

namespace farm::proto {

inline constexpr int64_t kRateMinJobs = 2;
inline constexpr double kRateMinSeconds = 1.0;

// `jobs` finished over `seconds` per second, or 0 (no rate) when fewer than
// kRateMinJobs finished or less than kRateMinSeconds passed.
inline double MeasuredJobsPerSecond(int64_t jobs, double seconds) {
  if (jobs < kRateMinJobs || !(seconds >= kRateMinSeconds)) return 0;
  return static_cast<double>(jobs) / seconds;
}

}  // namespace farm::proto

#endif  // PROTO_PROGRESS_RATE_H_
