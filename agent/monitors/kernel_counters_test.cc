#include "agent/monitors/kernel_counters.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/monitors/monitors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/base/fake_root_for_test.h"
#include "lib/base/file.h"

namespace farm::monitors {
namespace {

namespace pb = ::iommufarm::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using base::FakeRoot;

// kernel/trace/trace.c tracing_stats_read for one CPU whose buffer wrapped
// (overrun) and one that did not.
constexpr char kStatsCpu0[] =
    "entries: 1200\noverrun: 300\ncommit overrun: 2\nbytes: 57600\n"
    "oldest event ts:  1234.567890\nnow ts:  1240.000000\ndropped events: 0\nread events: 5\n";
constexpr char kStatsCpu1[] =
    "entries: 40\noverrun: 0\ncommit overrun: 0\nbytes: 1920\n"
    "oldest event ts:  1235.000000\nnow ts:  1240.000000\ndropped events: 3\nread events: 0\n";

// A hist trigger "hist:keys=size" on iommu:map, as the hist file prints it.
constexpr char kHist[] =
    "# event histogram\n#\n# trigger info: hist:keys=size:vals=hitcount:sort=hitcount:size=2048 "
    "[active]\n#\n\n{ size:       8192 } hitcount:         10\n"
    "{ size:       4096 } hitcount:       1200\n\nTotals:\n    Hits: 1210\n    Entries: 2\n"
    "    Dropped: 0\n";

TEST(ParseTraceStats, EveryEventThatFiredCountsOnce) {
  // 1200 + 300 + 2 + 5 on CPU0, 40 + 3 on CPU1; "bytes" is not a count.
  EXPECT_EQ(ParseTraceStats(absl::StrCat(kStatsCpu0, kStatsCpu1)), 1550);
  EXPECT_EQ(ParseTraceStats(""), 0);
}

TEST(ParseHistBytes, SumsSizeTimesHits) {
  EXPECT_EQ(ParseHistBytes(kHist), 8192 * 10 + 4096 * 1200);
  EXPECT_EQ(ParseHistBytes("# event histogram\n\nTotals:\n    Hits: 0\n"), 0);
  EXPECT_EQ(ParseHistBytes("nothing of a hist\n"), -1);
}

TEST(ParsePerfStat, ReadsPmcgCountsAndSkipsUncounted) {
  constexpr char kCsv[] =
      "# started on Sun Dec  6 15:00:00 2026\n\n"
      "123456,,smmuv3_pmcg_100020/transaction/,2001234567,100.00,,\n"
      "789,,smmuv3_pmcg_100020/tlb_miss/,2001234567,100.00,,\n"
      "<not counted>,,smmuv3_pmcg_140020/tlb_miss/,0,0.00,,\n";
  const std::map<std::string, int64_t> m = ParsePerfStat(kCsv);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("pmcg/smmuv3_pmcg_100020/transaction"), 123456);
  EXPECT_EQ(m.at("pmcg/smmuv3_pmcg_100020/tlb_miss"), 789);
}

TEST(ParseSnapshot, ReadsTheEventPartsIntoTheDelta) {
  const std::string base = "%% interrupts\n  CPU0\n%% vmstat\npgfault 1\n";
  const std::string after = absl::StrCat(
      base, "%% trace iommu:map\n", kStatsCpu0, kStatsCpu1, "%% trace-hist iommu:map\n", kHist,
      "%% trace iommu:unmap\n", "entries: 0\noverrun: 0\n",
      "%% event-note trace: no iommu:foo event in this kernel\n");
  absl::StatusOr<Snapshot> b = ParseSnapshot(base);
  absl::StatusOr<Snapshot> a = ParseSnapshot(after);
  ASSERT_TRUE(b.ok() && a.ok()) << a.status();
  const pb::Monitors m = Diff(*b, *a, "guest");
  ASSERT_EQ(m.events_size(), 3);
  EXPECT_EQ(m.events().at("trace/iommu:map"), 1550);
  EXPECT_EQ(m.events().at("trace/iommu:map/bytes"), 8192 * 10 + 4096 * 1200);
  EXPECT_EQ(m.events().at("trace/iommu:unmap"), 0);  // a zero is kept: it is a finding
  EXPECT_THAT(m.event_notes(), ElementsAre("trace: no iommu:foo event in this kernel"));
}

// A fixture tracefs: the instance of iommu:map exists as the kernel would
// make it (mkdir of an existing one is taken as ours), iommu:unmap's does
// not (the fixture's mkdir makes an empty folder with no enable file).
void WriteTracefs(FakeRoot& root) {
  root.Dir("sys/kernel/tracing/events/iommu/map");
  root.Dir("sys/kernel/tracing/events/iommu/unmap");
  const std::string in = "sys/kernel/tracing/instances/farm-iommu-map-t";
  root.Write(in + "/trace", "");
  root.Write(in + "/events/iommu/map/enable", "0");
  root.Write(in + "/events/iommu/map/trigger", "");
  root.Write(in + "/events/iommu/map/hist", kHist);
  root.Write(in + "/per_cpu/cpu0/stats", kStatsCpu0);
  root.Write(in + "/per_cpu/cpu1/stats", kStatsCpu1);
  root.Write("sys/kernel/debug/iommu/intel/dmar_perf_latency", "");
}

TEST(KernelCounters, SwitchesTheCountersOnAndOffAndReadsThem) {
  FakeRoot root;
  WriteTracefs(root);
  KernelCounterOptions o;
  o.root = root.path();
  o.tag = "t";
  o.perf_tool = root.path() + "/no-perf";
  const std::string in = root.path() + "/sys/kernel/tracing/instances/farm-iommu-map-t";
  const std::string latency = root.path() + "/sys/kernel/debug/iommu/intel/dmar_perf_latency";
  KernelCounters k(o);
  k.Start();
  EXPECT_EQ(base::ReadFileOrEmpty(in + "/events/iommu/map/enable"), "1");
  EXPECT_EQ(base::ReadFileOrEmpty(in + "/events/iommu/map/trigger"), "hist:keys=size");
  EXPECT_EQ(base::ReadFileOrEmpty(latency), "4");  // the last of the types 1..4
  const std::string parts = k.Stop();
  EXPECT_EQ(base::ReadFileOrEmpty(in + "/events/iommu/map/enable"), "0");
  EXPECT_EQ(base::ReadFileOrEmpty(in + "/events/iommu/map/trigger"), "!hist:keys=size");
  // unmap's instance had no enable file: a note, and its empty folder removed.
  EXPECT_FALSE(
      std::filesystem::exists(root.path() + "/sys/kernel/tracing/instances/farm-iommu-unmap-t"));
  EXPECT_THAT(parts, HasSubstr("%% trace iommu:map\nentries: 1200\n"));
  EXPECT_THAT(parts, HasSubstr("%% trace-hist iommu:map\n"));
  EXPECT_THAT(parts, HasSubstr("%% event-note trace: iommu:unmap: "));
  EXPECT_THAT(parts, HasSubstr("iommu:unmap: no bytes (a kernel without CONFIG_HIST_TRIGGERS)"));
  EXPECT_EQ(base::ReadFileOrEmpty(latency), "4");  // still on for the after snapshot
  k.DisableLatency();
  EXPECT_EQ(base::ReadFileOrEmpty(latency), "0");
}

TEST(KernelCounters, NoTracefsIsANoteNotAFailure) {
  FakeRoot root;
  root.Dir("proc");
  KernelCounterOptions o;
  o.root = root.path();
  KernelCounters k(o);
  k.Start();
  EXPECT_EQ(k.Stop(), "%% event-note trace: no tracefs (a kernel without CONFIG_TRACING)\n");
}

TEST(KernelCounters, PerfStatCountsThePmcgEventsForAsLongAsTheFlagExists) {
  const std::vector<std::string> argv =
      PerfStatArgv("perf", {"smmuv3_pmcg_100020/tlb_miss/", "smmuv3_pmcg_100020/transaction/"},
                   "/s/o.csv", "/s/f");
  EXPECT_EQ(absl::StrJoin(argv, " "),
            "perf stat -a -x , -o /s/o.csv -e "
            "smmuv3_pmcg_100020/tlb_miss/,smmuv3_pmcg_100020/transaction/ -- sh -c "
            "while [ -e '/s/f' ]; do sleep 0.1; done");
}

TEST(CounterInventory, SaysOnceWhatThisHostHasAndWhyNot) {
  FakeRoot root;
  root.Dir("sys/kernel/tracing/instances");
  root.Dir("sys/kernel/tracing/events/iommu/map");
  root.Write("sys/kernel/debug/iommu/intel/dmar_perf_latency", "");
  const std::string pmu = "sys/bus/event_source/devices/smmuv3_pmcg_100020/events/";
  root.Write(pmu + "tlb_miss", "event=0x2\n");
  root.Write(pmu + "transaction", "event=0x1\n");
  root.Write(pmu + "cycles", "event=0x0\n");
  EXPECT_THAT(PmcgEvents(root.path()),
              ElementsAre("smmuv3_pmcg_100020/tlb_miss/", "smmuv3_pmcg_100020/transaction/"));
  KernelCounterOptions o;
  o.root = root.path();
  o.perf_tool = root.path() + "/no-perf";
  const std::vector<pb::MonitorCounter> inv = CounterInventory(o);
  ASSERT_EQ(inv.size(), 5u);
  EXPECT_EQ(inv[0].name(), "trace/iommu:map");
  EXPECT_TRUE(inv[0].present()) << inv[0].note();
  EXPECT_EQ(inv[1].name(), "trace/iommu:unmap");
  EXPECT_FALSE(inv[1].present());
  EXPECT_THAT(inv[1].note(), HasSubstr("no such tracepoint"));
  EXPECT_EQ(inv[2].name(), "dmar_perf_latency");
  EXPECT_TRUE(inv[2].present());
  EXPECT_EQ(inv[3].name(), "invalidation_queue");
  EXPECT_FALSE(inv[3].present());
  EXPECT_THAT(inv[3].note(), HasSubstr("CONFIG_INTEL_IOMMU_DEBUGFS"));
  EXPECT_EQ(inv[4].name(), "pmcg");
  EXPECT_FALSE(inv[4].present());  // the PMU is there, perf is not
  EXPECT_THAT(inv[4].note(), HasSubstr("no perf on this host"));

  FakeRoot bare;
  bare.Dir("sys/kernel/debug");
  for (const pb::MonitorCounter& c : CounterInventory(KernelCounterOptions{.root = bare.path()})) {
    EXPECT_FALSE(c.present()) << c.name();
    EXPECT_FALSE(c.note().empty()) << c.name();
  }
}

}  // namespace
}  // namespace farm::monitors
