#include "cli/measured_costs.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

pb::Result Measured(const std::string& commit, double map_ns, double unmap_ns, uint32_t shift,
                    pb::IommuMode mode = pb::IOMMU_MODE_STRICT) {
  pb::Result r;
  r.mutable_job()->set_commit_id(commit);
  r.mutable_job()->set_catalog("test-tree");
  r.mutable_job()->set_mode(mode);
  r.mutable_host()->mutable_guest()->set_icount_shift(shift);
  r.mutable_host()->mutable_guest()->set_accel(shift ? "tcg-icount" : "tcg");
  pb::Sample* m = r.add_samples();
  m->set_metric("map_latency_mean");
  m->set_value(map_ns);
  pb::Sample* u = r.add_samples();
  u->set_metric("unmap_latency_mean");
  u->set_value(unmap_ns);
  return r;
}

pb::Catalog Source() {
  pb::Catalog c;
  c.set_name("test-tree");
  const char* ids[] = {"aaaaaaaaaaaa1111", "bbbbbbbbbbbb2222", "cccccccccccc3333"};
  for (int i = 0; i < 3; ++i) {
    pb::CatalogCommit* cc = c.add_commits();
    cc->set_id(ids[i]);
    cc->set_subject(i == 2 ? "iommu/dma: flush the whole IOTLB \"after\" a strict unmap" : "s");
    cc->set_index(i);
  }
  (*c.mutable_commits(0)->mutable_set())["iova.allocator"] = "rcache";
  return c;
}

// Instructions = guest-time latency / 2^shift (shift 7: 128 ns each): the
// third commit's unmap runs 718 instructions more than the reference's; the
// second was not measured and inherits the first's (no keys of its own).
TEST(MeasuredCostsTest, DeltasAreInstructionsOverTheReference) {
  const std::vector<pb::Result> runs = {
      Measured("aaaaaaaaaaaa1111", 128000, 249600, 7),
      Measured("aaaaaaaaaaaa1111", 128000, 249600, 7),
      Measured("cccccccccccc3333", 128128, 341504, 7),
      Measured("cccccccccccc3333", 0, 0, 7, pb::IOMMU_MODE_PASSTHROUGH)};
  absl::StatusOr<Measurement> m = MeasureCommits(runs, pb::IOMMU_MODE_STRICT);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->icount_shift, 7u);
  ASSERT_EQ(m->commits.size(), 2u);
  EXPECT_EQ(m->commits["aaaaaaaaaaaa1111"].runs, 2);
  absl::StatusOr<std::string> yaml =
      MeasuredCatalogYaml(Source(), "test-tree-measured", *m, "aaaaaaa");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  const YAML::Node parsed = YAML::Load(*yaml);
  EXPECT_EQ(parsed["catalog"].as<std::string>(), "test-tree-measured");
  const YAML::Node commits = parsed["commits"];
  ASSERT_EQ(commits.size(), 3u) << *yaml;
  EXPECT_EQ(commits[0]["set"]["sw.unmap_delta_insns"].as<std::string>(), "0");
  EXPECT_EQ(commits[0]["set"]["iova.allocator"].as<std::string>(), "rcache")
      << "the source's keys stay";
  EXPECT_FALSE(commits[1]["set"]) << *yaml;
  EXPECT_EQ(commits[2]["set"]["sw.map_delta_insns"].as<std::string>(), "1");
  EXPECT_EQ(commits[2]["set"]["sw.unmap_delta_insns"].as<std::string>(), "718");
  EXPECT_EQ(commits[2]["subject"].as<std::string>(), Source().commits(2).subject());
  EXPECT_EQ(FormatMeasurement(Source(), *m),
            "commit        runs  map insns  unmap insns  subject\n"
            "aaaaaaaaaaaa     2       1000         1950  s\n"
            "cccccccccccc     1       1001         2668  iommu/dma: flush the whole IOTLB "
            "\"after\" a strict unmap\n");
  EXPECT_FALSE(MeasuredCatalogYaml(Source(), "x", *m, "bbbbbbbbbbbb2222").ok())
      << "a reference that was not measured";
}

TEST(MeasuredCostsTest, OnlyInstructionTimedRunsOfOneShiftCount) {
  EXPECT_EQ(MeasureCommits({Measured("a", 1, 2, 0)}, pb::IOMMU_MODE_STRICT).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MeasureCommits({Measured("a", 1, 2, 7), Measured("b", 1, 2, 8)}, pb::IOMMU_MODE_STRICT)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MeasureCommits({Measured("a", 1, 2, 7)}, pb::IOMMU_MODE_LAZY).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace farm::cli
