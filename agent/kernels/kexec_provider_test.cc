// The kexec provider's state machine with a fake kexec: the command runner
// records argv, the facts function plays the kernel that runs after the
// "reboot", the clock is set by hand. Nothing reboots.
#include "agent/kernels/kexec_provider.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_join.h"

namespace farm::kernels {
namespace {

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kDefault[] = "6.1.0-13-amd64";
constexpr char kJobKernel[] = "6.1.0-57-cloud-amd64";

struct FakeHost {
  std::vector<std::vector<std::string>> commands;
  KernelFacts facts;
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  std::string tool_stdout = "{\"fio\": 1}";
  // How `systemctl kexec` ends: the signal that ended it (0: none), or its
  // exit status.
  int systemctl_kexec_signal = 0;
  int systemctl_kexec_exit = 0;
};

class FakeRunner : public CommandRunner {
 public:
  explicit FakeRunner(FakeHost* host) : host_(host) {}
  absl::StatusOr<process::ProcessResult> Run(const std::vector<std::string>& argv,
                                             absl::Duration) override {
    host_->commands.push_back(argv);
    process::ProcessResult r;
    r.exit_code = 0;
    if (argv[0] == "fio") r.stdout_data = host_->tool_stdout;
    if (argv[0] == "systemctl" && argv[1] == "kexec") {
      r.signaled = host_->systemctl_kexec_signal != 0;
      r.term_signal = host_->systemctl_kexec_signal;
      r.exit_code = host_->systemctl_kexec_exit;
    }
    return r;
  }

 private:
  FakeHost* host_;
};

// A kernel whose NVMe sits in a group of `type` ("" for no group).
KernelFacts Facts(const std::string& release, const std::string& type) {
  KernelFacts f;
  f.release = release;
  f.machine = "x86_64";
  NvmeController n;
  n.name = "nvme0";
  n.pci_address = "0000:01:00.0";
  if (!type.empty()) {
    n.group = "7";
    f.groups.push_back({"7", type, {"0000:01:00.0"}});
  }
  f.nvme.push_back(n);
  return f;
}

class KexecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kexec-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "state");
    fs::create_directories(dir_ / "store" / "kernel-a1");
    std::ofstream(dir_ / "store" / "kernel-a1" / "kernel.yaml")
        << "commit: kernel-a1\nrelease: " << kJobKernel
        << "\narch: x86_64\nimage: vmlinuz\ninitrd: initrd.img\n";
    std::ofstream(dir_ / "store" / "kernel-a1" / "vmlinuz") << "image";
    std::ofstream(dir_ / "store" / "kernel-a1" / "initrd.img") << "initrd";
    host_.facts = Facts(kDefault, "DMA-FQ");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A provider as the agent makes it at start: a new one after each "reboot".
  std::unique_ptr<KexecKernelProvider> Provider() {
    KexecConfig c;
    c.kernels_dir = (dir_ / "store").string();
    c.state_dir = (dir_ / "state").string();
    c.base_cmdline = "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet iommu.strict=0 intel_iommu=on";
    c.default_release = kDefault;
    c.boot_timeout = absl::Minutes(10);
    c.root_needs = root_needs_;
    return std::make_unique<KexecKernelProvider>(
        c, std::make_unique<FakeRunner>(&host_),
        [this]() -> absl::StatusOr<KernelFacts> { return host_.facts; },
        [this] { return host_.now; });
  }

  static KernelRequest Request(pb::IommuMode mode) {
    KernelRequest r;
    r.commit = "kernel-a1";
    r.kernel_release = kJobKernel;
    r.mode = mode;
    r.tool_argv = {"fio", "--output-format=json", "--name=r"};
    r.tool_runtime = absl::Seconds(4);
    return r;
  }

  // Step 1 on the default kernel: the state is written, kexec loads, systemd
  // reboots.
  void BootIntoTheJobsKernel(pb::IommuMode mode) {
    auto p = Provider();
    absl::StatusOr<KernelRun> run = p->RunLeased(Request(mode), {42, 1, "token-42", ""});
    ASSERT_EQ(run.status().code(), absl::StatusCode::kUnavailable) << run.status();
    EXPECT_THAT(run.status().message(), HasSubstr("rebooting into 6.1.0-57-cloud-amd64"));
    ASSERT_TRUE(fs::exists(p->StatePath()));
  }

  fs::path dir_;
  FakeHost host_;
  std::vector<RootNeed> root_needs_;
};

TEST_F(KexecTest, CmdlineKeepsTheHostsAndReplacesTheMode) {
  absl::StatusOr<std::string> c =
      KexecCmdline("root=/dev/sda1 ro iommu=pt amd_iommu=on iommu.passthrough=1 quiet",
                   pb::IOMMU_MODE_STRICT, {"iommu.forcedac=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, "root=/dev/sda1 ro quiet iommu.forcedac=1 iommu.strict=1");
  c = KexecCmdline("root=/dev/sda1", pb::IOMMU_MODE_OFF, {});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "root=/dev/sda1 intel_iommu=off amd_iommu=off");
  EXPECT_EQ(KexecCmdline("root=/dev/sda1", pb::IOMMU_MODE_STRICT, {"init=/bin/sh"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(KexecTest, LeaseKeptAcrossTheReboot) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  ASSERT_EQ(host_.commands.size(), 2u);
  EXPECT_THAT(host_.commands[0],
              ElementsAre("kexec", "-l", (dir_ / "store" / "kernel-a1" / "vmlinuz").string(),
                          "--initrd=" + (dir_ / "store" / "kernel-a1" / "initrd.img").string(),
                          "--append=BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet iommu.strict=1"));
  EXPECT_THAT(host_.commands[1], ElementsAre("systemctl", "kexec"));

  // "Reboot": the job's kernel runs, strict, three minutes later.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.now += absl::Minutes(3);
  host_.commands.clear();
  auto p = Provider();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = p->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kRun) << resumed->reason;
  EXPECT_EQ(resumed->boot.lease.job_id, 42);
  EXPECT_EQ(resumed->boot.lease.attempt, 1);
  EXPECT_EQ(resumed->boot.lease.lease_token, "token-42");
  EXPECT_EQ(resumed->boot.commit, "kernel-a1");
  EXPECT_EQ(resumed->boot.mode, pb::IOMMU_MODE_STRICT);

  absl::StatusOr<KernelRun> run = p->RunLeased(Request(pb::IOMMU_MODE_STRICT), resumed->boot.lease);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->provider, "kexec");
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_EQ(run->facts.release, kJobKernel);
  EXPECT_EQ(run->tool_exit, 0);
  EXPECT_EQ(run->tool_stdout, host_.tool_stdout);
  ASSERT_EQ(host_.commands.size(), 1u);  // only the tool: no reboot
  EXPECT_THAT(host_.commands[0], ElementsAre("fio", "--output-format=json", "--name=r"));
  ASSERT_TRUE(p->Finish().ok());
  EXPECT_FALSE(fs::exists(p->StatePath()));
  // Nothing pending any more.
  resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->kind, KexecKernelProvider::Resumed::kNothing);
}

// systemd stops the agent's service, systemctl client included, on its way
// into the kernel: the client's SIGTERM is the reboot under way, not a
// failure, and the pending boot stays for the agent on the job's kernel.
TEST_F(KexecTest, ASystemctlEndedByTheShutdownStillReboots) {
  host_.systemctl_kexec_signal = SIGTERM;
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts(kJobKernel, "DMA");
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->kind, KexecKernelProvider::Resumed::kRun) << resumed->reason;
}

// A systemctl that fails on its own (or is killed by anything but the
// shutdown) fails the job and leaves no pending boot behind.
TEST_F(KexecTest, ASystemctlThatFailsFailsTheJobAndForgetsTheBoot) {
  for (const auto& [signal, exit] : {std::pair{0, 1}, std::pair{SIGKILL, -1}}) {
    host_.systemctl_kexec_signal = signal;
    host_.systemctl_kexec_exit = exit;
    auto p = Provider();
    absl::StatusOr<KernelRun> run = p->RunLeased(Request(pb::IOMMU_MODE_STRICT), {42, 1, "t", ""});
    EXPECT_EQ(run.status().code(), absl::StatusCode::kAborted) << run.status();
    EXPECT_THAT(run.status().message(), HasSubstr("systemctl kexec"));
    EXPECT_FALSE(fs::exists(p->StatePath())) << signal;
  }
}

TEST_F(KexecTest, AKernelThatDoesNotComeBackFailsTheJob) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  // The kernel hung; the watchdog's reset brought up the default kernel.
  host_.now += absl::Minutes(11);
  host_.commands.clear();
  auto p = Provider();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = p->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_EQ(resumed->boot.lease.job_id, 42);
  EXPECT_EQ(resumed->reason,
            "kernel 6.1.0-57-cloud-amd64 (commit kernel-a1) did not come back: the host runs its "
            "default kernel 6.1.0-13-amd64, so it does not boot on this host");
  EXPECT_TRUE(host_.commands.empty());  // already on the default kernel
  EXPECT_FALSE(fs::exists(p->StatePath()));
}

TEST_F(KexecTest, BootTimeoutFailsTheJobAndReturnsToTheDefaultKernel) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts(kJobKernel, "DMA");
  host_.now += absl::Minutes(10) + absl::Seconds(1);
  host_.commands.clear();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_EQ(resumed->reason,
            "kernel 6.1.0-57-cloud-amd64 (commit kernel-a1) came back after the boot timeout "
            "(10m)");
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("systemctl", "reboot")));
}

TEST_F(KexecTest, AClockThatJumpedPastTheDeadlineDoesNotFailAKernelWhoseUptimeIsInTime) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  // An RTC read as local time, or an NTP step: hours on the wall clock,
  // while the new kernel has run for 25 s.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.uptime = absl::Seconds(25);
  host_.now += absl::Hours(5);
  host_.commands.clear();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->kind, KexecKernelProvider::Resumed::kRun) << resumed->reason;
  EXPECT_THAT(resumed->note,
              HasSubstr("kernel 6.1.0-57-cloud-amd64 (commit kernel-a1) has run for 25.0 s of its "
                        "10m: the clock moved after the kexec"));
  EXPECT_TRUE(host_.commands.empty());
}

TEST_F(KexecTest, ALateBootIsLateByTheWallClockAndTheUptimeBoth) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  // A kernel that took 11 minutes to come up: both clocks say so.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.uptime = absl::Minutes(11);
  host_.now += absl::Minutes(11) + absl::Seconds(20);
  host_.commands.clear();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_EQ(resumed->reason,
            "kernel 6.1.0-57-cloud-amd64 (commit kernel-a1) came back after the boot timeout "
            "(10m); it has run for 660.0 s");
  // In time by both clocks: the ordinary case, with nothing to say.
  host_.facts = Facts(kDefault, "DMA-FQ");
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.uptime = absl::Seconds(30);
  host_.now += absl::Seconds(40);
  resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->kind, KexecKernelProvider::Resumed::kRun);
  EXPECT_EQ(resumed->note, "");
}

// A farm build has no initramfs: one whose config leaves the root's driver a
// module would panic at boot, so its job fails before the kexec.
TEST_F(KexecTest, ABuildThatCannotMountTheRootFailsAsNotBootingWithoutAKexec) {
  const fs::path b = dir_ / "store" / "kernel-b2";
  fs::create_directories(b);
  std::ofstream(b / "kernel.yaml") << "commit: kernel-b2\nrelease: 6.1.192-gb2\narch: "
                                      "x86_64\nimage: vmlinuz\nconfig: config\n";
  std::ofstream(b / "vmlinuz") << "image";
  std::ofstream(b / "config") << "CONFIG_BLK_DEV_NVME=m\nCONFIG_EXT4_FS=y\n";
  root_needs_ = {{"CONFIG_BLK_DEV_NVME", "the root /dev/nvme0n1 is on driver nvme"},
                 {"CONFIG_EXT4_FS", "the root is ext4"}};
  KernelRequest req = Request(pb::IOMMU_MODE_STRICT);
  req.commit = "kernel-b2";
  req.kernel_release = "6.1.192-gb2";
  auto p = Provider();
  absl::StatusOr<KernelRun> run = p->RunLeased(req, {43, 1, "token-43", ""});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition) << run.status();
  EXPECT_EQ(run.status().message(),
            "kernel 6.1.192-gb2 (commit kernel-b2) cannot mount this host's root without an "
            "initramfs, which the build does not have: CONFIG_BLK_DEV_NVME=m (the root "
            "/dev/nvme0n1 is on driver nvme); so it does not boot on this host (no kexec was "
            "tried)");
  EXPECT_TRUE(host_.commands.empty());
  EXPECT_FALSE(fs::exists(p->StatePath()));

  // Built in, it boots as any other.
  std::ofstream(b / "config") << "CONFIG_BLK_DEV_NVME=y\nCONFIG_EXT4_FS=y\n";
  run = Provider()->RunLeased(req, {43, 1, "token-43", ""});
  EXPECT_EQ(run.status().code(), absl::StatusCode::kUnavailable) << run.status();
  ASSERT_FALSE(host_.commands.empty());
  EXPECT_EQ(host_.commands[0][0], "kexec");
}

TEST_F(KexecTest, WrongReleaseAfterBootFailsTheJob) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts("6.1.0-99-other", "DMA");
  host_.now += absl::Minutes(2);
  host_.commands.clear();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_EQ(resumed->reason,
            "booted kernel 6.1.0-99-other, wanted 6.1.0-57-cloud-amd64 (commit kernel-a1)");
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("systemctl", "reboot")));
}

TEST_F(KexecTest, CheckDecidesAndAbandonReboots) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts("6.1.0-99-other", "DMA");
  host_.commands.clear();
  auto p = Provider();
  absl::StatusOr<KexecKernelProvider::Resumed> checked = p->Check();
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_EQ(checked->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_EQ(checked->running, "6.1.0-99-other");
  // Nothing happened yet: the agent reports first.
  EXPECT_TRUE(host_.commands.empty());
  EXPECT_TRUE(fs::exists(p->StatePath()));
  ASSERT_TRUE(p->Abandon(*checked).ok());
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("systemctl", "reboot")));
  EXPECT_FALSE(fs::exists(p->StatePath()));
}

TEST_F(KexecTest, AbandonResetsTheDevicesEvenOnTheDefaultRelease) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_STRICT);
  host_.facts = Facts(kJobKernel, "DMA");
  host_.commands.clear();
  auto p = Provider();
  absl::StatusOr<KexecKernelProvider::Resumed> checked = p->Check();
  ASSERT_TRUE(checked.ok()) << checked.status();
  ASSERT_EQ(checked->kind, KexecKernelProvider::Resumed::kRun);
  // The agent found the host's devices broken on a kernel that is also the
  // default one: only a firmware reboot resets them.
  KexecKernelProvider::Resumed broken = *checked;
  broken.kind = KexecKernelProvider::Resumed::kFailed;
  broken.running = broken.boot.default_release;
  ASSERT_TRUE(p->Abandon(broken).ok());
  EXPECT_TRUE(host_.commands.empty()) << "a reboot into the release that runs";
  broken.reset_devices = true;
  ASSERT_TRUE(p->Abandon(broken).ok());
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("systemctl", "reboot")));
  EXPECT_FALSE(fs::exists(p->StatePath()));
}

TEST_F(KexecTest, WrongModeUnderACmdlineThatDidNotAskFailsTheJob) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_LAZY);
  // Lazy asked, strict runs, and the command line the kernel came back with
  // has lost the job's iommu.strict=0: the farm's boot, not the kernel.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.cmdline = "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet";
  host_.now += absl::Minutes(2);
  host_.commands.clear();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = Provider()->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kFailed);
  EXPECT_THAT(resumed->reason, HasSubstr("kernel 6.1.0-57-cloud-amd64 (commit kernel-a1): "
                                         "requested IOMMU mode lazy but the kernel ran strict"));
  EXPECT_THAT(resumed->reason, HasSubstr("did not ask for the requested mode"));
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("systemctl", "reboot")));
}

TEST_F(KexecTest, AKernelThatChoseStrictUnderALazyCmdlineReportsStrict) {
  BootIntoTheJobsKernel(pb::IOMMU_MODE_LAZY);
  const std::string append = host_.commands[0].back();
  ASSERT_THAT(append, HasSubstr("iommu.strict=0"));
  // The job's kernel came back with the command line it was given and
  // forced its DMA domains strict.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.cmdline = append.substr(append.find('=') + 1);
  host_.now += absl::Minutes(2);
  host_.commands.clear();
  auto p = Provider();
  absl::StatusOr<KexecKernelProvider::Resumed> resumed = p->Resume();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->kind, KexecKernelProvider::Resumed::kRun) << resumed->reason;

  absl::StatusOr<KernelRun> run = p->RunLeased(Request(pb::IOMMU_MODE_LAZY), resumed->boot.lease);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->requested, pb::IOMMU_MODE_LAZY);
  EXPECT_EQ(run->effective, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(run->domain_type, "DMA");
  EXPECT_EQ(run->effective_detail,
            "the kernel ran strict although its command line asked for lazy "
            "(iommu.strict=0): nvme0 0000:01:00.0 group 7: DMA");
  EXPECT_EQ(run->tool_exit, 0);
  // The tool ran on the kernel as it is: no second kexec.
  ASSERT_EQ(host_.commands.size(), 1u);
  EXPECT_EQ(host_.commands[0][0], "fio");
}

TEST_F(KexecTest, UnknownCommitIsRefusedBeforeAnyCommand) {
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.commit = "kernel-zz";
  auto p = Provider();
  EXPECT_EQ(p->RunLeased(r, {1, 1, "t", ""}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(host_.commands.empty());
  EXPECT_FALSE(fs::exists(p->StatePath()));
}

TEST_F(KexecTest, TheRightReleaseInAnotherModeBootsAgain) {
  host_.facts = Facts(kJobKernel, "DMA-FQ");  // the job's kernel, lazy
  auto p = Provider();
  absl::StatusOr<KernelRun> run = p->RunLeased(Request(pb::IOMMU_MODE_STRICT), {5, 1, "t", ""});
  ASSERT_EQ(run.status().code(), absl::StatusCode::kUnavailable) << run.status();
  ASSERT_EQ(host_.commands.size(), 2u);
  EXPECT_EQ(host_.commands[0].back(),
            "--append=BOOT_IMAGE=/vmlinuz root=UUID=1234 ro quiet iommu.strict=1");
  // Extra parameters the running command line lacks boot too.
  host_.facts = Facts(kJobKernel, "DMA");
  host_.facts.cmdline = "root=UUID=1234 iommu.strict=1";
  host_.commands.clear();
  KernelRequest r = Request(pb::IOMMU_MODE_STRICT);
  r.kernel_params = {"iommu.forcedac=1"};
  EXPECT_EQ(p->RunLeased(r, {5, 1, "t", ""}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(host_.commands.size(), 2u);
  host_.facts.cmdline = "root=UUID=1234 iommu.forcedac=1 iommu.strict=1";
  host_.commands.clear();
  absl::StatusOr<KernelRun> here = p->RunLeased(r, {5, 1, "t", ""});
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_THAT(host_.commands, ElementsAre(ElementsAre("fio", "--output-format=json", "--name=r")));
}

TEST_F(KexecTest, ARefusedHoldStopsTheBoot) {
  auto p = Provider();
  int asked = 0;
  absl::StatusOr<KernelRun> run =
      p->RunLeased(Request(pb::IOMMU_MODE_STRICT), {5, 1, "t", ""}, [&asked] {
        ++asked;
        return absl::AbortedError("no hold");
      });
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kAborted) << run.status();
  EXPECT_TRUE(host_.commands.empty());
  EXPECT_FALSE(fs::exists(p->StatePath()));
}

TEST_F(KexecTest, OffersEveryModeOfTheStoresKernels) {
  std::vector<pb::KernelOffer> offers = Provider()->Offers();
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].provider(), "kexec");
  EXPECT_EQ(offers[0].commit(), "kernel-a1");
  EXPECT_EQ(offers[0].release(), kJobKernel);
  EXPECT_EQ(offers[0].modes_size(), 4);
}

// A lab host kexecs into a kernel the farm built for its platform (a host
// build: the host fragment, its config id's "+host") and into packaged
// ones, never into a farm build for vm guests, which runs only from the
// guests' initramfs; the job's request for the host build boots it.
TEST_F(KexecTest, OffersHostBuildsAndPackagedKernelsButNotGuestBuilds) {
  const auto add = [this](const std::string& dir, const std::string& commit,
                          const std::string& release, const std::string& extra) {
    fs::create_directories(dir_ / "store" / dir);
    std::ofstream(dir_ / "store" / dir / "kernel.yaml")
        << "commit: " << commit << "\nrelease: " << release << "\narch: x86_64\nimage: vmlinuz\n"
        << extra;
    std::ofstream(dir_ / "store" / dir / "vmlinuz") << "image";
  };
  add("c0ffee-x86_64-0123456789abcdef+host", "c0ffee", "6.1.192-gc0ffee",
      "fragments: [host-x86.config]\nkernel_config: 0123456789abcdef+host\n");
  add("c0ffee-x86_64", "c0ffee", "6.1.192-gc0ffee",
      "fragments: [guest.config, q35-intel-iommu.config, q35-amd-iommu.config]\n");
  std::vector<pb::KernelOffer> offers = Provider()->Offers();
  std::set<std::string> offered;
  for (const pb::KernelOffer& o : offers) offered.insert(o.commit() + "/" + o.kernel_config());
  EXPECT_EQ(offered, (std::set<std::string>{"kernel-a1/", "c0ffee/0123456789abcdef+host"}));

  KernelRequest req = Request(pb::IOMMU_MODE_STRICT);
  req.commit = "c0ffee";
  req.kernel_release = "6.1.192-gc0ffee";
  req.kernel_config = "0123456789abcdef+host";
  absl::StatusOr<KernelRun> run = Provider()->RunLeased(req, {43, 1, "token-43", ""});
  ASSERT_EQ(run.status().code(), absl::StatusCode::kUnavailable) << run.status();
  ASSERT_FALSE(host_.commands.empty());
  EXPECT_THAT(absl::StrJoin(host_.commands.front(), " "),
              HasSubstr("c0ffee-x86_64-0123456789abcdef+host/vmlinuz"));
  // The guest build of the same commit is not the host's to boot.
  req.kernel_config = "";
  EXPECT_EQ(Provider()->CanRun(req).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(KexecTest, ReadsTheRunningKernelsFacts) {
  const fs::path r = dir_ / "root";
  fs::create_directories(r / "proc/sys/kernel");
  std::ofstream(r / "proc/sys/kernel/osrelease") << kJobKernel << "\n";
  std::ofstream(r / "proc/cmdline") << "root=/dev/sda1 iommu.strict=1\n";
  std::ofstream(r / "proc/uptime") << "31.47 55.02\n";
  fs::create_directories(r / "sys/class/iommu/dmar0");
  fs::create_directories(r / "sys/kernel/iommu_groups/7/devices/0000:01:00.0");
  std::ofstream(r / "sys/kernel/iommu_groups/7/type") << "DMA\n";
  fs::create_directories(r / "sys/class/nvme/nvme0/nvme0n1");
  std::ofstream(r / "sys/class/nvme/nvme0/address") << "0000:01:00.0\n";
  absl::StatusOr<KernelFacts> f = ReadRunningKernelFacts(r.string());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->release, kJobKernel);
  EXPECT_EQ(f->cmdline, "root=/dev/sda1 iommu.strict=1");
  EXPECT_EQ(f->uptime, absl::Milliseconds(31470));
  EXPECT_EQ(f->iommu, "dmar0");
  ASSERT_EQ(f->nvme.size(), 1u);
  EXPECT_EQ(f->nvme[0].group, "7");
  EXPECT_THAT(f->nvme[0].namespaces, ElementsAre("nvme0n1"));
  std::string detail;
  absl::StatusOr<pb::IommuMode> mode = EffectiveMode(*f, &detail);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(ReadRunningKernelFacts((dir_ / "nothing").string()).status().code(),
            absl::StatusCode::kInternal);
}

TEST(PendingBoot, RoundTripsAndRefusesGarbage) {
  PendingBoot b;
  b.lease = {7, 2, "tok", "{\"id\": \"7\"}"};
  b.commit = "c";
  b.release = "r";
  b.mode = pb::IOMMU_MODE_PASSTHROUGH;
  b.cmdline = "root=/dev/sda1 iommu.passthrough=1";
  b.deadline = absl::FromUnixSeconds(1234);
  b.default_release = "d";
  absl::StatusOr<PendingBoot> back = ParsePendingBoot(PendingBootJson(b));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->lease.lease_token, "tok");
  EXPECT_EQ(back->lease.job, b.lease.job);
  EXPECT_EQ(back->mode, pb::IOMMU_MODE_PASSTHROUGH);
  EXPECT_EQ(back->deadline, b.deadline);
  EXPECT_EQ(ParsePendingBoot("[]").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePendingBoot("{\"job_id\": 1}").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::kernels
