#include "emu/engine/stats.h"

#include <cmath>

namespace farm::emu {

void RunningStats::Merge(const RunningStats& o) {
  if (o.n_ == 0) return;
  if (n_ == 0) {
    *this = o;
    return;
  }
  uint64_t n = n_ + o.n_;
  double d = o.mean_ - mean_;
  double mean = mean_ + d * static_cast<double>(o.n_) / static_cast<double>(n);
  m2_ = m2_ + o.m2_ +
        d * d * static_cast<double>(n_) * static_cast<double>(o.n_) / static_cast<double>(n);
  mean_ = mean;
  if (o.min_ < min_) min_ = o.min_;
  if (o.max_ > max_) max_ = o.max_;
  n_ = n;
}

double RunningStats::stddev() const {
  if (n_ < 2) return 0;
  return std::sqrt(m2_ / static_cast<double>(n_));
}

double LogHistogram::BucketLow(int b) {
  if (b < kSub) return b;
  int msb = b / kSub + 3;
  int sub = b % kSub;
  return std::ldexp(static_cast<double>(kSub + sub), msb - 4);
}

double LogHistogram::BucketHigh(int b) {
  if (b < kSub) return b;
  int msb = b / kSub + 3;
  int sub = b % kSub;
  return std::ldexp(static_cast<double>(kSub + sub + 1), msb - 4);
}

void LogHistogram::Merge(const LogHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  total_ += o.total_;
}

double LogHistogram::Quantile(double q) const {
  if (total_ == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      if (b < kSub) return b;
      return (BucketLow(b) + BucketHigh(b)) / 2;
    }
  }
  return BucketHigh(kBuckets - 1);
}

void LatencyRecorder::Merge(const LatencyRecorder& o) {
  stats_.Merge(o.stats_);
  hist_.Merge(o.hist_);
  sum_100ns_ += o.sum_100ns_;
  sum_sq_100ns_ += o.sum_sq_100ns_;
}

LatencySummary LatencyRecorder::Summary() const {
  LatencySummary s;
  s.count = stats_.count();
  s.mean = stats_.mean();
  s.stddev = stats_.stddev();
  s.p50 = hist_.Quantile(0.50);
  s.p99 = hist_.Quantile(0.99);
  s.max = stats_.max();
  // Bucket midpoints can exceed the true maximum; clamp.
  if (s.p50 > s.max) s.p50 = s.max;
  if (s.p99 > s.max) s.p99 = s.max;
  return s;
}

}  // namespace farm::emu
