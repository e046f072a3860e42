#include "agent/executors/emulator_executor.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "agent/executors/emu_samples.h"
#include "nlohmann/json.hpp"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

std::map<std::string, pb::Sample> ByKey(const std::vector<pb::Sample>& samples) {
  std::map<std::string, pb::Sample> out;
  for (const auto& s : samples) out[s.metric() + (s.phase().empty() ? "" : "/" + s.phase())] = s;
  return out;
}

TEST(SamplesFromEmuResultTest, HeadlineLatenciesAndPhasedExtras) {
  farm::emu::RunResult r;
  r.throughput = 1234.5;
  r.throughput_unit = "maps/s";
  r.throughput_per_cpu = 308.6;
  r.operations = 1000;
  r.map_latency.count = 1000;
  r.map_latency.mean = 250;
  r.map_latency.p99 = 900;
  r.unmap_latency.count = 0;  // nothing timed: no unmap samples
  r.iotlb_hits = 3;
  r.iotlb_misses = 1;
  r.extra["throughput.write"] = 4.73;
  r.extra["nodes_visited"] = 17;
  auto samples = ByKey(SamplesFromEmuResult(r));
  EXPECT_DOUBLE_EQ(samples["throughput"].value(), 1234.5);
  EXPECT_EQ(samples["throughput"].unit(), "maps/s");
  EXPECT_DOUBLE_EQ(samples["map_latency_mean"].value(), 250);
  EXPECT_EQ(samples["map_latency_mean"].unit(), "ns");
  EXPECT_DOUBLE_EQ(samples["map_latency_p99"].value(), 900);
  EXPECT_EQ(samples.count("unmap_latency_mean"), 0u);
  EXPECT_DOUBLE_EQ(samples["iotlb_miss_rate"].value(), 0.25);
  EXPECT_DOUBLE_EQ(samples["throughput/write"].value(), 4.73);
  EXPECT_EQ(samples["throughput/write"].phase(), "write");
  EXPECT_DOUBLE_EQ(samples["nodes_visited"].value(), 17);
}

TEST(SamplesFromEmuResultTest, ExtrasCarryTheUnitTheirNameSays) {
  farm::emu::RunResult r;
  r.extra["throughput_kb_s.read"] = 4.7e6;
  r.extra["avg_map_100ns"] = 12;
  r.extra["map_stddev"] = 3;
  r.extra["map_sg_full_chunk_mean_ns"] = 410;
  r.extra["iops_cpu3"] = 2e5;
  r.extra["ios_reaped_in_window"] = 90;
  r.extra["nodes_visited"] = 17;
  auto samples = ByKey(SamplesFromEmuResult(r));
  EXPECT_EQ(samples["throughput_kb_s/read"].unit(), "kB/s");
  EXPECT_EQ(samples["avg_map_100ns"].unit(), "100ns");
  EXPECT_EQ(samples["map_stddev"].unit(), "100ns");
  EXPECT_EQ(samples["map_sg_full_chunk_mean_ns"].unit(), "ns");
  EXPECT_EQ(samples["iops_cpu3"].unit(), "IOPS");
  EXPECT_EQ(samples["ios_reaped_in_window"].unit(), "I/Os");
  EXPECT_EQ(samples["nodes_visited"].unit(), "");
}

pb::Job TinyJob() {
  pb::Job job;
  job.set_id(1);
  job.set_platform("intel-vtd-snb16c");
  job.set_commit_id("v4.6");
  job.set_mode(pb::IOMMU_MODE_STRICT);
  job.mutable_workload()->set_name("dma-map-bench");
  (*job.mutable_workload()->mutable_params())["threads"] = "2";
  (*job.mutable_workload()->mutable_params())["seconds"] = "0.001";
  job.set_seed(7);
  job.set_executor(pb::EXECUTOR_EMULATOR);
  return job;
}

TEST(EmulatorExecutorTest, RunsARealEmulatorJob) {
  EmulatorExecutor executor;
  CancelToken cancel;
  auto result = executor.Run(TinyJob(), cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->raw_format, "emu-json");
  auto json = nlohmann::json::parse(result->raw_output);
  EXPECT_TRUE(json.is_object());
  auto samples = ByKey(result->samples);
  ASSERT_EQ(samples.count("throughput"), 1u);
  EXPECT_GT(samples["throughput"].value(), 0);
  EXPECT_GT(samples["map_latency_mean"].value(), 0);
  EXPECT_GT(result->events_per_second, 0);
}

TEST(EmulatorExecutorTest, ReportsTheModeItsKernelReallyRan) {
  EmulatorExecutor executor;
  CancelToken cancel;
  pb::Job job = TinyJob();
  job.set_mode(pb::IOMMU_MODE_LAZY);
  auto lazy = executor.Run(job, cancel);
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  ASSERT_TRUE(lazy->emulated.has_value());
  EXPECT_EQ(lazy->emulated->requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(lazy->emulated->effective, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(lazy->emulated->domain_type, "DMA-FQ");
  // A commit whose flush queue cannot be set up runs strict under a lazy
  // request, and says why.
  job.set_commit_id("0123456789ab");
  (*job.mutable_model_set())["fq.init_fails"] = "true";
  auto fell_back = executor.Run(job, cancel);
  ASSERT_TRUE(fell_back.ok()) << fell_back.status();
  ASSERT_TRUE(fell_back->emulated.has_value());
  EXPECT_EQ(fell_back->emulated->requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(fell_back->emulated->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(fell_back->emulated->domain_type, "DMA");
  EXPECT_NE(fell_back->emulated->detail.find("iommu_dma_init_fq"), std::string::npos)
      << fell_back->emulated->detail;
}

TEST(EmulatorExecutorTest, SameSeedSameNumbers) {
  EmulatorExecutor executor;
  CancelToken cancel;
  auto a = executor.Run(TinyJob(), cancel);
  auto b = executor.Run(TinyJob(), cancel);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_DOUBLE_EQ(ByKey(a->samples)["throughput"].value(),
                   ByKey(b->samples)["throughput"].value());
}

TEST(EmulatorExecutorTest, BadJobsArePermanentFailures) {
  EmulatorExecutor executor;
  CancelToken cancel;
  pb::Job job = TinyJob();
  job.set_platform("no-such-platform");
  auto result = executor.Run(job, cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsPermanentFailure(result.status().code())) << result.status();
  EXPECT_NE(result.status().message().find("no-such-platform"), std::string::npos)
      << result.status();

  job = TinyJob();
  job.set_mode(pb::IOMMU_MODE_UNSPECIFIED);
  result = executor.Run(job, cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(IsPermanentFailure(result.status().code())) << result.status();
}

TEST(EmulatorExecutorTest, UnknownCommitRunsTheSchedulersResolvedKeys) {
  EmulatorExecutor executor;
  pb::Job job = TinyJob();
  job.set_commit_id("0123456789ab");  // from a user catalog
  (*job.mutable_model_set())["iova.allocator"] = "rcache";
  auto spec = executor.SpecForJob(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kernel, "iova.allocator=rcache");
  EXPECT_TRUE(spec->sets.empty());
  CancelToken cancel;
  EXPECT_TRUE(executor.Run(job, cancel).ok());

  job.clear_model_set();
  EXPECT_FALSE(executor.Run(job, cancel).ok());
}

// A user catalog may share ids with the shipped one (release tags): its
// commit runs the scheduler's resolved keys alone, never the shipped state.
TEST(EmulatorExecutorTest, AnotherCatalogsCommitRunsOnlyItsResolvedKeys) {
  EmulatorExecutor executor;
  pb::Job job = TinyJob();
  job.set_catalog("my-tree");
  job.set_commit_id("v5.11");  // also a linux-iommu tag
  auto spec = executor.SpecForJob(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kernel, "") << "nothing set: the registry defaults";
  CancelToken cancel;
  EXPECT_TRUE(executor.Run(job, cancel).ok());
  (*job.mutable_model_set())["iova.allocator"] = "rbtree";
  spec = executor.SpecForJob(job);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kernel, "iova.allocator=rbtree");
  EXPECT_TRUE(spec->sets.empty());

  job.set_catalog("linux-iommu");  // the agent's own: resolved in it
  spec = executor.SpecForJob(job);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->kernel, "v5.11");
  EXPECT_EQ(spec->sets.at("iova.allocator"), "rbtree");
}

TEST(EmulatorExecutorTest, CancelledBeforeRunIsCancelled) {
  EmulatorExecutor executor;
  CancelToken cancel;
  cancel.Cancel();
  EXPECT_EQ(executor.Run(TinyJob(), cancel).status().code(), absl::StatusCode::kCancelled);
}

// A run that would take many minutes of wall-clock time (300 virtual seconds).
pb::Job EndlessJob() {
  pb::Job job = TinyJob();
  (*job.mutable_workload()->mutable_params())["seconds"] = "300";
  return job;
}

TEST(EmulatorExecutorTest, ARunPastTheTimeLimitFailsForGood) {
  EmulatorExecutor executor("", absl::Milliseconds(200));
  CancelToken cancel;
  auto result = executor.Run(EndlessJob(), cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_TRUE(IsPermanentFailure(result.status().code()));
  EXPECT_NE(result.status().message().find("--emulator-time-limit"), std::string::npos)
      << result.status();
}

TEST(EmulatorExecutorTest, ARevokedLeaseStopsTheRunningEmulator) {
  EmulatorExecutor executor;  // no time limit: only the token ends it
  CancelToken cancel;
  std::thread revoke([&cancel] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel.Cancel();
  });
  auto result = executor.Run(EndlessJob(), cancel);
  revoke.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled) << result.status();
}

}  // namespace
}  // namespace farm::agent
