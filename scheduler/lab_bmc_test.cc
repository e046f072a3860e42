// LabRecovery against a BMC: a real ipmitool speaks IPMI 2.0 (RMCP+) to
// OpenIPMI's BMC simulator (ipmi_sim, lanserv) on a loopback UDP port,
// whose chassis powers a stand-in machine (its `startcmd`, a script that
// logs each power-on). The lab hosts file's power command is the one a lab
// writes for a real BMC, `ipmitool -I lanplus ... chassis power cycle`; the
// BMC cuts the machine's power (SIGTERM: no VM is attached to answer a
// graceful shutdown) and starts it again. Needs ipmi_sim (Debian's
// openipmi) and ipmitool, which scripts/install-deps installs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/file.h"
#include "lib/process/process.h"
#include "scheduler/lab_recovery_test_fixture.h"
#include "testing/child_process.h"
#include "testing/service_harness.h"

namespace farm::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr char kUser[] = "farm";
constexpr char kPassword[] = "lab-7-secret";

class LabBmcTest : public LabRecoveryTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> sim = process::ResolveExecutable("ipmi_sim");
    absl::StatusOr<std::string> tool = process::ResolveExecutable("ipmitool");
    ASSERT_TRUE(sim.ok() && tool.ok())
        << "needs ipmi_sim (Debian's openipmi) and ipmitool: scripts/install-deps";
    ipmitool_ = *tool;
    const std::string dir = dir_.path().string();
    power_log_ = dir + "/power.log";
    // The machine: logs its power-on, and ends with its BMC.
    const std::string machine = dir + "/machine.sh";
    std::ofstream(machine) << "#!/bin/sh\necho \"power on $$\" >> " << power_log_
                           << "\nwhile kill -0 $PPID 2>/dev/null; do sleep 0.2; done\n";
    std::filesystem::permissions(machine, std::filesystem::perms::owner_all);
    port_ = testing::PickFreePort();
    std::ofstream(dir + "/lan.conf")
        << "name \"lab7bmc\"\nset_working_mc 0x20\n  startlan 1\n    addr 127.0.0.1 " << port_
        << "\n    priv_limit admin\n    allowed_auths_callback none md5 straight\n"
           "    allowed_auths_user none md5 straight\n"
           "    allowed_auths_operator none md5 straight\n"
           "    allowed_auths_admin none md5 straight\n"
           "    guid a123456789abcdefa123456789abcdef\n  endlan\n"
           // ipmi_sim controls the chassis through a VM serial interface
           // (where QEMU's ipmi-bmc-extern would connect; nothing does
           // here): without one it refuses power control ("Invalid data
           // field in request").
           "  serial kcs 127.0.0.1 "
        << testing::PickFreePort()
        << " codec VM\n"
           "  user 2 true \""
        << kUser << "\" \"" << kPassword << "\" admin 10 none md5 straight\n  startcmd \""
        << machine << "\"\n  startnow true\n  poweroff_wait 1\n  kill_wait 2\n";
    // The BMC's management controller (ipmi_sim_cmd(5)).
    std::ofstream(dir + "/bmc.emu")
        << "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 dynsens\n"
           "mc_enable 0x20\n";
    bmc_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{*sim, "-c", dir + "/lan.conf", "-f", dir + "/bmc.emu", "-n", "-s",
                                 dir + "/state"},
        dir + "/ipmi_sim.log");
    // Up when the BMC answers and the machine has powered on.
    for (int i = 0; i < 100 && !(PowerOns() == 1 && Ipmi({"chassis", "power", "status"}).ok());
         ++i) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_EQ(PowerOns(), 1) << base::ReadFileOrEmpty(dir + "/ipmi_sim.log");
  }

  // ipmitool against the BMC, as a lab's hosts file names it: IPMI 2.0 with
  // cipher suite 3 (ipmi_sim has no suite 17, ipmitool's default), and
  // ipmitool's own retries (a retried power cycle that reaches a chassis the
  // first one turned off fails: "Invalid data field in request").
  std::vector<std::string> IpmiCommand(const std::string& password,
                                       const std::vector<std::string>& command) const {
    // One option and its value a pair.
    // clang-format off
    std::vector<std::string> argv = {ipmitool_, "-I", "lanplus", "-C", "3", "-H", "127.0.0.1",
                                     "-p", absl::StrCat(port_), "-U", kUser, "-P", password};
    // clang-format on
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  absl::Status Ipmi(const std::vector<std::string>& command) const {
    process::ProcessOptions p;
    p.argv = IpmiCommand(kPassword, command);
    p.timeout = absl::Seconds(10);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    if (!r.ok()) return r.status();
    return r->ok() ? absl::OkStatus() : absl::UnavailableError(r->Describe() + r->stderr_data);
  }
  int PowerOns() const {
    int n = 0;
    for (absl::string_view line : absl::StrSplit(base::ReadFileOrEmpty(power_log_), '\n')) {
      n += absl::StartsWith(line, "power on ") ? 1 : 0;
    }
    return n;
  }

  std::string ipmitool_;
  std::string power_log_;
  int port_ = 0;
  std::unique_ptr<testing::ChildProcess> bmc_;
};

TEST_F(LabBmcTest, TheBmcCyclesTheHostsPowerAndTheJobSaysSo) {
  LabHosts hosts;
  hosts["lab-7"].power_cycle = IpmiCommand(kPassword, {"chassis", "power", "cycle"});
  hosts["lab-7"].timeout = absl::Seconds(30);
  LabRecovery recovery(&store_, hosts);
  const storage::UnbootedLease u = Unbooted("lab-7");
  recovery.Recover(u);
  WaitFor(recovery, 1);
  // The BMC powers the machine off, then on: a second power-on.
  for (int i = 0; i < 100 && PowerOns() < 2; ++i) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(PowerOns(), 2) << base::ReadFileOrEmpty(power_log_);
  const std::string reason = Reason(u.job_id);
  EXPECT_THAT(reason, HasSubstr("power-cycled into the default kernel by " + ipmitool_ +
                                " -I lanplus -C 3 -H 127.0.0.1"));
  EXPECT_THAT(reason, HasSubstr("chassis power cycle"));
}

TEST_F(LabBmcTest, ABmcThatRefusesTheLoginLeavesTheHostAsItWasAndSaysWhy) {
  LabHosts hosts;
  hosts["lab-7"].power_cycle = IpmiCommand("not-the-password", {"chassis", "power", "cycle"});
  hosts["lab-7"].timeout = absl::Seconds(30);
  LabRecovery recovery(&store_, hosts);
  const storage::UnbootedLease u = Unbooted("lab-7");
  recovery.Recover(u);
  WaitFor(recovery, 1);
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(PowerOns(), 1) << base::ReadFileOrEmpty(power_log_);
  const std::string reason = Reason(u.job_id);
  EXPECT_THAT(reason, HasSubstr("the power cycle failed: " + ipmitool_));
  EXPECT_THAT(reason, HasSubstr("Unable to establish IPMI v2 / RMCP+ session"));
}

}  // namespace
}  // namespace farm::scheduler
