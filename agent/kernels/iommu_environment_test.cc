#include "agent/kernels/iommu_environment.h"

#include <gtest/gtest.h>

#include <string>

#include "agent/kernels/guest_channel.h"

namespace farm::kernels {
namespace {

// A 4 KiB PCIe config space whose extended list is AER at 0x100, then ATS
// at 0x148 with `ats_control` in its control register.
std::string ConfigWithAts(uint16_t ats_control) {
  std::string c(4096, '\0');
  auto put32 = [&c](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) c[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(0x100, 0x0001 | (1u << 16) | (0x148u << 20));  // AER, version 1, next 0x148
  put32(0x148, 0x000f | (1u << 16));                   // ATS, version 1, last
  put32(0x14c, static_cast<uint32_t>(ats_control) << 16);
  return c;
}

TEST(IommuEnvironmentTest, ParsesBothSmmuBootLineForms) {
  std::optional<SmmuBootLine> old = ParseSmmuBootLine(
      "arm-smmu-v3 arm-smmu-v3.0.auto: ias 48-bit, oas 48-bit (features 0x00001fef)");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->ias, "48");
  EXPECT_EQ(old->oas, "48");
  EXPECT_EQ(old->features, "0x00001fef");
  std::optional<SmmuBootLine> recent = ParseSmmuBootLine("oas 44-bit (features 0x0008df0f)");
  ASSERT_TRUE(recent);
  EXPECT_EQ(recent->ias, "");
  EXPECT_EQ(recent->oas, "44");
  EXPECT_EQ(recent->features, "0x0008df0f");
  EXPECT_FALSE(ParseSmmuBootLine("arm-smmu-v3 arm-smmu-v3.0.auto: option mask 0x2"));
}

TEST(IommuEnvironmentTest, CachingModeIsCapBit7) {
  EXPECT_EQ(CachingMode("d2008c40660462"), "0");  // 0x62: bit 7 clear
  EXPECT_EQ(CachingMode("12008c22260286"), "1");  // 0x86: bit 7 set
  EXPECT_FALSE(CachingMode(""));
  EXPECT_FALSE(CachingMode("not hex"));
}

TEST(IommuEnvironmentTest, AtsStateReadsTheControlEnableBit) {
  EXPECT_EQ(AtsState(ConfigWithAts(0x8000)), "on");
  EXPECT_EQ(AtsState(ConfigWithAts(0x0000)), "off");
  std::string no_ats = ConfigWithAts(0x8000);
  no_ats[0x148] = 0x0b;  // vendor-specific instead of ATS
  EXPECT_EQ(AtsState(no_ats), "");
  EXPECT_EQ(AtsState(std::string(256, '\0')), "");  // conventional PCI: no extended space
  EXPECT_FALSE(AtsState(std::string(64, '\x11')));  // an unprivileged read
  std::string loop(4096, '\0');
  loop[0x100] = 0x01;
  loop[0x102] = 0x00;
  loop[0x103] = 0x10;  // next = 0x100: itself
  EXPECT_EQ(AtsState(loop), "");
}

TEST(IommuEnvironmentTest, FinishDerivesAndDigests) {
  iommufarm::v1::IommuEnvironment env = FinishIommuEnvironment(
      {{"unit/dmar0/cap", "12008c22260286"},
       {"unit/dmar0/ecap", "f00f5e"},
       {"unit/ivhd0/cap", "190b"},
       {"unit/smmu3.0x9050000/smmu_log", "ias 44-bit, oas 44-bit (features 0x00008305)"},
       {"unit/smmu3.0x9060000/smmu_log", "garbled"},
       {"device/0000:00:01.0/domain", "DMA-FQ"}},
      {{"device/*/ats", "why"}});
  EXPECT_EQ(env.facts().at("unit/dmar0/caching_mode"), "1");
  EXPECT_FALSE(env.facts().contains("unit/ivhd0/caching_mode"));  // AMD-Vi: no ecap
  EXPECT_EQ(env.facts().at("unit/smmu3.0x9050000/features"), "0x00008305");
  EXPECT_EQ(env.facts().at("unit/smmu3.0x9050000/ias"), "44");
  EXPECT_FALSE(env.facts().contains("unit/smmu3.0x9050000/smmu_log"));
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x9060000/features"));
  EXPECT_EQ(env.unavailable().at("device/*/ats"), "why");
  EXPECT_EQ(env.digest(), EnvironmentDigest(SortedFacts(env)));
  EXPECT_EQ(env.digest().size(), 64u);

  // Finishing a finished environment changes nothing (the agent refreshes
  // its devices over the start's facts).
  iommufarm::v1::IommuEnvironment again = FinishIommuEnvironment(SortedFacts(env), {});
  EXPECT_EQ(again.digest(), env.digest());
}

TEST(IommuEnvironmentTest, DigestFollowsEveryFact) {
  EXPECT_EQ(EnvironmentDigest({}), "");
  const std::string a = EnvironmentDigest({{"device/0000:00:01.0/domain", "DMA"}});
  EXPECT_NE(a, EnvironmentDigest({{"device/0000:00:01.0/domain", "DMA-FQ"}}));
  EXPECT_NE(a, EnvironmentDigest({{"device/0000:00:02.0/domain", "DMA"}}));
  EXPECT_EQ(a, EnvironmentDigest({{"device/0000:00:01.0/domain", "DMA"}}));
}

// A virt+smmuv3 guest's facts section as its init writes it.
constexpr char kSmmuGuest[] =
    "@@farm-begin facts\nrelease=6.1.0-57-cloud-arm64\nmachine=aarch64\n"
    "cmdline=console=ttyAMA0 iommu.strict=1\n"
    "iommu=smmu3.0x0000000009050000:arm-smmu-v3 \n"
    "env.unit/smmu3.0x0000000009050000/smmu_log=ias 44-bit, oas 44-bit (features 0x00008305)\n"
    "env.firmware/bios_vendor=EFI Development Kit II / OVMF\n"
    "env.device/0000:00:01.0/domain=DMA\n"
    "env.device/0000:00:02.0/domain=\n"
    "@@farm-end facts 0\n@@farm-done\n";

TEST(GuestIommuEnvironmentTest, ReadsTheFactsSectionsEnvLines) {
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(kSmmuGuest);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<KernelFacts> facts = KernelFactsFromGuest(*out);
  ASSERT_TRUE(facts.ok()) << facts.status();
  // The keys a reader knew before env. lines read as they did.
  EXPECT_EQ(facts->release, "6.1.0-57-cloud-arm64");
  EXPECT_EQ(facts->cmdline, "console=ttyAMA0 iommu.strict=1");
  EXPECT_EQ(facts->iommu, "smmu3.0x0000000009050000:arm-smmu-v3");
  const iommufarm::v1::IommuEnvironment& env = facts->iommu_environment;
  EXPECT_EQ(env.facts().at("unit/smmu3.0x0000000009050000/features"), "0x00008305");
  EXPECT_EQ(env.facts().at("firmware/bios_vendor"), "EFI Development Kit II / OVMF");
  EXPECT_EQ(env.facts().at("device/0000:00:01.0/domain"), "DMA");
  EXPECT_FALSE(env.facts().contains("device/0000:00:02.0/domain"));  // empty: skipped
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x0000000009050000/iidr"));
  EXPECT_FALSE(env.unavailable().contains("unit/smmu3.0x0000000009050000/features"));
  EXPECT_TRUE(env.unavailable().contains("device/*/ats"));
  EXPECT_EQ(env.digest(), EnvironmentDigest(SortedFacts(env)));
}

TEST(GuestIommuEnvironmentTest, AGuestWithoutEnvLinesHasNone) {
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(
      "@@farm-begin facts\nrelease=6.1\niommu=dmar0 \n@@farm-end facts 0\n@@farm-done\n");
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<KernelFacts> facts = KernelFactsFromGuest(*out);
  ASSERT_TRUE(facts.ok()) << facts.status();
  EXPECT_TRUE(facts->iommu_environment.facts().empty());
  EXPECT_TRUE(facts->iommu_environment.unavailable().empty());
  EXPECT_EQ(facts->iommu_environment.digest(), "");
}

TEST(GuestIommuEnvironmentTest, AnSmmuWhoseBootLineIsMissingIsNamed) {
  const iommufarm::v1::IommuEnvironment env = GuestIommuEnvironment(
      "env.device/0000:00:01.0/domain=DMA-FQ\n", "smmu3.0x0000000009050000:arm-smmu-v3 dmar0");
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x0000000009050000/features"));
  EXPECT_FALSE(env.unavailable().contains("unit/dmar0/iidr"));
  EXPECT_EQ(env.facts().size(), 1u);
}

}  // namespace
}  // namespace farm::kernels
