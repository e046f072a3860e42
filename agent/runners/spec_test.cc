// Spec validation and argv building. The refusal tables run every refused
// spec through the real runner with a wrapped tool that would leave a marker
// if it were ever started, and check that a canary file outside the allowed
// directory is untouched after each one.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/runners/fio_spec.h"
#include "agent/runners/free_space.h"
#include "agent/runners/iozone_spec.h"
#include "agent/runners/runners.h"
#include "agent/runners/targets.h"
#include "gtest/gtest.h"

namespace farm::runners {
namespace {

namespace fs = std::filesystem;

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "runners-spec-XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    allowed_ = root_ + "/allowed";
    outside_ = root_ + "/outside";
    fs::create_directories(allowed_ + "/sub");
    fs::create_directories(outside_);
    canary_ = outside_ + "/canary";
    std::ofstream(canary_) << kCanaryText;
    ASSERT_EQ(::stat(canary_.c_str(), &canary_stat_), 0);
    fs::create_symlink(canary_, allowed_ + "/link");
    fs::create_directory_symlink(outside_, allowed_ + "/dirlink");
    fs::create_hard_link(canary_, allowed_ + "/hardlink");
    marker_ = root_ + "/tool-started";
    // A tool that leaves a marker before running the real one: if any
    // refused spec reached exec, the marker shows it.
    for (const char* tool : {"fio", "iozone"}) {
      const std::string path = absl::StrCat(root_, "/wrapped-", tool);
      std::ofstream(path) << "#!/bin/sh\ntouch " << marker_ << "\nexec " << tool << " \"$@\"\n";
      fs::permissions(path, fs::perms::owner_all);
    }
    auto allowed = AllowedTargets::Parse({allowed_}, {"/dev/null"});
    ASSERT_TRUE(allowed.ok()) << allowed.status();
    targets_ = *allowed;
  }
  void TearDown() override { fs::remove_all(root_); }

  // The canary is byte-for-byte and inode-for-inode what SetUp wrote, and
  // nothing else appeared next to it.
  void ExpectCanaryUntouched(const std::string& what) {
    struct stat st;
    ASSERT_EQ(::stat(canary_.c_str(), &st), 0) << what;
    std::ifstream in(canary_);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, kCanaryText) << what;
    EXPECT_EQ(st.st_ino, canary_stat_.st_ino) << what;
    EXPECT_EQ(st.st_size, canary_stat_.st_size) << what;
    EXPECT_EQ(st.st_mtim.tv_sec, canary_stat_.st_mtim.tv_sec) << what;
    EXPECT_EQ(st.st_mtim.tv_nsec, canary_stat_.st_mtim.tv_nsec) << what;
    int entries = 0;
    for (const auto& e : fs::directory_iterator(outside_)) {
      (void)e;
      ++entries;
    }
    EXPECT_EQ(entries, 1) << what << ": something was created in " << outside_;
    EXPECT_FALSE(fs::exists(marker_)) << what << ": the tool was started";
  }

  static constexpr char kCanaryText[] = "canary: must survive\n";
  std::string root_, allowed_, outside_, canary_, marker_;
  struct stat canary_stat_ {};
  AllowedTargets targets_;
};

struct Refusal {
  Params params;
  absl::StatusCode code;
  std::string message;  // must appear in the error
};

TEST_F(SandboxTest, EveryRefusedFioSpecStartsNothingAndSparesTheCanary) {
  const std::string ok_size = "1m";
  const std::vector<Refusal> table = {
      {{{"exec_prerun", "echo pwned > " + canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "runs a shell command"},
      {{{"exec_postrun", "rm -f " + canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "runs a shell command"},
      {{{"ioengine", "external:/tmp/evil.so"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "arbitrary code"},
      {{{"ioengine", "external"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "arbitrary code"},
      {{{"ioengine", "exec"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "arbitrary code"},
      {{{"ioengine", "sg"}, {"size", ok_size}}, absl::StatusCode::kInvalidArgument, "allowlist"},
      {{{"rw", "trim"}, {"size", ok_size}}, absl::StatusCode::kInvalidArgument, "trim modes"},
      {{{"rw", "randtrim"}, {"size", ok_size}}, absl::StatusCode::kInvalidArgument, "trim modes"},
      {{{"rw", "trimwrite"}, {"size", ok_size}}, absl::StatusCode::kInvalidArgument, "trim modes"},
      {{{"rw", "randread:8"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "is not one of"},
      {{{"allow_mounted_write", "1"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "mounted device"},
      {{{"write_bw_log", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"write_lat_log", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"write_iops_log", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"write_hist_log", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"write_iolog", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"log_avg_msec", "10"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "log files"},
      {{{"read_iolog", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "read or replay"},
      {{{"output", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "output file and format"},
      {{{"output-format", "terse"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "output file and format"},
      {{{"trigger-file", canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "run a command"},
      {{{"ioscheduler", "none"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "host settings"},
      {{{"verify", "md5"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "unknown option"},
      {{{"name", "x"}, {"size", ok_size}}, absl::StatusCode::kInvalidArgument, "unknown option"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", "../outside/canary"}},
       absl::StatusCode::kPermissionDenied,
       "'..'"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", allowed_ + "/sub/../../outside/canary"}},
       absl::StatusCode::kPermissionDenied,
       "'..'"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", canary_}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", allowed_ + "/link"}},
       absl::StatusCode::kPermissionDenied,
       "symbolic link"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", allowed_ + "/dirlink/canary"}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", allowed_ + "/hardlink"}},
       absl::StatusCode::kPermissionDenied,
       "hard links"},
      {{{"size", ok_size}, {"rw", "write"}, {"directory", outside_}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", ok_size}, {"rw", "write"}, {"directory", allowed_ + "/dirlink"}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", allowed_ + "/a:" + canary_}},
       absl::StatusCode::kInvalidArgument,
       "list of files"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", "${HOME}/x"}},
       absl::StatusCode::kInvalidArgument,
       "may expand '$'"},
      {{{"size", ok_size}, {"rw", "write"}, {"filename", "/dev/null"}},
       absl::StatusCode::kPermissionDenied,
       "read-only"},
      {{{"rw", "read"}, {"filename", "/dev/zero"}},
       absl::StatusCode::kPermissionDenied,
       "not allowed on this agent"},
      {{{"size", ok_size}, {"filename", allowed_ + "/f"}, {"directory", allowed_}},
       absl::StatusCode::kInvalidArgument,
       "not both"},
      {{{"bs", "4k$(rm " + canary_ + ")"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "param 'bs'"},
      {{{"size", "${HOME}"}}, absl::StatusCode::kInvalidArgument, "param 'size'"},
      {{{"cpus_allowed", "0;touch " + canary_}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "param 'cpus_allowed'"},
      {{{"numjobs", "100000"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "param 'numjobs'"},
      {{{"iodepth", "-1"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "param 'iodepth'"},
      {{{"rw", "write"}}, absl::StatusCode::kInvalidArgument, "'size' is required"},
      {{{"time_based", "1"}, {"size", ok_size}},
       absl::StatusCode::kInvalidArgument,
       "needs 'runtime'"},
  };
  FioRunner runner(ToolInfo{root_ + "/wrapped-fio", "fio-test"});
  for (const Refusal& r : table) {
    std::string what;
    for (const auto& [k, v] : r.params) absl::StrAppend(&what, k, "=", v, " ");
    absl::StatusOr<RunResult> result = runner.RunParams(r.params, targets_, RunOptions{});
    ASSERT_FALSE(result.ok()) << what << " was accepted";
    EXPECT_EQ(result.status().code(), r.code) << what << result.status();
    EXPECT_NE(result.status().message().find(r.message), std::string::npos)
        << what << ": message \"" << result.status().message() << "\" lacks \"" << r.message
        << "\"";
    ExpectCanaryUntouched(what);
  }
}

TEST_F(SandboxTest, EveryRefusedIozoneSpecStartsNothingAndSparesTheCanary) {
  const std::vector<Refusal> table = {
      {{{"size", "1m"}, {"filename", canary_}},
       absl::StatusCode::kInvalidArgument,
       "named by the agent"},
      {{{"size", "1m"}, {"tests", "write,exec"}},
       absl::StatusCode::kInvalidArgument,
       "unknown test 'exec'"},
      {{{"size", "1m"}, {"tests", "write,,read"}},
       absl::StatusCode::kInvalidArgument,
       "empty list item"},
      {{{"size", "1m"}, {"directory", outside_}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", "1m"}, {"directory", "../outside"}}, absl::StatusCode::kPermissionDenied, "'..'"},
      {{{"size", "1m"}, {"directory", allowed_ + "/dirlink"}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"size", "1m"}, {"directory", "/dev"}},
       absl::StatusCode::kPermissionDenied,
       "outside the allowed"},
      {{{"tests", "write"}}, absl::StatusCode::kInvalidArgument, "'size' is required"},
      {{{"size", "64k"}, {"record", "1m"}}, absl::StatusCode::kInvalidArgument, "must not exceed"},
      {{{"size", "1m"}, {"threads", "0"}}, absl::StatusCode::kInvalidArgument, "param 'threads'"},
      {{{"size", "1m"}, {"extra_args", "-+r " + canary_}},
       absl::StatusCode::kInvalidArgument,
       "unknown option"},
      {{{"size", "1m"}, {"-+u", "1"}}, absl::StatusCode::kInvalidArgument, "unknown option"},
      {{{"size", "1m;rm " + canary_}}, absl::StatusCode::kInvalidArgument, "param 'size'"},
  };
  IozoneRunner runner(ToolInfo{root_ + "/wrapped-iozone", "3.489"});
  for (const Refusal& r : table) {
    std::string what;
    for (const auto& [k, v] : r.params) absl::StrAppend(&what, k, "=", v, " ");
    absl::StatusOr<RunResult> result = runner.RunParams(r.params, targets_, RunOptions{});
    ASSERT_FALSE(result.ok()) << what << " was accepted";
    EXPECT_EQ(result.status().code(), r.code) << what << result.status();
    EXPECT_NE(result.status().message().find(r.message), std::string::npos)
        << what << ": message \"" << result.status().message() << "\" lacks \"" << r.message
        << "\"";
    ExpectCanaryUntouched(what);
  }
}

TEST_F(SandboxTest, IozoneRefusesAPlantedSymlinkUnderItsFileName) {
  fs::create_symlink(canary_, allowed_ + "/planted.0");
  auto spec = IozoneSpecFromParams({{"size", "1m"}});
  ASSERT_TRUE(spec.ok());
  auto cmd = BuildIozoneCommand(*spec, targets_, "iozone", "planted");
  ASSERT_FALSE(cmd.ok());
  EXPECT_EQ(cmd.status().code(), absl::StatusCode::kPermissionDenied);
  ExpectCanaryUntouched("planted symlink");
}

TEST_F(SandboxTest, FioArgvIsBuiltFromTheSpec) {
  auto spec = FioSpecFromParams({{"rw", "randread"},
                                 {"bs", "4k"},
                                 {"iodepth", "64"},
                                 {"numjobs", "2"},
                                 {"size", "4m"},
                                 {"runtime", "1"},
                                 {"ramp_time", "0"},
                                 {"ioengine", "io_uring"},
                                 {"direct", "1"},
                                 {"cpus_allowed", "0-1"},
                                 {"filename", "sub/data"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto argv = BuildFioArgv(*spec, targets_, "/usr/bin/fio", "job1");
  ASSERT_TRUE(argv.ok()) << argv.status();
  const std::string real_allowed = fs::canonical(allowed_);
  EXPECT_EQ(*argv,
            (std::vector<std::string>{
                "/usr/bin/fio", "--name=job1", "--rw=randread", "--bs=4096", "--iodepth=64",
                "--numjobs=2", "--ioengine=io_uring", "--direct=1", "--size=4194304", "--runtime=1",
                "--cpus_allowed=0-1", "--filename=" + real_allowed + "/sub/data",
                "--group_reporting", "--output-format=json"}));
}

TEST_F(SandboxTest, FioDefaultsToTheFirstAllowedDirectory) {
  auto spec = FioSpecFromParams({{"size", "1m"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto argv = BuildFioArgv(*spec, targets_);
  ASSERT_TRUE(argv.ok()) << argv.status();
  const std::string real_allowed = fs::canonical(allowed_);
  EXPECT_NE(std::find(argv->begin(), argv->end(), "--directory=" + real_allowed), argv->end());
  EXPECT_NE(std::find(argv->begin(), argv->end(), "--unlink=1"), argv->end());
  EXPECT_EQ(argv->back(), "--output-format=json");
}

TEST_F(SandboxTest, DevicesReadOnlyUnlessAllowedRw) {
  auto spec = FioSpecFromParams({{"rw", "randread"}, {"filename", "/dev/null"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(BuildFioArgv(*spec, targets_).ok());
  auto write = FioSpecFromParams({{"rw", "randrw"}, {"filename", "/dev/null"}});
  ASSERT_TRUE(write.ok());
  EXPECT_EQ(BuildFioArgv(*write, targets_).status().code(), absl::StatusCode::kPermissionDenied);
  auto rw_targets = AllowedTargets::Parse({}, {"/dev/null:rw"});
  ASSERT_TRUE(rw_targets.ok());
  auto argv = BuildFioArgv(*write, *rw_targets);
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_NE(std::find(argv->begin(), argv->end(), "--filename=/dev/null"), argv->end());
}

TEST_F(SandboxTest, NoAllowedDirectoryMeansNoFileRuns) {
  auto none = AllowedTargets::Parse({}, {});
  ASSERT_TRUE(none.ok());
  auto spec = FioSpecFromParams({{"size", "1m"}});
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(BuildFioArgv(*spec, *none).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(SandboxTest, AllowListFlagsAreChecked) {
  EXPECT_FALSE(AllowedTargets::Parse({root_ + "/missing"}, {}).ok());
  EXPECT_FALSE(AllowedTargets::Parse({canary_}, {}).ok());  // not a dir
  EXPECT_FALSE(AllowedTargets::Parse({}, {canary_}).ok());  // not a device
  auto t = AllowedTargets::Parse({allowed_ + "/dirlink"}, {"/dev/null:rw"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dirs().at(0), fs::canonical(outside_).string());
  EXPECT_TRUE(t->devices().at(0).writable);
}

TEST_F(SandboxTest, IozoneArgvIsBuiltFromTheSpec) {
  auto spec = IozoneSpecFromParams({{"tests", "[write, read, randread]"},
                                    {"size", "1g"},
                                    {"record", "256k"},
                                    {"threads", "2"},
                                    {"direct", "true"},
                                    {"machine_info", "1"},
                                    {"directory", "sub"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto cmd = BuildIozoneCommand(*spec, targets_, "/usr/bin/iozone", "j");
  ASSERT_TRUE(cmd.ok()) << cmd.status();
  const std::string sub = fs::canonical(allowed_ + "/sub");
  EXPECT_EQ(cmd->directory, sub);
  EXPECT_EQ(cmd->argv, (std::vector<std::string>{"/usr/bin/iozone", "-s", "1048576k", "-r", "256k",
                                                 "-i0", "-i1", "-i2", "-I", "-M", "-t", "2", "-F",
                                                 sub + "/j.0", sub + "/j.1"}));
}

TEST(IozoneGuestArgv, SameArgvWithFilesInTheGuestDirectory) {
  auto spec = IozoneSpecFromParams({{"tests", "[write, read, randread]"},
                                    {"size", "1g"},
                                    {"record", "256k"},
                                    {"threads", "2"},
                                    {"direct", "true"},
                                    {"machine_info", "1"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto argv = BuildIozoneGuestArgv(*spec, "/mnt/nvme", "iozone", "j");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(*argv, (std::vector<std::string>{"iozone", "-s", "1048576k", "-r", "256k", "-i0", "-i1",
                                             "-i2", "-I", "-M", "-t", "2", "-F", "/mnt/nvme/j.0",
                                             "/mnt/nvme/j.1"}));
  spec->directory = "/srv";  // the guest has no other place for files
  EXPECT_EQ(BuildIozoneGuestArgv(*spec, "/mnt/nvme").status().code(),
            absl::StatusCode::kInvalidArgument);
  spec->directory = "/mnt/nvme";
  EXPECT_TRUE(BuildIozoneGuestArgv(*spec, "/mnt/nvme").ok());
  EXPECT_EQ(BuildIozoneGuestArgv(*spec, "/mnt/nvme", "iozone", "../x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FioSpec, AcceptedValues) {
  auto spec = FioSpecFromParams({{"rw", "RandRW"},
                                 {"rwmixread", "70"},
                                 {"size", "1GiB"},
                                 {"runtime", "2m"},
                                 {"time_based", "yes"},
                                 {"ioengine", "libaio"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rw, "randrw");
  EXPECT_EQ(spec->size_bytes, 1ull << 30);
  EXPECT_EQ(spec->runtime_s, 120);
  EXPECT_TRUE(spec->time_based);
  EXPECT_TRUE(spec->writes());
  EXPECT_EQ(spec->ioengine, "libaio");
}

TEST(FioGuestArgv, RunsOnTheGuestDeviceOnly) {
  auto spec = FioSpecFromParams({{"rw", "randread"}, {"size", "1m"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto argv = BuildFioGuestArgv(*spec, "/dev/nvme0n1");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(argv->front(), "fio");
  EXPECT_NE(std::find(argv->begin(), argv->end(), "--filename=/dev/nvme0n1"), argv->end());
  EXPECT_EQ(std::find(argv->begin(), argv->end(), "--unlink=1"), argv->end());
  EXPECT_EQ(argv->back(), "--output-format=json");

  spec = FioSpecFromParams({{"filename", "/dev/nvme0n1"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(BuildFioGuestArgv(*spec, "/dev/nvme0n1").ok());
  spec = FioSpecFromParams({{"filename", "/dev/sda"}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<std::string>> refused = BuildFioGuestArgv(*spec, "/dev/nvme0n1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "a guest run's only target is its NVMe /dev/nvme0n1; the spec names '/dev/sda'");
}

// What one job may lay out is capped at submit: fio's size x numjobs in a
// directory (one file a job), size alone for one shared file; iozone's
// size x threads.
TEST(JobFootprintTest, SizeTimesJobsIsCappedAtOneTebibyte) {
  auto fio = FioSpecFromParams({{"size", "1t"}, {"numjobs", "64"}, {"runtime", "86400"}});
  ASSERT_EQ(fio.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fio.status().message(),
            "fio: size x numjobs = 70368744177664 bytes is more than a job may lay out on its "
            "target (1099511627776 bytes, 1 TiB)");
  EXPECT_TRUE(FioSpecFromParams({{"size", "1t"}}).ok());
  EXPECT_TRUE(FioSpecFromParams({{"size", "1t"}, {"numjobs", "64"}, {"filename", "f"}}).ok());
  EXPECT_TRUE(FioSpecFromParams({{"numjobs", "64"}, {"filename", "/dev/nvme0n1"}}).ok());
  auto iozone = IozoneSpecFromParams({{"size", "1t"}, {"threads", "256"}});
  ASSERT_EQ(iozone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(iozone.status().message().find("iozone: size x threads = "), std::string::npos);
  EXPECT_TRUE(IozoneSpecFromParams({{"size", "4g"}, {"threads", "256"}}).ok());
}

TEST(FreeSpaceTest, TheReserveIsFivePercentAtMostFourGibibytes) {
  EXPECT_EQ(FreeSpaceReserve(20ull << 30), 1ull << 30);
  EXPECT_EQ(FreeSpaceReserve(1ull << 40), 4ull << 30);
  EXPECT_TRUE(CheckFreeSpace("/tmp", 0).ok());
  EXPECT_TRUE(CheckFreeSpace("/tmp", 4096).ok());
  EXPECT_EQ(CheckFreeSpace("/tmp", 1ull << 62).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CheckFreeSpace("/nonexistent-farm-dir", 4096).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace farm::runners
