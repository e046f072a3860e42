// The fio / iozone Executors the agent plugs in: a real fio job from a proto
// Job, refusals mapped to permanent failures, cancellation.
#include "agent/executors/real_executors.h"

#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "gtest/gtest.h"

namespace farm::runners {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

RealExecutorOptions Opts(const std::string& dir, const std::string& tool = "") {
  RealExecutorOptions o;
  o.allow_dirs = {dir};
  o.tool = tool;
  return o;
}

class RealExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "runners-exec-XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  pb::Job FioJob(std::map<std::string, std::string> params) {
    pb::Job job;
    job.set_id(7);
    job.set_executor(pb::EXECUTOR_FIO);
    job.mutable_workload()->set_name("fio-small");
    for (const auto& [k, v] : params) {
      (*job.mutable_workload()->mutable_params())[k] = v;
    }
    return job;
  }

  std::string dir_;
};

TEST_F(RealExecutorTest, FioJobRunsAndReportsSamples) {
  auto exec = MakeRealExecutor("fio", Opts(dir_));
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->capability(), "fio");
  EXPECT_EQ((*exec)->version().rfind("fio-", 0), 0u) << (*exec)->version();
  farm::agent::CancelToken cancel;
  auto r = (*exec)->Run(FioJob({{"rw", "randread"}, {"size", "2m"}, {"runtime", "1"}}), cancel);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->raw_format, "fio-json");
  EXPECT_EQ(r->tool_version, (*exec)->version());
  bool have_iops = false;
  for (const pb::Sample& s : r->samples) {
    EXPECT_EQ(s.phase(), "read");
    if (s.metric() == "iops") {
      have_iops = true;
      EXPECT_GT(s.value(), 0);
      EXPECT_EQ(s.unit(), "iops");
    }
  }
  EXPECT_TRUE(have_iops);
}

TEST_F(RealExecutorTest, RefusalsArePermanentFailures) {
  auto exec = MakeRealExecutor("fio", Opts(dir_));
  ASSERT_TRUE(exec.ok()) << exec.status();
  farm::agent::CancelToken cancel;
  auto bad = (*exec)->Run(FioJob({{"size", "1m"}, {"exec_prerun", "touch /tmp/x"}}), cancel);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(farm::agent::IsPermanentFailure(bad.status().code()));
  // A target outside --allow-dir is PermissionDenied inside the runner;
  // the agent must not retry it.
  auto outside = (*exec)->Run(FioJob({{"size", "1m"}, {"directory", "/etc"}}), cancel);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("outside the allowed"), std::string::npos)
      << outside.status();
}

TEST_F(RealExecutorTest, CancelTokenStopsTheRun) {
  auto exec = MakeRealExecutor("fio", Opts(dir_));
  ASSERT_TRUE(exec.ok()) << exec.status();
  farm::agent::CancelToken cancel;
  std::thread canceller([&cancel] {
    absl::SleepFor(absl::Milliseconds(300));
    cancel.Cancel();
  });
  auto r = (*exec)->Run(
      FioJob({{"rw", "randread"}, {"size", "1m"}, {"runtime", "60"}, {"time_based", "1"}}), cancel);
  canceller.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
}

TEST_F(RealExecutorTest, ConstructionErrors) {
  EXPECT_EQ(MakeRealExecutor("fio", {}).status().code(),
            absl::StatusCode::kInvalidArgument);  // nothing allowed
  EXPECT_EQ(MakeRealExecutor("dd", Opts(dir_)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeRealExecutor("fio", Opts(dir_ + "/missing")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto missing = MakeRealExecutor("iozone", Opts(dir_, "no-iozone"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto iozone = MakeRealExecutor("iozone", Opts(dir_));
  ASSERT_TRUE(iozone.ok()) << iozone.status();
  EXPECT_EQ((*iozone)->capability(), "iozone");
  farm::agent::CancelToken cancel;
  pb::Job job;
  job.set_executor(pb::EXECUTOR_IOZONE);
  (*job.mutable_workload()->mutable_params())["size"] = "1m";
  (*job.mutable_workload()->mutable_params())["filename"] = "/etc/passwd";
  EXPECT_EQ((*iozone)->Run(job, cancel).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::runners
