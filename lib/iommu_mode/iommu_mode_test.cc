#include "lib/iommu_mode/iommu_mode.h"

#include <gtest/gtest.h>

namespace farm::iommu_mode {
namespace {

using Params = std::vector<std::string>;

TEST(ModeTableTest, EveryModeHasItsSpellings) {
  struct Row {
    Mode mode;
    const char* word;
    const char* domain_type;
    Params intel_params;
  };
  const Row rows[] = {
      {Mode::kOff, "off", "", {"intel_iommu=off"}},
      {Mode::kPassthrough, "passthrough", "identity", {"iommu.passthrough=1"}},
      {Mode::kStrict, "strict", "DMA", {"iommu.strict=1"}},
      {Mode::kLazy, "lazy", "DMA-FQ", {"iommu.strict=0"}},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(std::string_view(Word(r.mode)), r.word);
    EXPECT_EQ(FromWord(r.word), r.mode) << r.word;
    EXPECT_EQ(std::string_view(DomainType(r.mode)), r.domain_type) << r.word;
    EXPECT_EQ(KernelParams(r.mode, {Driver::kIntelVtd}), r.intel_params) << r.word;
  }
  EXPECT_EQ(WordList(), "off, passthrough, strict, lazy");
}

TEST(ModeTableTest, UnknownWordsAndTypesAreNoMode) {
  for (const char* w : {"", "Strict", "pt", "unspecified", "stict"}) {
    EXPECT_EQ(FromWord(w), std::nullopt) << w;
  }
  EXPECT_EQ(FromDomainType("identity"), Mode::kPassthrough);
  EXPECT_EQ(FromDomainType("DMA"), Mode::kStrict);
  EXPECT_EQ(FromDomainType("DMA-FQ"), Mode::kLazy);
  for (const char* t : {"", "blocked", "unmanaged", "dma", "unknown"}) {
    EXPECT_EQ(FromDomainType(t), std::nullopt) << t;
  }
}

TEST(KernelParamsTest, OffIsEachDriversSwitch) {
  EXPECT_EQ(KernelParams(Mode::kOff, {Driver::kIntelVtd, Driver::kAmdVi}),
            (Params{"intel_iommu=off", "amd_iommu=off"}));
  EXPECT_EQ(KernelParams(Mode::kOff, {Driver::kAmdVi}), Params{"amd_iommu=off"});
  EXPECT_EQ(KernelParams(Mode::kOff, {Driver::kArmSmmuV3}), Params{});
  EXPECT_EQ(KernelParams(Mode::kStrict, {Driver::kArmSmmuV3}), Params{"iommu.strict=1"});
  EXPECT_EQ(KernelParams(Mode::kLazy, {Driver::kIntelVtd, Driver::kAmdVi}),
            Params{"iommu.strict=0"});
}

TEST(ModeParamsTest, WhichWordsChooseTheMode) {
  struct Case {
    const char* word;
    bool is_mode_param;
    bool overrides_mode;
  };
  const Case cases[] = {
      {"intel_iommu=on", true, false},    {"intel_iommu=sm_on", true, false},
      {"amd_iommu=off", true, false},     {"iommu=pt", true, true},
      {"iommu=nopt", true, true},         {"iommu=off", true, false},
      {"iommu.strict=1", true, true},     {"iommu.passthrough=0", true, true},
      {"iommu.strict", false, true},      {"iommu.forcedac=1", false, false},
      {"xintel_iommu=off", false, false}, {"root=/dev/sda1", false, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(IsModeParam(c.word), c.is_mode_param) << c.word;
    EXPECT_EQ(OverridesMode(c.word), c.overrides_mode) << c.word;
  }
}

struct CmdlineCase {
  const char* cmdline;
  std::optional<Mode> mode;
};

class ModeFromCmdlineTest : public testing::TestWithParam<CmdlineCase> {};

TEST_P(ModeFromCmdlineTest, Mode) {
  EXPECT_EQ(ModeFromCmdline(GetParam().cmdline).mode, GetParam().mode) << GetParam().cmdline;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ModeFromCmdlineTest,
    testing::Values(CmdlineCase{"BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet", std::nullopt},
                    CmdlineCase{"intel_iommu=on iommu.strict=1", Mode::kStrict},
                    CmdlineCase{"intel_iommu=on iommu.strict=0", Mode::kLazy},
                    CmdlineCase{"intel_iommu=on,sm_on iommu=pt", Mode::kPassthrough},
                    CmdlineCase{"iommu.passthrough=1", Mode::kPassthrough},
                    CmdlineCase{"iommu.passthrough=1 iommu.passthrough=0 iommu.strict=1",
                                Mode::kStrict},
                    CmdlineCase{"intel_iommu=off", Mode::kOff},
                    CmdlineCase{"amd_iommu=off iommu.strict=1", Mode::kOff},
                    CmdlineCase{"iommu=off", Mode::kOff},
                    CmdlineCase{"intel_iommu=off intel_iommu=on", std::nullopt},
                    CmdlineCase{"intel_iommu=strict", Mode::kStrict},
                    CmdlineCase{"iommu=pt iommu=nopt iommu.strict=0", Mode::kLazy},
                    CmdlineCase{"iommu.strict=1 iommu.strict=0", Mode::kLazy},
                    CmdlineCase{"xintel_iommu=off iommu_strict=1", std::nullopt},
                    // kstrtobool() spellings, as the kernel parses them.
                    CmdlineCase{"iommu.strict=Y", Mode::kStrict},
                    CmdlineCase{"iommu.strict=off", Mode::kLazy},
                    CmdlineCase{"iommu.strict=no", Mode::kLazy},
                    CmdlineCase{"iommu.passthrough=on", Mode::kPassthrough},
                    CmdlineCase{"iommu.strict=1 iommu.strict=bogus", Mode::kStrict},
                    CmdlineCase{"amd_iommu=fullflush", Mode::kStrict},
                    CmdlineCase{"iommu=pt iommu.strict=1", Mode::kPassthrough}));

TEST(ModeFromCmdlineTest, DetailKeepsOnlyIommuParameters) {
  EXPECT_EQ(ModeFromCmdline("ro quiet intel_iommu=on iommu.strict=1\n").detail,
            "intel_iommu=on iommu.strict=1");
  EXPECT_EQ(ModeFromCmdline("ro\tquiet").detail, "");
}

RunningKernel Kernel(bool behind_iommu, std::vector<std::string> group_types,
                     std::string_view cmdline = "", std::string_view release = "",
                     std::string_view arch = "") {
  RunningKernel k;
  k.behind_iommu = behind_iommu;
  k.group_types = std::move(group_types);
  k.cmdline = cmdline;
  k.release = release;
  k.arch = arch;
  return k;
}

struct ReadingCase {
  const char* name;
  RunningKernel kernel;
  std::optional<Mode> mode;
  const char* note;
};

class ReadRunningModeTest : public testing::TestWithParam<ReadingCase> {};

TEST_P(ReadRunningModeTest, Mode) {
  const ModeReading r = ReadRunningMode(GetParam().kernel);
  EXPECT_EQ(r.mode, GetParam().mode);
  EXPECT_EQ(r.note, GetParam().note);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReadRunningModeTest,
    testing::Values(
        ReadingCase{"LazyGroups", Kernel(true, {"DMA-FQ"}), Mode::kLazy, ""},
        ReadingCase{"StrictGroupsAndCmdline",
                    Kernel(true, {"DMA"}, "iommu.strict=1", "6.1.0", "x86_64"), Mode::kStrict, ""},
        ReadingCase{"IdentityGroups", Kernel(true, {"identity"}), Mode::kPassthrough, ""},
        ReadingCase{"NoIommuIsOffWhateverTheGroups", Kernel(false, {"DMA"}, "iommu.strict=1"),
                    Mode::kOff, ""},
        ReadingCase{"NoGroupsNoCmdline", Kernel(true, {}), std::nullopt, ""},
        ReadingCase{"NoGroupsCmdlineDecides", Kernel(true, {}, "iommu=pt"), Mode::kPassthrough, ""},
        ReadingCase{"MajorityOfTranslatedTypes", Kernel(true, {"DMA-FQ", "DMA-FQ", "DMA"}),
                    Mode::kLazy, ""},
        ReadingCase{"BlockedAbstains", Kernel(true, {"DMA", "blocked"}), Mode::kStrict, ""},
        ReadingCase{"TieGoesToTheEarlierMode", Kernel(true, {"DMA-FQ", "identity"}),
                    Mode::kPassthrough, ""},
        ReadingCase{"OnlyUnknownTypesIsNoMode", Kernel(true, {"unmanaged"}), std::nullopt, ""},
        ReadingCase{"OnlyUnknownTypesCmdlineDecides", Kernel(true, {"unmanaged"}, "iommu.strict=0"),
                    Mode::kLazy, ""},
        ReadingCase{"GroupsOverrideCmdline", Kernel(true, {"DMA-FQ"}, "iommu.strict=1"),
                    Mode::kLazy, ""},
        ReadingCase{"Pre515DmaOnX86IsLazy",
                    Kernel(true, {"DMA"}, "quiet", "5.10.0-9-amd64", "x86_64"), Mode::kLazy,
                    "pre-5.15 kernel: DMA groups, x86 default lazy"},
        ReadingCase{"Pre515DmaCmdlineStrict",
                    Kernel(true, {"DMA"}, "iommu.strict=1", "5.10.0", "x86_64"), Mode::kStrict, ""},
        ReadingCase{"Pre515DmaCmdlineLazyOnArm",
                    Kernel(true, {"DMA"}, "iommu.strict=0", "5.4.0", "aarch64"), Mode::kLazy, ""},
        ReadingCase{"Pre515DmaOnArmIsStrict", Kernel(true, {"DMA"}, "", "4.19.0", "aarch64"),
                    Mode::kStrict, ""},
        ReadingCase{"WithoutReleaseDmaIsStrict", Kernel(true, {"DMA"}, "", "", "x86_64"),
                    Mode::kStrict, ""},
        ReadingCase{"V515DmaIsStrict", Kernel(true, {"DMA"}, "", "5.15.0", "x86_64"), Mode::kStrict,
                    ""}),
    [](const testing::TestParamInfo<ReadingCase>& c) { return std::string(c.param.name); });

TEST(ReadRunningModeTest, KeepsTheCmdlineDetail) {
  EXPECT_EQ(ReadRunningMode(Kernel(false, {}, "ro amd_iommu=off")).cmdline_detail, "amd_iommu=off");
}

}  // namespace
}  // namespace farm::iommu_mode
