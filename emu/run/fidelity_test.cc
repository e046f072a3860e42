// Fidelity: the model against published behaviour (docs/fidelity.md).
// One cost table per platform serves every case; nothing here tunes a run:
// every RunSpec below uses the shipped platform, kernel and workload defaults
// apart from run length and CPU count, and runs without run-to-run noise
// (noise.cv=0): fidelity compares the model's mean behaviour.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "emu/model/platform.h"
#include "emu/run/run.h"
#include "emu/workloads/workload.h"
#include "gtest/gtest.h"

namespace farm::emu {
namespace {

// RunEmulation with noise.cv=0 unless the spec sets it.
absl::StatusOr<RunResult> RunNoiseFree(RunSpec s) {
  s.sets.emplace("noise.cv", "0");
  return RunEmulation(s);
}

double Percent(const RunResult& r, const std::string& sym) {
  for (const ProfileEntry& e : r.profile) {
    if (e.symbol == sym) return e.percent;
  }
  return 0;
}

RunResult MustRun(const RunSpec& s) {
  auto r = RunNoiseFree(s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : RunResult{};
}

RunSpec Memcached16(const std::string& kernel, const std::string& mode) {
  RunSpec s;
  s.platform = "intel-vtd-snb16c";
  s.kernel = kernel;
  s.mode = mode;
  s.workload = "memcached";
  s.params = {{"instances", "16"}, {"seconds", "0.05"}};
  return s;
}

// Seed 001 (Peleg/Morrison, ATC'15 and the 2016 patch series): 16 memcached
// instances on 16 cores; stock v4.6 22% of iommu=off with 61.7% of cycles in
// _raw_spin_lock_irqsave, patched (9257b4a206fc + aa4732406e12) 97% with 1.3%.
TEST(Fidelity, Seed001StockKernelCollapsesOnSpinlocks) {
  RunResult off = MustRun(Memcached16("stock-2016", "off"));
  RunResult stock = MustRun(Memcached16("stock-2016", "lazy"));
  ASSERT_GT(off.throughput, 0);
  double ratio = stock.throughput / off.throughput;
  EXPECT_GE(ratio, 0.15);
  EXPECT_LE(ratio, 0.35);
  ASSERT_FALSE(stock.profile.empty());
  EXPECT_EQ(stock.profile[0].symbol, "_raw_spin_lock_irqsave");
  EXPECT_GE(Percent(stock, "_raw_spin_lock_irqsave"), 40.0);
}

TEST(Fidelity, Seed001PerCpuCachesAndQueuesRecover) {
  RunResult off = MustRun(Memcached16("stock-2016", "off"));
  RunResult patched = MustRun(Memcached16("patched-2016", "lazy"));
  ASSERT_GT(off.throughput, 0);
  EXPECT_GE(patched.throughput / off.throughput, 0.90);
  EXPECT_LE(Percent(patched, "_raw_spin_lock_irqsave"), 5.0);
  // The v4.7 mechanism is exercised, not bypassed: lists fill up and flush.
  EXPECT_GT(patched.counters.fq_full_flushes, 0u);
  EXPECT_GT(patched.counters.inv_global, 0u);
}

// J. Garry (2020), map+unmap per CPU per second on Kunpeng 920, strict, the
// mainline lock-free cmdq (587e6c10a7ce; the "before" column of his
// lock-efficiency patch): 32 CPUs 63187, 64: 19418, 128: 10169.
TEST(Fidelity, GarrySmmuV3CmdqScaling) {
  const std::vector<std::pair<int, double>> published = {{32, 63187}, {64, 19418}, {128, 10169}};
  double prev = 1e18;
  for (const auto& [cpus, value] : published) {
    RunSpec s;
    s.platform = "kunpeng920-smmuv3";
    s.kernel = "latest";
    s.mode = "strict";
    s.workload = "dma-map-bench";
    s.params = {{"threads", std::to_string(cpus)}, {"seconds", "0.002"}};
    RunResult r = MustRun(s);
    EXPECT_GE(r.throughput_per_cpu, value / 2) << cpus << " CPUs";
    EXPECT_LE(r.throughput_per_cpu, value * 2) << cpus << " CPUs";
    // Once the contenders span several nodes (both dies of the socket away
    // from the SMMU at 64, every node at 128) the home node's snoops bring
    // the rows within 1.3x.
    EXPECT_GE(r.throughput_per_cpu, value / 1.3) << cpus << " CPUs";
    EXPECT_LE(r.throughput_per_cpu, value * 1.3) << cpus << " CPUs";
    std::printf("garry %3d CPUs: model %.0f per CPU, published %.0f (x%.2f)\n", cpus,
                r.throughput_per_cpu, value, value / r.throughput_per_cpu);
    EXPECT_LT(r.throughput_per_cpu, prev) << cpus << " CPUs";
    EXPECT_GT(r.counters.cmdq_batches, 0u) << cpus << " CPUs";
    prev = r.throughput_per_cpu;
  }
}

RunSpec KunpengStrict(const std::string& kernel, const std::string& workload,
                      std::map<std::string, std::string> params) {
  RunSpec s;
  s.platform = "kunpeng920-smmuv3";
  s.kernel = kernel;
  s.mode = "strict";
  s.workload = workload;
  s.params = std::move(params);
  return s;
}

// 587e6c10a7ce (v5.4, Will Deacon's lock-free arm_smmu_cmdq_issue_cmdlist())
// was reported as an improvement. A CPU alone on the cmdq words waits on no
// other CPU and, its lines in its own L1, executes the atomics near, so a
// strict unmap costs about what v5.3's per-command cmdq->lock path costs;
// with several contenders the owner gathers their commands. The band, 5%:
// v5.3 writes PROD after the TLBI, so the SMMU runs it while the CPU queues
// the CMD_SYNC, where the lock-free path publishes both with one PROD write
// (+3.5% at 1 thread; the far-atomic round trips this guards against were
// +187%). From 2 threads on, CPUs of one node share the cmdq lines through
// the node's shared cache, and the lock-free path must be faster
// (docs/fidelity.md, "The lock-free cmdq at low thread counts").
TEST(Fidelity, SmmuV3LockfreeCmdqNoSlowerThanSpinlockAtFewThreads) {
  for (int threads : {1, 2, 3, 4, 8}) {
    std::map<std::string, std::string> p = {{"threads", std::to_string(threads)},
                                            {"seconds", "0.005"}};
    RunResult locked = MustRun(KunpengStrict("v5.3", "dma-map-bench", p));
    RunResult lockfree = MustRun(KunpengStrict("587e6c10a7ce", "dma-map-bench", p));
    std::printf(
        "cmdq %d thread(s): v5.3 %.0f pairs/s unmap %.0f ns, 587e6c10a7ce %.0f pairs/s "
        "unmap %.0f ns\n",
        threads, locked.throughput, locked.unmap_latency.mean, lockfree.throughput,
        lockfree.unmap_latency.mean);
    ASSERT_GT(locked.unmap_latency.mean, 0);
    if (threads == 1) {
      // "lock-free on the fast-path": one CPU takes no contended lock either way.
      EXPECT_LE(lockfree.unmap_latency.mean, locked.unmap_latency.mean * 1.05);
    } else {
      // A few CPUs already overlap their insertion with each other's CMD_SYNC
      // wait, which v5.3 made them do one at a time under cmdq.lock.
      EXPECT_GT(lockfree.throughput, locked.throughput * 1.01) << threads;
    }
  }
  // fio 4k randread, one job: the IRQ CPU's strict unmaps are what bound it.
  std::map<std::string, std::string> fio = {{"numjobs", "1"}};
  RunResult locked = MustRun(KunpengStrict("v5.3", "fio-nvme", fio));
  RunResult lockfree = MustRun(KunpengStrict("587e6c10a7ce", "fio-nvme", fio));
  std::printf("cmdq fio-nvme numjobs=1: v5.3 %.0f IOPS, 587e6c10a7ce %.0f IOPS\n",
              locked.throughput, lockfree.throughput);
  EXPECT_GE(lockfree.throughput, locked.throughput * 0.99);
}

// Short runs of every registered workload: the run-length and CPU-count
// parameters it has, shrunk; everything else at its default.
std::map<std::string, std::string> ShortParams(const WorkloadInfo& w) {
  std::map<std::string, std::string> p;
  for (const WorkloadParam& s : w.params) {
    if (s.name == "seconds") p["seconds"] = w.name == "memcached" ? "0.005" : "0.001";
    if (s.name == "warmup") p["warmup"] = "0.005";
    if (s.name == "runtime_ms") p["runtime_ms"] = "5";
    // Lazy's IOVA caches fill over its first flush-queue cycles (one depot
    // miss per full flush for ~40 ms on kunpeng920-smmuv3 at one job); the
    // ordering is a steady-state claim, so fio measures after them.
    if (s.name == "ramp_ms" && w.name == "fio-nvme") p["ramp_ms"] = "40";
    if (s.name == "threads") p["threads"] = "4";
    if (s.name == "instances") p["instances"] = "8";
    if (s.name == "size") p["size"] = "4m";
  }
  return p;
}

// arm_smmu_cmdq_issue_cmdlist() retries a failed cmpxchg with the word it
// returned (llq.val = old), so a retrier on a busy home node is no staler
// than a newcomer and nobody waits on the reservation for long. 32 fio jobs
// on 8 NVMe queues: when the model let a retrier keep the word of its
// attempt's issue, one unmap waited 11.6 ms and the run gave 168,982 IOPS.
TEST(Fidelity, SmmuV3CmdqRetrierIsNotStarved) {
  RunResult r = MustRun(KunpengStrict("latest", "fio-nvme", {{"numjobs", "32"}, {"devices", "8"}}));
  std::printf("cmdq fio-nvme numjobs=32 devices=8: %.0f IOPS, unmap max %.0f ns\n", r.throughput,
              r.unmap_latency.max);
  EXPECT_GT(r.throughput, 1e6);
  EXPECT_LT(r.unmap_latency.max, 100e3);
}

// Strict is never faster than lazy, lazy never faster than off, for every
// platform x kernel x workload the tree has (combinations a platform cannot
// run, e.g. an NVMe workload without an NVMe device, are skipped).
TEST(Fidelity, ModeOrderingHoldsEverywhere) {
  int compared = 0;
  for (const Platform& platform : AllPlatforms()) {
    for (const char* kernel : {"latest", "stock-2016", "patched-2016"}) {
      for (const WorkloadInfo& w : AllWorkloads()) {
        double tput[3] = {0, 0, 0};
        bool runnable = true;
        int i = 0;
        for (const char* mode : {"strict", "lazy", "off"}) {
          RunSpec s;
          s.platform = platform.name;
          s.kernel = kernel;
          s.mode = mode;
          s.workload = w.name;
          s.params = ShortParams(w);
          auto r = RunNoiseFree(s);
          if (!r.ok()) {
            // Only "this platform lacks what the workload needs" may skip.
            EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
                << platform.name << " " << kernel << " " << w.name << ": " << r.status();
            runnable = false;
            break;
          }
          tput[i++] = r->throughput;
        }
        if (!runnable) continue;
        ++compared;
        // Exact, for every workload: the storage/network workloads measure a
        // steady-state window after a warm-up (ramp_ms) by the device work
        // done in it, so device-bound modes tie bit for bit instead of
        // showing where the window cut the pipeline (docs/fidelity.md).
        // The 2016 kernels' deferred flushing (the global list, then
        // aa4732406e12's per-CPU lists) was intel-iommu's own: dma-iommu, the
        // Arm SMMUs' path, had no lazy mode before v4.14. There "lazy" at
        // those kernels composes intel's lists with dma-iommu's find_iova() +
        // __free_iova(), which no kernel shipped, and its flushing CPU frees
        // every CPU's struct iova from their caches under iova_rbtree_lock
        // (docs/fidelity.md, "Mode ordering"): strict is not compared there.
        const std::string& type = platform.settings.at("iommu.type");
        const bool shipped_lazy =
            std::string(kernel) == "latest" || (type != "smmuv3" && type != "mmu500");
        if (shipped_lazy) {
          EXPECT_LE(tput[0], tput[1]) << platform.name << " " << kernel << " " << w.name;
        }
        EXPECT_LE(tput[1], tput[2]) << platform.name << " " << kernel << " " << w.name;
      }
    }
  }
  // 4 platforms x 3 kernels x (dma-map-bench + memcached) at the very least.
  EXPECT_GE(compared, 24);
}

}  // namespace
}  // namespace farm::emu
