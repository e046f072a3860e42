// The kernel's own DMA-API benchmark on real kernels built from the test
// tree, in q35 + intel-iommu guests under tcg-icount, through the agent's
// KernelExecutor (params -> the guest's dma_map_benchmark -> samples). The
// planted regression of scripts/make-test-kernel-tree (an extra full IOTLB
// flush after each strict unmap) and its parent are built (the parent
// incrementally after the planted one, in the build directory the kbuild
// tests share), then run in interleaved rounds: strict repeats of one commit
// must agree within 1% (coefficient of variation) and the planted commit's
// unmap latency must stand clear of its parent's; in passthrough, where no
// IOTLB is flushed, the two must not differ beyond their noise. Then each
// commit runs once more with the kernel's counters on (farm-agent
// --kernel-counters): VT-d's dmar_perf_latency must have timed IOTLB
// invalidations through the queue under strict, and next to none under
// passthrough, where the device's identity domain is never invalidated.
// Needs: scripts/make-test-kernel-tree and scripts/build-guest-root (scripts/test runs both as
// root).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "agent/monitors/monitors.h"
#include "integration_tests/guest_kbuild_fixture.h"
#include "proto/names.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

constexpr int kRounds = 5;

struct Spread {
  double mean = 0, sd = 0;
  double Cv() const { return mean == 0 ? 0 : sd / mean; }
};

Spread SpreadOf(const std::vector<double>& v) {
  Spread s;
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean) / static_cast<double>(v.size() - 1);
  s.sd = std::sqrt(s.sd);
  return s;
}

class DmaMapBenchKbuildTest : public GuestKbuildTest {
 protected:
  DmaMapBenchKbuildTest() : GuestKbuildTest("x86_64") {}

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(PrepareTreeRootAndStore("dma-map-bench-"));
    ASSERT_NO_FATAL_FAILURE(ParentOf(tree_.planted, &parent_));
    for (const std::string& commit : {tree_.planted, parent_}) {
      ASSERT_NO_FATAL_FAILURE(BuildInto(commit));
    }
  }

  // unmap_latency_mean (ns) of each round, per commit, the commits'
  // order alternating round by round.
  std::map<std::string, std::vector<double>> Rounds(pb::IommuMode mode) {
    std::unique_ptr<agent::KernelExecutor> ex = Executor();
    std::map<std::string, std::vector<double>> out;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::string> order = {parent_, tree_.planted};
      if (round % 2 == 1) std::swap(order[0], order[1]);
      for (const std::string& commit : order) {
        agent::CancelToken cancel;
        absl::StatusOr<agent::ExecutionResult> r =
            ex->Run(DmaMapBenchJob(round, commit, mode), cancel);
        EXPECT_TRUE(r.ok()) << commit << " " << proto::ModeName(mode) << ": " << r.status();
        if (!r.ok()) continue;
        EXPECT_TRUE(r->ran_on.has_value());
        if (!r->ran_on.has_value()) continue;
        EXPECT_EQ(r->ran_on->guest().accel(), "tcg-icount");
        EXPECT_EQ(r->ran_on->guest().icount_shift(), 7u);
        EXPECT_EQ(r->ran_on->iommu_mode(), mode);
        EXPECT_EQ(r->raw_format, "dma-map-bench");
        for (const pb::Sample& s : r->samples) {
          if (s.metric() == "unmap_latency_mean") out[commit].push_back(s.value());
        }
        std::cout << proto::ModeName(mode) << " " << commit.substr(0, 12) << " round " << round
                  << ": " << absl::StripTrailingAsciiWhitespace(r->raw_output) << "\n";
      }
    }
    return out;
  }

  // The IOTLB invalidations VT-d's dmar_perf_latency timed in one counted
  // run of `commit` under `mode` (its inv_iotlb buckets' deltas summed);
  // -1 when the run or its monitors failed (the failure is EXPECTed).
  int64_t SampledIotlbInvalidations(const std::string& commit, pb::IommuMode mode) {
    std::unique_ptr<agent::KernelExecutor> ex = Executor(/*kernel_counters=*/true);
    agent::CancelToken cancel;
    absl::StatusOr<agent::ExecutionResult> r = ex->Run(DmaMapBenchJob(100, commit, mode), cancel);
    EXPECT_TRUE(r.ok()) << commit << " " << proto::ModeName(mode) << ": " << r.status();
    if (!r.ok()) return -1;
    EXPECT_TRUE(r->monitors.has_value()) << "the guest's monitors did not parse";
    if (!r->monitors.has_value()) return -1;
    const int64_t n = monitors::SampledIotlbInvalidations(*r->monitors);
    std::cout << proto::ModeName(mode) << " " << commit.substr(0, 12)
              << " counted: dmar_perf_latency inv_iotlb samples " << n << "\n";
    EXPECT_GE(n, 0) << "no dmar_perf_latency counters: " << r->monitors->ShortDebugString();
    return n;
  }

  void Report(const char* what, const Spread& parent, const Spread& planted) {
    std::cout << absl::StrFormat(
        "%s: parent %.0f ns (cv %.2f%%), planted %.0f ns (cv %.2f%%), change %+.2f%%\n", what,
        parent.mean, 100 * parent.Cv(), planted.mean, 100 * planted.Cv(),
        100 * (planted.mean / parent.mean - 1));
  }

  std::string parent_;
};

TEST_F(DmaMapBenchKbuildTest, StrictShowsThePlantedFlushAndPassthroughDoesNot) {
  std::map<std::string, std::vector<double>> strict = Rounds(pb::IOMMU_MODE_STRICT);
  ASSERT_EQ(strict[parent_].size(), static_cast<size_t>(kRounds));
  ASSERT_EQ(strict[tree_.planted].size(), static_cast<size_t>(kRounds));
  const Spread p = SpreadOf(strict[parent_]), q = SpreadOf(strict[tree_.planted]);
  Report("strict unmap latency", p, q);
  EXPECT_LT(p.Cv(), 0.01);
  EXPECT_LT(q.Cv(), 0.01);
  // Clear of both commits' noise: well beyond what their repeats spread.
  EXPECT_GT(q.mean - p.mean, 5 * std::max(p.sd, q.sd));

  std::map<std::string, std::vector<double>> pt = Rounds(pb::IOMMU_MODE_PASSTHROUGH);
  ASSERT_EQ(pt[parent_].size(), static_cast<size_t>(kRounds));
  ASSERT_EQ(pt[tree_.planted].size(), static_cast<size_t>(kRounds));
  const Spread a = SpreadOf(pt[parent_]), b = SpreadOf(pt[tree_.planted]);
  Report("passthrough unmap latency", a, b);
  EXPECT_LT(std::fabs(b.mean - a.mean), 0.01 * a.mean + 3 * std::max(a.sd, b.sd));

  // Every strict unmap of the benchmark invalidates the IOTLB through the
  // queue (qi_submit_sync), thousands in its second; passthrough's
  // identity domain none of its own.
  for (const std::string& commit : {parent_, tree_.planted}) {
    const int64_t strict_invalidations = SampledIotlbInvalidations(commit, pb::IOMMU_MODE_STRICT);
    EXPECT_GT(strict_invalidations, 1000) << commit;
    const int64_t pt_invalidations = SampledIotlbInvalidations(commit, pb::IOMMU_MODE_PASSTHROUGH);
    EXPECT_GE(pt_invalidations, 0) << commit;
    EXPECT_LT(pt_invalidations * 100, strict_invalidations) << commit;
  }
}

}  // namespace
}  // namespace farm
