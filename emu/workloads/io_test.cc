#include "emu/workloads/io.h"

#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "emu/model/irq_affinity.h"

namespace farm::emu {
namespace {

using ::testing::HasSubstr;

// A DMA path with fixed costs, so the workloads' own logic is tested apart
// from the IOMMU model: per call plus per segment, unmap optionally slow.
class FixedCostDma final : public DmaPath {
 public:
  FixedCostDma(Time call, Time per_seg, Time unmap)
      : call_(call), per_seg_(per_seg), unmap_(unmap) {}
  Task<uint64_t> MapSg(Cpu& cpu, int, int nents, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaMapSg, call_ + per_seg_ * nents);
    co_return ++next_;
  }
  Task<void> UnmapSg(Cpu& cpu, uint64_t) override {
    cpu.Charge(Sym::kIommuDmaUnmapPage, unmap_);
    co_return;
  }
  Task<uint64_t> MapPage(Cpu& cpu, int, uint64_t, DmaDir) override {
    cpu.Charge(Sym::kIommuDmaMapPage, call_ + per_seg_);
    co_return ++next_;
  }
  Task<void> UnmapPage(Cpu& cpu, uint64_t) override {
    cpu.Charge(Sym::kIommuDmaUnmapPage, unmap_);
    co_return;
  }

 private:
  Time call_, per_seg_, unmap_;
  uint64_t next_ = 0;
};

DmaPathFactory Fixed(Time call, Time per_seg, Time unmap) {
  return [=](Engine&) { return std::make_unique<FixedCostDma>(call, per_seg, unmap); };
}

IoPlatform TwoSocket() {
  IoPlatform p;
  p.name = "test-2s12c";
  p.topology.num_cpus = 24;
  for (int c = 0; c < 24; ++c) p.topology.cpu_node.push_back(c < 12 ? 0 : 1);
  p.topology.node_socket = {0, 1};
  return p;
}

IoPlatform FourNode128() {
  IoPlatform p;
  p.name = "test-4n128";
  p.topology.num_cpus = 128;
  for (int c = 0; c < 128; ++c) p.topology.cpu_node.push_back(c / 32);
  p.topology.node_socket = {0, 0, 1, 1};
  p.device_node = 2;
  return p;
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
  IoPlatform p = FourNode128();
  IrqAffinity a = IrqAffinity::Spread(p.topology, 23);
  EXPECT_EQ(a.queues().size(), 23u);
  for (int c = 0; c < 128; ++c) EXPECT_GE(a.QueueOf(c), 0) << c;
}

TEST(IozoneTest, SlowerMapSgLowersThroughputAndPrintsIozoneReport) {
  std::map<std::string, std::string> params = {
      {"threads", "12"}, {"record", "256k"}, {"tests", "write,read"}, {"sim_records", "16"}};
  auto fast = RunIoWorkload("iozone-nfsrdma", params, TwoSocket(), Fixed(2000, 250, 3000), 1);
  auto slow = RunIoWorkload("iozone-nfsrdma", params, TwoSocket(), Fixed(2000, 1800, 3000), 1);
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_LT(slow->metrics.at("write_kb_s"), fast->metrics.at("write_kb_s"));
  EXPECT_LT(slow->metrics.at("read_kb_s"), fast->metrics.at("read_kb_s"));
  EXPECT_THAT(fast->iozone, HasSubstr("Children see throughput for 12 initial writers"));
  EXPECT_THAT(fast->iozone, HasSubstr("Children see throughput for 12 readers"));
  EXPECT_NEAR(fast->metrics.at("map_sg_full_chunk_mean_ns"), 2000 + 30 * 250, 1);
}

TEST(IozoneTest, RejectsUnknownParamsAndTests) {
  auto r = RunIoWorkload("iozone-nfsrdma", {{"thread", "12"}}, TwoSocket(), Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("unknown --param thread"));
  r = RunIoWorkload("iozone-nfsrdma", {{"tests", "write,fsync"}}, TwoSocket(), Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("unknown test 'fsync'"));
  r = RunIoWorkload("iozone-nfsrdma", {{"record", "big"}}, TwoSocket(), Fixed(1, 1, 1), 1);
  EXPECT_THAT(r.status().message(), HasSubstr("--param record=big"));
}

TEST(FioNvmeTest, CpuThatTakesTheIrqIsSlower) {
  IoPlatform p = FourNode128();
  p.irq_affinity = "0-5@4;32-38@35";
  auto run = [&](int cpu) {
    auto r = RunIoWorkload("fio-nvme", {{"cpus_allowed", std::to_string(cpu)}, {"runtime_ms", "2"}},
                           p, Fixed(300, 50, 900), 7);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->throughput : 0.0;
  };
  double cpu0 = run(0), cpu4 = run(4);
  EXPECT_GT(cpu0, 0);
  EXPECT_LT(cpu4, 0.8 * cpu0);
}

TEST(FioNvmeTest, DeviceCeilingCapsIops) {
  IoPlatform p = FourNode128();
  auto r = RunIoWorkload(
      "fio-nvme",
      {{"cpus_allowed", "64-71"}, {"numjobs", "8"}, {"dev_iops", "200000"}, {"runtime_ms", "2"}}, p,
      Fixed(100, 10, 100), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->throughput, 200000 * 1.02);
  EXPECT_GT(r->throughput, 200000 * 0.8);
  EXPECT_THAT(r->fio_json, HasSubstr("\"clat_ns\""));
}

TEST(OtherWorkloadsTest, TcpStreamAndNvmfTargetRun) {
  auto tcp = RunIoWorkload("tcp-stream", {{"direction", "rx"}, {"runtime_ms", "1"}}, FourNode128(),
                           Fixed(200, 20, 300), 1);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_GT(tcp->throughput, 0);
  EXPECT_LE(tcp->throughput, 100.5);
  auto nvmf =
      RunIoWorkload("nvmf-target", {{"runtime_ms", "1"}}, FourNode128(), Fixed(200, 20, 300), 1);
  ASSERT_TRUE(nvmf.ok()) << nvmf.status();
  EXPECT_GT(nvmf->throughput, 0);
}

}  // namespace
}  // namespace farm::emu
