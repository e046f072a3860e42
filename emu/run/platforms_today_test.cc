// Current platforms and the catalog's commits since v5.11: the new machines
// are listed and run the shipped workloads, the newest kernel costs
// differently from v5.11 on them, and a commit that changes one IOMMU
// driver changes only platforms with that IOMMU. Runs without run-to-run
// noise (noise.cv=0), so "identical" means bit for bit. The published rows
// of docs/fidelity.md "Current platforms" are checked against their bands and
// against the document.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "emu/model/platform.h"
#include "emu/run/platform_fidelity.h"
#include "emu/run/run.h"
#include "gtest/gtest.h"

namespace farm::emu {
namespace {

constexpr const char* kSpr = "intel-spr-2s56c";
constexpr const char* kGenoa = "amd-genoa-2s96c";
constexpr const char* kGrace = "nvidia-grace-2s72c";

RunResult MustRun(const std::string& platform, const std::string& kernel,
                  const std::string& workload, std::map<std::string, std::string> params,
                  const std::string& mode = "strict") {
  absl::StatusOr<RunResult> r =
      RunEmulation(NoiseFreeSpec(platform, kernel, mode, workload, std::move(params)));
  EXPECT_TRUE(r.ok()) << platform << " " << kernel << " " << workload << ": " << r.status();
  return r.ok() ? *r : RunResult{};
}

// Enough threads on one device that invalidations of different CPUs overlap
// (8: every platform's node 0 has that many CPUs).
RunResult Bench(const std::string& platform, const std::string& kernel) {
  return MustRun(platform, kernel, "dma-map-bench",
                 {{"threads", "8"}, {"seconds", "0.0005"}, {"node", "0"}});
}

// What one map+unmap pair costs the benchmark, ns: finer than throughput,
// which counts whole pairs in a short window.
double PairNs(const RunResult& r) { return r.map_latency.mean + r.unmap_latency.mean; }

int64_t LockAcquisitions(const RunResult& r, const std::string& name) {
  int64_t n = 0;
  for (const LockReport& l : r.locks) {
    if (l.name == name) n += static_cast<int64_t>(l.acquisitions);
  }
  return n;
}

TEST(PlatformsToday, AreListedWithTheirInterruptController) {
  struct Want {
    const char* name;
    const char* iommu;
    IrqChip chip;
    int cpus;
  };
  for (const Want& w :
       {Want{kSpr, "vtd", IrqChip::kX86Vector, 112}, Want{kGenoa, "amd", IrqChip::kX86Vector, 192},
        Want{kGrace, "smmuv3", IrqChip::kGicIts, 144}}) {
    absl::StatusOr<const Platform*> p = FindPlatform(w.name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->settings.at("iommu.type"), w.iommu) << w.name;
    EXPECT_EQ((*p)->irq_chip, w.chip) << w.name;
    EXPECT_EQ((*p)->topology.num_cpus, w.cpus) << w.name;
    EXPECT_EQ((*p)->topology.num_nodes(), 2) << w.name;
  }
  EXPECT_EQ((*FindPlatform(kGrace))->settings.at("smmu.vcmdqs"), "2");
}

TEST(PlatformsToday, RunDmaMapBenchAndFio) {
  for (const char* platform : {kSpr, kGenoa, kGrace}) {
    for (const char* mode : {"strict", "lazy"}) {
      RunResult bench = MustRun(platform, "latest", "dma-map-bench",
                                {{"threads", "4"}, {"seconds", "0.0005"}}, mode);
      EXPECT_GT(bench.throughput, 0) << platform << " " << mode;
      EXPECT_GT(bench.counters.dma_maps, 0u) << platform << " " << mode;
      RunResult fio = MustRun(platform, "latest", "fio-nvme",
                              {{"runtime_ms", "2"}, {"ramp_ms", "1"}, {"numjobs", "2"}}, mode);
      EXPECT_GT(fio.throughput, 0) << platform << " " << mode;
    }
    // Strict invalidates through the platform's own IOMMU model.
    RunResult strict =
        MustRun(platform, "latest", "dma-map-bench", {{"threads", "2"}, {"seconds", "0.0005"}});
    EXPECT_GT(strict.counters.syncs, 0u) << platform;
  }
}

// A v6.12 kernel on Sapphire Rapids, strict: the v6.10 cache_lock serialises
// the 8 CPUs' invalidations of the one domain and v6.12 drops the indirect
// dma_map_ops call; v5.11 has neither.
TEST(PlatformsToday, V612CostsDifferentlyFromV511OnSapphireRapids) {
  RunResult v511 = Bench(kSpr, "v5.11");
  RunResult v612 = Bench(kSpr, "v6.12");
  ASSERT_GT(v511.throughput, 0);
  EXPECT_NE(PairNs(v511), PairNs(v612));
  EXPECT_NE(v511.throughput, v612.throughput);
  EXPECT_EQ(LockAcquisitions(v511, "dmar_domain->cache_lock"), 0);
  EXPECT_GT(LockAcquisitions(v612, "dmar_domain->cache_lock"), 0);
  // The cache_lock commit alone is a loss at 8 threads on one domain.
  RunResult before = Bench(kSpr, "v6.9");
  RunResult after = Bench(kSpr, "a600ccd0a347");
  EXPECT_LT(after.throughput, before.throughput);
  EXPECT_GT(PairNs(after), PairNs(before));
  // The direct calls alone make each pair cheaper.
  EXPECT_LT(PairNs(Bench(kSpr, "b5c58b2fdc42")), PairNs(Bench(kSpr, "v6.11")));
}

// Each driver-specific commit moves its own IOMMU's platform and leaves the
// others bit for bit as they were.
TEST(PlatformsToday, DriverCommitsAreScopedToTheirIommu) {
  struct Step {
    const char* before;
    const char* commit;
    const char* moves;  // the one platform whose result must change
  };
  const Step steps[] = {
      {"v5.14", "fc65d0acaf23", kGenoa},         // AMD-Vi selective flush
      {"4e589a53685c", "a600ccd0a347", kSpr},    // VT-d cache_lock (strict)
      {"b5c58b2fdc42", "918eb5c856f6", kGrace},  // Tegra241 CMDQV
      {"v6.19", "d2a0cac10597", kGenoa},         // AMD-Vi unlocked completion wait
  };
  const char* platforms[] = {kSpr, kGenoa, kGrace, "kunpeng920-smmuv3", "intel-vtd-2s12c"};
  for (const Step& s : steps) {
    for (const char* p : platforms) {
      RunResult a = Bench(p, s.before);
      RunResult b = Bench(p, s.commit);
      // The VT-d commit also moves the older VT-d platform.
      const bool moves = std::string(p) == s.moves ||
                         (std::string(s.moves) == kSpr && std::string(p) == "intel-vtd-2s12c");
      if (moves) {
        EXPECT_NE(PairNs(a), PairNs(b)) << s.commit << " on " << p;
      } else {
        EXPECT_EQ(PairNs(a), PairNs(b)) << s.commit << " on " << p;
        EXPECT_EQ(a.throughput, b.throughput) << s.commit << " on " << p;
        EXPECT_EQ(a.events, b.events) << s.commit << " on " << p;
      }
    }
  }
}

// The generic v6.12 commit changes every new platform (each pays an indirect
// call before it) and no calibrated one (cost.indirect_call_ns is 0 there).
TEST(PlatformsToday, DirectCallsChangeOnlyPlatformsThatPriceTheIndirectCall) {
  for (const char* p : {kSpr, kGenoa, kGrace}) {
    EXPECT_GT(PairNs(Bench(p, "v6.11")), PairNs(Bench(p, "b5c58b2fdc42"))) << p;
  }
  for (const char* p : {"kunpeng920-smmuv3", "intel-vtd-2s12c", "intel-vtd-snb16c"}) {
    EXPECT_EQ(PairNs(Bench(p, "v6.11")), PairNs(Bench(p, "b5c58b2fdc42"))) << p;
  }
}

// Every row of `farm-emu fidelity`, run once for the tests below.
const std::vector<PlatformFidelityRow>& FidelityRows() {
  static const std::vector<PlatformFidelityRow>* rows = [] {
    absl::StatusOr<std::vector<PlatformFidelityRow>> r = PlatformsTodayFidelity();
    EXPECT_TRUE(r.ok()) << r.status();
    return new std::vector<PlatformFidelityRow>(r.ok() ? *r : std::vector<PlatformFidelityRow>{});
  }();
  return *rows;
}

// A row is inside its band unless it names its known gap; a gap row must stay
// outside, so a model change that closes it (or breaks a passing row) fails
// here and the document is regenerated.
TEST(PlatformsTodayFidelity, EveryPublishedRowIsInsideItsBandOrAKnownGap) {
  const std::vector<PlatformFidelityRow>& rows = FidelityRows();
  ASSERT_FALSE(rows.empty());
  for (const PlatformFidelityRow& r : rows) {
    EXPECT_LT(r.band_lo, r.published_value) << r.what;
    EXPECT_GT(r.band_hi, r.published_value) << r.what;
    if (r.known_gap.empty()) {
      EXPECT_GE(r.model_value, r.band_lo)
          << r.platform << ": " << r.what << " (" << r.model_detail << ")";
      EXPECT_LE(r.model_value, r.band_hi)
          << r.platform << ": " << r.what << " (" << r.model_detail << ")";
    } else {
      EXPECT_FALSE(r.pass) << r.platform << ": " << r.what
                           << " now passes: drop its known gap and regenerate the table";
    }
  }
}

// docs/fidelity.md carries the table `farm-emu fidelity` prints, between its
// two markers, so the document's model figures are the model's.
TEST(PlatformsTodayFidelity, DocumentCarriesThePrintedTable) {
  std::ifstream in(FARM_FIDELITY_DOC);
  ASSERT_TRUE(in) << FARM_FIDELITY_DOC;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- farm-emu fidelity: begin -->\n";
  const std::string end = "<!-- farm-emu fidelity: end -->";
  const size_t b = doc.find(begin);
  const size_t e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  ASSERT_LT(b, e);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()),
            FormatPlatformFidelity(FidelityRows()))
      << "regenerate it: scripts/emu-fidelity-doc";
}

}  // namespace
}  // namespace farm::emu
