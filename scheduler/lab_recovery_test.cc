// The lab hosts file and LabRecovery: a host that did not come back from a
// job's kernel has its console read and its power cycled by real commands,
// and the job's reason says what they did.
#include "scheduler/lab_recovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "lib/base/file.h"
#include "scheduler/lab_recovery_test_fixture.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseLabHostsTest, ReadsEachHostsCommands) {
  absl::StatusOr<LabHosts> h = ParseLabHosts(R"(
hosts:
  lab-7:
    power_cycle: [ipmitool, -I, lanplus, -H, bmc-7, -E, chassis, power, cycle]
    console: [tail, -c, "65536", /var/log/conserver/lab-7.log]
    timeout: 90s
    console_lines: 12
  lab-8:
    power_cycle: [/usr/local/bin/pdu, outlet, "8", cycle]
)");
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 2u);
  const LabHost& a = h->at("lab-7");
  EXPECT_EQ(a.power_cycle.back(), "cycle");
  EXPECT_EQ(a.console.size(), 4u);
  EXPECT_EQ(a.timeout, absl::Seconds(90));
  EXPECT_EQ(a.console_lines, 12);
  const LabHost& b = h->at("lab-8");
  EXPECT_TRUE(b.console.empty());
  EXPECT_EQ(b.timeout, absl::Minutes(2));
  EXPECT_EQ(b.console_lines, 40);
}

TEST(ParseLabHostsTest, NamesTheHostAndKeyOfAMistake) {
  struct Case {
    const char* yaml;
    const char* error;
  };
  for (const Case& c : {
           Case{"hosts:\n  h1:\n    console: [cat, x]\n", "hosts.h1.power_cycle: is required"},
           Case{"hosts:\n  h1:\n    power_cycle: reboot\n", "hosts.h1.power_cycle: must be a"},
           Case{"hosts:\n  h1:\n    power_cycle: [x]\n    timeout: soon\n",
                "hosts.h1.timeout: must be a positive duration"},
           Case{"hosts:\n  h1:\n    power_cycle: [x]\n    timeout: -1s\n", "hosts.h1.timeout"},
           Case{"hosts:\n  h1:\n    power_cycle: [x]\n    consol: [y]\n",
                "hosts.h1.consol: unknown key"},
           Case{"hosts:\n  h1:\n    power_cycle: [x]\n    console_lines: 0\n",
                "hosts.h1.console_lines"},
           Case{"hosts:\n  h1:\n    power_cycle: [[x]]\n", "every item must be a string"},
           Case{"hosts: [h1]\n", "must be a map with one key"},
           Case{"lab: {}\n", "must be a map with one key"},
           Case{"hosts:\n  h1: {power_cycle: [x]}\n  h1: {power_cycle: [y]}\n", "appears twice"},
           Case{"hosts: {h1: [\n", "not YAML"},
       }) {
    absl::StatusOr<LabHosts> h = ParseLabHosts(c.yaml);
    ASSERT_FALSE(h.ok()) << c.yaml;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(std::string(h.status().message()), HasSubstr(c.error)) << c.yaml;
  }
}

// A host's kernel config: its files read from beside the lab hosts file,
// checked as a spec's kernel_config; an entry naming only a config needs no
// power command.
TEST(LoadLabHostsTest, ReadsEachHostsKernelConfigFiles) {
  absl::StatusOr<process::ScopedTempDir> dir =
      process::ScopedTempDir::Create(std::filesystem::temp_directory_path(), "lab-hosts-");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::filesystem::path d = dir->path();
  ASSERT_TRUE(
      base::WriteFile((d / "lab.config").string(), "# lab-7\nCONFIG_BLK_DEV_NVME=y\n").ok());
  ASSERT_TRUE(base::WriteFile((d / "ext4.config").string(), "CONFIG_EXT4_FS=y\n").ok());
  const std::string yaml = (d / "lab.yaml").string();
  ASSERT_TRUE(base::WriteFile(yaml,
                              "hosts:\n  lab-7:\n    kernel_config: lab.config\n"
                              "    kernel_fragments: [ext4.config]\n"
                              "  lab-8:\n    power_cycle: [x]\n")
                  .ok());
  absl::StatusOr<LabHosts> h = LoadLabHosts(yaml);
  ASSERT_TRUE(h.ok()) << h.status();
  const pb::KernelConfig& c = h->at("lab-7").kernel_config;
  EXPECT_EQ(c.base(), "lab.config");
  EXPECT_EQ(c.base_text(), "# lab-7\nCONFIG_BLK_DEV_NVME=y\n");
  ASSERT_EQ(c.fragments_size(), 1);
  EXPECT_EQ(c.fragments(0).name(), "ext4.config");
  EXPECT_EQ(c.fragments(0).text(), "CONFIG_EXT4_FS=y\n");
  EXPECT_TRUE(h->at("lab-7").power_cycle.empty());
  const std::map<std::string, pb::KernelConfig> configs = LabKernelConfigs(*h);
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs.count("lab-7"), 1u);

  struct Case {
    std::string yaml;
    std::string error;
  };
  for (const Case& c : {
           Case{"hosts:\n  h1:\n    kernel_config: missing.config\n",
                "lab.yaml: hosts.h1.kernel_config: "},
           Case{"hosts:\n  h1:\n    kernel_config: lab.config\n"
                "    kernel_fragments: [ext4.config, gone.config]\n",
                "hosts.h1.kernel_fragments[2]: "},
           Case{"hosts:\n  h1:\n    kernel_config: bad.config\n",
                "hosts.h1.kernel_config.base: line 1 is not CONFIG_X=value"},
           Case{"hosts:\n  h1:\n    power_cycle: [x]\n    kernel_fragments: [ext4.config]\n",
                "hosts.h1.kernel_fragments: needs kernel_config"},
       }) {
    ASSERT_TRUE(base::WriteFile((d / "bad.config").string(), "CONFIG_X y\n").ok());
    ASSERT_TRUE(base::WriteFile(yaml, c.yaml).ok());
    absl::StatusOr<LabHosts> bad = LoadLabHosts(yaml);
    ASSERT_FALSE(bad.ok()) << c.yaml;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(c.error)) << c.yaml;
  }
}

TEST(TailLinesTest, KeepsTheLastLinesAsText) {
  EXPECT_EQ(TailLines("a\nb\nc\n", 2), "b\nc");
  EXPECT_EQ(TailLines("a\nb\nc", 1), "c");
  EXPECT_EQ(TailLines("a\nb", 5), "a\nb");
  EXPECT_EQ(TailLines("", 3), "");
  EXPECT_EQ(TailLines("boot\r\nKernel panic\r\n", 1), "Kernel panic");
  // Serial junk: control bytes shown as '?', bytes that are not UTF-8 replaced.
  EXPECT_EQ(TailLines(std::string("ok\n\x1b[0mpanic\xff\n", 14), 1), "?[0mpanic\xEF\xBF\xBD");
  EXPECT_EQ(TailLines(std::string(20000, 'x'), 1).size(), 8192u);
}

TEST_F(LabRecoveryTest, ReadsTheConsoleThenCyclesThePowerAndSaysSoOnTheJob) {
  const std::string log = (dir_.path() / "power.log").string();
  LabHosts hosts;
  hosts["lab-7"].console = {"sh", "-c",
                            "printf 'booting 6.1.0\\nKernel panic - not syncing: VFS\\n'"};
  hosts["lab-7"].power_cycle = {"sh", "-c", "echo cycle >> " + log};
  hosts["lab-7"].console_lines = 1;
  LabRecovery recovery(&store_, hosts);
  const storage::UnbootedLease u = Unbooted("lab-7");
  recovery.Recover(u);
  WaitFor(recovery, 1);
  EXPECT_EQ(base::ReadFileOrEmpty(log), "cycle\n");
  const std::string reason = Reason(u.job_id);
  // The first boot that did not come back: the job runs again, and the
  // recovery's note goes with the attempt that hung.
  EXPECT_THAT(reason, HasSubstr("(boot 1 of 2) (agent lab-7)\nconsole (sh -c"));
  EXPECT_THAT(reason, HasSubstr("exit 0), its last lines:\nKernel panic - not syncing: VFS\n"));
  EXPECT_THAT(reason, Not(HasSubstr("lines:\nbooting 6.1.0")));  // one line kept
  EXPECT_THAT(reason, HasSubstr("power-cycled into the default kernel by sh -c echo cycle"));
}

TEST_F(LabRecoveryTest, AFailedPowerCycleAndAHostWithoutOneAreSaid) {
  LabHosts hosts;
  hosts["lab-7"].power_cycle = {"sh", "-c", "echo 'bmc unreachable' >&2; exit 3"};
  LabRecovery recovery(&store_, hosts);
  const storage::UnbootedLease broken = Unbooted("lab-7");
  recovery.Recover(broken);
  WaitFor(recovery, 1);
  EXPECT_THAT(Reason(broken.job_id),
              HasSubstr("the power cycle failed: sh -c echo 'bmc unreachable' >&2; exit 3 (exit "
                        "3): bmc unreachable"));
  const storage::UnbootedLease unknown = Unbooted("lab-9");
  recovery.Recover(unknown);
  WaitFor(recovery, 2);
  EXPECT_THAT(Reason(unknown.job_id),
              HasSubstr("no power command for agent lab-9 (farm-scheduler --lab-hosts)"));
}

// Each recovery counts once by agent and outcome in the scheduler's
// metrics, the family the scheduler's /metrics serves.
TEST_F(LabRecoveryTest, CountsPowerCyclesPerAgentAndOutcome) {
  LabHosts hosts;
  hosts["lab-6"].power_cycle = {"true"};
  hosts["lab-7"].power_cycle = {"true"};
  hosts["lab-8"].power_cycle = {"sh", "-c", "exit 3"};
  metrics::MetricsRegistry registry;
  metrics::SchedulerMetrics metrics(registry.registry());
  LabRecovery recovery(&store_, hosts, &metrics);
  // Before any recovery: a zero for each host with a power command, so the
  // first recovery is an increase; nothing for an agent the lab does not name.
  const std::string before = registry.Serialize();
  EXPECT_THAT(before, HasSubstr("farm_lab_power_cycles_total{agent=\"lab-7\",outcome=\"power_"
                                "cycled\"} 0\n"));
  EXPECT_THAT(before,
              HasSubstr("farm_lab_power_cycles_total{agent=\"lab-8\",outcome=\"failed\"} 0\n"));
  EXPECT_THAT(before, Not(HasSubstr("agent=\"lab-9\"")));
  std::vector<storage::UnbootedLease> leases;
  for (const char* agent : {"lab-6", "lab-7", "lab-8", "lab-9"}) leases.push_back(Unbooted(agent));
  for (const storage::UnbootedLease& u : leases) recovery.Recover(u);
  WaitFor(recovery, 4);
  const std::string text = registry.Serialize();
  EXPECT_THAT(text, HasSubstr("farm_lab_power_cycles_total{agent=\"lab-7\",outcome=\"power_"
                              "cycled\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("farm_lab_power_cycles_total{agent=\"lab-8\",outcome=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("farm_lab_power_cycles_total{agent=\"lab-9\",outcome=\"no_"
                              "command\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("farm_lab_power_cycles_total{agent=\"lab-8\",outcome=\"power_"
                              "cycled\"} 0\n"));
}

// A power switch that never answers does not hold the scheduler's
// shutdown for its timeout.
TEST_F(LabRecoveryTest, StopCancelsACommandUnderWay) {
  LabHosts hosts;
  hosts["lab-7"].power_cycle = {"sleep", "600"};
  auto recovery = std::make_unique<LabRecovery>(&store_, hosts);
  recovery->Recover(Unbooted("lab-7"));
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time start = absl::Now();
  recovery->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace farm::scheduler
