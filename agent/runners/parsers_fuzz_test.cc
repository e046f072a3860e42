// Property tests of the parsers that turn tool output into samples
// (ParseFioJson, ParseIozoneReport(s)) over mutated recordings of testdata/
// and reports written at random: any text gets an answer, never a crash or a
// hang, an error is short whatever the line it quotes, and a report written
// from known numbers reads back as those numbers. testing/fuzz.h says how to
// run longer.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/iozone_report.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "testing/fuzz.h"

namespace farm::runners {
namespace {

using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

// An error quotes at most a cut of the line it names.
constexpr size_t kMaxErrorBytes = 1024;

std::string Recorded(const std::string& name) {
  std::ifstream in(std::string(FARM_RUNNERS_TESTDATA) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void FioProperties(const std::string& text) {
  absl::StatusOr<FioReport> r = ParseFioJson(text);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
    EXPECT_LE(r.status().message().size(), kMaxErrorBytes) << r.status();
    return;
  }
  EXPECT_LE(r->jobs.size(), text.size());
  for (const FioJob& j : r->jobs) {
    for (const FioDirection* d : {&j.read, &j.write, &j.trim}) {
      EXPECT_FALSE(std::isnan(d->iops) || std::isnan(d->bw_kib_s) || std::isnan(d->clat.mean_ns));
    }
  }
}

TEST(FioJsonFuzzTest, MutatedReportsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(10000);
  const std::string recorded = Recorded("fio-3.33-randrw-psync.json");
  Mutator m(
      config.seed,
      {recorded, "fio: file hash not empty on exit\n" + recorded,
       "{\"fio version\": \"fio-2.2\", \"jobs\": [{\"read\": {\"clat\": {\"mean\": 1.5}}}]}\n"},
      {"{", "}", "\n{", "\"jobs\"", "\"read\"", "\"io_bytes\"", "\"clat_ns\"", "\"percentile\"",
       "\"99.900000\"", "\"error\"", ": 1e400", ": -1e400", ": 1e30", ": -5", "\"\\u0000\"",
       "\"\\ud800\""});
  RunFuzz(
      config, [&] { return m.Next(); }, FioProperties);
}

// Lines that start a '{' and never close it: each was scanned to the end of
// the text, so the whole took time quadratic in the text's length.
TEST(FioJsonFuzzTest, ManyUnclosedObjectsAreReadInBoundedTime) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "{\n";
  absl::StatusOr<FioReport> r;
  RunFuzz(
      {1, 0}, [&] { return text; }, [&](const std::string& t) { r = ParseFioJson(t); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// Numbers past the fields' ranges read as the range's end (a cast would be
// undefined), not as whatever the conversion makes of them.
TEST(FioJsonFuzzTest, HugeNumbersAreClamped) {
  absl::StatusOr<FioReport> r = ParseFioJson(
      "{\"fio version\": \"fio-3.33\", \"jobs\": [{\"error\": 1e10, \"job_runtime\": 1e30,"
      " \"read\": {\"io_bytes\": 1e300, \"total_ios\": -1e300, \"runtime\": 1.9e19}}]}\n");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->jobs.size(), 1u);
  EXPECT_EQ(r->jobs[0].error, std::numeric_limits<int>::max());
  EXPECT_EQ(r->jobs[0].job_runtime_ms, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r->jobs[0].read.io_bytes, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r->jobs[0].read.total_ios, 0u);
  EXPECT_EQ(r->jobs[0].read.runtime_ms, std::numeric_limits<uint64_t>::max());
}

// A report of random jobs and numbers, after random warning lines, reads
// back as written.
TEST(FioJsonFuzzTest, WrittenReportsReadBack) {
  const auto config = FuzzConfigFromEnv(5000);
  Mutator m(config.seed, {""});
  FioReport want;
  RunFuzz(
      config,
      [&] {
        want = FioReport{absl::StrCat("fio-3.", m.Below(40)), {}};
        nlohmann::json root = {{"fio version", want.fio_version},
                               {"jobs", nlohmann::json::array()}};
        const size_t jobs = m.Below(5);
        for (size_t i = 0; i < jobs; ++i) {
          FioJob job;
          job.name = m.Next() + "{\"}";
          job.error = static_cast<int>(m.Below(3));
          job.read.io_bytes = m.rng()();
          job.read.iops = static_cast<double>(m.Below(1 << 30)) / 7;
          job.read.clat.p999_ns = static_cast<double>(m.Below(1 << 20));
          nlohmann::json j = {{"jobname", nlohmann::json(job.name)}, {"error", job.error}};
          j["read"] = {{"io_bytes", job.read.io_bytes},
                       {"iops", job.read.iops},
                       {"clat_ns", {{"percentile", {{"99.900000", job.read.clat.p999_ns}}}}}};
          root["jobs"].push_back(j);
          want.jobs.push_back(job);
        }
        std::string text;
        for (size_t i = m.Below(3); i > 0; --i) text += "fio: warning {" + m.Next() + "\n";
        // Names that are not UTF-8 are written with their bytes replaced.
        return text +
               root.dump(m.OneIn(2) ? 2 : -1, ' ', false,
                         nlohmann::json::error_handler_t::replace) +
               "\n";
      },
      [&](const std::string& text) {
        absl::StatusOr<FioReport> r = ParseFioJson(text);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->fio_version, want.fio_version);
        ASSERT_EQ(r->jobs.size(), want.jobs.size());
        for (size_t i = 0; i < want.jobs.size(); ++i) {
          EXPECT_EQ(r->jobs[i].error, want.jobs[i].error);
          EXPECT_EQ(r->jobs[i].read.iops, want.jobs[i].read.iops);
          EXPECT_EQ(r->jobs[i].read.clat.p999_ns, want.jobs[i].read.clat.p999_ns);
          // A JSON number is a double: 53 bits of the count survive.
          EXPECT_NEAR(static_cast<double>(r->jobs[i].read.io_bytes),
                      static_cast<double>(want.jobs[i].read.io_bytes),
                      static_cast<double>(want.jobs[i].read.io_bytes) * 1e-15 + 1);
        }
      });
}

void IozoneProperties(const std::string& text) {
  absl::StatusOr<std::vector<IozoneReport>> runs = ParseIozoneReports(text);
  absl::StatusOr<IozoneReport> merged = ParseIozoneReport(text);
  ASSERT_EQ(runs.ok(), merged.ok());
  if (!runs.ok()) {
    EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(runs.status().message().empty());
    EXPECT_LE(runs.status().message().size(), kMaxErrorBytes) << runs.status();
    return;
  }
  size_t tests = 0;
  for (const IozoneReport& r : *runs) {
    EXPECT_FALSE(r.tests.empty());
    tests += r.tests.size();
    for (const IozoneTest& t : r.tests) EXPECT_EQ(r.Find(t.name) != nullptr, true);
  }
  EXPECT_EQ(merged->tests.size(), tests);
}

TEST(IozoneReportFuzzTest, MutatedReportsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(10000);
  Mutator m(
      config.seed,
      {Recorded("iozone-3.489-t1-i0-i1-i2.txt"), Recorded("iozone-3.489-t2-i0-i1.txt"),
       Recorded("seed000-iozone-nfsrdma.txt")},
      {"Children see throughput for ", "Parent sees throughput for ", "Min throughput per process",
       "Max throughput per process", "Avg throughput per process", "Min xfer", " = ", "kB/sec",
       "ops/sec", "> ", "Version $Revision: ", " initial writers ", " re-readers "});
  RunFuzz(
      config, [&] { return m.Next(); }, IozoneProperties);
}

// One block per test, numbers as iozone prints them ("%.2f"), read back.
TEST(IozoneReportFuzzTest, WrittenReportsReadBack) {
  const auto config = FuzzConfigFromEnv(5000);
  Mutator m(config.seed, {""});
  const std::vector<std::pair<std::string, std::string>> labels = {{"initial writers", "write"},
                                                                   {"rewriters", "rewrite"},
                                                                   {"readers", "read"},
                                                                   {"re-readers", "reread"},
                                                                   {"random readers", "randread"},
                                                                   {"random writers", "randwrite"}};
  std::vector<IozoneTest> want;
  RunFuzz(
      config,
      [&] {
        want.clear();
        std::string text =
            "\tIozone: Performance Test of File I/O\n\t\tVersion $Revision: 3.489 $\n";
        std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
        std::shuffle(order.begin(), order.end(), m.rng());
        order.resize(1 + m.Below(order.size()));
        const std::string quote = m.OneIn(3) ? "> " : "";
        const std::string unit = m.OneIn(2) ? "ops/sec" : "kB/sec";
        for (size_t k : order) {
          IozoneTest t;
          t.label = labels[k].first;
          t.name = labels[k].second;
          t.processes = static_cast<int>(1 + m.Below(64));
          t.unit = unit;
          auto num = [&m] { return static_cast<double>(m.Below(100000000)) / 100; };
          t.children = num();
          t.parent = num();
          t.min_per_process = num();
          t.max_per_process = num();
          t.avg_per_process = num();
          t.min_xfer_kb = num();
          absl::StrAppendFormat(&text,
                                "%s\tChildren see throughput for %2d %s \t= %10.2f %s\n"
                                "%s\tParent sees throughput for %2d %s \t= %10.2f %s\n"
                                "%s\tMin throughput per process \t\t\t= %10.2f %s \n"
                                "%s\tMax throughput per process \t\t\t= %10.2f %s\n"
                                "%s\tAvg throughput per process \t\t\t= %10.2f %s\n"
                                "%s\tMin xfer \t\t\t\t\t= %10.2f kB\n\n",
                                quote, t.processes, t.label, t.children, unit, quote, t.processes,
                                t.label, t.parent, unit, quote, t.min_per_process, unit, quote,
                                t.max_per_process, unit, quote, t.avg_per_process, unit, quote,
                                t.min_xfer_kb);
          want.push_back(t);
        }
        return text;
      },
      [&](const std::string& text) {
        absl::StatusOr<IozoneReport> r = ParseIozoneReport(text);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_EQ(r->version, "3.489");
        ASSERT_EQ(r->tests.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          const IozoneTest &got = r->tests[i], &w = want[i];
          EXPECT_EQ(got.name, w.name);
          EXPECT_EQ(got.label, w.label);
          EXPECT_EQ(got.processes, w.processes);
          EXPECT_EQ(got.unit, w.unit);
          EXPECT_DOUBLE_EQ(got.children, w.children);
          EXPECT_DOUBLE_EQ(got.parent, w.parent);
          EXPECT_DOUBLE_EQ(got.min_per_process, w.min_per_process);
          EXPECT_DOUBLE_EQ(got.max_per_process, w.max_per_process);
          EXPECT_DOUBLE_EQ(got.avg_per_process, w.avg_per_process);
          EXPECT_DOUBLE_EQ(got.min_xfer_kb, w.min_xfer_kb);
        }
      });
}

// A long line that does not parse is quoted cut, not whole, in the error.
TEST(IozoneReportFuzzTest, ErrorsQuoteALongLineCut) {
  const std::string line =
      "Children see throughput for 2 initial writers = " + std::string(1 << 20, 'x');
  absl::StatusOr<IozoneReport> r = ParseIozoneReport(line);
  ASSERT_FALSE(r.ok());
  EXPECT_LE(r.status().message().size(), kMaxErrorBytes);
}

}  // namespace
}  // namespace farm::runners
