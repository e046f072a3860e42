// The storage and network workloads' own logic, apart from the IOMMU model:
// they run through RunEmulation on fixed-cost DMA paths (per call plus per
// segment, unmap optionally slow), plus the parsers they share.
#include <map>
#include <memory>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "emu/iommu/dma_path.h"
#include "emu/model/irq_affinity.h"
#include "emu/model/platform.h"
#include "emu/run/run.h"
#include "emu/workloads/workload.h"

namespace farm::emu {
namespace {

using ::testing::HasSubstr;

class FixedCostDma final : public DmaPath {
 public:
  FixedCostDma(Time call, Time per_seg, Time unmap)
      : call_(call), per_seg_(per_seg), unmap_(unmap) {}
  Task<uint64_t> MapSg(Cpu& cpu, int, const SgSegment*, int nents, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaMapSg, call_ + per_seg_ * nents);
    co_return ++next_;
  }
  Task<void> UnmapSg(Cpu& cpu, int, uint64_t, const SgSegment*, int, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaUnmapPage, unmap_);
    co_return;
  }
  Task<uint64_t> MapPage(Cpu& cpu, int, uint64_t, uint64_t, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaMapPage, call_ + per_seg_);
    co_return ++next_;
  }
  Task<void> UnmapPage(Cpu& cpu, int, uint64_t, uint64_t, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaUnmapPage, unmap_);
    co_return;
  }

 private:
  Time call_, per_seg_, unmap_;
  uint64_t next_ = 0;
};

DmaPathFactory Fixed(Time call, Time per_seg, Time unmap) {
  return [=] { return std::make_unique<FixedCostDma>(call, per_seg, unmap); };
}

// intel-vtd-2s12c: 2 sockets x 12 CPUs, devices on node 0. kunpeng920-smmuv3:
// 128 CPUs on 4 nodes (2 sockets), the NVMe on node 2.
constexpr char kTwoSocket[] = "intel-vtd-2s12c";
constexpr char kFourNode128[] = "kunpeng920-smmuv3";

absl::StatusOr<RunResult> RunFixed(const std::string& workload, const std::string& platform,
                                   const std::map<std::string, std::string>& params,
                                   const DmaPathFactory& dma, uint64_t seed) {
  RunSpec s;
  s.platform = platform;
  s.mode = "off";  // the fake is the whole DMA cost
  s.workload = workload;
  s.params = params;
  s.seed = seed;
  s.sets = {{"noise.cv", "0"}};  // the workload's logic alone, no run-to-run noise
  return RunEmulation(s, dma);
}

TEST(ParseTest, SizesAndCpuLists) {
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("256K"), 262144u);
  EXPECT_EQ(*ParseSize("1g"), 1ULL << 30);
  EXPECT_EQ(*ParseSize("120kb"), 120u << 10);
  EXPECT_FALSE(ParseSize("lots").ok());
  EXPECT_EQ(*ParseCpuList("0,4,32-34"), (std::vector<int>{0, 4, 32, 33, 34}));
  EXPECT_FALSE(ParseCpuList("5-3").ok());
}

TEST(IrqAffinityTest, ParsesSeed002Listing) {
  const char* text =
      "-eirq 298, cpu list 67, effective list 67\n"
      "-eirq 299, cpu list 32-38, effective list 35\n"
      "-eirq 316, cpu list 0-5, effective list 4\n"
      "-eirq 317, cpu list 6-11, effective list 6\n";
  auto a = IrqAffinity::ParseProcText(text, /*skip_first=*/true);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->queues().size(), 3u);
  EXPECT_EQ(a->IrqCpuFor(0), 4);
  EXPECT_EQ(a->IrqCpuFor(4), 4);
  EXPECT_EQ(a->IrqCpuFor(33), 35);
  EXPECT_EQ(a->IrqCpuFor(100), 100);  // unmapped: itself
  auto b = IrqAffinity::Parse(a->ToString());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ToString(), "32-38@35;0-5@4;6-11@6");
  EXPECT_THAT(IrqAffinity::Parse("0-5").status().message(), HasSubstr("<cpu list>@"));
}

TEST(IrqAffinityTest, SpreadCoversEveryCpuOnce) {
  const Platform* p = *FindPlatform(kFourNode128);
  IrqAffinity a = IrqAffinity::Spread(p->topology, 23);
  EXPECT_EQ(a.queues().size(), 23u);
  for (int c = 0; c < 128; ++c) EXPECT_GE(a.QueueOf(c), 0) << c;
}

TEST(IozoneTest, SlowerMapSgLowersThroughputAndPrintsIozoneReport) {
  std::map<std::string, std::string> params = {
      {"threads", "12"}, {"record", "256k"}, {"tests", "write,read"}, {"sim_records", "16"}};
  auto fast = RunFixed("iozone-nfsrdma", kTwoSocket, params, Fixed(2000, 250, 3000), 1);
  auto slow = RunFixed("iozone-nfsrdma", kTwoSocket, params, Fixed(2000, 1800, 3000), 1);
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_LT(slow->extra.at("write_kb_s"), fast->extra.at("write_kb_s"));
  EXPECT_LT(slow->extra.at("read_kb_s"), fast->extra.at("read_kb_s"));
  EXPECT_THAT(fast->kernel_output, HasSubstr("Children see throughput for 12 initial writers"));
  EXPECT_THAT(fast->kernel_output, HasSubstr("Children see throughput for 12 readers"));
  EXPECT_NEAR(fast->extra.at("map_sg_full_chunk_mean_ns"), 2000 + 30 * 250, 1);
}

TEST(IozoneTest, RejectsUnknownParamsAndTests) {
  auto r = RunFixed("iozone-nfsrdma", kTwoSocket, {{"thread", "12"}}, Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("unknown parameter 'thread'"));
  r = RunFixed("iozone-nfsrdma", kTwoSocket, {{"tests", "write,fsync"}}, Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("unknown test 'fsync'"));
  r = RunFixed("iozone-nfsrdma", kTwoSocket, {{"record", "big"}}, Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("--param record=big"));
}

TEST(FioNvmeTest, CpuThatTakesTheIrqIsSlower) {
  auto run = [&](int cpu) {
    auto r = RunFixed("fio-nvme", kFourNode128,
                      {{"cpus_allowed", std::to_string(cpu)},
                       {"runtime_ms", "2"},
                       {"irq_affinity", "0-5@4;32-38@35"}},
                      Fixed(300, 50, 900), 7);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->throughput : 0.0;
  };
  double cpu0 = run(0), cpu4 = run(4);
  EXPECT_GT(cpu0, 0);
  EXPECT_LT(cpu4, 0.8 * cpu0);
}

TEST(FioNvmeTest, DeviceCeilingCapsIops) {
  auto r = RunFixed(
      "fio-nvme", kFourNode128,
      {{"cpus_allowed", "64-71"}, {"numjobs", "8"}, {"dev_iops", "200000"}, {"runtime_ms", "2"}},
      Fixed(100, 10, 100), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->throughput, 200000 * 1.02);
  EXPECT_GT(r->throughput, 200000 * 0.8);
  EXPECT_THAT(r->kernel_output, HasSubstr("\"clat_ns\""));
}

// Records, per CPU that maps, the CPUs that unmap its buffers: fio-nvme
// unmaps in the completion interrupt, so that is its job's IRQ CPU.
class UnmapCpuRecorder final : public DmaPath {
 public:
  using IrqCpus = std::map<int, std::set<int>>;
  explicit UnmapCpuRecorder(std::shared_ptr<IrqCpus> out) : out_(std::move(out)) {}
  Task<uint64_t> MapSg(Cpu& cpu, int, const SgSegment*, int, DmaDir) override {
    co_return Record(cpu);
  }
  Task<void> UnmapSg(Cpu& cpu, int, uint64_t dma, const SgSegment*, int, DmaDir) override {
    (*out_)[mapped_on_[dma]].insert(cpu.cpu());
    co_return;
  }
  Task<uint64_t> MapPage(Cpu& cpu, int, uint64_t, uint64_t, DmaDir) override {
    co_return Record(cpu);
  }
  Task<void> UnmapPage(Cpu& cpu, int, uint64_t dma, uint64_t, DmaDir) override {
    (*out_)[mapped_on_[dma]].insert(cpu.cpu());
    co_return;
  }

 private:
  uint64_t Record(Cpu& cpu) {
    cpu.Charge(Sym::kIommuDmaMapPage, 100);
    mapped_on_[++next_] = cpu.cpu();
    return next_;
  }
  std::shared_ptr<IrqCpus> out_;
  std::map<uint64_t, int> mapped_on_;
  uint64_t next_ = 0;
};

// Each NVMe has its own vectors: on kunpeng920-smmuv3 the four jobs (CPUs
// 0-3, all in queue mask 0-5) of four devices complete on four different
// CPUs, where one shared map sent them all to CPU 4.
TEST(FioNvmeTest, EachDeviceHasItsOwnIrqCpus) {
  auto irq_cpus = std::make_shared<UnmapCpuRecorder::IrqCpus>();
  auto r = RunFixed(
      "fio-nvme", kFourNode128,
      {{"devices", "4"}, {"numjobs", "4"}, {"runtime_ms", "1"}, {"ramp_ms", "0"}},
      [&] { return std::make_unique<UnmapCpuRecorder>(irq_cpus); }, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<int> used;
  for (int job_cpu = 0; job_cpu < 4; ++job_cpu) {
    ASSERT_EQ((*irq_cpus)[job_cpu].size(), 1u) << "job on CPU " << job_cpu;
    used.insert(*(*irq_cpus)[job_cpu].begin());
  }
  EXPECT_EQ(used, (std::set<int>{4, 5, 0, 1}));  // the GIC ITS's picks, irq_affinity_test.cc
}

// The same through the whole model in passthrough: two devices' jobs
// complete on two IRQ CPUs and double one job; four go well past one shared
// IRQ CPU's ceiling, short of 4x because two of the four vectors of mask 0-5
// land on job CPUs (CPUs 0 and 1 run a job and take another device's IRQs).
TEST(FioNvmeTest, IopsScaleWithDevicesInPassthrough) {
  auto iops = [](int n) {
    RunSpec s;
    s.platform = kFourNode128;
    s.mode = "passthrough";
    s.workload = "fio-nvme";
    s.params = {{"devices", std::to_string(n)},
                {"numjobs", std::to_string(n)},
                {"runtime_ms", "2"},
                {"ramp_ms", "1"}};
    s.sets = {{"noise.cv", "0"}};
    absl::StatusOr<RunResult> r = RunEmulation(s);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->throughput : 0.0;
  };
  const double one = iops(1), two = iops(2), four = iops(4);
  ASSERT_GT(one, 0);
  EXPECT_GT(two, 1.95 * one);
  EXPECT_GT(four, 2.5 * one);
}

TEST(OtherWorkloadsTest, TcpStreamAndNvmfTargetRun) {
  auto tcp = RunFixed("tcp-stream", kFourNode128, {{"direction", "rx"}, {"runtime_ms", "1"}},
                      Fixed(200, 20, 300), 1);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_GT(tcp->throughput, 0);
  EXPECT_LE(tcp->throughput, 100.5);
  auto nvmf = RunFixed("nvmf-target", kFourNode128, {{"runtime_ms", "1"}}, Fixed(200, 20, 300), 1);
  ASSERT_TRUE(nvmf.ok()) << nvmf.status();
  EXPECT_GT(nvmf->throughput, 0);
}

// Records memcached's DMA-API calls by size and direction, at no cost.
struct DmaCalls {
  std::map<uint64_t, int> rx_maps, rx_unmaps, tx_maps, tx_unmaps;  // bytes -> calls
};
class CountingDma final : public DmaPath {
 public:
  explicit CountingDma(std::shared_ptr<DmaCalls> calls) : calls_(std::move(calls)) {}
  Task<uint64_t> MapSg(Cpu&, int, const SgSegment*, int, DmaDir) override { co_return ++next_; }
  Task<void> UnmapSg(Cpu&, int, uint64_t, const SgSegment*, int, DmaDir) override { co_return; }
  Task<uint64_t> MapPage(Cpu&, int, uint64_t, uint64_t size, DmaDir dir) override {
    ++(dir == DmaDir::kFromDevice ? calls_->rx_maps : calls_->tx_maps)[size];
    co_return (++next_) << 16;
  }
  Task<void> UnmapPage(Cpu&, int, uint64_t, uint64_t size, DmaDir dir) override {
    ++(dir == DmaDir::kFromDevice ? calls_->rx_unmaps : calls_->tx_unmaps)[size];
    co_return;
  }

 private:
  std::shared_ptr<DmaCalls> calls_;
  uint64_t next_ = 0;
};

// Where an instance's mapped RX pages and the reply's mappings come from,
// counted by size: one 32 KiB RX page per 21 fragments of 1,536 bytes,
// unmapped after its last one; the GET reply's linear part (headers and the
// 1,110 bytes of "VALUE <key> 0 1024\r\n<value>\r\nEND\r\n"); the 74-byte
// SET reply inlined. No warm-up: the ring's initial fill is counted.
TEST(MemcachedTest, DmaCallsFollowTheMlx4DriversRequestShape) {
  auto calls = std::make_shared<DmaCalls>();
  auto r = RunFixed(
      "memcached", "intel-vtd-snb16c",
      {{"instances", "2"},
       {"seconds", "0.01"},
       {"warmup", "0"},
       {"rx_ring", "1024"},
       {"rx_frag_stride", "1536"},
       {"rx_page_bytes", "32768"},
       {"inline_thold", "104"},
       {"tx_linear_bytes", "1424"}},
      [calls] { return std::make_unique<CountingDma>(calls); }, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const int requests = static_cast<int>(r->operations);
  const int sets = static_cast<int>(r->extra.at("set_requests"));
  ASSERT_GT(requests, 1000);
  ASSERT_GT(sets, 0);
  EXPECT_EQ(calls->tx_maps, (std::map<uint64_t, int>{{66 + 1110, requests - sets}}));
  EXPECT_EQ(calls->tx_unmaps, calls->tx_maps);
  ASSERT_EQ(calls->rx_maps.size(), 1u);
  ASSERT_EQ(calls->rx_unmaps.size(), 1u);
  EXPECT_EQ(calls->rx_maps.begin()->first, 32768u);
  EXPECT_EQ(calls->rx_unmaps.begin()->first, 32768u);
  // Each instance: ceil(1024 / 21) pages for the initial ring, then one per
  // 21 refills; one unmap per 21 completed fragments (+-1 each for where its
  // last request fell in a page).
  EXPECT_NEAR(calls->rx_maps.begin()->second, 2 * 49 + requests / 21.0, 2);
  EXPECT_NEAR(calls->rx_unmaps.begin()->second, requests / 21.0, 2);
}

// The defaults, the request shape seed 001's platform costs are calibrated
// with: one RX buffer per packet, GET replies in two mappings (headers with
// the key, then the rest), SET replies mapped.
TEST(MemcachedTest, DefaultShapeMapsThreePairsPerGetAndTwoPerSet) {
  auto calls = std::make_shared<DmaCalls>();
  auto r = RunFixed(
      "memcached", "intel-vtd-snb16c", {{"instances", "2"}, {"seconds", "0.01"}, {"warmup", "0"}},
      [calls] { return std::make_unique<CountingDma>(calls); }, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  const int requests = static_cast<int>(r->operations);
  const int sets = static_cast<int>(r->extra.at("set_requests"));
  ASSERT_GT(sets, 0);
  EXPECT_EQ(calls->tx_maps,
            (std::map<uint64_t, int>{
                {66 + 8, sets}, {66 + 64, requests - sets}, {1110 - 64, requests - sets}}));
  EXPECT_EQ(calls->tx_unmaps, calls->tx_maps);
  EXPECT_EQ(calls->rx_maps, (std::map<uint64_t, int>{{2048, 2 + requests}}));
  EXPECT_EQ(calls->rx_unmaps, (std::map<uint64_t, int>{{2048, requests}}));
}

// The parameter tables alone: names, types, ranges, choices, no platform.
TEST(WorkloadParamsTest, SubmitTimeValidationUsesTheTables) {
  EXPECT_TRUE(ValidateWorkloadParams("fio-nvme", {{"bs", "64k"}, {"rw", "read"}}).ok());
  EXPECT_TRUE(ValidateWorkloadParams("memcached", {{"instances", "100000"}}).ok());
  EXPECT_THAT(ValidateWorkloadParams("fio-nvme", {{"rw", "trim"}}).message(),
              HasSubstr("fio-nvme: --param rw=trim: expected one of randread, randwrite, read, "
                        "write"));
  EXPECT_THAT(ValidateWorkloadParams("dma-map-bench", {{"granule", "2048"}}).message(),
              HasSubstr("parameter granule: 2048 out of range [1, 1024]"));
  EXPECT_THAT(ValidateWorkloadParams("dma-map-bench", {{"seconds", "x"}}).message(),
              HasSubstr("parameter seconds: 'x' is not a number"));
  EXPECT_THAT(ValidateWorkloadParams("tcp-stream", {{"sessions", "0"}}).message(),
              HasSubstr("tcp-stream: --param sessions=0: out of range [1, 4096]"));
  EXPECT_THAT(ValidateWorkloadParams("memcached", {{"bogus", "1"}}).message(),
              HasSubstr("workload memcached: unknown parameter 'bogus'; valid: instances"));
  EXPECT_EQ(ValidateWorkloadParams("nope", {}).code(), absl::StatusCode::kNotFound);
  for (const WorkloadInfo& w : AllWorkloads()) {
    EXPECT_TRUE(ValidateWorkloadParams(w.name, {}).ok()) << w.name << ": defaults are valid";
  }
}

}  // namespace
}  // namespace farm::emu
