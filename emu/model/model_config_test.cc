// Tests of the model-key registry, kernel resolution and platforms.
#include "emu/model/model_config.h"

#include "emu/model/kernel.h"
#include "emu/model/platform.h"
#include "gtest/gtest.h"

namespace farm::emu {
namespace {

TEST(ModelConfig, EveryKeyHasDefaultUnitlessOrUnitAndDescription) {
  ModelConfig cfg;
  for (const ParamSpec& p : AllParams()) {
    EXPECT_FALSE(p.description.empty()) << p.key;
    EXPECT_EQ(cfg.Get(p.key), p.default_value) << p.key;
    if (p.key.rfind("cost.", 0) == 0 || p.key.rfind("hw.", 0) == 0) {
      EXPECT_FALSE(p.unit.empty()) << p.key;
    }
  }
  EXPECT_TRUE(Model::From(cfg).ok());
}

TEST(ModelConfig, ApplyValidates) {
  ModelConfig cfg;
  auto ok = cfg.Apply({{"iova.allocator", "rbtree"}, {"cost.pte_write_ns", "7"}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->Get("iova.allocator"), "rbtree");
  EXPECT_EQ(Model::From(*ok)->pte_write, 7);

  auto unknown = cfg.Apply({{"iova.alocator", "rbtree"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("did you mean 'iova.allocator'"), std::string::npos);

  auto bad_enum = cfg.Apply({{"fq.kind", "global"}});
  ASSERT_FALSE(bad_enum.ok());
  EXPECT_NE(bad_enum.status().message().find("intel-global"), std::string::npos);

  EXPECT_FALSE(cfg.Apply({{"fq.size", "abc"}}).ok());
  EXPECT_FALSE(cfg.Apply({{"fq.size", "-1"}}).ok());
  EXPECT_FALSE(cfg.Apply({{"iopgtable.lockless", "maybe"}}).ok());
  EXPECT_EQ(cfg.Apply({{"iopgtable.lockless", "0"}})->Get("iopgtable.lockless"), "false");
}

TEST(KernelPresets, SettingsAccumulateAlongTheList) {
  auto v46 = ResolveKernel("v4.6", "");
  ASSERT_TRUE(v46.ok());
  EXPECT_EQ(v46->at("iova.allocator"), "rbtree");
  EXPECT_EQ(v46->at("fq.kind"), "intel-global");
  auto patched = ResolveKernel("patched-2016", "");
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(patched->at("iova.allocator"), "rcache");
  EXPECT_EQ(patched->at("fq.kind"), "intel-percpu");
  EXPECT_EQ(patched->at("smmu.cmdq"), "spinlock");  // inherited from v4.6
  auto v511 = ResolveKernel("v5.11", "");
  EXPECT_EQ(v511->at("map_sg"), "per-segment");
  EXPECT_EQ(v511->at("smmu.cmdq"), "lockfree");
  auto raw = ResolveKernel("v4.6+iova.allocator=rcache", "");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->at("iova.allocator"), "rcache");
  EXPECT_EQ(raw->at("fq.kind"), "intel-global");
  EXPECT_FALSE(ResolveKernel("v9.99", "").ok());
  // --catalog goes through the commit-catalog loader: a missing
  // file is an error naming it, not a silent fallback to the built-ins.
  auto missing = ResolveKernel("v4.6", "/nonexistent/some.yaml");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("some.yaml"), std::string::npos) << missing.status();
}

TEST(Platforms, TablesAreValidAndTopologiesMatchTheBrief) {
  ModelConfig cfg;
  for (const Platform& p : AllPlatforms()) {
    auto c = cfg.Apply(p.settings);
    ASSERT_TRUE(c.ok()) << p.name << ": " << c.status();
    EXPECT_TRUE(Model::From(*c).ok());
    EXPECT_EQ(static_cast<int>(p.topology.cpu_node.size()), p.topology.num_cpus);
    EXPECT_FALSE(p.devices.empty());
  }
  auto k = FindPlatform("kunpeng920-smmuv3");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ((*k)->topology.num_cpus, 128);
  EXPECT_EQ((*k)->topology.num_nodes(), 4);
  auto bad = FindPlatform("nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("intel-vtd-snb16c"), std::string::npos);
}

}  // namespace
}  // namespace farm::emu
