// emu/engine/stats.h: bounded-memory statistics for latency samples.
//
// RunningStats keeps count/mean/variance (Welford) and min/max; LogHistogram
// keeps counts in log-linear buckets (16 sub-buckets per power of two, < 6.25%
// relative error) so p50/p99 cost O(1) memory however long a run is.
// Thread-safety: none (one owner). Values are non-negative integers (ns).
#ifndef EMU_ENGINE_STATS_H_
#define EMU_ENGINE_STATS_H_

#include <array>
#include <cstdint>

namespace farm::emu {

class RunningStats {
 public:
  void Add(double x) {
    ++n_;
    double d = x - mean_;
    mean_ += d / static_cast<double>(n_);
    m2_ += d * (x - mean_);
    if (n_ == 1 || x < min_) min_ = x;
    if (n_ == 1 || x > max_) max_ = x;
  }
  void Merge(const RunningStats& o);
  uint64_t count() const { return n_; }
  double mean() const { return mean_; }
  //! Population standard deviation.
  double stddev() const;
  double min() const { return min_; }
  double max() const { return max_; }

 private:
  uint64_t n_ = 0;
  double mean_ = 0;
  double m2_ = 0;
  double min_ = 0;
  double max_ = 0;
};

class LogHistogram {
 public:
  void Add(uint64_t v) {
    ++counts_[Bucket(v)];
    ++total_;
  }
  void Merge(const LogHistogram& o);
  uint64_t total() const { return total_; }
  //! Value at quantile q in [0,1] (bucket midpoint; exact below 16).
  double Quantile(double q) const;

  static int Bucket(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    int msb = 63 - __builtin_clzll(v);  // >= 4
    int sub = static_cast<int>((v >> (msb - 4)) & (kSub - 1));
    return (msb - 3) * kSub + sub;
  }
  static double BucketLow(int b);
  static double BucketHigh(int b);

 private:
  static constexpr int kSub = 16;
  static constexpr int kBuckets = 61 * kSub;
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

//! Latency summary as reported: mean, stddev, p50, p99, max (ns).
struct LatencySummary {
  double mean = 0, stddev = 0, p50 = 0, p99 = 0, max = 0;
  uint64_t count = 0;
};

//! A latency recorder: RunningStats + LogHistogram + the dma_map_benchmark
//! integer sums (samples in 100 ns units, as kernel/dma/map_benchmark.c keeps).
class LatencyRecorder {
 public:
  void Add(int64_t ns) {
    uint64_t v = ns < 0 ? 0 : static_cast<uint64_t>(ns);
    stats_.Add(static_cast<double>(v));
    hist_.Add(v);
    uint64_t u100 = v / 100;
    sum_100ns_ += u100;
    sum_sq_100ns_ += u100 * u100;
  }
  void Merge(const LatencyRecorder& o);
  LatencySummary Summary() const;
  uint64_t count() const { return stats_.count(); }
  uint64_t sum_100ns() const { return sum_100ns_; }
  uint64_t sum_sq_100ns() const { return sum_sq_100ns_; }

 private:
  RunningStats stats_;
  LogHistogram hist_;
  uint64_t sum_100ns_ = 0;
  uint64_t sum_sq_100ns_ = 0;
};

}  // namespace farm::emu

#endif  // EMU_ENGINE_STATS_H_
