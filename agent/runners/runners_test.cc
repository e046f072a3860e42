// Real fio and iozone runs on small files in an allowed temp dir, parsed end
// to end; tool failures and timeouts become the documented statuses.
#include "agent/runners/runners.h"

#include <stdlib.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace farm::runners {
namespace {

namespace fs = std::filesystem;

class RealRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "runners-real-XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto t = AllowedTargets::Parse({dir_}, {});
    ASSERT_TRUE(t.ok()) << t.status();
    targets_ = *t;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::set<std::string> Phases(const RunResult& r, const std::string& metric) {
    std::set<std::string> out;
    for (const Sample& s : r.samples) {
      if (s.metric == metric) out.insert(s.phase);
    }
    return out;
  }
  double Value(const RunResult& r, const std::string& metric, const std::string& phase) {
    for (const Sample& s : r.samples) {
      if (s.metric == metric && s.phase == phase) return s.value;
    }
    ADD_FAILURE() << "no sample " << metric << "/" << phase;
    return -1;
  }
  int Entries() {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      (void)e;
      ++n;
    }
    return n;
  }

  std::string dir_;
  AllowedTargets targets_;
};

TEST_F(RealRunTest, FioRandrwOnASmallFile) {
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  FioRunner runner(*fio);
  RunOptions opts;
  opts.timeout = absl::Seconds(60);
  auto r = runner.RunParams({{"rw", "randrw"},
                             {"bs", "4k"},
                             {"size", "4m"},
                             {"runtime", "1"},
                             {"ioengine", "psync"},
                             {"numjobs", "2"},
                             {"filename", "data.bin"}},
                            targets_, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->raw_format, "fio-json");
  EXPECT_EQ(r->tool_version, fio->version);
  EXPECT_EQ(r->argv.front(), fio->path);
  EXPECT_EQ(Phases(*r, "iops"), (std::set<std::string>{"read", "write"}));
  EXPECT_GT(Value(*r, "iops", "read"), 0);
  EXPECT_GT(Value(*r, "bw_kib_s", "write"), 0);
  EXPECT_GT(Value(*r, "clat_mean_ns", "read"), 0);
  EXPECT_GE(Value(*r, "clat_p99_ns", "write"), Value(*r, "clat_p50_ns", "write"));
  // The raw output is what was parsed: it re-parses to the same numbers.
  auto again = ParseFioJson(r->raw_output);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->jobs.size(), 1u);  // group_reporting over numjobs=2
  EXPECT_DOUBLE_EQ(again->jobs[0].read.iops, Value(*r, "iops", "read"));
  EXPECT_TRUE(fs::exists(dir_ + "/data.bin"));
}

// A job whose files would not fit is refused before the tool starts, with
// the numbers; nothing is written.
TEST_F(RealRunTest, AJobLargerThanTheFreeSpaceIsRefusedBeforeItRuns) {
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  auto iozone = DetectIozone();
  ASSERT_TRUE(iozone.ok()) << iozone.status();
  // Under the submit cap of 1 TiB, over what this test's file system holds
  // free (checked: otherwise the test cannot tell).
  struct statvfs st {};
  ASSERT_EQ(statvfs(dir_.c_str(), &st), 0);
  ASSERT_LT(static_cast<double>(st.f_bavail) * st.f_frsize, 900.0 * (1ull << 30))
      << "the test directory has more than 900 GiB free";
  auto big = FioRunner(*fio).RunParams({{"rw", "write"}, {"size", "900g"}}, targets_, RunOptions{});
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted) << big.status();
  EXPECT_NE(big.status().message().find("bytes are free there"), std::string::npos) << big.status();
  auto many = IozoneRunner(*iozone).RunParams(
      {{"tests", "write"}, {"size", "15g"}, {"threads", "60"}}, targets_, RunOptions{});
  EXPECT_EQ(many.status().code(), absl::StatusCode::kResourceExhausted) << many.status();
  EXPECT_EQ(Entries(), 0);
}

TEST_F(RealRunTest, FioInTheDefaultDirectoryCleansUp) {
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  FioRunner runner(*fio);
  auto r = runner.RunParams({{"rw", "write"}, {"size", "1m"}}, targets_, RunOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Phases(*r, "bw_kib_s"), (std::set<std::string>{"write"}));
  EXPECT_EQ(Entries(), 0) << "fio left files in the allowed directory";
}

TEST_F(RealRunTest, FioTimeoutIsDeadlineExceeded) {
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  FioRunner runner(*fio);
  RunOptions opts;
  opts.timeout = absl::Milliseconds(500);
  auto r = runner.RunParams(
      {{"rw", "randread"}, {"size", "1m"}, {"runtime", "60"}, {"time_based", "1"}}, targets_, opts);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
}

TEST_F(RealRunTest, FioCancelled) {
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  FioRunner runner(*fio);
  RunOptions opts;
  int polls = 0;
  opts.cancelled = [&polls] { return ++polls > 10; };
  auto r = runner.RunParams(
      {{"rw", "randread"}, {"size", "1m"}, {"runtime", "60"}, {"time_based", "1"}}, targets_, opts);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
}

TEST_F(RealRunTest, ToolFailureCarriesStderr) {
  const std::string fake = dir_ + "/fake-fio";
  std::ofstream(fake) << "#!/bin/sh\necho 'fio: engine went away' >&2\n"
                         "exit 1\n";
  fs::permissions(fake, fs::perms::owner_all);
  FioRunner runner(ToolInfo{fake, "fio-fake"});
  auto r = runner.RunParams({{"size", "1m"}}, targets_, RunOptions{});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_NE(r.status().message().find("engine went away"), std::string::npos);
  EXPECT_NE(r.status().message().find("exit 1"), std::string::npos);
}

// iozone's throughput mode sleeps 2 s around each test (iozone.c), so the
// real run keeps to -i0 -i1 (~12 s); the random tests' report lines are
// covered by the recorded output in parsers_test.
TEST_F(RealRunTest, IozoneTwoProcessesOnSmallFiles) {
  auto iozone = DetectIozone();
  ASSERT_TRUE(iozone.ok()) << iozone.status();
  IozoneRunner runner(*iozone);
  RunOptions opts;
  opts.timeout = absl::Seconds(120);
  auto r = runner.RunParams(
      {{"tests", "write,rewrite,read,reread"}, {"size", "1m"}, {"record", "64k"}, {"threads", "2"}},
      targets_, opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->raw_format, "iozone");
  EXPECT_EQ(r->tool_version, iozone->version);
  const std::set<std::string> all = {"write", "rewrite", "read", "reread"};
  EXPECT_EQ(Phases(*r, "throughput_kb_s"), all);
  for (const std::string& phase : all) {
    EXPECT_GT(Value(*r, "throughput_kb_s", phase), 0) << phase;
    EXPECT_GT(Value(*r, "parent_throughput_kb_s", phase), 0) << phase;
    EXPECT_GT(Value(*r, "max_throughput_kb_s", phase), 0) << phase;
  }
  EXPECT_NE(r->raw_output.find("Children see throughput for  2 initial"), std::string::npos);
  EXPECT_EQ(std::vector<std::string>(r->argv.begin() + 1, r->argv.begin() + 9),
            (std::vector<std::string>{"-s", "1024k", "-r", "64k", "-i0", "-i1", "-t", "2"}));
  EXPECT_EQ(Entries(), 0) << "iozone files left behind";
}

}  // namespace
}  // namespace farm::runners
