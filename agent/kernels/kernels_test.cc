// The pure parts of the kernel providers: mode parameters and mapping, the
// guest's framed channel, QEMU's argv, the job archive, how a finished guest
// run is judged, and the host provider's refusal. Nothing here runs QEMU.
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/kernels/accel_probe.h"
#include "agent/kernels/guest_archive.h"
#include "agent/kernels/guest_channel.h"
#include "agent/kernels/guest_channel_testdata.h"
#include "agent/kernels/guest_run.h"
#include "agent/kernels/host_provider.h"
#include "agent/kernels/kernel_provider.h"
#include "agent/kernels/module_deps.h"
#include "agent/kernels/qemu_args.h"
#include "agent/kernels/vm_provider.h"
#include "agent/monitors/monitors.h"
#include "lib/base/fake_root_for_test.h"
#include "lib/process/process.h"

namespace farm::kernels {
namespace {

using ::farm::kernels::testdata::kLazyAskedStrictRanChannel;
using ::farm::kernels::testdata::kStrictChannel;

namespace pb = ::iommufarm::v1;
using ::testing::HasSubstr;

KernelRequest Request(pb::IommuMode mode) {
  KernelRequest r;
  r.kernel_release = "6.1.0-57-cloud-amd64";
  r.mode = mode;
  r.tool_argv = {"fio", "--name=r", "--output-format=json"};
  return r;
}

QemuExit CleanExit() {
  QemuExit e;
  e.exited_cleanly = true;
  e.description = "exit 0";
  return e;
}

TEST(ModeKernelParamsTest, EachModeHasItsParameters) {
  using iommu_mode::Driver;
  using Words = std::vector<std::string>;
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_OFF, {Driver::kIntelVtd}), Words{"intel_iommu=off"});
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_OFF, {Driver::kIntelVtd, Driver::kAmdVi}),
            (Words{"intel_iommu=off", "amd_iommu=off"}));
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_OFF, {Driver::kArmSmmuV3}), Words{});
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_PASSTHROUGH, {Driver::kIntelVtd}),
            Words{"iommu.passthrough=1"});
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_STRICT, {Driver::kIntelVtd}), Words{"iommu.strict=1"});
  EXPECT_EQ(*ModeKernelParams(pb::IOMMU_MODE_LAZY, {Driver::kIntelVtd}), Words{"iommu.strict=0"});
  EXPECT_EQ(ModeKernelParams(pb::IOMMU_MODE_UNSPECIFIED, {Driver::kIntelVtd}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EffectiveModeTest, DecidedByTheNvmeGroup) {
  KernelFacts f;
  f.groups = {{"0", "identity", {"0000:00:00.0"}}, {"1", "DMA-FQ", {"0000:00:01.0"}}};
  f.nvme = {{"nvme0", "0000:00:01.0", "1", {"nvme0n1"}}};
  std::string detail;
  EXPECT_EQ(*EffectiveMode(f, &detail), pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(detail, "nvme0 0000:00:01.0 group 1: DMA-FQ");
}

TEST(EffectiveModeTest, NoGroupIsOff) {
  KernelFacts f;
  f.nvme = {{"nvme0", "0000:00:01.0", "", {"nvme0n1"}}};
  std::string detail;
  EXPECT_EQ(*EffectiveMode(f, &detail), pb::IOMMU_MODE_OFF);
  EXPECT_THAT(detail, HasSubstr("no IOMMU group"));
}

TEST(EffectiveModeTest, UnknownOrMissingIsAnError) {
  KernelFacts none;
  EXPECT_EQ(EffectiveMode(none, nullptr).status().code(), absl::StatusCode::kInternal);
  KernelFacts blocked;
  blocked.groups = {{"1", "blocked", {}}};
  blocked.nvme = {{"nvme0", "0000:00:01.0", "1", {}}};
  EXPECT_EQ(EffectiveMode(blocked, nullptr).status().code(), absl::StatusCode::kInternal);
  KernelFacts unlisted;
  unlisted.nvme = {{"nvme0", "0000:00:01.0", "7", {}}};
  EXPECT_EQ(EffectiveMode(unlisted, nullptr).status().code(), absl::StatusCode::kInternal);
}

TEST(GuestChannelTest, ParsesFramesAndFacts) {
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(kStrictChannel);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->done);
  ASSERT_EQ(out->sections.count("tool"), 1u);
  EXPECT_EQ(out->sections.at("tool").body, "{\n  \"fio version\" : \"fio-3.33\"\n}\n");
  EXPECT_EQ(out->sections.at("tool").exit, 0);
  absl::StatusOr<KernelFacts> f = KernelFactsFromGuest(*out);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->release, "6.1.0-57-cloud-amd64");
  EXPECT_EQ(f->machine, "x86_64");
  EXPECT_EQ(f->cmdline, "console=ttyS0 panic=-1 iommu.strict=1");
  EXPECT_EQ(f->iommu, "dmar0");
  ASSERT_EQ(f->groups.size(), 3u);
  EXPECT_EQ(f->groups[2].devices,
            (std::vector<std::string>{"0000:00:1f.0", "0000:00:1f.2", "0000:00:1f.3"}));
  ASSERT_EQ(f->nvme.size(), 1u);
  EXPECT_EQ(f->nvme[0].group, "1");
  EXPECT_EQ(f->nvme[0].namespaces, std::vector<std::string>{"nvme0n1"});
}

TEST(GuestChannelTest, ToolExitStatusIsKept) {
  absl::StatusOr<GuestOutput> out =
      ParseGuestChannel("@@farm-begin tool\nfio: oops\n@@farm-end tool 127\n");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE(out->done);
  EXPECT_EQ(out->sections.at("tool").exit, 127);
}

TEST(GuestChannelTest, BrokenFramesAreRefused) {
  EXPECT_EQ(ParseGuestChannel("@@farm-begin tool\n{\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGuestChannel("@@farm-begin tool\n@@farm-end nvme 0\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGuestChannel("@@farm-begin a\n@@farm-end a 0\n@@farm-begin a\n@@farm-end a 0\n")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KernelFactsFromGuest(GuestOutput{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ConsoleTailTest, KeepsTheLastLines) {
  std::string console;
  for (int i = 0; i < 100; ++i) console += "line " + std::to_string(i) + "\r\n";
  std::string tail = ConsoleTail(console, 3);
  EXPECT_EQ(tail, "line 97\nline 98\nline 99\n");
  EXPECT_LE(ConsoleTail(console, 100, 20).size(), 20u);
}

TEST(GuestCmdlineTest, ConsolePanicAndMode) {
  EXPECT_EQ(*GuestCmdline(pb::IOMMU_MODE_STRICT),
            "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1 iommu.strict=1");
  EXPECT_THAT(*GuestCmdline(pb::IOMMU_MODE_OFF), HasSubstr(" intel_iommu=off"));
  EXPECT_FALSE(GuestCmdline(pb::IOMMU_MODE_UNSPECIFIED).ok());
}

TEST(GuestCmdlineTest, AllowListedExtrasComeBeforeTheMode) {
  absl::StatusOr<std::string> c =
      GuestCmdline(pb::IOMMU_MODE_STRICT, {"intel_iommu=sm_on", "iommu.forcedac=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, HasSubstr("panic=-1 intel_iommu=sm_on iommu.forcedac=1 iommu.strict=1"));
  for (const char* bad : {"init=/bin/sh", "rdinit=/x", "root=/dev/sda", "iommu.strict=0"}) {
    c = GuestCmdline(pb::IOMMU_MODE_STRICT, {"quiet", bad});
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(c.status().message(), HasSubstr("kernel parameter")) << bad;
  }
}

QemuInvocation Invocation() {
  QemuInvocation q;
  q.qemu = "qemu-system-x86_64";
  q.accel = "tcg";
  q.kernel = "/k/vmlinuz";
  q.initrd = "/s/initrd";
  q.nvme_image = "/s/nvme.img";
  q.console_log = "/s/console.log";
  q.channel_log = "/s/channel.log";
  q.cmdline = "console=ttyS0 iommu.strict=1";
  return q;
}

// The value after `flag`, or "" (flags may repeat: the n-th occurrence).
std::string After(const std::vector<std::string>& argv, const std::string& flag, int n = 0) {
  for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag && n-- == 0) return argv[i + 1];
  }
  return "";
}

TEST(BuildQemuArgvTest, Q35WithVtdNvmeAndTwoSerials) {
  absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(Invocation());
  ASSERT_TRUE(argv.ok()) << argv.status();
  const std::vector<std::string>& a = *argv;
  EXPECT_EQ(a[0], "qemu-system-x86_64");
  EXPECT_EQ(After(a, "-M"), "q35");
  EXPECT_EQ(After(a, "-accel"), "tcg");
  for (const char* flag : {"-nodefaults", "-no-user-config", "-no-reboot"}) {
    EXPECT_NE(std::find(a.begin(), a.end(), flag), a.end()) << flag;
  }
  EXPECT_EQ(After(a, "-m"), "1024M");
  EXPECT_EQ(After(a, "-smp"), "2");
  EXPECT_EQ(After(a, "-device", 0), "intel-iommu,intremap=on,caching-mode=on");
  EXPECT_EQ(After(a, "-drive"), "file=/s/nvme.img,if=none,id=nvme0,format=raw");
  EXPECT_EQ(After(a, "-device", 1), "nvme,serial=farm-nvme0,drive=nvme0");
  EXPECT_EQ(After(a, "-serial", 0), "file:/s/console.log");
  EXPECT_EQ(After(a, "-serial", 1), "file:/s/channel.log");
  EXPECT_EQ(After(a, "-kernel"), "/k/vmlinuz");
  EXPECT_EQ(After(a, "-initrd"), "/s/initrd");
  EXPECT_EQ(After(a, "-append"), "console=ttyS0 iommu.strict=1");
  // No device beyond the IOMMU and the NVMe: no network, no display.
  EXPECT_EQ(std::count(a.begin(), a.end(), "-device"), 2);
  EXPECT_EQ(std::count(a.begin(), a.end(), "-netdev"), 0);
}

TEST(BuildQemuArgvTest, VirtWithSmmuV3NvmeAndOneSerial) {
  QemuInvocation q = Invocation();
  q.arch = kArchArm64;
  q.qemu = "qemu-system-aarch64";
  q.cpu = "max,pauth-impdef=on";
  q.channel_log = q.console_log;
  absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  const std::vector<std::string>& a = *argv;
  EXPECT_EQ(a[0], "qemu-system-aarch64");
  EXPECT_EQ(After(a, "-M"), "virt,iommu=smmuv3");
  EXPECT_EQ(After(a, "-cpu"), "max,pauth-impdef=on");
  EXPECT_NE(std::find(a.begin(), a.end(), "-nodefaults"), a.end());
  EXPECT_EQ(After(a, "-device", 0), "nvme,serial=farm-nvme0,drive=nvme0");
  EXPECT_EQ(std::count(a.begin(), a.end(), "-device"), 1);
  EXPECT_EQ(std::count(a.begin(), a.end(), "-serial"), 1);
  q.iommu = false;  // mode off: no SMMUv3 at all
  argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(After(*argv, "-M"), "virt");
  q.arch = "riscv64";
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GuestCmdlineTest, Arm64ConsoleAndModes) {
  EXPECT_EQ(*GuestCmdline(pb::IOMMU_MODE_LAZY, {}, kArchArm64),
            "console=ttyAMA0 panic=-1 iommu.strict=0");
  EXPECT_EQ(*GuestCmdline(pb::IOMMU_MODE_OFF, {}, kArchArm64), "console=ttyAMA0 panic=-1");
  EXPECT_EQ(
      *GuestCmdline(pb::IOMMU_MODE_PASSTHROUGH, {"arm-smmu-v3.disable_msipolling=1"}, kArchArm64),
      "console=ttyAMA0 panic=-1 arm-smmu-v3.disable_msipolling=1 iommu.passthrough=1");
}

TEST(BuildQemuArgvTest, RefusesWhatQemuCannotCarry) {
  QemuInvocation q = Invocation();
  q.nvme_image = "/s/a,b.img";
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
  q = Invocation();
  q.accel = "hvf";
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
  q = Invocation();
  q.memory_mib = 0;
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KernelImagePathTest, PlainReleasesOnly) {
  EXPECT_EQ(*KernelImagePath("/c", "6.1.0-57-cloud-amd64"), "/c/6.1.0-57-cloud-amd64/vmlinuz");
  EXPECT_FALSE(KernelImagePath("/c", "../etc").ok());
  EXPECT_FALSE(KernelImagePath("/c", "a/b").ok());
  EXPECT_FALSE(KernelImagePath("/c", "").ok());
}

// Walks a newc archive: the names in order, checking magic and alignment.
std::vector<std::string> NewcNames(const std::string& a, std::string* argv_content) {
  std::vector<std::string> names;
  std::size_t off = 0;
  while (off + 110 <= a.size()) {
    EXPECT_EQ(a.substr(off, 6), "070701") << off;
    auto field = [&](int i) {
      std::uint32_t v = 0;
      EXPECT_TRUE(absl::SimpleHexAtoi(a.substr(off + 6 + 8 * i, 8), &v));
      return v;
    };
    std::uint32_t size = field(6), namesize = field(11);
    std::string name = a.substr(off + 110, namesize - 1);
    names.push_back(name);
    off = (off + 110 + namesize + 3) & ~std::size_t{3};
    if (name == "farm/argv" && argv_content) *argv_content = a.substr(off, size);
    off = (off + size + 3) & ~std::size_t{3};
    if (name == "TRAILER!!!") break;
  }
  EXPECT_EQ(off, a.size());
  return names;
}

TEST(GuestJobArchiveTest, ArgvOneALineWithParentsAndTrailer) {
  absl::StatusOr<std::string> a =
      GuestJobArchive({"/usr/bin/fio", "--name=r", "--filename=/dev/nvme0n1"}, "/dev/nvme0n1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->size() % 4, 0u);
  std::string argv;
  EXPECT_EQ(NewcNames(*a, &argv),
            (std::vector<std::string>{"farm", "farm/argv", "farm/wait-device", "TRAILER!!!"}));
  EXPECT_EQ(argv, "fio\n--name=r\n--filename=/dev/nvme0n1\n");
}

TEST(GuestJobArchiveTest, RefusesWhatTheGuestCannotRun) {
  EXPECT_EQ(GuestJobArchive({"iozone", "-a"}, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GuestJobArchive({"fio", "--name=a\n--exec_prerun=x"}, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(GuestJobArchive({}, "").ok());  // facts only
}

TEST(GuestJobArchiveTest, IozoneGetsAScratchFileSystemOnTheDevice) {
  const std::vector<std::string> argv = {"iozone",
                                         "-s",
                                         "4096k",
                                         "-r",
                                         "64k",
                                         "-i0",
                                         "-i1",
                                         "-I",
                                         "-t",
                                         "2",
                                         "-F",
                                         "/mnt/nvme/iozone.farm.0",
                                         "/mnt/nvme/iozone.farm.1"};
  absl::StatusOr<std::string> a = GuestJobArchive(argv, "/dev/nvme0n1");
  ASSERT_TRUE(a.ok()) << a.status();
  std::string content;
  EXPECT_EQ(NewcNames(*a, &content),
            (std::vector<std::string>{"farm", "farm/argv", "farm/scratch-fs", "farm/wait-device",
                                      "TRAILER!!!"}));
  EXPECT_EQ(content, absl::StrCat(absl::StrJoin(argv, "\n"), "\n"));
  EXPECT_THAT(*a, HasSubstr("/dev/nvme0n1 /mnt/nvme\n"));
  // fio takes the raw device: no file system.
  EXPECT_THAT(*GuestJobArchive({"fio", "--name=r"}, "/dev/nvme0n1"),
              ::testing::Not(HasSubstr("scratch-fs")));
  // Kernel event counters only when the agent asks for them.
  EXPECT_THAT(*GuestJobArchive({"fio", "--name=r"}, "/dev/nvme0n1"),
              ::testing::Not(HasSubstr("farm/kernel-counters")));
  EXPECT_THAT(*GuestJobArchive({"fio", "--name=r"}, "/dev/nvme0n1", "", "", true),
              HasSubstr("farm/kernel-counters"));
  // No device to put the file system on.
  EXPECT_EQ(GuestJobArchive(argv, "").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckGuestIozoneArgvTest, OnlyTheFarmsThroughputRunInTheScratchDir) {
  const std::vector<std::string> ok = {"iozone", "-s", "4096k", "-r", "64k",
                                       "-i0",    "-t", "1",     "-F", "/mnt/nvme/f.0"};
  EXPECT_TRUE(CheckGuestIozoneArgv(ok).ok());
  auto with = [&](std::size_t i, const std::string& v) {
    std::vector<std::string> a = ok;
    a[i] = v;
    return CheckGuestIozoneArgv(a).code();
  };
  EXPECT_EQ(with(9, "/tmp/f.0"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(9, "/mnt/nvme/../../etc/x"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(9, "/mnt/nvmex/f"), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(9, "/mnt/nvme/.."), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with(5, "-b"), absl::StatusCode::kInvalidArgument);  // writes a spreadsheet anywhere
  EXPECT_EQ(with(5, "-U"), absl::StatusCode::kInvalidArgument);  // remounts a mount point
  EXPECT_EQ(with(2, "4096k;x"), absl::StatusCode::kInvalidArgument);
  // Throughput mode only: no -t, or no files.
  EXPECT_EQ(CheckGuestIozoneArgv({"iozone", "-s", "4k", "-F", "/mnt/nvme/f"}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckGuestIozoneArgv({"iozone", "-s", "4k", "-t", "1", "-F"}).code(),
            absl::StatusCode::kInvalidArgument);
}

namespace fs = std::filesystem;

// A minimal ELF64 relocatable object: a null section, .modinfo holding
// `modinfo` and the section-name table, as a kernel module lays them out.
std::string ModuleElf(const std::string& modinfo) {
  const std::string names = std::string("\0.modinfo\0.shstrtab\0", 20);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_REL;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 3;
  eh.e_shstrndx = 2;
  const std::size_t info_off = sizeof eh, names_off = info_off + modinfo.size();
  eh.e_shoff = names_off + names.size();
  Elf64_Shdr sh[3] = {};
  sh[1].sh_name = 1;
  sh[1].sh_offset = info_off;
  sh[1].sh_size = modinfo.size();
  sh[2].sh_name = 10;
  sh[2].sh_offset = names_off;
  sh[2].sh_size = names.size();
  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  out += modinfo + names;
  out.append(reinterpret_cast<const char*>(sh), sizeof sh);
  return out;
}

TEST(ModuleDependsTest, ReadsDependsAndSoftPreFromModinfo) {
  absl::StatusOr<ModuleNeeds> n = ModuleDepends(ModuleElf(
      std::string("license=GPL\0depends=t10-pi,crc64\0softdep=pre: crc32c post: x\0", 61)));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->depends, (std::vector<std::string>{"t10-pi", "crc64"}));
  EXPECT_EQ(n->soft_pre, (std::vector<std::string>{"crc32c"}));
  n = ModuleDepends(ModuleElf(std::string("depends=\0", 9)));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->depends.empty());
  EXPECT_EQ(ModuleDepends("not an elf").status().code(), absl::StatusCode::kInvalidArgument);
  std::string truncated = ModuleElf("depends=a");
  truncated.resize(truncated.size() - 8);  // the section headers run past the end
  EXPECT_EQ(ModuleDepends(truncated).status().code(), absl::StatusCode::kInvalidArgument);
}

class GuestModulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "guest-modules-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    build_.release = "6.1.0-57-amd64";
    build_.arch = kArchX86;
    build_.dir = dir_;
    build_.config = "config";
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& content) {
    fs::create_directories((fs::path(dir_) / rel).parent_path());
    std::ofstream(fs::path(dir_) / rel, std::ios::binary) << content;
  }
  std::vector<std::string> Names(const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const std::string& p : paths) out.push_back(fs::path(p).filename().string());
    return out;
  }
  std::string dir_;
  kstore::KernelBuild build_;
};

TEST_F(GuestModulesTest, DependenciesFirstOnlyForWhatIsAModule) {
  Write("config", "CONFIG_BLK_DEV_NVME=m\nCONFIG_NVME_CORE=m\nCONFIG_EXT4_FS=m\n");
  build_.modules = "modules";
  Write("modules/kernel/drivers/nvme/host/nvme.ko",
        ModuleElf(std::string("depends=nvme-core\0", 18)));
  Write("modules/kernel/drivers/nvme/host/nvme-core.ko",
        ModuleElf(std::string("depends=t10-pi\0", 15)));
  Write("modules/kernel/block/t10-pi.ko",
        ModuleElf(std::string("depends=\0softdep=pre: crc64 absent\0", 35)));
  Write("modules/kernel/lib/crc64.ko", ModuleElf(std::string("depends=\0", 9)));
  Write("modules/kernel/fs/ext4/ext4.ko", ModuleElf(std::string("depends=jbd2\0", 13)));
  absl::StatusOr<std::vector<std::string>> m = GuestModules(build_, false);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Names(*m),
            (std::vector<std::string>{"crc64.ko", "t10-pi.ko", "nvme-core.ko", "nvme.ko"}));
  // ext4 only for a scratch file system; its missing jbd2 is named.
  m = GuestModules(build_, true);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition) << m.status();
  EXPECT_THAT(m.status().message(), HasSubstr("needs module jbd2"));
  Write("modules/kernel/fs/jbd2/jbd2.ko", ModuleElf(std::string("depends=\0", 9)));
  m = GuestModules(build_, true);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(Names(*m).back(), "ext4.ko");

  absl::StatusOr<std::string> archive = GuestModulesArchive(*m);
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_THAT(*archive, HasSubstr("farm/modules/nvme.ko"));
  EXPECT_THAT(*archive, HasSubstr("crc64.ko\nt10-pi.ko\nnvme-core.ko\nnvme.ko\n"));
}

TEST_F(GuestModulesTest, BuiltInDriversNeedNothingAndAModuleNeedsTheDirectory) {
  Write("config", "CONFIG_BLK_DEV_NVME=y\nCONFIG_EXT4_FS=y\n");
  absl::StatusOr<std::vector<std::string>> m = GuestModules(build_, true);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->empty());
  Write("config", "CONFIG_BLK_DEV_NVME=m\n");
  m = GuestModules(build_, false);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), HasSubstr("no modules directory"));
}

TEST(InterpretGuestRunTest, ModuleLoadFailureAbortsBeforeTheModeIsJudged) {
  // No NVMe came up, so the groups cannot show the mode: not a mismatch.
  const std::string channel =
      "@@farm-begin facts\nrelease=6.1.0-57-cloud-amd64\nmachine=x86_64\n"
      "cmdline=console=ttyS0 iommu.strict=1\niommu=ivhd0 \n@@farm-end facts 0\n"
      "@@farm-begin iommu-groups\n@@farm-end iommu-groups 0\n"
      "@@farm-begin modules\ninsmod nvme-core.ko\ninsmod: can't insert 'nvme-core.ko': "
      "unknown symbol in module\n@@farm-end modules 1\n"
      "@@farm-begin nvme\n@@farm-end nvme 0\n@@farm-done\n";
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), channel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kAborted) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("could not load its kernel modules"));
  EXPECT_THAT(run.status().message(), HasSubstr("unknown symbol in module"));
}

TEST(InterpretGuestRunTest, ScratchFileSystemFailureAbortsWithItsOutput) {
  std::string channel = kStrictChannel;
  channel.insert(channel.find("@@farm-done"),
                 "@@farm-begin scratch-fs\nmke2fs: short write\n@@farm-end scratch-fs 1\n");
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), channel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kAborted) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("scratch file system"));
  EXPECT_THAT(run.status().message(), HasSubstr("mke2fs: short write"));
}

TEST(BuildQemuArgvTest, TcgIcountIsOneTcgThreadCountingInstructions) {
  QemuInvocation q = Invocation();
  q.accel = "tcg-icount";
  q.icount_shift = 7;
  absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(After(*argv, "-accel"), "tcg,thread=single");
  EXPECT_EQ(After(*argv, "-icount"), "shift=7,align=off,sleep=off");
  EXPECT_EQ((*argv)[3], "-accel");  // right after the machine, as for tcg
  q.arch = kArchArm64;
  argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(After(*argv, "-icount"), "shift=7,align=off,sleep=off");
  EXPECT_EQ((*argv)[5], "-accel");  // after -cpu on virt
  q.icount_shift = 11;
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
  q.icount_shift = 7;
  q.accel = "hvf";
  EXPECT_THAT(BuildQemuArgv(q).status().message(), HasSubstr("(tcg, tcg-icount, kvm)"));
  // Without icount there is no -icount.
  q.accel = "tcg";
  argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "-icount"), 0);
}

TEST(BuildQemuArgvTest, BenchDeviceIsOneEduBesideTheNvme) {
  QemuInvocation q = Invocation();
  q.bench_device = true;
  for (const std::string& arch : {std::string(kArchX86), std::string(kArchArm64)}) {
    q.arch = arch;
    absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(q);
    ASSERT_TRUE(argv.ok()) << argv.status();
    EXPECT_EQ(std::count(argv->begin(), argv->end(), "edu"), 1) << arch;
    // The kernel and its command line stay last.
    EXPECT_EQ((*argv)[argv->size() - 2], "-append") << arch;
  }
}

TEST(GuestJobArchiveTest, BenchToolComesExecutableWithItsDevice) {
  absl::StatusOr<std::string> a =
      GuestJobArchive({"dma_map_benchmark", "-t", "1", "-s", "1"}, "/dev/nvme0n1", "", "ELF...");
  ASSERT_TRUE(a.ok()) << a.status();
  std::string content;
  EXPECT_EQ(NewcNames(*a, &content),
            (std::vector<std::string>{"farm", "farm/bin", "farm/bin/dma_map_benchmark",
                                      "farm/bench-device", "farm/argv", "farm/wait-device",
                                      "TRAILER!!!"}));
  EXPECT_THAT(*a, HasSubstr("1234:11e8\n"));
  // The tool's entry is 0100755, every other file 0100644.
  const std::size_t tool = a->find("farm/bin/dma_map_benchmark");
  ASSERT_NE(tool, std::string::npos);
  EXPECT_EQ(a->substr(tool - 110 + 14, 8), "000081ED");
  EXPECT_EQ(GuestJobArchive({"dma_map_benchmark"}, "/dev/nvme0n1").status().code(),
            absl::StatusCode::kInvalidArgument);  // no binary
}

TEST(InterpretGuestRunTest, KernelWithoutTheBenchDriverFailsPermanently) {
  std::string channel = kStrictChannel;
  channel.insert(channel.find("@@farm-done"),
                 "@@farm-begin bench-device\nno dma_map_benchmark driver bound 0000:00:04.0 (a "
                 "kernel without CONFIG_DMA_MAP_BENCHMARK and CONFIG_DEBUG_FS)\n"
                 "@@farm-end bench-device 1\n");
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), channel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("cannot run dma_map_benchmark"));
  EXPECT_THAT(run.status().message(), HasSubstr("CONFIG_DMA_MAP_BENCHMARK"));
}

TEST(GuestJobArchiveTest, NamesTheChannelWhenGiven) {
  absl::StatusOr<std::string> a = GuestJobArchive({}, "/dev/nvme0n1", "/dev/ttyAMA0");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(*a, HasSubstr("farm/channel"));
  EXPECT_THAT(*a, HasSubstr("/dev/ttyAMA0\n"));
  EXPECT_THAT(*GuestJobArchive({}, "/dev/nvme0n1"), ::testing::Not(HasSubstr("farm/channel")));
}

TEST(InterpretGuestRunTest, StrictRunCarriesFactsAndToolOutput) {
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), kStrictChannel, "", CleanExit());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->provider, "vm");
  EXPECT_EQ(run->requested, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->effective_detail, "nvme0 0000:00:01.0 group 1: DMA");
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_EQ(run->facts.iommu, "dmar0");
  EXPECT_EQ(run->tool_exit, 0);
  EXPECT_THAT(run->tool_stdout, HasSubstr("fio-3.33"));
}

// kStrictChannel with the init's monitor sections around the tool: the
// host reads them with the host monitor's parser.
std::string ChannelWithMonitors() {
  std::string c = kStrictChannel;
  const std::string monitors =
      "@@farm-begin monitor-before\r\n"
      "%% interrupts\r\n"
      "            CPU0       CPU1       \r\n"
      "  24:          0          0  DMAR-MSI    0-edge      dmar0\r\n"
      "  26:        100          0  IR-PCI-MSIX-0000:00:01.0    1-edge      nvme0q1\r\n"
      " LOC:       5000       4000   Local timer interrupts\r\n"
      "%% vmstat\r\n"
      "pgfault 1000\r\nnr_dirty 10\r\n"
      "%% iommu-note none exposed (debugfs has no iommu/: the IOMMU driver exposes none, or it "
      "is off)\r\n"
      "@@farm-end monitor-before 0\r\n"
      "@@farm-begin monitor-after\r\n"
      "%% interrupts\r\n"
      "            CPU0       CPU1       \r\n"
      "  24:          0          0  DMAR-MSI    0-edge      dmar0\r\n"
      "  26:        400          2  IR-PCI-MSIX-0000:00:01.0    1-edge      nvme0q1\r\n"
      " LOC:       5100       4000   Local timer interrupts\r\n"
      "%% vmstat\r\n"
      "pgfault 1300\r\nnr_dirty 10\r\n"
      "%% iommu-note none exposed (debugfs has no iommu/: the IOMMU driver exposes none, or it "
      "is off)\r\n"
      "@@farm-end monitor-after 0\r\n";
  c.insert(c.find("@@farm-done"), monitors);
  return c;
}

TEST(InterpretGuestRunTest, GuestMonitorSectionsBecomeTheRunsMonitors) {
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), ChannelWithMonitors(), "", CleanExit());
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->monitors.has_value());
  const pb::Monitors& m = *run->monitors;
  EXPECT_EQ(m.where(), "guest");
  ASSERT_EQ(m.interrupts_size(), 2);
  EXPECT_EQ(m.interrupts(0).source(), "nvme0q1");
  EXPECT_EQ(m.interrupts(0).total(), 302);
  EXPECT_EQ(m.interrupts(1).source(), "LOC");
  EXPECT_EQ(m.vmstat().size(), 1u);
  EXPECT_EQ(m.vmstat().at("pgfault"), 300);
  EXPECT_THAT(m.iommu_note(), HasSubstr("none exposed"));
  EXPECT_THAT(m.perf_note(), HasSubstr("no perf"));
}

TEST(InterpretGuestRunTest, AGuestWithoutSnapshotsSaysSo) {
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), kStrictChannel, "", CleanExit());
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_TRUE(run->monitors.has_value());
  EXPECT_EQ(run->monitors->interrupts_size(), 0);
  EXPECT_THAT(run->monitors->iommu_note(), HasSubstr("no monitor-before"));
  std::string broken = ChannelWithMonitors();
  broken.replace(broken.find("pgfault 1300"), 12, "pgfault lots");
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(broken);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(MonitorsFromGuest(*out).status().code(), absl::StatusCode::kInvalidArgument);
}

// The init's own monitor_snapshot, run by the POSIX shell on this machine's
// /proc, writes what the host's parser reads.
TEST(GuestInitTest, MonitorSnapshotIsWhatTheParserReads) {
  process::ProcessOptions p;
  p.argv = {"/bin/sh", "-c",
            "eval \"$(sed -n '/^monitor_snapshot() {/,/^}/p' \"$0\")\" && monitor_snapshot",
            std::string(FARM_SOURCE_DIR) + "/agent/kernels/guest/init"};
  p.timeout = absl::Seconds(30);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->ok()) << r->Describe() << r->stderr_data;
  absl::StatusOr<monitors::Snapshot> s = monitors::ParseSnapshot(r->stdout_data);
  ASSERT_TRUE(s.ok()) << s.status() << "\n" << r->stdout_data.substr(0, 2000);
  EXPECT_FALSE(s->interrupts.cpus.empty());
  EXPECT_FALSE(s->interrupts.lines.empty());
  EXPECT_GT(s->vmstat.count("pgfault"), 0u);
  EXPECT_TRUE(!s->iommu_note.empty() || !s->iommu_files.empty());
}

using InitTree = base::FakeRoot;

// The init's counters_start / counters_stop / latency_off, run by this
// machine's sh on a fixture tracefs and dmar_perf_latency file: what they
// switch on and off, and the after-snapshot parts the host's parser reads.
absl::StatusOr<process::ProcessResult> RunInitCounters(const InitTree& root,
                                                       const std::string& call) {
  process::ProcessOptions p;
  p.argv = {"/bin/sh", "-c",
            "eval \"$(sed -n -e '/^farm_/p' -e '/^counters_start() {/,/^}/p' "
            "-e '/^counters_stop() {/,/^}/p' -e '/^latency_off() {/,/^}/p' \"$0\")\" && " +
                call,
            std::string(FARM_SOURCE_DIR) + "/agent/kernels/guest/init"};
  p.env = {"PATH=/usr/bin:/bin", "farm_tracefs=" + root.path() + "/tracing",
           "farm_latency=" + root.path() + "/dmar_perf_latency",
           "farm_notes=" + root.path() + "/notes"};
  p.timeout = absl::Seconds(30);
  return process::RunProcess(p);
}

TEST(GuestInitTest, CountersAreWhatTheParserReads) {
  InitTree root;
  root.Dir("tracing/events/iommu/map");  // no iommu:unmap in this "kernel"
  const std::string in = "tracing/instances/farm-iommu-map";
  root.Write(in + "/events/iommu/map/enable", "0");
  root.Write(in + "/events/iommu/map/hist",
             "# event histogram\n{ size:       4096 } hitcount:        700\n\nTotals:\n"
             "    Hits: 700\n");
  root.Write(in + "/events/iommu/map/trigger", "");
  root.Write(in + "/per_cpu/cpu0/stats", "entries: 500\noverrun: 100\n");
  root.Write(in + "/per_cpu/cpu1/stats", "entries: 100\noverrun: 0\n");
  root.Write("dmar_perf_latency", "");
  absl::StatusOr<process::ProcessResult> r = RunInitCounters(root, "counters_start");
  ASSERT_TRUE(r.ok() && r->ok()) << (r.ok() ? r->stderr_data : r.status().ToString());
  auto read = [&root](const std::string& rel) {
    std::ifstream f(root.path() + "/" + rel);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(read(in + "/events/iommu/map/enable"), "1\n");
  EXPECT_EQ(read(in + "/events/iommu/map/trigger"), "hist:keys=size\n");
  EXPECT_EQ(read("dmar_perf_latency"), "4\n");
  r = RunInitCounters(root, "counters_stop && latency_off");
  ASSERT_TRUE(r.ok() && r->ok()) << (r.ok() ? r->stderr_data : r.status().ToString());
  EXPECT_EQ(read(in + "/events/iommu/map/enable"), "0\n");
  EXPECT_EQ(read(in + "/events/iommu/map/trigger"), "!hist:keys=size\n");
  EXPECT_EQ(read("dmar_perf_latency"), "0\n");
  const std::string base = "%% interrupts\n CPU0\n%% vmstat\npgfault 1\n";
  absl::StatusOr<monitors::Snapshot> b = monitors::ParseSnapshot(base);
  absl::StatusOr<monitors::Snapshot> a = monitors::ParseSnapshot(base + r->stdout_data);
  ASSERT_TRUE(b.ok() && a.ok()) << r->stdout_data;
  const pb::Monitors m = monitors::Diff(*b, *a, "guest");
  EXPECT_EQ(m.events().at("trace/iommu:map"), 700) << r->stdout_data;
  EXPECT_EQ(m.events().at("trace/iommu:map/bytes"), 700 * 4096);
  EXPECT_EQ(m.events().count("trace/iommu:unmap"), 0u);
  ASSERT_EQ(m.event_notes_size(), 1) << r->stdout_data;
  EXPECT_EQ(m.event_notes(0), "trace: no iommu:unmap event in this kernel");
}

// The guest's command line says strict (iommu.strict=1): the farm did not
// ask for lazy, so the run fails rather than report the kernel's choice.
TEST(InterpretGuestRunTest, AModeTheCmdlineDidNotAskForIsAPermanentMismatch) {
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_LAZY), kStrictChannel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("requested IOMMU mode lazy"));
  EXPECT_THAT(run.status().message(), HasSubstr("ran strict"));
  EXPECT_THAT(run.status().message(), HasSubstr("did not ask for the requested mode"));
}

// The farm asked for lazy and the kernel chose strict: a result under the
// mode it ran, as an emulator's whose kernel chose.
TEST(InterpretGuestRunTest, AKernelThatChoseAnotherModeReportsIt) {
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_LAZY), kLazyAskedStrictRanChannel, "", CleanExit());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_EQ(run->effective_detail,
            "the kernel ran strict although its command line asked for lazy "
            "(iommu.strict=0): nvme0 0000:00:02.0 group 1: DMA");
  EXPECT_EQ(run->tool_exit, 0);
  // Strict asked and run: the detail is the group's alone.
  run = InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), kStrictChannel, "", CleanExit());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->effective_detail, "nvme0 0000:00:01.0 group 1: DMA");
}

// Before v5.15 a lazy domain's type was "DMA" too: the type cannot prove
// the kernel ran strict, so the run fails as before.
TEST(InterpretGuestRunTest, APreDmaFqDmaGroupCannotProveAnotherMode) {
  std::string channel = kLazyAskedStrictRanChannel;
  for (size_t at; (at = channel.find("6.1.0-57")) != std::string::npos;) {
    channel.replace(at, 8, "5.10.0-28");
  }
  KernelRequest r = Request(pb::IOMMU_MODE_LAZY);
  r.kernel_release = "5.10.0-28-cloud-amd64";
  absl::StatusOr<KernelRun> run = InterpretGuestRun(r, channel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("cannot tell the two"));
}

// The rule itself: off on a machine whose IOMMU has no off switch
// (SMMUv3) puts no word on the command line, so a translated result is the
// farm's machine, never the kernel's choice.
TEST(CheckRanModeTest, OnlyACmdlineThatAskedMakesAResult) {
  KernelFacts f;
  f.release = "6.1.0-57-arm64";
  f.machine = "aarch64";
  f.cmdline = "console=ttyAMA0 panic=-1";
  f.nvme.push_back({"nvme0", "0000:00:01.0", "3", {"nvme0n1"}});
  f.groups.push_back({"3", "DMA", {"0000:00:01.0"}});
  std::string detail = "nvme0 0000:00:01.0 group 3: DMA";
  EXPECT_EQ(CheckRanMode(f, pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_STRICT, &detail).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(detail, "nvme0 0000:00:01.0 group 3: DMA");
  // Passthrough asked (iommu.passthrough=1) and a DMA domain made: reported.
  f.cmdline = "console=ttyAMA0 panic=-1 iommu.passthrough=1";
  EXPECT_TRUE(CheckRanMode(f, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT, &detail).ok());
  EXPECT_EQ(detail,
            "the kernel ran strict although its command line asked for passthrough "
            "(iommu.passthrough=1): nvme0 0000:00:01.0 group 3: DMA");
  // An extra word after the mode's that overrides it is the farm's too.
  f.cmdline = "console=ttyAMA0 iommu.passthrough=1 iommu.passthrough=0";
  EXPECT_FALSE(CheckRanMode(f, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT, nullptr).ok());
}

TEST(InterpretGuestRunTest, AnotherReleaseIsAMismatch) {
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.kernel_release = "6.1.0-56-cloud-amd64";
  absl::StatusOr<KernelRun> run = InterpretGuestRun(r, kStrictChannel, "", CleanExit());
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(), HasSubstr("6.1.0-56-cloud-amd64"));
  EXPECT_THAT(run.status().message(), HasSubstr("6.1.0-57-cloud-amd64"));
}

TEST(InterpretGuestRunTest, UnbootableImageIsAPermanentFailureWithTheConsoleTail) {
  QemuExit halted;
  halted.halted = true;
  halted.description = "killed by signal 15 (cancelled)";
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), "",
                        "Probing EDD...\r\n\r\nDecoding failed\r\n\r\n -- System halted", halted);
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(), HasSubstr("corrupt or unbootable kernel image"));
  EXPECT_THAT(run.status().message(), HasSubstr("halted in its boot stub"));
  EXPECT_THAT(run.status().message(), HasSubstr("Decoding failed"));

  QemuExit refused;
  refused.image_refused = true;
  refused.description = "exit 1";
  refused.qemu_stderr = "qemu-system-x86_64: linux kernel too old to load a ram disk\n";
  run = InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT), "", "", refused);
  ASSERT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(), HasSubstr("refused by QEMU's loader"));
  EXPECT_THAT(run.status().message(), HasSubstr("linux kernel too old"));
}

TEST(InterpretGuestRunTest, UnfinishedGuestFailsWithTheConsoleTail) {
  QemuExit hung;
  hung.timed_out = true;
  hung.description = "killed by signal 9 (timed out) after 1m30s";
  absl::StatusOr<KernelRun> run =
      InterpretGuestRun(Request(pb::IOMMU_MODE_STRICT),
                        "@@farm-begin facts\nrelease=6.1.0-57-cloud-amd64\n@@farm-end facts 0\n",
                        "Kernel panic - not syncing: VFS\n", hung);
  ASSERT_EQ(run.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(run.status().message(), HasSubstr("did not finish in time"));
  EXPECT_THAT(run.status().message(), HasSubstr("Kernel panic"));
}

pb::HostFacts Host() {
  pb::HostFacts h;
  h.set_kernel_release("6.18.44");
  h.set_iommu_mode(pb::IOMMU_MODE_PASSTHROUGH);
  h.set_iommu_detail("iommu=pt");
  return h;
}

TEST(HostKernelProviderTest, RefusesAnotherReleaseOrMode) {
  HostKernelProvider host(Host());
  KernelRequest r;
  r.kernel_release = "6.18.44";
  r.mode = pb::IOMMU_MODE_PASSTHROUGH;
  EXPECT_TRUE(host.CanRun(r).ok());
  r.mode = pb::IOMMU_MODE_STRICT;
  absl::Status s = host.CanRun(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("runs mode passthrough"));
  EXPECT_THAT(s.message(), HasSubstr("in mode strict"));
  r.mode = pb::IOMMU_MODE_PASSTHROUGH;
  r.kernel_release = "6.1.0-57-cloud-amd64";
  s = host.Run(r).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("6.1.0-57-cloud-amd64"));
}

TEST(HostKernelProviderTest, RunsTheToolOnTheHost) {
  HostKernelProvider host(Host());
  KernelRequest r;
  r.kernel_release = "6.18.44";
  r.mode = pb::IOMMU_MODE_PASSTHROUGH;
  r.tool_argv = {"/bin/sh", "-c", "echo report; exit 3"};
  absl::StatusOr<KernelRun> run = host.Run(r);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->provider, "host");
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(run->tool_stdout, "report\n");
  EXPECT_EQ(run->tool_exit, 3);
}

TEST(VmKernelProviderTest, RefusesWithoutImageOrQemu) {
  VmConfig c;
  c.kernels_dir = "/nonexistent/kernels";
  c.initramfs = "/nonexistent/initramfs.cpio";
  c.allow_dir = "/tmp";
  VmKernelProvider vm(c);
  absl::Status s = vm.CanRun(Request(pb::IOMMU_MODE_STRICT));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("scripts/fetch-test-kernels"));
  EXPECT_EQ(vm.CanRun(Request(pb::IOMMU_MODE_UNSPECIFIED)).code(),
            absl::StatusCode::kInvalidArgument);
}

// The vm provider reads its kernels from a kernel store: offers carry the
// build's commit, a request by commit finds its image.
TEST(VmKernelProviderTest, OffersAndFindsTheStoresBuildsByCommit) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "vm-store-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  auto write_build = [&](const std::string& name, const std::string& manifest) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "kernel.yaml") << manifest;
    std::ofstream(dir / name / "vmlinuz") << "image";
  };
  write_build("kernel-a1-x86_64",
              "commit: kernel-a1\nrelease: 6.1.0-57-cloud-amd64\narch: x86_64\nimage: vmlinuz\n");
  write_build("kernel-a1-aarch64",
              "commit: kernel-a1\nrelease: 6.1.0-57-cloud-arm64\narch: aarch64\nimage: vmlinuz\n");
  // The bare layout still reads: commit = release = the directory's name.
  fs::create_directories(dir / "6.1.0-50-cloud-amd64");
  std::ofstream(dir / "6.1.0-50-cloud-amd64" / "vmlinuz") << "image";

  VmConfig c;
  c.kernels_dir = dir.string();
  VmKernelProvider vm(c);
  std::vector<pb::KernelOffer> offers = vm.Offers();
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[0].commit(), "6.1.0-50-cloud-amd64");
  EXPECT_EQ(offers[0].release(), "6.1.0-50-cloud-amd64");
  EXPECT_EQ(offers[1].commit(), "kernel-a1");
  EXPECT_EQ(offers[1].release(), "6.1.0-57-cloud-amd64");
  EXPECT_EQ(offers[1].machine_model(), "q35+intel-iommu");

  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.commit = "kernel-a1";
  r.kernel_release = "6.1.0-57-cloud-amd64";
  absl::StatusOr<kstore::KernelBuild> b = vm.FindKernel(r);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ImagePath(), (dir / "kernel-a1-x86_64" / "vmlinuz").string());
  r.commit.clear();
  r.kernel_release = "6.1.0-50-cloud-amd64";
  b = vm.FindKernel(r);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ImagePath(), (dir / "6.1.0-50-cloud-amd64" / "vmlinuz").string());
  // The commit's build is another release than the job names.
  r.commit = "kernel-a1";
  r.kernel_release = "6.1.0-50-cloud-amd64";
  EXPECT_EQ(vm.FindKernel(r).status().message(),
            "the store's build of commit kernel-a1 is 6.1.0-57-cloud-amd64, the job wants "
            "6.1.0-50-cloud-amd64");
  r.commit = "kernel-zz";
  EXPECT_THAT(vm.FindKernel(r).status().message(), HasSubstr("farmctl kernels import"));

  // A build added later is offered at the next call (the store is watched,
  // not read once).
  EXPECT_EQ(vm.Offers().size(), 2u);
  write_build("kernel-b2-x86_64",
              "commit: kernel-b2\nrelease: 6.1.0-58-cloud-amd64\narch: x86_64\nimage: vmlinuz\n");
  offers = vm.Offers();
  ASSERT_EQ(offers.size(), 3u);
  EXPECT_EQ(offers[2].commit(), "kernel-b2");

  c.arch = kArchArm64;
  VmKernelProvider arm(c);
  offers = arm.Offers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].release(), "6.1.0-57-cloud-arm64");
  fs::remove_all(dir);
}

// q35 + amd-iommu is offered only for a kernel whose config has the AMD
// IOMMU driver built in.
TEST(VmKernelProviderTest, AmdIommuOnlyForKernelsWithTheDriver) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "vm-amd-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  auto write_build = [&](const std::string& commit, const std::string& config) {
    fs::create_directories(dir / commit);
    std::ofstream(dir / commit / "kernel.yaml")
        << "commit: " << commit << "\nrelease: 6.1.0-" << commit
        << "\narch: x86_64\nimage: vmlinuz\nconfig: config\n";
    std::ofstream(dir / commit / "vmlinuz") << "image";
    std::ofstream(dir / commit / "config") << config;
  };
  write_build("amd", "CONFIG_INTEL_IOMMU=y\nCONFIG_AMD_IOMMU=y\n");
  write_build("cloud", "CONFIG_INTEL_IOMMU=y\n# CONFIG_AMD_IOMMU is not set\n");
  write_build("module", "CONFIG_AMD_IOMMU=m\n");
  VmConfig c;
  c.kernels_dir = dir.string();
  std::vector<std::string> offered;
  for (const pb::KernelOffer& o : VmKernelProvider(c).Offers()) {
    offered.push_back(o.commit() + " " + o.machine_model());
  }
  EXPECT_EQ(offered, (std::vector<std::string>{"amd q35+intel-iommu", "amd q35+amd-iommu",
                                               "cloud q35+intel-iommu", "module q35+intel-iommu"}));
  kstore::KernelBuild arm;
  arm.config = "";
  EXPECT_EQ(IommuModelsFor(arm, kArchArm64), (std::vector<std::string>{"virt+smmuv3"}));
  fs::remove_all(dir);
}

// Each build is offered under its kernel config; one with
// CONFIG_DMA_MAP_BENCHMARK made for fio (or imported) also under its
// dma-map-bench build config. A request finds the build of its config.
TEST(VmKernelProviderTest, OffersEachBuildUnderItsKernelConfig) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "vm-config-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  auto write_build = [&](const std::string& name, const std::string& commit,
                         const std::string& kernel_config, const std::string& config) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "kernel.yaml")
        << "commit: " << commit << "\nrelease: 6.1.0-" << name
        << "\narch: x86_64\nimage: vmlinuz\nconfig: config\n"
        << (kernel_config.empty() ? "" : "kernel_config: " + kernel_config + "\n");
    std::ofstream(dir / name / "vmlinuz") << "image";
    std::ofstream(dir / name / "config") << config;
  };
  write_build("old", "c1", "", "CONFIG_INTEL_IOMMU=y\nCONFIG_DMA_MAP_BENCHMARK=y\n");
  write_build("fio", "c2", "", "CONFIG_INTEL_IOMMU=y\n");
  write_build("bench", "c2", "dma-map-bench", "CONFIG_DMA_MAP_BENCHMARK=y\n");
  write_build("lazy", "c2", "a8ea6ec7fc4d4bdb", "CONFIG_INTEL_IOMMU=y\n");
  VmConfig c;
  c.kernels_dir = dir.string();
  VmKernelProvider vm(c);
  std::vector<std::string> offered;
  for (const pb::KernelOffer& o : vm.Offers()) {
    offered.push_back(o.commit() + " " + o.release() + " [" + o.kernel_config() + "]");
  }
  EXPECT_EQ(offered, (std::vector<std::string>{
                         "c1 6.1.0-old []", "c1 6.1.0-old [dma-map-bench]", "c2 6.1.0-fio []",
                         "c2 6.1.0-lazy [a8ea6ec7fc4d4bdb]", "c2 6.1.0-bench [dma-map-bench]"}));
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.commit = "c2";
  r.kernel_release.clear();
  for (const auto& [config, release] :
       std::vector<std::pair<std::string, std::string>>{{"", "6.1.0-fio"},
                                                        {"dma-map-bench", "6.1.0-bench"},
                                                        {"a8ea6ec7fc4d4bdb", "6.1.0-lazy"}}) {
    r.kernel_config = config;
    absl::StatusOr<kstore::KernelBuild> b = vm.FindKernel(r);
    ASSERT_TRUE(b.ok()) << config << ": " << b.status();
    EXPECT_EQ(b->release, release) << config;
  }
  r.kernel_config = "0000000000000000";
  EXPECT_FALSE(vm.FindKernel(r).ok());
  fs::remove_all(dir);
}

TEST(BuildQemuArgvTest, AmdIommuDeviceAndNoneForOff) {
  QemuInvocation q;
  q.qemu = "qemu-system-x86_64";
  q.accel = "tcg";
  q.kernel = "/k";
  q.initrd = "/i";
  q.nvme_image = "/n";
  q.console_log = "/c";
  q.channel_log = "/h";
  q.cmdline = "console=ttyS0";
  q.iommu_model = kModelAmd;
  absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok()) << argv.status();
  auto device = std::find(argv->begin(), argv->end(), "amd-iommu");
  ASSERT_NE(device, argv->end());
  EXPECT_EQ(*(device - 1), "-device");
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "intel-iommu,intremap=on,caching-mode=on"), 0);
  q.iommu = false;
  argv = BuildQemuArgv(q);
  ASSERT_TRUE(argv.ok());
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "amd-iommu"), 0);
  EXPECT_EQ(std::count(argv->begin(), argv->end(), "-device"), 1);  // the NVMe only
  q.iommu_model = "q35+virtio-iommu";
  EXPECT_EQ(BuildQemuArgv(q).status().code(), absl::StatusCode::kInvalidArgument);
}

// Safety: every machine model, IOMMU on and off, runs with -nodefaults
// -no-user-config and nothing but the options the provider means: no
// network, display, USB, monitor or extra drive; the only devices are the
// model's IOMMU and the NVMe on the job's scratch image.
TEST(BuildQemuArgvTest, EveryModelRunsWithNodefaultsAndOnlyItsDevices) {
  struct Case {
    std::string arch, model;
    bool iommu;
    std::vector<std::string> devices;
  };
  const std::string nvme = "nvme,serial=farm-nvme0,drive=nvme0";
  const std::vector<Case> cases = {
      {kArchX86, kModelIntel, true, {"intel-iommu,intremap=on,caching-mode=on", nvme}},
      {kArchX86, kModelIntel, false, {"intel-iommu,intremap=on,caching-mode=on", nvme}},
      {kArchX86, kModelAmd, true, {"amd-iommu", nvme}},
      {kArchX86, kModelAmd, false, {nvme}},
      {kArchArm64, kModelSmmuv3, true, {nvme}},
      {kArchArm64, kModelSmmuv3, false, {nvme}},
  };
  // Options and how many values each takes.
  const std::map<std::string, int> allowed = {{"-M", 1},
                                              {"-cpu", 1},
                                              {"-accel", 1},
                                              {"-nodefaults", 0},
                                              {"-no-user-config", 0},
                                              {"-no-reboot", 0},
                                              {"-display", 1},
                                              {"-m", 1},
                                              {"-smp", 1},
                                              {"-drive", 1},
                                              {"-device", 1},
                                              {"-serial", 1},
                                              {"-kernel", 1},
                                              {"-initrd", 1},
                                              {"-append", 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + (c.iommu ? " on" : " off"));
    QemuInvocation q = Invocation();
    q.arch = c.arch;
    q.iommu_model = c.arch == kArchArm64 ? "" : c.model;
    q.iommu = c.iommu;
    if (c.arch == kArchArm64) q.channel_log = q.console_log;
    absl::StatusOr<std::vector<std::string>> argv = BuildQemuArgv(q);
    ASSERT_TRUE(argv.ok()) << argv.status();
    const std::vector<std::string>& a = *argv;
    std::vector<std::string> devices, seen;
    for (std::size_t i = 1; i < a.size(); ++i) {
      auto it = allowed.find(a[i]);
      ASSERT_NE(it, allowed.end()) << "unexpected QEMU argument '" << a[i] << "'";
      seen.push_back(a[i]);
      if (a[i] == "-device") devices.push_back(a[i + 1]);
      i += it->second;
    }
    for (const char* must : {"-nodefaults", "-no-user-config", "-no-reboot"}) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), must), 1) << must;
    }
    EXPECT_EQ(After(a, "-display"), "none");
    EXPECT_EQ(devices, c.devices);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), "-drive"), 1);
    EXPECT_EQ(After(a, "-drive"), "file=/s/nvme.img,if=none,id=nvme0,format=raw");
    EXPECT_EQ(std::count(seen.begin(), seen.end(), "-serial"), c.arch == kArchArm64 ? 1 : 2);
  }
}

TEST(ResolveAccelTest, AutoProbesOnceAndFallsBack) {
  int probes = 0;
  std::string why;
  auto kvm_works = [&] {
    ++probes;
    return absl::OkStatus();
  };
  auto kvm_broken = [&] {
    ++probes;
    return absl::FailedPreconditionError("a KVM guest did not boot: KVM internal error");
  };
  EXPECT_EQ(ResolveAccel("auto", kvm_works, &why), "kvm");
  EXPECT_EQ(why, "");
  EXPECT_EQ(ResolveAccel("auto", kvm_broken, &why), "tcg-icount");
  EXPECT_EQ(why, "a KVM guest did not boot: KVM internal error");
  EXPECT_EQ(probes, 2);
  EXPECT_EQ(ResolveAccel("tcg", kvm_works, &why), "tcg");
  EXPECT_EQ(ResolveAccel("kvm", kvm_broken, &why), "kvm");
  EXPECT_EQ(probes, 2);  // given accelerators are not probed
}

TEST(KvmArchMismatchTest, NamesBothArchitectures) {
  EXPECT_EQ(KvmArchMismatch("x86_64", "x86_64"), "");
  EXPECT_EQ(KvmArchMismatch("aarch64", "x86_64"),
            "an aarch64 guest runs under TCG on this x86_64 host: KVM runs only x86_64 guests "
            "here");
}

TEST(CheckAccelTest, KvmForAForeignGuestIsRefusedNamingTcg) {
  const absl::Status st = CheckAccel("kvm", "aarch64", "x86_64");
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("--vm-accel kvm: an aarch64 guest runs under TCG on this x86_64"),
            std::string::npos)
      << st;
  EXPECT_TRUE(CheckAccel("kvm", "x86_64", "x86_64").ok());
  for (const char* flag : {"auto", "tcg", "tcg-icount"}) {
    EXPECT_TRUE(CheckAccel(flag, "aarch64", "x86_64").ok()) << flag;
  }
}

TEST(ProbeKvmTest, AForeignGuestIsRefusedBeforeAnyBoot) {
  VmConfig c;
  c.arch = HostArch() == kArchArm64 ? kArchX86 : kArchArm64;
  // No kernel, no QEMU: the reason is the architecture, not a failed boot.
  absl::Status st = ProbeKvm(c, "no-such-release", "no-such-commit");
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_NE(st.message().find("KVM runs only"), std::string::npos) << st;
}

}  // namespace
}  // namespace farm::kernels
