#include "agent/monitors/monitors.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/monitors/host_monitor.h"
#include "gtest/gtest.h"
#include "lib/base/file.h"

namespace farm::monitors {
namespace {

namespace pb = ::iommufarm::v1;

// An x86 guest under q35 + intel-iommu: interrupt remapping (IR-), NVMe
// queues, the DMAR fault interrupt, and the one-count ERR / MIS lines.
constexpr char kX86Before[] = R"(            CPU0       CPU1       
   0:         44          0   IO-APIC   2-edge      timer
   8:          0          0   IR-IO-APIC    8-edge      rtc0
  24:          0          0  DMAR-MSI    0-edge      dmar0
  25:         10          3  IR-PCI-MSIX-0000:00:04.0    0-edge      nvme0q0
  26:        100          0  IR-PCI-MSIX-0000:00:04.0    1-edge      nvme0q1
 NMI:          0          0   Non-maskable interrupts
 LOC:       5000       4000   Local timer interrupts
 TLB:         12         30   TLB shootdowns
 ERR:          0
 MIS:          0
)";

// After: CPU2 was hot-added, nvme0q2 appeared, ERR counted one.
constexpr char kX86After[] = R"(            CPU0       CPU1       CPU2       
   0:         44          0          0   IO-APIC   2-edge      timer
   8:          0          0          0   IR-IO-APIC    8-edge      rtc0
  24:          1          0          0  DMAR-MSI    0-edge      dmar0
  25:         10          3          0  IR-PCI-MSIX-0000:00:04.0    0-edge      nvme0q0
  26:        350          0          0  IR-PCI-MSIX-0000:00:04.0    1-edge      nvme0q1
  27:          0          0         80  IR-PCI-MSIX-0000:00:04.0    2-edge      nvme0q2
 NMI:          0          0          0   Non-maskable interrupts
 LOC:       5600       4100         50   Local timer interrupts
 TLB:         12         30          0   TLB shootdowns
 ERR:          1
 MIS:          0
)";

// arm64 virt + SMMUv3: GICv3 and ITS-MSI lines (their hardware IRQ number
// sits between the counts and the action) and IPIs.
constexpr char kArm64[] = R"(           CPU0       CPU1       
 10:       2104       1973     GICv3  27 Level     arch_timer
 12:          0          0     GICv3  33 Level     uart-pl011
 14:          0          0     GICv3 106 Edge      arm-smmu-v3-evtq
 47:         81          0   ITS-MSI 16384 Edge      nvme0q0
 48:       9021          0   ITS-MSI 16385 Edge      nvme0q1
IPI0:       120        98       Rescheduling interrupts
IPI1:        34        51       Function call interrupts
Err:          0
)";

constexpr char kVmstatBefore[] = "nr_free_pages 500000\npgfault 1000\npgmajfault 3\nnr_dirty 10\n";
constexpr char kVmstatAfter[] =
    "nr_free_pages 499000\npgfault 1800\npgmajfault 3\nnr_dirty 10\nnr_iommu_pages 12\n";

// drivers/iommu/intel/debugfs.c's latency_show_one over perf.c's
// dmar_latency_snapshot with IOTLB latency sampling on.
constexpr char kDmarPerfLatency[] =
    "IOMMU: dmar0 Register Base Address: fed90000\n"
    "                  <0.1us   0.1us-1us    1us-10us  10us-100us   100us-1ms    1ms-10ms"
    "      >=10ms     min(us)     max(us) average(us)\n"
    "   inv_iotlb           0           0        1200          30           1           0"
    "           0           2         140           4\n";

constexpr char kInvalidationQueue[] =
    "Invalidation queue on IOMMU: dmar0\n"
    " Base: 0x10b0c000\tHead: 212\tTail: 214\n"
    "Index\t\tqw0\t\t\tqw1\t\t\tstatus\n"
    "0\t\t0x0000000000000011\t0x0000000000000000\t0x0\n";

std::string Layout(const std::string& interrupts, const std::string& vmstat,
                   const std::string& iommu) {
  return absl::StrCat("%% interrupts\n", interrupts, "%% vmstat\n", vmstat, iommu);
}

const pb::InterruptDelta* Line(const pb::Monitors& m, const std::string& irq) {
  for (const pb::InterruptDelta& d : m.interrupts()) {
    if (d.irq() == irq) return &d;
  }
  return nullptr;
}

TEST(ParseInterrupts, ReadsX86Lines) {
  absl::StatusOr<InterruptTable> t = ParseInterrupts(kX86Before);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cpus, (std::vector<std::string>{"CPU0", "CPU1"}));
  ASSERT_EQ(t->lines.size(), 10u);
  EXPECT_EQ(t->lines[4].irq, "26");
  EXPECT_EQ(t->lines[4].counts, (std::vector<int64_t>{100, 0}));
  EXPECT_EQ(t->lines[4].description, "IR-PCI-MSIX-0000:00:04.0 1-edge nvme0q1");
  EXPECT_EQ(InterruptSource(t->lines[4]), "nvme0q1");
  EXPECT_EQ(InterruptSource(t->lines[2]), "dmar0");
  EXPECT_EQ(InterruptSource(t->lines[6]), "LOC");
  EXPECT_EQ(t->lines[8].irq, "ERR");
  EXPECT_FALSE(t->lines[8].per_cpu);
  EXPECT_EQ(t->lines[8].counts, (std::vector<int64_t>{0}));
}

TEST(ParseInterrupts, ReadsArm64LinesWithTheirHardwareNumbers) {
  absl::StatusOr<InterruptTable> t = ParseInterrupts(kArm64);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->lines.size(), 8u);
  EXPECT_EQ(t->lines[4].counts, (std::vector<int64_t>{9021, 0}));
  EXPECT_EQ(t->lines[4].description, "ITS-MSI 16385 Edge nvme0q1");
  EXPECT_EQ(InterruptSource(t->lines[4]), "nvme0q1");
  EXPECT_EQ(InterruptSource(t->lines[2]), "arm-smmu-v3-evtq");
  EXPECT_EQ(t->lines[5].irq, "IPI0");
  EXPECT_EQ(InterruptSource(t->lines[5]), "IPI0");
  EXPECT_FALSE(t->lines[7].per_cpu);
}

TEST(ParseInterrupts, RefusesWhatIsNotTheTable) {
  EXPECT_FALSE(ParseInterrupts("").ok());
  EXPECT_FALSE(ParseInterrupts("nr_free_pages 1\n").ok());
  EXPECT_FALSE(ParseInterrupts("  CPU0\n  no label here\n").ok());
}

TEST(ParseVmstat, ReadsCountersAndRefusesOthers) {
  absl::StatusOr<std::map<std::string, int64_t>> v = ParseVmstat(kVmstatBefore);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->at("pgfault"), 1000);
  EXPECT_EQ(v->size(), 4u);
  EXPECT_FALSE(ParseVmstat("pgfault many\n").ok());
}

TEST(Diff, CountsHotAddedCpusNewLinesAndDropsWhatDidNotMove) {
  absl::StatusOr<Snapshot> b = ParseSnapshot(Layout(kX86Before, kVmstatBefore, ""));
  absl::StatusOr<Snapshot> a = ParseSnapshot(Layout(kX86After, kVmstatAfter, ""));
  ASSERT_TRUE(b.ok() && a.ok());
  pb::Monitors m = Diff(*b, *a, "guest");
  EXPECT_EQ(m.where(), "guest");
  EXPECT_EQ(m.cpus_size(), 3);
  const pb::InterruptDelta* q1 = Line(m, "26");
  ASSERT_NE(q1, nullptr);
  EXPECT_EQ(q1->source(), "nvme0q1");
  EXPECT_EQ(std::vector<int64_t>(q1->per_cpu().begin(), q1->per_cpu().end()),
            (std::vector<int64_t>{250, 0, 0}));
  const pb::InterruptDelta* q2 = Line(m, "27");  // new in after: from 0
  ASSERT_NE(q2, nullptr);
  EXPECT_EQ(q2->total(), 80);
  const pb::InterruptDelta* loc = Line(m, "LOC");  // CPU2 new: from 0
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(std::vector<int64_t>(loc->per_cpu().begin(), loc->per_cpu().end()),
            (std::vector<int64_t>{600, 100, 50}));
  ASSERT_NE(Line(m, "ERR"), nullptr);
  EXPECT_EQ(Line(m, "ERR")->total(), 1);
  EXPECT_TRUE(Line(m, "ERR")->per_cpu().empty());
  EXPECT_EQ(Line(m, "24")->total(), 1);
  EXPECT_EQ(Line(m, "0"), nullptr);  // timer did not move
  EXPECT_EQ(Line(m, "TLB"), nullptr);
  EXPECT_EQ(m.interrupts_size(), 5);
  EXPECT_EQ(m.vmstat().size(), 3u);  // pgmajfault and nr_dirty did not move
  EXPECT_EQ(m.vmstat().at("pgfault"), 800);
  EXPECT_EQ(m.vmstat().at("nr_free_pages"), -1000);
  EXPECT_EQ(m.vmstat().at("nr_iommu_pages"), 12);
  EXPECT_EQ(m.iommu_note(), "none exposed (debugfs has no iommu/ directory)");
}

TEST(Diff, ACountThatWentDownWasReset) {
  absl::StatusOr<Snapshot> b = ParseSnapshot(Layout(kX86After, kVmstatBefore, ""));
  absl::StatusOr<Snapshot> a = ParseSnapshot(Layout(kX86Before, kVmstatBefore, ""));
  ASSERT_TRUE(b.ok() && a.ok());
  pb::Monitors m = Diff(*b, *a, "host");
  ASSERT_NE(Line(m, "26"), nullptr);
  EXPECT_EQ(Line(m, "26")->total(), 100);
}

TEST(ParseDmarPerfLatency, CountsBucketsAndKeepsMinMaxAverageAsLevels) {
  std::map<std::string, IommuValue> v = ParseDmarPerfLatency(kDmarPerfLatency);
  ASSERT_EQ(v.size(), 10u);
  EXPECT_EQ(v.at("dmar_perf_latency/dmar0/inv_iotlb/1us-10us").value, 1200);
  EXPECT_FALSE(v.at("dmar_perf_latency/dmar0/inv_iotlb/1us-10us").gauge);
  EXPECT_EQ(v.at("dmar_perf_latency/dmar0/inv_iotlb/max(us)").value, 140);
  EXPECT_TRUE(v.at("dmar_perf_latency/dmar0/inv_iotlb/max(us)").gauge);
}

TEST(SampledIotlbInvalidations, SumsTheInvIotlbBucketsOfEveryIommu) {
  pb::Monitors m;
  EXPECT_EQ(SampledIotlbInvalidations(m), -1) << "no dmar_perf_latency: a kernel without it";
  auto add = [&](const std::string& name, double delta, bool gauge) {
    pb::IommuCounter* c = m.add_iommu();
    c->set_name(name);
    c->set_delta(delta);
    c->set_after(delta);
    c->set_gauge(gauge);
  };
  add("invalidation_queue/dmar0/head", 7, true);
  EXPECT_EQ(SampledIotlbInvalidations(m), -1);
  add("dmar_perf_latency/dmar0/inv_iotlb/1us-10us", 0, false);
  EXPECT_EQ(SampledIotlbInvalidations(m), 0) << "counted, and none came";
  add("dmar_perf_latency/dmar0/inv_iotlb/10us-100us", 1852, false);
  add("dmar_perf_latency/dmar0/inv_iotlb/max(us)", 379, true);
  add("dmar_perf_latency/dmar0/inv_iec/1us-10us", 5, false);
  add("dmar_perf_latency/dmar1/inv_iotlb/100us-1ms", 18, false);
  EXPECT_EQ(SampledIotlbInvalidations(m), 1870);
}

TEST(ParseInvalidationQueue, ReadsEachIommusHeadAndTail) {
  std::map<std::string, IommuValue> v = ParseInvalidationQueue(kInvalidationQueue);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v.at("invalidation_queue/dmar0/head").value, 212);
  EXPECT_EQ(v.at("invalidation_queue/dmar0/tail").value, 214);
}

TEST(ParseSnapshot, ReadsTheIommuPartsAndTheirDelta) {
  const std::string iommu = absl::StrCat(
      "%% iommu-files\nintel/dmar_perf_latency\nintel/invalidation_queue\nintel/iommu_regset\n",
      "%% iommu intel/dmar_perf_latency\n", kDmarPerfLatency, "%% iommu intel/invalidation_queue\n",
      kInvalidationQueue, "%% a-later-part\nwhatever\n");
  absl::StatusOr<Snapshot> b = ParseSnapshot(Layout(kArm64, kVmstatBefore, ""));
  absl::StatusOr<Snapshot> a = ParseSnapshot(Layout(kArm64, kVmstatBefore, iommu));
  ASSERT_TRUE(b.ok() && a.ok()) << a.status();
  EXPECT_EQ(a->iommu_files.size(), 3u);
  pb::Monitors m = Diff(*b, *a, "guest");
  EXPECT_EQ(m.interrupts_size(), 0);
  EXPECT_EQ(m.iommu_size(), 12);
  EXPECT_EQ(m.iommu_note(),
            "debugfs iommu/: intel/dmar_perf_latency intel/invalidation_queue intel/iommu_regset");
  for (const pb::IommuCounter& c : m.iommu()) {
    if (c.name() == "dmar_perf_latency/dmar0/inv_iotlb/1us-10us") {
      EXPECT_EQ(c.delta(), 1200);
    }
  }
}

TEST(ParseSnapshot, KeepsTheNoteAndRefusesAPartialSnapshot) {
  absl::StatusOr<Snapshot> s = ParseSnapshot(
      Layout(kArm64, kVmstatBefore, "%% iommu-note none exposed (arm-smmu-v3 has no debugfs)\n"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->iommu_note, "none exposed (arm-smmu-v3 has no debugfs)");
  EXPECT_FALSE(ParseSnapshot(absl::StrCat("%% interrupts\n", kArm64)).ok());
  EXPECT_FALSE(ParseSnapshot(Layout("garbage\n", kVmstatBefore, "")).ok());
}

TEST(ParsePerfReport, ReadsSymbolsLargestFirst) {
  constexpr char kReport[] =
      "     4.56%  [.] push_to_top_level\n"
      "    13.93%  [k] iommu_dma_map_page\n"
      "     1.49%  [k] qi_submit_sync\n"
      "# a comment\n"
      "     1.03%  [.] 0x000000000000b81b\n";
  std::vector<pb::PerfSymbol> s = ParsePerfReport(kReport, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].symbol(), "iommu_dma_map_page");
  EXPECT_DOUBLE_EQ(s[0].share(), 13.93);
  EXPECT_TRUE(s[0].kernel());
  EXPECT_FALSE(s[1].kernel());
  EXPECT_EQ(s[2].symbol(), "qi_submit_sync");
}

// A fixture tree in place of / : the capture reads its files, its debugfs
// has an iommu/ folder, and a perf that does not exist is a reason.
TEST(HostMonitor, CapturesAFixtureRoot) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(::testing::TempDir()) / absl::StrCat("monroot-", ::getpid());
  fs::create_directories(root / "proc");
  fs::create_directories(root / "sys/kernel/debug/iommu/intel");
  ASSERT_TRUE(base::WriteFile((root / "proc/interrupts").string(), kX86Before).ok());
  ASSERT_TRUE(base::WriteFile((root / "proc/vmstat").string(), kVmstatBefore).ok());
  ASSERT_TRUE(base::WriteFile((root / "sys/kernel/debug/iommu/intel/invalidation_queue").string(),
                              kInvalidationQueue)
                  .ok());
  HostMonitorOptions opts;
  opts.root = root.string();
  opts.perf_tool = (root / "no-perf").string();
  HostMonitor mon(opts);
  mon.Start();
  ASSERT_TRUE(base::WriteFile((root / "proc/interrupts").string(), kX86After).ok());
  ASSERT_TRUE(base::WriteFile((root / "proc/vmstat").string(), kVmstatAfter).ok());
  pb::Monitors m = mon.Finish();
  EXPECT_EQ(m.where(), "host");
  EXPECT_EQ(m.interrupts_size(), 5);
  EXPECT_EQ(m.vmstat().at("pgfault"), 800);
  EXPECT_EQ(m.iommu_size(), 2);
  EXPECT_EQ(m.iommu_note(), "debugfs iommu/: intel/invalidation_queue");
  EXPECT_EQ(m.perf_size(), 0);
  EXPECT_NE(m.perf_note().find("no perf on this host"), std::string::npos) << m.perf_note();
  fs::remove_all(root);
}

}  // namespace
}  // namespace farm::monitors
