// PerDeviceAffinity: every device gets the first device's masks, device 0
// keeps its effective CPUs, and each later vector goes where the chip's
// least-loaded pick (with its tie rule) sends it.
#include "emu/model/irq_affinity.h"

#include <map>

#include <gtest/gtest.h>

namespace farm::emu {
namespace {

IrqAffinity Map(const std::string& spec) {
  absl::StatusOr<IrqAffinity> a = IrqAffinity::Parse(spec);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : IrqAffinity();
}

std::vector<int> EffectiveOfQueue(const std::vector<IrqAffinity>& maps, size_t queue) {
  std::vector<int> out;
  for (const IrqAffinity& m : maps) out.push_back(m.queues()[queue].effective);
  return out;
}

TEST(PerDeviceAffinityTest, DeviceZeroIsTheInputAndEveryDeviceHasItsMasks) {
  const IrqAffinity first = Map("32-38@35;0-5@4;6-11@6");
  for (IrqChip chip : {IrqChip::kX86Vector, IrqChip::kGicIts}) {
    std::vector<IrqAffinity> maps = PerDeviceAffinity(first, 5, chip);
    ASSERT_EQ(maps.size(), 5u);
    EXPECT_EQ(maps[0].ToString(), first.ToString());
    for (const IrqAffinity& m : maps) {
      ASSERT_EQ(m.queues().size(), first.queues().size());
      for (size_t q = 0; q < m.queues().size(); ++q) {
        EXPECT_EQ(m.queues()[q].cpus, first.queues()[q].cpus);
      }
    }
  }
  EXPECT_EQ(PerDeviceAffinity(first, 1, IrqChip::kGicIts).size(), 1u);
}

TEST(PerDeviceAffinityTest, FourDevicesOnAFourCpuMaskTakeOneCpuEach) {
  for (const char* spec : {"0-3@0", "0-3@2", "0-3@3"}) {
    for (IrqChip chip : {IrqChip::kX86Vector, IrqChip::kGicIts}) {
      std::map<int, int> vectors;
      for (int cpu : EffectiveOfQueue(PerDeviceAffinity(Map(spec), 4, chip), 0)) ++vectors[cpu];
      EXPECT_EQ(vectors, (std::map<int, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}))
          << spec << " " << IrqChipName(chip);
    }
  }
}

// matrix_find_best_cpu_managed keeps the last CPU of the least loaded;
// cpumask_pick_least_loaded the first.
TEST(PerDeviceAffinityTest, TieRulesOfEachChip) {
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-3@0"), 3, IrqChip::kGicIts), 0),
            (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-3@3"), 3, IrqChip::kX86Vector), 0),
            (std::vector<int>{3, 2, 1}));
  // Once every CPU carries one vector, the tie is over the whole mask.
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-1@0"), 4, IrqChip::kGicIts), 0),
            (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-1@1"), 4, IrqChip::kX86Vector), 0),
            (std::vector<int>{1, 0, 1, 0}));
}

// Device 0's measured CPU says what the chip saw: seed 002's 0-5@4 on the
// ITS means CPUs 0-3 were busier than 4 and 5, so device 1 goes to 5, not 0.
TEST(PerDeviceAffinityTest, MeasuredChoiceImpliesLoadOnTheCpusTheRulePreferred) {
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-5@4"), 4, IrqChip::kGicIts), 0),
            (std::vector<int>{4, 5, 0, 1}));
  // The same map under x86's last-wins rule says CPU 5 was busier.
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("0-5@4"), 4, IrqChip::kX86Vector), 0),
            (std::vector<int>{4, 3, 2, 1}));
  // The mask is walked in CPU order (for_each_cpu), whatever the list order.
  EXPECT_EQ(EffectiveOfQueue(PerDeviceAffinity(Map("3,2,1,0@0"), 2, IrqChip::kGicIts), 0),
            (std::vector<int>{0, 1}));
}

}  // namespace
}  // namespace farm::emu
