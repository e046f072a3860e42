#include "emu/model/effective_mode.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "emu/model/kernel.h"

namespace farm::emu {
namespace {

using iommu_mode::Mode;

// The model of an AMD-Vi kernel with `sets` over the registry defaults.
Model Amd(std::map<std::string, std::string> sets) {
  sets["iommu.type"] = "amd";
  absl::StatusOr<ModelConfig> cfg = ModelConfig().Apply(sets);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  absl::StatusOr<Model> m = Model::From(*cfg);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// The shipped catalog's state at `commit` on AMD-Vi.
Model AmdAt(const std::string& commit, const std::string& lazy_request) {
  absl::StatusOr<std::map<std::string, std::string>> kernel = ResolveKernel(commit, "");
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  std::map<std::string, std::string> sets = *kernel;
  sets["boot.lazy_request"] = lazy_request;
  return Amd(sets);
}

TEST(EffectiveModeTest, AmdDefaultBootRanStrictOnlyBetweenTheTwoCommits) {
  // Lazy left to the kernel's default: lazy before a250c23f15c2, strict from
  // it (the ice regression), lazy again from be227f8e99a6.
  const std::pair<const char*, Mode> era[] = {
      {"v5.12", Mode::kLazy},        {"a250c23f15c2", Mode::kStrict}, {"v5.13", Mode::kStrict},
      {"be227f8e99a6", Mode::kLazy}, {"v5.15", Mode::kLazy},          {"latest", Mode::kLazy}};
  for (const auto& [commit, want] : era) {
    const EffectiveMode e = ResolveEffectiveMode(AmdAt(commit, "default"), Mode::kLazy);
    EXPECT_EQ(e.mode, want) << commit << ": " << e.decided_by;
  }
  EXPECT_NE(ResolveEffectiveMode(AmdAt("a250c23f15c2", "default"), Mode::kLazy)
                .decided_by.find("bus_set_iommu"),
            std::string::npos);
}

TEST(EffectiveModeTest, IommuStrictZeroKeepsEveryEraLazy) {
  // "booting with iommu.strict=0 should also restore the expected behaviour"
  for (const char* commit : {"v4.6", "v5.12", "a250c23f15c2", "be227f8e99a6", "latest"}) {
    EXPECT_EQ(ResolveEffectiveMode(AmdAt(commit, "param"), Mode::kLazy).mode, Mode::kLazy)
        << commit;
  }
}

TEST(EffectiveModeTest, OtherModesRunAsAsked) {
  for (const char* commit : {"v4.6", "a250c23f15c2", "latest"}) {
    for (Mode m : {Mode::kOff, Mode::kPassthrough, Mode::kStrict}) {
      EXPECT_EQ(ResolveEffectiveMode(AmdAt(commit, "default"), m).mode, m) << commit;
    }
  }
  EXPECT_NE(ResolveEffectiveMode(AmdAt("v4.6", "param"), Mode::kStrict)
                .decided_by.find("amd_iommu=fullflush"),
            std::string::npos);
}

TEST(EffectiveModeTest, BuildDefaultDecidesTheDomainTypeEra) {
  const Model strict_build = Amd({{"boot.lazy_request", "default"},
                                  {"iommu.default_dma", "strict"},
                                  {"amd.strict_policy", "domain-type"}});
  EXPECT_EQ(ResolveEffectiveMode(strict_build, Mode::kLazy).mode, Mode::kStrict);
  // An explicit iommu.strict=0 wins over the build's default.
  const Model asked = Amd({{"iommu.default_dma", "strict"}, {"amd.strict_policy", "domain-type"}});
  EXPECT_EQ(ResolveEffectiveMode(asked, Mode::kLazy).mode, Mode::kLazy);
}

TEST(EffectiveModeTest, AFlushQueueThatCannotBeSetUpFallsBackToStrict) {
  for (const char* type : {"vtd", "smmuv3", "mmu500", "amd"}) {
    absl::StatusOr<ModelConfig> cfg =
        ModelConfig().Apply({{"iommu.type", type}, {"fq.init_fails", "true"}});
    ASSERT_TRUE(cfg.ok());
    const EffectiveMode e = ResolveEffectiveMode(*Model::From(*cfg), Mode::kLazy);
    EXPECT_EQ(e.mode, Mode::kStrict) << type;
    EXPECT_NE(e.decided_by.find("iommu_dma_init_fq"), std::string::npos) << e.decided_by;
    EXPECT_EQ(ResolveEffectiveMode(*Model::From(*cfg), Mode::kStrict).mode, Mode::kStrict);
  }
}

}  // namespace
}  // namespace farm::emu
