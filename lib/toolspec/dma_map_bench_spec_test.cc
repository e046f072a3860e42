#include "lib/toolspec/dma_map_bench_spec.h"

#include <gtest/gtest.h>

namespace farm::toolspec {
namespace {

TEST(DmaMapBenchSpecTest, DefaultsAreOneThreadOneSecondOnePage) {
  absl::StatusOr<DmaMapBenchSpec> s = DmaMapBenchSpecFromParams({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(DmaMapBenchArgv(*s, "/bin/dma_map_benchmark"),
            (std::vector<std::string>{"/bin/dma_map_benchmark", "-t", "1", "-s", "1", "-n", "-1",
                                      "-b", "32", "-d", "0", "-x", "0", "-g", "1"}));
}

TEST(DmaMapBenchSpecTest, TakesTheEmulatorsParamNames) {
  absl::StatusOr<DmaMapBenchSpec> s = DmaMapBenchSpecFromParams(
      {{"threads", "2"}, {"seconds", "3"}, {"granule", "4"}, {"dir", "1"}, {"bits", "64"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->threads, 2);
  EXPECT_EQ(s->seconds, 3);
  EXPECT_EQ(s->granule, 4);
  EXPECT_EQ(s->dir, 1);
  EXPECT_EQ(s->bits, 64);
}

TEST(DmaMapBenchSpecTest, RefusesWhatTheKernelRefuses) {
  for (const Params& p : std::vector<Params>{{{"threads", "0"}},
                                             {{"seconds", "301"}},
                                             {{"seconds", "0.5"}},
                                             {{"granule", "1025"}},
                                             {{"dir", "3"}},
                                             {{"bits", "19"}},
                                             {{"dma_trans_ns", "10000001"}}}) {
    EXPECT_EQ(DmaMapBenchSpecFromParams(p).status().code(), absl::StatusCode::kInvalidArgument)
        << p.begin()->first << "=" << p.begin()->second;
  }
  absl::Status device = DmaMapBenchSpecFromParams({{"device", "nvme0"}}).status();
  EXPECT_NE(device.message().find("spare PCI device"), std::string::npos) << device;
  absl::Status unknown = DmaMapBenchSpecFromParams({{"iodepth", "4"}}).status();
  EXPECT_NE(unknown.message().find("allowed: threads, seconds"), std::string::npos) << unknown;
}

TEST(DmaMapBenchSpecTest, ParsesTheToolsLinesBackToHundredsOfNanoseconds) {
  absl::StatusOr<DmaMapBenchReport> r = ParseDmaMapBenchOutput(
      "dma mapping benchmark: threads:1 seconds:1 node:-1 dir:BIDIRECTIONAL granule: 1\n"
      "average map latency(us):93.7 standard deviation:12.0\n"
      "average unmap latency(us):141.3 standard deviation:0.4\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->avg_map_100ns, 937);
  EXPECT_EQ(r->map_stddev, 120);
  EXPECT_EQ(r->avg_unmap_100ns, 1413);
  EXPECT_EQ(r->unmap_stddev, 4);
}

TEST(DmaMapBenchSpecTest, RefusesOutputWithoutBothLatencyLines) {
  EXPECT_FALSE(ParseDmaMapBenchOutput("average map latency(us):1.0 standard deviation:0.1\n").ok());
  EXPECT_FALSE(ParseDmaMapBenchOutput("open: No such file or directory\n").ok());
  EXPECT_FALSE(ParseDmaMapBenchOutput("average map latency(us):x standard deviation:0.1\n"
                                      "average unmap latency(us):1.0 standard deviation:0.1\n")
                   .ok());
}

}  // namespace
}  // namespace farm::toolspec
