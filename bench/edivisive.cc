#include "bench/edivisive.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace farm::bench {
namespace {

struct Split {
  int at = -1;    // first point of the right part, an index into the whole series
  double q = -1;  // its energy statistic
};

// The best split of x[begin, end) by the energy statistic Q(tau) =
// tau (n - tau) / n * (2 E|X - Y| - E|X - X'| - E|Y - Y'|), from the
// prefix sums of the pairwise distance matrix (O(n^2) for all tau).
Split BestSplit(const std::vector<double>& x, int begin, int end, int min_size) {
  const int n = end - begin;
  Split best;
  if (n < 2 * min_size) return best;
  // P(i, j): sum of |x_a - x_b| over begin <= a < begin + i, begin <= b < begin + j.
  const int w = n + 1;
  std::vector<double> p(static_cast<size_t>(w) * w, 0);
  auto at = [&](int i, int j) -> double& { return p[static_cast<size_t>(i) * w + j]; };
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      at(i + 1, j + 1) =
          std::fabs(x[begin + i] - x[begin + j]) + at(i, j + 1) + at(i + 1, j) - at(i, j);
    }
  }
  auto rect = [&](int r0, int r1, int c0, int c1) {
    return at(r1, c1) - at(r0, c1) - at(r1, c0) + at(r0, c0);
  };
  for (int tau = min_size; tau <= n - min_size; ++tau) {
    const double m = tau, k = n - tau;
    const double between = rect(0, tau, tau, n) / (m * k);
    // Ordered pairs count each pair twice: the mean over pairs i != j.
    const double left = tau > 1 ? rect(0, tau, 0, tau) / (m * (m - 1)) : 0;
    const double right = n - tau > 1 ? rect(tau, n, tau, n) / (k * (k - 1)) : 0;
    const double q = m * k / n * (2 * between - left - right);
    if (q > best.q) best = Split{begin + tau, q};
  }
  return best;
}

// The best split over every segment (bounds ascending, first 0, last n).
Split BestOverSegments(const std::vector<double>& x, const std::vector<int>& bounds, int min_size) {
  Split best;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) {
    const Split here = BestSplit(x, bounds[s], bounds[s + 1], min_size);
    if (here.q > best.q) best = here;
  }
  return best;
}

}  // namespace

std::vector<int> EDivisive(const std::vector<double>& x, const EDivisiveOptions& o) {
  std::vector<int> bounds = {0, static_cast<int>(x.size())};
  std::mt19937_64 rng(o.seed);
  for (;;) {
    const Split found = BestOverSegments(x, bounds, o.min_size);
    if (found.at < 0) break;
    // Permutation test: the same search over points shuffled within each
    // segment, where no change can remain.
    int as_large = 0;
    std::vector<double> shuffled = x;
    for (int r = 0; r < o.permutations; ++r) {
      for (size_t s = 0; s + 1 < bounds.size(); ++s) {
        std::shuffle(shuffled.begin() + bounds[s], shuffled.begin() + bounds[s + 1], rng);
      }
      as_large += BestOverSegments(shuffled, bounds, o.min_size).q >= found.q ? 1 : 0;
    }
    const double p = (as_large + 1.0) / (o.permutations + 1.0);
    if (p >= o.significance) break;
    bounds.insert(std::upper_bound(bounds.begin(), bounds.end(), found.at), found.at);
  }
  return std::vector<int>(bounds.begin() + 1, bounds.end() - 1);
}

}  // namespace farm::bench
