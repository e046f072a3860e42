// End-to-end tests of RunEmulation, the output formats and the DMA API paths.
#include "emu/run/run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "emu/iommu/dma_api.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"
#include "emu/workloads/workload.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace farm::emu {
namespace {

RunSpec Spec(const std::string& platform, const std::string& mode, const std::string& workload) {
  RunSpec s;
  s.platform = platform;
  s.mode = mode;
  s.workload = workload;
  if (workload == "dma-map-bench") {
    s.params = {{"seconds", "0.0005"}, {"threads", "4"}};
  } else {
    // No warm-up: the whole run is measured, so every unmap has its map
    // (plus one initial RX buffer per instance still mapped at the end).
    s.params = {{"seconds", "0.002"}, {"instances", "4"}, {"warmup", "0"}};
  }
  return s;
}

TEST(Run, EveryPlatformModeWorkloadRunsCleanly) {
  for (const Platform& p : AllPlatforms()) {
    for (const char* mode : {"off", "passthrough", "strict", "lazy"}) {
      for (const char* w : {"dma-map-bench", "memcached"}) {
        for (const char* kernel : {"latest", "stock-2016"}) {
          RunSpec s = Spec(p.name, mode, w);
          s.kernel = kernel;
          auto r = RunEmulation(s);
          ASSERT_TRUE(r.ok()) << p.name << " " << mode << " " << w << ": " << r.status();
          EXPECT_GT(r->throughput, 0) << p.name << " " << mode << " " << w;
          EXPECT_EQ(r->errors, 0u);
          EXPECT_EQ(r->counters.dma_faults, 0u) << p.name << " " << mode << " " << w;
          EXPECT_EQ(r->counters.dma_maps, r->counters.dma_unmaps + (w[0] == 'm' ? 4 : 0));
        }
      }
    }
  }
}

TEST(Run, JsonHasTheContractFields) {
  auto r = RunEmulation(Spec("kunpeng920-smmuv3", "strict", "dma-map-bench"));
  ASSERT_TRUE(r.ok());
  auto j = nlohmann::json::parse(FormatJson(*r));
  for (const char* k :
       {"platform", "kernel", "mode", "workload", "seed", "throughput", "latency_ns", "profile",
        "counters", "virtual_duration_ns", "events", "model", "wall", "effective_mode"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["throughput"]["unit"], "map+unmap/s");
  for (const char* k : {"mean", "stddev", "p50", "p99", "max"}) {
    EXPECT_TRUE(j["latency_ns"]["map"].contains(k));
    EXPECT_TRUE(j["latency_ns"]["unmap"].contains(k));
  }
  for (const char* k :
       {"invalidations", "syncs", "rcache_hit_rate", "rbtree_nodes_visited", "lock_wait_ns"}) {
    EXPECT_TRUE(j["counters"].contains(k)) << k;
  }
  EXPECT_EQ(j["model"]["smmu.cmdq"], "lockfree");
  EXPECT_EQ(j["profile"][0]["symbol"], "arm_smmu_cmdq_issue_cmdlist");
}

TEST(Run, ADomainWhoseFlushQueueFailsRunsStrictAndSaysSo) {
  // Asked for lazy on a kernel whose flush queue cannot be set up: the run
  // is the strict run, figure for figure, and reports strict with why.
  RunSpec lazy = NoiseFreeSpec("amd-genoa-2s96c", "latest", "lazy", "dma-map-bench",
                               {{"seconds", "0.0005"}, {"threads", "4"}});
  lazy.sets["fq.init_fails"] = "true";
  RunSpec strict = lazy;
  strict.mode = "strict";
  auto a = RunEmulation(lazy);
  auto b = RunEmulation(strict);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->mode, "lazy");
  EXPECT_EQ(a->effective_mode, "strict");
  EXPECT_NE(a->effective_detail.find("iommu_dma_init_fq"), std::string::npos);
  EXPECT_EQ(a->throughput, b->throughput);
  EXPECT_EQ(a->counters.fq_queued, 0u);
  EXPECT_EQ(a->counters.syncs, b->counters.syncs);
  const auto j = nlohmann::json::parse(FormatJson(*a));
  EXPECT_EQ(j["mode"], "lazy");
  EXPECT_EQ(j["effective_mode"]["mode"], "strict");
  EXPECT_NE(FormatText(*a).find("effective mode: strict, not lazy"), std::string::npos);
  // Without the failure the same request runs lazy.
  lazy.sets.erase("fq.init_fails");
  auto c = RunEmulation(lazy);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->effective_mode, "lazy");
  EXPECT_GT(c->counters.fq_queued, 0u);
  EXPECT_GT(c->throughput, b->throughput);
}

TEST(Run, DeterministicForASeedAndNoiseIsSeeded) {
  RunSpec s = Spec("intel-vtd-snb16c", "lazy", "memcached");
  s.kernel = "stock-2016";
  auto a = RunEmulation(s);
  auto b = RunEmulation(s);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ja = nlohmann::json::parse(FormatJson(*a));
  auto jb = nlohmann::json::parse(FormatJson(*b));
  ja.erase("wall");
  jb.erase("wall");
  EXPECT_EQ(ja, jb);

  s.sets = {{"noise.cv", "0.05"}};
  auto n1 = RunEmulation(s);
  s.seed = 2;
  auto n2 = RunEmulation(s);
  ASSERT_TRUE(n1.ok() && n2.ok());
  EXPECT_NE(n1->throughput, n2->throughput);
  EXPECT_NE(n1->throughput, a->throughput);
}

// The default noise.cv is the workload's declared run-to-run CV: repeats of
// one cell (same spec, seeds 1..N as the farm gives its repeats) differ with
// the default, are bit-identical with noise.cv=0, and their throughput CV is
// the declared one within sampling error.
struct CellCv {
  double cv = 0;
  size_t distinct = 0;
};

CellCv RepeatCv(const std::string& workload, const std::map<std::string, std::string>& params,
                const std::map<std::string, std::string>& sets, int repeats) {
  CellCv out;
  std::vector<double> v;
  for (int seed = 1; seed <= repeats; ++seed) {
    RunSpec s;
    s.platform = "intel-vtd-2s12c";
    s.mode = "strict";
    s.workload = workload;
    s.params = params;
    s.sets = sets;
    s.seed = static_cast<uint64_t>(seed);
    auto r = RunEmulation(s);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    v.push_back(r->throughput);
  }
  double mean = 0, ss = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) ss += (x - mean) * (x - mean);
  out.cv = std::sqrt(ss / static_cast<double>(v.size() - 1)) / mean;
  std::sort(v.begin(), v.end());
  out.distinct = static_cast<size_t>(std::unique(v.begin(), v.end()) - v.begin());
  return out;
}

TEST(Run, DefaultNoiseIsTheWorkloadsRunToRunCv) {
  struct Case {
    std::string workload;
    std::map<std::string, std::string> params;
  };
  const std::vector<Case> cases = {
      {"fio-nvme", {{"runtime_ms", "3"}, {"ramp_ms", "1"}, {"numjobs", "2"}}},
      {"iozone-nfsrdma", {{"threads", "4"}, {"size", "16m"}, {"sim_records", "4"}}},
  };
  constexpr int kRepeats = 24;
  for (const Case& c : cases) {
    auto info = FindWorkload(c.workload);
    ASSERT_TRUE(info.ok());
    const double declared = (*info)->noise_cv;
    ASSERT_GT(declared, 0) << c.workload << " declares no run-to-run noise";

    CellCv quiet = RepeatCv(c.workload, c.params, {{"noise.cv", "0"}}, kRepeats);
    EXPECT_EQ(quiet.distinct, 1u) << c.workload << ": noise.cv=0 repeats differ";

    CellCv noisy = RepeatCv(c.workload, c.params, {}, kRepeats);
    // A short fio window counts whole I/Os, so two repeats may tie.
    EXPECT_GE(noisy.distinct, static_cast<size_t>(kRepeats * 3 / 4))
        << c.workload << ": default-noise repeats coincide";
    // The sample CV of 24 draws has a relative standard error of about
    // 1/sqrt(2*23) = 15%, and a CPU-bound run feels the workload's CPU factor
    // on only part of its cost per I/O (each IOMMU cost key has its own
    // factor): +-50% of the declared CV, which excludes 0. The seeds are
    // fixed, so the test is deterministic.
    EXPECT_GT(noisy.cv, 0.5 * declared) << c.workload << " CV " << noisy.cv;
    EXPECT_LT(noisy.cv, 1.5 * declared) << c.workload << " CV " << noisy.cv;

    // An explicit CV overrides the workload's.
    CellCv doubled =
        RepeatCv(c.workload, c.params, {{"noise.cv", std::to_string(2 * declared)}}, kRepeats);
    std::printf("noise %-14s declared CV %.4f: %d repeats CV %.4f; noise.cv=%.4f: CV %.4f\n",
                c.workload.c_str(), declared, kRepeats, noisy.cv, 2 * declared, doubled.cv);
    EXPECT_GT(doubled.cv, 2 * 0.5 * declared) << c.workload << " CV " << doubled.cv;
    EXPECT_LT(doubled.cv, 2 * 1.5 * declared) << c.workload << " CV " << doubled.cv;
  }
}

TEST(Run, NoiseCvAcceptsWorkloadOrANumber) {
  ModelConfig cfg;
  EXPECT_EQ(cfg.Get("noise.cv"), "workload");
  EXPECT_TRUE(cfg.Apply({{"noise.cv", "0"}}).ok());
  EXPECT_TRUE(cfg.Apply({{"noise.cv", "workload"}}).ok());
  auto bad = cfg.Apply({{"noise.cv", "lots"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("neither a number nor 'workload'"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(cfg.Apply({{"noise.cv", "0.9"}}).ok());
}

TEST(Run, KernelFormatIsTheToolsThreeLines) {
  RunSpec s = Spec("intel-vtd-2s12c", "strict", "dma-map-bench");
  s.params = {{"seconds", "0.001"}, {"threads", "2"}, {"granule", "4"}, {"dir", "1"}};
  auto r = RunEmulation(s);
  ASSERT_TRUE(r.ok());
  auto k = FormatKernel(*r);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->rfind("dma mapping benchmark: threads:2 seconds:0 node:-1 dir:TO_DEVICE "
                     "granule: 4\naverage map latency(us):",
                     0),
            0u);
  EXPECT_NE(k->find("\naverage unmap latency(us):"), std::string::npos);
  EXPECT_EQ(std::count(k->begin(), k->end(), '\n'), 3);
  auto m = RunEmulation(Spec("intel-vtd-2s12c", "strict", "memcached"));
  EXPECT_FALSE(FormatKernel(*m).ok());
}

TEST(Run, UsageErrorsAreClear) {
  RunSpec s = Spec("nope", "strict", "memcached");
  EXPECT_EQ(RunEmulation(s).status().code(), absl::StatusCode::kNotFound);
  s = Spec("intel-vtd-snb16c", "sloppy", "memcached");
  EXPECT_EQ(RunEmulation(s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Spec("intel-vtd-snb16c", "strict", "memcached");
  s.params["bogus"] = "1";
  EXPECT_EQ(RunEmulation(s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Spec("intel-vtd-snb16c", "strict", "memcached");
  s.sets["no.such.key"] = "1";
  EXPECT_EQ(RunEmulation(s).status().code(), absl::StatusCode::kInvalidArgument);
  s = Spec("arm-mmu500-8c", "strict", "dma-map-bench");
  s.params["threads"] = "9";
  EXPECT_EQ(RunEmulation(s).status().code(), absl::StatusCode::kInvalidArgument);
  // A table bound that is the platform's CPU count.
  s = Spec("intel-vtd-snb16c", "strict", "memcached");
  s.params["instances"] = "17";
  EXPECT_EQ(RunEmulation(s).status().message(), "parameter instances: 17 out of range [1, 16]");
}

// map_sg variants on VT-d with write-buffer flushing: per-segment syncs each
// segment, batched once, the private path walks and flushes once.
TEST(DmaApi, MapSgVariantsCostWhatTheirCodePathsDo) {
  auto cost_of = [](const char* variant) {
    const Platform* p = *FindPlatform("intel-vtd-2s12c");
    ModelConfig cfg = *ModelConfig().Apply(p->settings);
    cfg = *cfg.Apply({{"map_sg", variant}, {"vtd.rwbf", "true"}});
    Model m = *Model::From(cfg);
    Engine e(p->topology, m.line, 1);
    Sim sim;
    sim.engine = &e;
    sim.model = &m;
    DmaApi dma(&sim, Mode::kStrict, p->devices, p->topology.num_cpus);
    Cpu& cpu = e.AddCpu(0);
    Time map_ns = 0;
    uint64_t flushes = 0;
    auto prog = [&](Cpu& c) -> Task<void> {
      SgSegment segs[30];
      for (int i = 0; i < 30; ++i) segs[i] = SgSegment{(1ULL << 30) + i * 8192ULL, 4096};
      for (int rep = 0; rep < 10; ++rep) {
        Time t0 = c.now();
        uint64_t a = co_await dma.MapSg(c, 0, segs, 30, DmaDir::kFromDevice);
        map_ns += c.now() - t0;
        co_await dma.UnmapSg(c, 0, a, segs, 30, DmaDir::kFromDevice);
      }
    };
    e.Start(cpu, prog(cpu));
    EXPECT_TRUE(e.Run().ok());
    flushes = sim.counters.write_buffer_flushes;
    EXPECT_EQ(sim.counters.ptes_written, 300u);
    EXPECT_EQ(sim.counters.ptes_cleared, 300u);
    return std::make_pair(map_ns, flushes);
  };
  auto priv = cost_of("intel-private");
  auto per_seg = cost_of("per-segment");
  auto batched = cost_of("batched");
  EXPECT_EQ(priv.second, 10u);
  EXPECT_EQ(per_seg.second, 300u);
  EXPECT_EQ(batched.second, 10u);
  EXPECT_GT(per_seg.first, 2 * batched.first);
  EXPECT_GT(batched.first, priv.first);
}

}  // namespace
}  // namespace farm::emu
