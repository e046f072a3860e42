// Property tests of farmctl try's planning (PlanTry) over mutated specs and
// patches: any spec and patch get an answer, never a crash or a hang; a plan
// is specs that map, and the patch the scheduler maps from them is the
// patch's every byte, so its try commit is the one the plan compares.
// testing/fuzz.h says how to run longer.
#include <map>
#include <string>
#include <vector>

#include "cli/compare.h"
#include "gtest/gtest.h"
#include "lib/base/utf8.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_yaml.h"
#include "proto/try_commit.h"
#include "testing/fuzz.h"

namespace farm::cli {
namespace {

using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

constexpr char kTrySpec[] = R"(name: nfs
catalog: linux-iommu
platform: intel-vtd-snb16c
commits: [v4.6]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 2}
repeats: 4
set: {iova.allocator: rcache}
)";

constexpr char kRealSpec[] = R"(name: real
catalog: vm-kernels
platform: q35-intel-iommu
commits: [v6.1]
modes: [strict, lazy]
executor: fio
workloads:
  - name: fio-nvme
    params: {rw: randread, size: 1m}
)";

constexpr char kPatch[] =
    "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n---\n"
    "--- a/drivers/iommu/dma-iommu.c\n+++ b/drivers/iommu/dma-iommu.c\n@@ -1 +1 @@\n-a\n+b\n"
    "-- \n2.39.2\n\n";

void PlanProperties(const std::string& spec, const std::map<std::string, std::string>& set,
                    const std::string& patch_commit, const std::string& patch) {
  absl::StatusOr<TryPlan> plan = PlanTry(spec, set, patch_commit, patch);
  if (!plan.ok()) {
    EXPECT_FALSE(plan.status().message().empty());
    return;
  }
  ASSERT_FALSE(plan->specs_yaml.empty());
  EXPECT_LE(plan->specs_yaml.size(), 2u);
  EXPECT_FALSE(plan->base_commit.empty());
  for (const std::string& yaml : plan->specs_yaml) {
    absl::StatusOr<spec::pb::MatrixSpec> mapped = spec::MatrixSpecFromYaml(yaml, {});
    // A spec of bytes that are not UTF-8 cannot be written as YAML; one the
    // checks refuse is the scheduler's to refuse.
    bool text = base::IsValidUtf8(spec) && base::IsValidUtf8(patch) &&
                base::IsValidUtf8(patch_commit) &&
                (patch + patch_commit).find('\0') == std::string::npos;
    for (const auto& [k, v] : set) text = text && base::IsValidUtf8(k);
    if (!text || !spec::ParseMatrixSpec(spec, {}).ok()) continue;
    ASSERT_TRUE(mapped.ok()) << mapped.status() << "\nplanned:\n" << yaml;
    if (!patch.empty()) {
      EXPECT_EQ(mapped->patch(), patch);
      EXPECT_EQ(proto::TryCommitId(plan->base_commit, mapped->patch()), plan->patch_commit);
    }
  }
}

TEST(TryFuzzTest, MutatedSpecsAndPatchesArePlanned) {
  const auto config = FuzzConfigFromEnv(3000);
  Mutator specs(config.seed, {kTrySpec, kRealSpec},
                {"commits: ", "[v4.6]", "v4.6..v4.7", "patch: ", "set: ", "name: "});
  Mutator patches(config.seed + 1, {kPatch, std::string(kPatch, sizeof(kPatch) - 3)});
  std::string spec, patch_commit, patch;
  std::map<std::string, std::string> set;
  RunFuzz(
      config,
      [&] {
        spec = specs.Next();
        set.clear();
        patch_commit.clear();
        patch.clear();
        switch (specs.Below(4)) {
          case 0:
            set[specs.OneIn(2) ? "fq.kind" : specs.Next().substr(0, 20)] = "single";
            break;
          case 1:
            patch_commit = specs.OneIn(2) ? "9257b4a206fc" : patches.Next().substr(0, 40);
            break;
          case 2:
            patch = patches.Next();
            break;
          default:  // none, or two at once: refused
            if (specs.OneIn(2)) {
              patch = kPatch;
              patch_commit = "9257b4a206fc";
            }
        }
        return spec + "\n--- patch:\n" + patch;
      },
      [&](const std::string&) { PlanProperties(spec, set, patch_commit, patch); });
}

// git format-patch's signature ends the file with a blank line; the spec's
// YAML form kept one final newline, so the scheduler hashed another try
// commit than the plan compared.
TEST(TryFuzzTest, AFormatPatchFileKeepsItsTryCommit) {
  PlanProperties(kTrySpec, {}, "", kPatch);
  PlanProperties(kTrySpec, {}, "", std::string(kPatch, sizeof(kPatch) - 3));
}

}  // namespace
}  // namespace farm::cli
