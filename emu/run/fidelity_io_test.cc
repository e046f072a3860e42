// Reproductions of seeds 000, 002 and 004 from the commit catalog alone: the
// platform cost tables, the catalog's per-commit keys and the workloads, with
// nothing tuned inside a workload. The figures printed here are the ones in
// docs/fidelity.md ("Seeds 000 and 002 from the commit catalog").
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "emu/model/catalog.h"
#include "emu/model/irq_affinity.h"
#include "emu/model/model_config.h"
#include "emu/run/run.h"

namespace farm::emu {
namespace {

// One run at a catalog commit, through the run driver.
absl::StatusOr<RunResult> RunAtCommit(const std::string& platform, const std::string& commit,
                                      const std::string& mode, const std::string& workload,
                                      const std::map<std::string, std::string>& params) {
  RunSpec spec;
  spec.platform = platform;
  spec.kernel = commit;
  spec.mode = mode;
  spec.workload = workload;
  spec.params = params;
  spec.sets = {{"noise.cv", "0"}};  // the model's mean behaviour, no run-to-run noise
  return RunEmulation(spec);
}

// Seed 000's NFS server, from its 65f746e8285f figures: the turnaround that
// gives 12 processes 4.73 GB/s of writes and 5.92 GB/s of reads on the
// unregressed kernel. Everything after that is the IOMMU model's prediction.
const std::map<std::string, std::string> kSeed000 = {
    {"threads", "12"},       {"record", "256k"},         {"size", "1g"},
    {"tests", "write,read"}, {"server_write_us", "560"}, {"server_read_us", "425"},
};

struct Iozone {
  double write = 0, read = 0, map30_ns = 0;
};

Iozone RunSeed000(const std::string& commit, const std::string& mode) {
  absl::StatusOr<RunResult> r =
      RunAtCommit("intel-vtd-2s12c", commit, mode, "iozone-nfsrdma", kSeed000);
  EXPECT_TRUE(r.ok()) << commit << ": " << r.status();
  if (!r.ok()) return {};
  Iozone z;
  z.write = r->extra.at("write_kb_s");
  z.read = r->extra.at("read_kb_s");
  z.map30_ns =
      r->extra.count("map_sg_full_chunk_mean_ns") ? r->extra.at("map_sg_full_chunk_mean_ns") : 0;
  std::printf("seed000 %-5s %-14s writers %9.0f kB/s readers %9.0f kB/s map_sg(30) %6.1f us\n",
              mode.c_str(), commit.c_str(), z.write, z.read, z.map30_ns / 1000);
  return z;
}

// Every key the shipped catalog sets is a model key with a valid value.
TEST(ShippedCatalogTest, KeysAreRegistryKeys) {
  absl::StatusOr<std::string> path = DefaultCatalogPath();
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<Catalog> c = Catalog::LoadFile(*path, CheckModelKey);
  ASSERT_TRUE(c.ok()) << c.status();
  // ... and every commit's accumulated state resolves to a model.
  for (const CatalogCommit& commit : c->commits()) {
    absl::StatusOr<ResolvedCommit> r = c->Resolve(commit.id);
    ASSERT_TRUE(r.ok()) << commit.id;
    absl::StatusOr<ModelConfig> cfg = ModelConfig().Apply(r->settings);
    ASSERT_TRUE(cfg.ok()) << commit.id << ": " << cfg.status();
    EXPECT_TRUE(Model::From(*cfg).ok()) << commit.id;
  }
}

TEST(Seed000Test, BisectedCommitsReproduceTheReportedRatios) {
  Iozone base = RunSeed000("65f746e8285f", "strict");
  Iozone geom = RunSeed000("c062db039f40", "strict");
  Iozone conv = RunSeed000("c588072bba6b", "strict");
  ASSERT_GT(base.write, 0);
  ASSERT_GT(base.read, 0);
  std::printf("seed000 ratios: c062 writers %.3f readers %.3f; c588 writers %.3f readers %.3f\n",
              geom.write / base.write, geom.read / base.read, conv.write / base.write,
              conv.read / base.read);
  EXPECT_NEAR(geom.write / base.write, 0.92, 0.08);
  EXPECT_NEAR(geom.read / base.read, 0.91, 0.08);
  EXPECT_NEAR(conv.write / base.write, 0.80, 0.08);
  EXPECT_NEAR(conv.read / base.read, 0.72, 0.08);
}

TEST(Seed000Test, ThirtySegmentMapSgCostsMatchTheTrace) {
  Iozone before = RunSeed000("65f746e8285f", "strict");
  Iozone after = RunSeed000("c588072bba6b", "strict");
  // Seed 000's function_graph trace: ~10 us in v5.10, ~63 us in v5.11-rc;
  // the issue asks for about 10 and about 60, within a factor of 2.
  EXPECT_GE(before.map30_ns, 10000 / 2);
  EXPECT_LE(before.map30_ns, 10000 * 2);
  EXPECT_GE(after.map30_ns, 60000 / 2);
  EXPECT_LE(after.map30_ns, 60000 * 2);
}

TEST(Seed000Test, V512FixesRecoverThroughput) {
  Iozone base = RunSeed000("65f746e8285f", "strict");
  for (const char* id : {"933fcd01e97e", "v5.12", "v5.15", "v6.8"}) {
    Iozone z = RunSeed000(id, "strict");
    EXPECT_GE(z.write / base.write, 0.95) << id;
    EXPECT_GE(z.read / base.read, 0.95) << id;
  }
}

TEST(Seed000Test, NoRegressionWithoutTheIommu) {
  Iozone base = RunSeed000("65f746e8285f", "off");
  Iozone conv = RunSeed000("c588072bba6b", "off");
  EXPECT_GE(conv.write / base.write, 0.99);
  EXPECT_GE(conv.read / base.read, 0.99);
}

// Seed 002: John Garry's Kunpeng 920, NVMe queue IRQ affinity as he printed it.
constexpr char kSeed002Irqs[] = R"(-eirq 298, cpu list 67, effective list 67
-eirq 299, cpu list 32-38, effective list 35
-eirq 300, cpu list 39-45, effective list 39
-eirq 301, cpu list 46-51, effective list 46
-eirq 302, cpu list 52-57, effective list 52
-eirq 303, cpu list 58-63, effective list 60
-eirq 304, cpu list 64-69, effective list 68
-eirq 305, cpu list 70-75, effective list 70
-eirq 306, cpu list 76-80, effective list 76
-eirq 307, cpu list 81-85, effective list 84
-eirq 308, cpu list 86-90, effective list 86
-eirq 309, cpu list 91-95, effective list 92
-eirq 310, cpu list 96-101, effective list 100
-eirq 311, cpu list 102-107, effective list 102
-eirq 312, cpu list 108-112, effective list 108
-eirq 313, cpu list 113-117, effective list 116
-eirq 314, cpu list 118-122, effective list 118
-eirq 315, cpu list 123-127, effective list 124
-eirq 316, cpu list 0-5, effective list 4
-eirq 317, cpu list 6-11, effective list 6
-eirq 318, cpu list 12-16, effective list 12
-eirq 319, cpu list 17-21, effective list 20
-eirq 320, cpu list 22-26, effective list 22
-eirq 321, cpu list 27-31, effective list 28
)";

// Seed 002's IOPS per CPU (John Garry's Kunpeng 920, v5.14-rc2): printed
// beside the model's, never asserted (the seed's spread is not ordered by
// node distance and its author says nodes make no huge difference).
const std::map<int, double> kSeed002Iops = {
    {0, 479000}, {4, 307000}, {32, 566000}, {64, 488000}, {96, 508000}};

std::map<int, double> RunSeed002(const IrqAffinity& irq) {
  std::map<int, double> iops;
  for (int cpu : {0, 4, 32, 64, 96}) {
    absl::StatusOr<RunResult> r = RunAtCommit("kunpeng920-smmuv3", "v5.14", "strict", "fio-nvme",
                                              {{"rw", "randread"},
                                               {"bs", "4k"},
                                               {"ioengine", "io_uring"},
                                               {"iodepth", "64"},
                                               {"numjobs", "1"},
                                               {"cpus_allowed", std::to_string(cpu)},
                                               {"irq_affinity", irq.ToString()},
                                               {"runtime_ms", "5"}});
    EXPECT_TRUE(r.ok()) << r.status();
    iops[cpu] = r.ok() ? r->throughput : 0;
  }
  double best = 0;
  for (const auto& [cpu, v] : iops) best = std::max(best, v);
  std::printf("seed002 | CPU | node | IRQ CPU | model IOPS | /best | seed IOPS | /best |\n");
  for (const auto& [cpu, v] : iops) {
    std::printf("seed002 | %3d | %d | %3d | %9.0f | %.3f | %6.0f | %.3f |\n", cpu, cpu / 32,
                irq.IrqCpuFor(cpu), v, v / best, kSeed002Iops.at(cpu),
                kSeed002Iops.at(cpu) / 566000.0);
  }
  return iops;
}

TEST(Seed002Test, CpuServicingTheCompletionIrqFallsBehind) {
  absl::StatusOr<IrqAffinity> irq = IrqAffinity::ParseProcText(kSeed002Irqs, /*skip_first=*/true);
  ASSERT_TRUE(irq.ok()) << irq.status();
  std::map<int, double> iops = RunSeed002(*irq);
  double best = 0;
  for (const auto& [cpu, v] : iops) best = std::max(best, v);
  std::printf("seed002 cpu4/best = %.3f\n", iops[4] / best);
  EXPECT_EQ(irq->IrqCpuFor(4), 4);
  EXPECT_LE(iops[4], 0.75 * best);
  for (int cpu : {0, 32, 64, 96}) EXPECT_GT(iops[cpu], iops[4]) << cpu;
}

// The per-node spread the model predicts with the NVMe and its SMMU on node 2
// (kunpeng920-smmuv3: nvme0 node 2, iommu.node 2): every CPU's completion IRQ
// lands on its own node, so what differs between nodes is the distance from
// that node to the device and the SMMU (SQE/CQE lines, the MSI, the cmdq
// words' far atomics). Same node >= same socket > other socket; nodes 0 and 1
// are both one socket away and tie. This is the model's prediction, not seed
// 002's ordering (which is 1 > 3 > 2 > 0).
TEST(Seed002Test, PerNodeSpreadFollowsDistanceToTheDeviceNode) {
  absl::StatusOr<IrqAffinity> irq = IrqAffinity::ParseProcText(kSeed002Irqs, /*skip_first=*/true);
  ASSERT_TRUE(irq.ok()) << irq.status();
  std::map<int, double> iops = RunSeed002(*irq);
  for (int cpu : {0, 32, 64, 96}) {
    ASSERT_GT(iops[cpu], 0) << cpu;
    // The IRQ CPU sits on the submitting CPU's node for every node.
    EXPECT_EQ(irq->IrqCpuFor(cpu) / 32, cpu / 32) << cpu;
  }
  EXPECT_GT(iops[64], iops[96]);  // node 2 (device) > node 3 (same socket)
  EXPECT_GT(iops[96], iops[0]);   // same socket > other socket
  EXPECT_EQ(iops[0], iops[32]);   // nodes 0 and 1: same distance class
}

// fio without cpus_allowed leaves its jobs to the scheduler, which spreads
// them over idle CPUs: 32 jobs on 8 NVMe run on 32 CPUs, not on one. In
// passthrough, so that what is measured is the placement (docs/fidelity.md
// "fio placement" gives the strict figures).
TEST(FioPlacementTest, JobsWithoutCpusAllowedSpreadOverIdleCpus) {
  std::map<std::string, std::string> p = {{"numjobs", "32"}, {"devices", "8"}};
  absl::StatusOr<RunResult> spread =
      RunAtCommit("kunpeng920-smmuv3", "latest", "passthrough", "fio-nvme", p);
  ASSERT_TRUE(spread.ok()) << spread.status();
  p["cpus_allowed"] = "64";
  absl::StatusOr<RunResult> one =
      RunAtCommit("kunpeng920-smmuv3", "latest", "passthrough", "fio-nvme", p);
  ASSERT_TRUE(one.ok()) << one.status();
  std::printf("fio 32 jobs / 8 nvme: no cpus_allowed %.0f IOPS, cpus_allowed=64 %.0f IOPS\n",
              spread->throughput, one->throughput);
  EXPECT_GT(spread->throughput, 2 * one->throughput);
  // One job per CPU: 32 distinct CPUs in the jobs' fio options (those whose
  // CPU took interrupts were moved to idle ones).
  int jobs_on_distinct_cpus = 0;
  for (int cpu = 0; cpu < 128; ++cpu) {
    if (spread->kernel_output.find("\"cpus_allowed\": \"" + std::to_string(cpu) + "\"") !=
        std::string::npos) {
      ++jobs_on_distinct_cpus;
    }
  }
  EXPECT_EQ(jobs_on_distinct_cpus, 32);
  // With no lone job on a CPU (4 per CPU of 0-7) nothing moves: split, which
  // pins, gives the same placement.
  p["cpus_allowed"] = "0-7";
  absl::StatusOr<RunResult> shared =
      RunAtCommit("kunpeng920-smmuv3", "latest", "strict", "fio-nvme", p);
  p["cpus_allowed_policy"] = "split";
  absl::StatusOr<RunResult> split =
      RunAtCommit("kunpeng920-smmuv3", "latest", "strict", "fio-nvme", p);
  ASSERT_TRUE(shared.ok() && split.ok());
  EXPECT_EQ(shared->throughput, split->throughput);
  // One job per CPU of 0-15 on 8 devices: shared lets the balancer move the
  // jobs whose CPUs take interrupts; split keeps them there, slower.
  p = {{"numjobs", "8"}, {"devices", "8"}, {"cpus_allowed", "0-15"}};
  absl::StatusOr<RunResult> moved =
      RunAtCommit("kunpeng920-smmuv3", "latest", "passthrough", "fio-nvme", p);
  p["cpus_allowed_policy"] = "split";
  absl::StatusOr<RunResult> pinned =
      RunAtCommit("kunpeng920-smmuv3", "latest", "passthrough", "fio-nvme", p);
  ASSERT_TRUE(moved.ok() && pinned.ok());
  std::printf("8 jobs / 8 nvme on 0-15: shared %.0f IOPS, split %.0f IOPS\n", moved->throughput,
              pinned->throughput);
  EXPECT_GT(moved->throughput, 1.2 * pinned->throughput);
}

// Seed 004 (Ray Jui, MMU-500 8-core board, 50G NIC behind the SMMU, NVMe
// SSDs on root complexes without IOMMU): strict mode, v4.12 against the
// io-pgtable lock removal series (v4.13), and iommu off.
double LockWait(const RunResult& r, const std::string& lock) {
  for (const LockReport& l : r.locks) {
    if (l.name == lock) return static_cast<double>(l.wait_ns);
  }
  return 0;
}

RunResult RunSeed004(const std::string& commit, const std::string& mode,
                     const std::string& workload,
                     const std::map<std::string, std::string>& params) {
  absl::StatusOr<RunResult> r = RunAtCommit("arm-mmu500-8c", commit, mode, workload, params);
  EXPECT_TRUE(r.ok()) << commit << ": " << r.status();
  if (!r.ok()) return {};
  std::printf("seed004 %-12s %-6s %-12s %-28s %10.2f %s pgtbl_lock wait %.2f ms\n", commit.c_str(),
              mode.c_str(), workload.c_str(),
              (params.count("direction") ? params.at("direction") + " x" + params.at("sessions")
                                         : std::string("4k randread, 8 jobs"))
                  .c_str(),
              r->throughput, r->throughput_unit.c_str(), LockWait(*r, "pgtbl_lock") / 1e6);
  return *r;
}

// "performance has improved significantly with this patch series ... However,
// it is still off, compared to the test runs without the IOMMU": TX and RX
// with 4 and 8 sessions, each on its own CPU.
TEST(Seed004Test, LockRemovalImprovesTcpAtFourAndEightSessions) {
  for (const char* dir : {"tx", "rx"}) {
    for (const char* sessions : {"4", "8"}) {
      std::map<std::string, std::string> p = {{"direction", dir}, {"sessions", sessions}};
      RunResult before = RunSeed004("v4.12", "strict", "tcp-stream", p);
      RunResult lockless_pgtable = RunSeed004("2c3d273eabe8", "strict", "tcp-stream", p);
      RunResult after = RunSeed004("v4.13", "strict", "tcp-stream", p);
      RunResult off = RunSeed004("v4.12", "off", "tcp-stream", p);
      SCOPED_TRACE(std::string(dir) + " x" + sessions);
      // v4.12: arm_smmu_unmap() holds pgtbl_lock over the TLBI writes and
      // the TLB sync, so the sessions queue on it.
      EXPECT_GT(LockWait(before, "pgtbl_lock"), 0);
      // 2c3d273eabe8 alone makes io-pgtable-arm lock-free, but the driver
      // still takes its lock until 523d7423e21b: nothing changes yet.
      EXPECT_EQ(lockless_pgtable.throughput, before.throughput);
      // v4.13 on MMU-500: "there shouldn't be any locks left".
      EXPECT_EQ(LockWait(after, "pgtbl_lock"), 0);
      EXPECT_EQ(LockWait(after, "smmu_domain->cb_lock"), 0);
      EXPECT_GT(after.throughput, 1.3 * before.throughput);
      EXPECT_LE(after.throughput, off.throughput);
      // iommu off is bound by the 50G link (the platform's NIC rate).
      EXPECT_NEAR(off.throughput, 50.0, 0.5);
    }
  }
}

// The NVMf target, fio 4k random read with 8 jobs over 4 SSDs: the SSDs are
// not behind the IOMMU, so only the NIC's half of the mappings translate.
TEST(Seed004Test, LockRemovalImprovesNvmfTargetAndOnlyTheNicTranslates) {
  std::map<std::string, std::string> p = {
      {"bs", "4k"}, {"jobs", "8"}, {"ssds", "4"}, {"rw", "read"}};
  RunResult before = RunSeed004("v4.12", "strict", "nvmf-target", p);
  RunResult after = RunSeed004("v4.13", "strict", "nvmf-target", p);
  RunResult off = RunSeed004("v4.12", "off", "nvmf-target", p);
  EXPECT_GT(after.throughput, 1.3 * before.throughput);
  EXPECT_LT(after.throughput, off.throughput);
  ASSERT_GT(after.counters.dma_map_sgs, 0u);
  EXPECT_NEAR(static_cast<double>(after.counters.iommu_map_calls) /
                  static_cast<double>(after.counters.dma_map_sgs),
              0.5, 0.01);
  // The SSDs translated as well (the group's type set to DMA): every
  // mapping goes through the SMMU and the target gets slower.
  RunResult both = RunSeed004("v4.13+group.nvme.type=translated", "strict", "nvmf-target", p);
  EXPECT_NEAR(static_cast<double>(both.counters.iommu_map_calls) /
                  static_cast<double>(both.counters.dma_map_sgs),
              1.0, 0.01);
  EXPECT_LT(both.throughput, after.throughput);
}

}  // namespace
}  // namespace farm::emu
