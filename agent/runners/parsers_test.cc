// Parser tests on recorded tool outputs (testdata/README.md says how each
// was recorded), including seed 000's iozone report.
#include <fstream>
#include <sstream>
#include <string>

#include "agent/runners/fio_json.h"
#include "agent/runners/iozone_report.h"
#include "agent/runners/runners.h"
#include "agent/runners/tools.h"
#include "gtest/gtest.h"

namespace farm::runners {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(FARM_RUNNERS_TESTDATA) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FioJson, ParsesRecordedRandrw) {
  absl::StatusOr<FioReport> r = ParseFioJson(ReadTestdata("fio-3.33-randrw-psync.json"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fio_version, "fio-3.33");
  ASSERT_EQ(r->jobs.size(), 1u);
  const FioJob& j = r->jobs[0];
  EXPECT_EQ(j.name, "rec");
  EXPECT_EQ(j.error, 0);
  EXPECT_EQ(j.job_runtime_ms, 49u);
  EXPECT_EQ(j.read.io_bytes, 2031616u);
  EXPECT_EQ(j.read.total_ios, 496u);
  EXPECT_DOUBLE_EQ(j.read.iops, 9920.0);
  EXPECT_DOUBLE_EQ(j.read.bw_kib_s, 39680);
  EXPECT_EQ(j.read.runtime_ms, 50u);
  EXPECT_NEAR(j.read.clat.mean_ns, 83406.671371, 1e-6);
  EXPECT_DOUBLE_EQ(j.read.clat.p50_ns, 49920);
  EXPECT_DOUBLE_EQ(j.read.clat.p99_ns, 301056);
  EXPECT_DOUBLE_EQ(j.read.clat.p999_ns, 4816896);
  EXPECT_DOUBLE_EQ(j.write.iops, 10560.0);
  EXPECT_DOUBLE_EQ(j.write.bw_kib_s, 42240);
  EXPECT_DOUBLE_EQ(j.write.clat.p99_ns, 32640);
  EXPECT_DOUBLE_EQ(j.write.clat.p999_ns, 44800);
  EXPECT_TRUE(j.read.active());
  EXPECT_FALSE(j.trim.active());
}

TEST(FioJson, ToleratesTextBeforeAndAfterTheObject) {
  const std::string json = ReadTestdata("fio-3.33-randrw-psync.json");
  const std::string noisy =
      "fio: file hash not empty on exit\n"
      "note: both iodepth >= 1 and synchronous I/O engine are selected, "
      "queue depth will be capped at 1 {see docs}\n" +
      json + "\nfio: some trailing message }\n";
  absl::StatusOr<FioReport> r = ParseFioJson(noisy);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->jobs.at(0).read.iops, 9920.0);
}

TEST(FioJson, ErrorsAreStatuses) {
  const std::string json = ReadTestdata("fio-3.33-randrw-psync.json");
  EXPECT_FALSE(ParseFioJson("").ok());
  EXPECT_FALSE(ParseFioJson("fio: engine libaio not loadable\n").ok());
  absl::StatusOr<FioReport> truncated = ParseFioJson(json.substr(0, json.size() / 2));
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated"), std::string::npos)
      << truncated.status();
  absl::StatusOr<FioReport> no_version = ParseFioJson("{\"jobs\": []}");
  ASSERT_FALSE(no_version.ok());
  EXPECT_NE(no_version.status().message().find("fio version"), std::string::npos);
  EXPECT_FALSE(ParseFioJson("{\"fio version\": \"fio-3.33\"}").ok());
  EXPECT_FALSE(ParseFioJson("{\"fio version\": \"fio-3.33\", \"jobs\": [1]}").ok());
}

TEST(FioJson, SamplesNamedPerDirection) {
  absl::StatusOr<FioReport> r = ParseFioJson(ReadTestdata("fio-3.33-randrw-psync.json"));
  ASSERT_TRUE(r.ok());
  std::vector<Sample> s = FioSamples(*r);
  ASSERT_EQ(s.size(), 12u);  // 6 metrics x {read, write}; trim did no I/O
  EXPECT_EQ(s[0].metric, "iops");
  EXPECT_EQ(s[0].phase, "read");
  EXPECT_EQ(s[0].unit, "iops");
  EXPECT_DOUBLE_EQ(s[0].value, 9920.0);
  EXPECT_EQ(s[1].metric, "bw_kib_s");
  EXPECT_EQ(s[1].unit, "KiB/s");
  EXPECT_EQ(s[4].metric, "clat_p99_ns");
  EXPECT_DOUBLE_EQ(s[4].value, 301056);
  EXPECT_EQ(s[6].phase, "write");
  EXPECT_DOUBLE_EQ(s[6].value, 10560.0);
}

TEST(IozoneReport, Seed000ThreeRunsOfFourTests) {
  absl::StatusOr<std::vector<IozoneReport>> runs =
      ParseIozoneReports(ReadTestdata("seed000-iozone-nfsrdma.txt"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  for (const IozoneReport& r : *runs) {
    ASSERT_EQ(r.tests.size(), 4u);
    EXPECT_EQ(r.tests[0].name, "write");
    EXPECT_EQ(r.tests[0].label, "initial writers");
    EXPECT_EQ(r.tests[1].name, "rewrite");
    EXPECT_EQ(r.tests[2].name, "read");
    EXPECT_EQ(r.tests[3].name, "reread");
    for (const IozoneTest& t : r.tests) {
      EXPECT_EQ(t.processes, 12);
      EXPECT_EQ(t.unit, "kB/sec");
    }
  }
  // 65f746e8285f (good), c062db039f40, c588072bba6b (the big step).
  EXPECT_DOUBLE_EQ((*runs)[0].Find("write")->children, 4732581.09);
  EXPECT_DOUBLE_EQ((*runs)[0].Find("read")->children, 5921370.94);
  EXPECT_DOUBLE_EQ((*runs)[1].Find("write")->children, 4342419.12);
  EXPECT_DOUBLE_EQ((*runs)[1].Find("read")->children, 5406879.47);
  const IozoneTest* w = (*runs)[2].Find("write");
  ASSERT_NE(w, nullptr);
  EXPECT_DOUBLE_EQ(w->children, 3812036.91);
  EXPECT_DOUBLE_EQ(w->parent, 3753683.40);
  EXPECT_DOUBLE_EQ(w->min_per_process, 313672.25);
  EXPECT_DOUBLE_EQ(w->max_per_process, 321719.44);
  EXPECT_DOUBLE_EQ(w->avg_per_process, 317669.74);
  EXPECT_DOUBLE_EQ(w->min_xfer_kb, 1022464.00);
  const IozoneTest* rr = (*runs)[2].Find("reread");
  ASSERT_NE(rr, nullptr);
  EXPECT_DOUBLE_EQ(rr->children, 4220651.19);
  EXPECT_DOUBLE_EQ(rr->min_xfer_kb, 1035264.00);
  // The regression the farm must find: writers lose ~19%, readers ~28%.
  EXPECT_LT((*runs)[2].Find("write")->children, 0.85 * (*runs)[0].Find("write")->children);
}

TEST(IozoneReport, SingleParseKeepsAllBlocksInOrder) {
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(ReadTestdata("seed000-iozone-nfsrdma.txt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tests.size(), 12u);
  EXPECT_DOUBLE_EQ(r->Find("write")->children, 4732581.09);  // first one
}

TEST(IozoneReport, RecordedTwoProcessRunWithTabs) {
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(ReadTestdata("iozone-3.489-t2-i0-i1.txt"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, "3.489");
  std::map<std::string, IozoneTest> by = r->ByName();
  ASSERT_EQ(by.size(), 4u);
  EXPECT_EQ(by["write"].processes, 2);
  EXPECT_DOUBLE_EQ(by["write"].children, 495622.38);
  EXPECT_DOUBLE_EQ(by["write"].parent, 101196.62);
  EXPECT_DOUBLE_EQ(by["write"].min_per_process, 0.0);
  EXPECT_DOUBLE_EQ(by["rewrite"].max_per_process, 4064103.25);
  EXPECT_DOUBLE_EQ(by["rewrite"].min_xfer_kb, 64.0);
  EXPECT_DOUBLE_EQ(by["read"].avg_per_process, 2681653.75);
  EXPECT_DOUBLE_EQ(by["reread"].children, 6025439.00);
}

TEST(IozoneReport, RecordedRandomTests) {
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(ReadTestdata("iozone-3.489-t1-i0-i1-i2.txt"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tests.size(), 6u);
  EXPECT_EQ(r->tests[4].name, "randread");
  EXPECT_EQ(r->tests[4].label, "random readers");
  EXPECT_DOUBLE_EQ(r->tests[4].children, 6402699.00);
  EXPECT_EQ(r->tests[5].name, "randwrite");
  EXPECT_DOUBLE_EQ(r->tests[5].children, 5991815.00);
  EXPECT_DOUBLE_EQ(r->tests[5].min_xfer_kb, 1024.00);
}

TEST(IozoneReport, SamplesNamedPerTest) {
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(ReadTestdata("iozone-3.489-t2-i0-i1.txt"));
  ASSERT_TRUE(r.ok());
  std::vector<Sample> s = IozoneSamples(*r);
  ASSERT_EQ(s.size(), 24u);
  EXPECT_EQ(s[0].metric, "throughput_kb_s");
  EXPECT_EQ(s[0].phase, "write");
  EXPECT_EQ(s[0].unit, "kB/s");
  EXPECT_DOUBLE_EQ(s[0].value, 495622.38);
  EXPECT_EQ(s[1].metric, "parent_throughput_kb_s");
  EXPECT_EQ(s[2].metric, "min_throughput_kb_s");
  EXPECT_EQ(s[3].metric, "max_throughput_kb_s");
  EXPECT_EQ(s[4].metric, "avg_throughput_kb_s");
  EXPECT_EQ(s[5].metric, "min_xfer_kb");
  EXPECT_EQ(s[18].phase, "reread");
}

TEST(IozoneReport, ErrorsAreStatuses) {
  EXPECT_FALSE(ParseIozoneReport("").ok());
  EXPECT_FALSE(ParseIozoneReport("iozone test complete.\n").ok());
  absl::StatusOr<IozoneReport> bad =
      ParseIozoneReport("Children see throughput for 2 initial writers = lots kB/sec\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no number"), std::string::npos);
  EXPECT_FALSE(ParseIozoneReport("Children see throughput for writers = 1 kB/sec\n").ok());
}

TEST(IozoneReport, MailQuotingIsStripped) {
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(
      "> > Children see throughput for 12 readers = 10.5 kB/sec\n"
      "> > Min xfer = 3.00 kB\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->Find("read")->children, 10.5);
  EXPECT_DOUBLE_EQ(r->Find("read")->min_xfer_kb, 3.0);
}

TEST(Tools, VersionsFromRecordedOutput) {
  EXPECT_EQ(*ParseFioVersion("fio-3.33\n"), "fio-3.33");
  EXPECT_FALSE(ParseFioVersion("bash: fio: not found\n").ok());
  EXPECT_EQ(*ParseIozoneVersion(ReadTestdata("iozone-3.489-t2-i0-i1.txt")), "3.489");
  EXPECT_FALSE(ParseIozoneVersion("").ok());
}

}  // namespace
}  // namespace farm::runners
