// E-divisive with means (Matteson and James, "A Nonparametric Approach for
// Multiple Change Point Analysis of Multivariate Data", JASA 2014; R's
// ecp::e.divisive; the method Apache Otava, formerly Hunter, runs over a
// test's results): the reference peer detector of bench/peer_compare.
//
// Hierarchical: the split of the current segments that maximises the
// energy statistic (alpha = 1, absolute differences) is kept while a
// permutation test (points permuted within each segment) says it is
// significant; then the segments are searched again.
//
// Pure functions over their own inputs and random stream; thread-compatible.
#ifndef BENCH_EDIVISIVE_H_
#define BENCH_EDIVISIVE_H_

#include <cstdint>
#include <vector>

namespace farm::bench {

struct EDivisiveOptions {
  double significance = 0.05;  // the permutation test's level
  int permutations = 199;      // ecp's default R
  int min_size = 5;            // fewest points a segment keeps (one commit's repeats)
  uint64_t seed = 1;           // the permutations' stream
};

// Change points of `x` (points in time order) as the index of the first
// point of each new segment, ascending.
std::vector<int> EDivisive(const std::vector<double>& x, const EDivisiveOptions& options = {});

}  // namespace farm::bench

#endif  // BENCH_EDIVISIVE_H_
