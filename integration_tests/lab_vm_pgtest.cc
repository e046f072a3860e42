// The VM lab host: the kexec provider for real. A QEMU q35 + intel-iommu
// guest (TCG) with a Debian root (scripts/build-lab-root) plays a bare-metal
// lab host: its farm-agent, the test's build, registers over QEMU's user
// networking with the in-process scheduler on this host's loopback
// (10.0.2.2 from the guest) and PostgreSQL, leases each job of a matrix of
// two Debian cloud kernels (scripts/fetch-test-kernels --previous) x strict
// and passthrough, writes the pending boot, holds the lease, `kexec -l`s the
// job's kernel with the job's mode on its command line and kexecs into it
// with `systemctl kexec`: the guest runs systemd and the deployed
// farm-agent-kexec.service, which systemd stops on the way down and starts
// again on the new kernel, where the agent resumes with its lease, proves the effective mode, runs
// fio on the guest's NVMe (through the vIOMMU) and reports, then moves on to the next kernel and
// mode. Every result must carry the kernel and mode it really ran. The test prints its phases' wall
// times and each boot's "farm-lab: up" line. Missing kernels, root or QEMU fail (never skip): the
// message says what to run. Also: a kernel that hangs after the kexec (power-cycled through the
// QEMU monitor, failed or booted again) and a disk that goes away under a job (the host reboots
// itself and the job runs again).
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "integration_tests/lab_vm_fixture.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/process/process.h"
#include "proto/names.h"

namespace farm::lab_vm {
namespace {

// `jobs` done in `wall`, as an hour's rate.
int JobsPerHour(int jobs, absl::Duration wall) {
  return static_cast<int>(jobs * 3600 / absl::ToDoubleSeconds(wall));
}

TEST_F(LabVmPgTest, TwoKernelsTimesStrictAndPassthroughRunThroughRealKexecReboots) {
  const absl::Time start = absl::Now();
  BuildImage();
  if (HasFatalFailure()) return;
  const absl::Time built = absl::Now();

  // Submitted before the guest boots: the agent leases the first job at its
  // first registration.
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const int64_t matrix_id =
      Submit(commands, {kernels_[0].commit, kernels_[1].commit}, "[strict, passthrough]");
  if (HasFatalFailure()) return;

  // Room for one hung kexec: the 6-minute hold, the power cycle, the boot again.
  std::vector<pb::Result> results;
  absl::Time finished;
  BootAndCollectFour(commands, matrix_id, absl::Minutes(25), &results, &finished);
  if (HasFatalFailure()) return;
  std::map<std::string, std::string> release_of;
  for (const StoreKernel& k : kernels_) release_of[k.commit] = k.release;
  std::set<std::string> cells;
  for (const pb::Result& r : results) {
    const std::string mode = proto::ModeName(r.job().mode());
    const std::string cell = absl::StrCat(r.job().commit_id(), "/", mode);
    cells.insert(cell);
    EXPECT_EQ(r.agent(), kAgentName) << cell;
    EXPECT_EQ(r.host().hostname(), "lab-vm") << cell;
    EXPECT_EQ(r.host().kernel_release(), release_of[r.job().commit_id()]) << cell;
    EXPECT_EQ(r.host().iommu_mode(), r.job().mode()) << cell << ": " << r.host().iommu_detail();
    ASSERT_TRUE(r.host().has_guest()) << cell;
    const pb::GuestFacts& g = r.host().guest();
    EXPECT_EQ(g.provider(), "kexec") << cell;
    EXPECT_EQ(g.requested_mode(), r.job().mode()) << cell;
    EXPECT_EQ(g.domain_type(), mode == "strict" ? "DMA" : "identity") << cell;
    EXPECT_EQ(g.iommu_driver(), "dmar0") << cell;
    // The default kernel's intel_iommu=off gave way to the job's mode.
    EXPECT_FALSE(absl::StrContains(g.cmdline(), "intel_iommu=off")) << g.cmdline();
    EXPECT_TRUE(
        absl::StrContains(g.cmdline(), mode == "strict" ? "iommu.strict=1" : "iommu.passthrough=1"))
        << g.cmdline();
    double iops = 0;
    for (const pb::Sample& s : r.samples()) {
      if (s.metric() == "iops" && s.phase() == "read") iops = s.value();
    }
    EXPECT_GT(iops, 0) << cell;
    std::cout << "lab vm result: " << cell << " on " << r.host().kernel_release() << " ("
              << r.host().iommu_detail() << "): " << iops << " read IOPS\n";
  }
  EXPECT_EQ(cells.size(), 4u);
  // In PostgreSQL, once each.
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM results WHERE matrix_id = ", matrix_id,
                             " AND agent = '", kAgentName, "'")),
            4);

  // Every job was a reboot: the cold boot, then one kexec per job, each
  // through systemd's kexec.target with the job's kernel loaded; a job
  // booted again after a hung kexec adds its kexec and the power cycle's
  // cold boot.
  const int again = BootedAgain(results);
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(CountPrefix(lines, "farm-lab: kexec.target, kexec_loaded=1"), 4 + again) << Console();
  EXPECT_EQ(KexecsStarted(Console()), 4 + again) << Console();
  EXPECT_GE(CountPrefix(lines, "farm-lab: up "), 5 + again) << Console();
  for (const std::string& l : lines) {
    if (absl::StartsWith(l, "farm-lab: up ")) std::cout << "lab vm boot: " << l << "\n";
  }
  std::cout << "lab vm: image " << absl::ToDoubleSeconds(built - start) << " s, matrix of 4 jobs "
            << absl::ToDoubleSeconds(finished - built) << " s ("
            << absl::ToDoubleSeconds(finished - built) / 4 << " s a job, kexec to result; "
            << JobsPerHour(4, finished - built) << " jobs an hour), " << 4 + again
            << " kexec reboots\n";
}

// Jobs of the kernel and mode the host already runs take no reboot: four
// repeats of one kernel x strict are one kexec (the first job's) and four
// results on that boot. Beside the matrix test above (a kexec every job),
// it gives the host's jobs an hour with and without kernel changes.
TEST_F(LabVmPgTest, RepeatsOfTheRunningKernelAndModeTakeNoReboot) {
  BuildImage();
  if (HasFatalFailure()) return;
  const absl::Time built = absl::Now();
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const int64_t matrix_id = SubmitYaml(
      commands, Spec("lab-kernels", {kernels_[1].commit}, "[strict]", /*more=*/"", /*repeats=*/4));
  if (HasFatalFailure()) return;
  std::vector<pb::Result> results;
  absl::Time finished;
  BootAndCollectFour(commands, matrix_id, absl::Minutes(20), &results, &finished);
  if (HasFatalFailure()) return;
  for (const pb::Result& r : results) {
    EXPECT_EQ(r.host().kernel_release(), kernels_[1].release);
    EXPECT_EQ(r.host().iommu_mode(), pb::IOMMU_MODE_STRICT) << r.host().iommu_detail();
  }
  // One kexec, the first job's (and one more for each job booted again
  // after a hung kexec, BootedAgain).
  const int again = BootedAgain(results);
  EXPECT_EQ(KexecsStarted(Console()), 1 + again) << Console();
  std::cout << "lab vm: 4 repeats of one kernel and mode "
            << absl::ToDoubleSeconds(finished - built) << " s ("
            << absl::ToDoubleSeconds(finished - built) / 4 << " s a job; "
            << JobsPerHour(4, finished - built) << " jobs an hour), " << 1 + again
            << " kexec reboots\n";
}

// A kernel that hangs after the kexec: the guest is stopped through QEMU's
// monitor the moment its agent kexecs, which is what a hung kernel looks like
// from outside (no console, no network). The scheduler's hold passes,
// LabRecovery reads the serial console and cycles the power through the
// same monitor (system_reset, cont), and the host, back on its default
// kernel, runs the matrix's jobs. With one boot allowed the hung job fails
// as not booting; with the default two it is booted again and runs.
class LabVmRecoveryPgTest : public LabVmPgTest {
 protected:
  void ConfigureScheduler(scheduler::ServerOptions& options) override {
    options.config.max_boot_timeout = absl::Seconds(90);
    options.config.retry.boot_attempts = boot_attempts_;
  }

  void Monitor(const std::string& command) {
    process::ProcessOptions p;
    p.argv = {std::string(FARM_SOURCE_DIR) + "/integration_tests/qemu_monitor.sh",
              absl::StrCat(monitor_port_), command};
    p.timeout = absl::Seconds(30);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    ASSERT_TRUE(r.ok() && r->ok())
        << (r.ok() ? r->Describe() + r->stderr_data : r.status().ToString());
  }

  // Builds the image, submits one kernel (not the default) x strict and
  // passthrough, one slot, boots the guest, stops it as its agent kexecs
  // into the first job's kernel and waits for the matrix. Sets matrix_id_
  // and hung_to_done_.
  pb::Matrix HangTheFirstKexecAndWait() {
    BuildImage();
    if (HasFatalFailure()) return {};
    commands_ = std::make_unique<cli::Commands>(client_, out_, err_);
    matrix_id_ = Submit(*commands_, {kernels_[1].commit}, "[strict, passthrough]");
    if (HasFatalFailure()) return {};
    BootGuest();
    const absl::Time deadline = absl::Now() + absl::Minutes(5);
    while (KexecsStarted(Console()) == 0 && absl::Now() < deadline && qemu_->Alive()) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_EQ(KexecsStarted(Console()), 1) << Console();
    if (KexecsStarted(Console()) != 1) return {};
    Monitor("stop");
    const absl::Time hung = absl::Now();
    pb::Matrix done = WaitForMatrix(matrix_id_, absl::Minutes(12));
    hung_to_done_ = absl::Now() - hung;
    return done;
  }

  std::ostringstream out_, err_;
  std::unique_ptr<cli::Commands> commands_;  // made once client_ is set
  int64_t matrix_id_ = 0;
  absl::Duration hung_to_done_;
  int boot_attempts_ = 1;
};

TEST_F(LabVmRecoveryPgTest, AHungKernelIsPowerCycledAndTheHostRunsTheNextJob) {
  const pb::Matrix done = HangTheFirstKexecAndWait();
  if (HasFailure()) return;
  const int64_t matrix_id = matrix_id_;
  EXPECT_EQ(done.counts().failed(), 1) << done.ShortDebugString();
  EXPECT_EQ(done.counts().succeeded(), 1) << done.ShortDebugString();
  const std::string reason = SqlText(absl::StrCat(
      "SELECT failure_reason FROM jobs WHERE matrix_id = ", matrix_id, " AND state = 4"));
  std::cout << "lab vm recovery: the hung job's reason:\n" << reason << "\n";
  EXPECT_TRUE(absl::StrContains(reason, "so it does not boot on this host (agent lab-vm-1)"))
      << reason;
  EXPECT_TRUE(absl::StrContains(reason, "console (tail -c 16384")) << reason;
  const size_t tail = reason.find("), its last lines:\n");
  ASSERT_NE(tail, std::string::npos) << reason;
  EXPECT_NE(reason[tail + 19], '\n') << "an empty console tail: " << reason;
  EXPECT_TRUE(absl::StrContains(reason, "power-cycled into the default kernel by")) << reason;
  EXPECT_EQ(Sql(absl::StrCat("SELECT count(*) FROM results WHERE matrix_id = ", matrix_id)), 1);

  // The cold boot, the power cycle's cold boot, the second job's kernel.
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(KexecsStarted(Console()), 2) << Console();
  EXPECT_EQ(CountPrefix(lines, "farm-lab: up "), 3) << Console();
  std::cout << "lab vm recovery: hung to matrix done " << absl::ToDoubleSeconds(hung_to_done_)
            << " s (boot hold 90 s, recovery, cold boot, the next job)\n";
}

class LabVmBootAgainPgTest : public LabVmRecoveryPgTest {
 protected:
  LabVmBootAgainPgTest() { boot_attempts_ = 2; }
};

// The scheduler's default: one boot that hangs is not proof, so the hung
// job is booted again after the power cycle and runs; its reason keeps the
// hang's console tail and the power cycle, and its result is attempt 2.
TEST_F(LabVmBootAgainPgTest, AKernelThatHangsOnceIsPowerCycledAndBootedAgain) {
  const pb::Matrix done = HangTheFirstKexecAndWait();
  if (HasFailure()) return;
  const int64_t matrix_id = matrix_id_;
  EXPECT_EQ(done.counts().failed(), 0) << done.ShortDebugString();
  ASSERT_EQ(done.counts().succeeded(), 2) << done.ShortDebugString();
  auto results = commands_->FetchResults(matrix_id, /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ(BootedAgain(*results), 1);
  const std::string reason = SqlText(absl::StrCat(
      "SELECT failure_reason FROM jobs WHERE matrix_id = ", matrix_id, " AND attempt = 2"));
  EXPECT_TRUE(absl::StrContains(reason, "(boot 1 of 2) (agent lab-vm-1)\nconsole (tail -c 16384"))
      << reason;
  EXPECT_TRUE(absl::StrContains(reason, "power-cycled into the default kernel by")) << reason;
  for (const pb::Result& r : *results) {
    EXPECT_EQ(r.host().kernel_release(), kernels_[1].release);
    EXPECT_EQ(r.host().iommu_mode(), r.job().mode()) << r.host().iommu_detail();
  }

  // The cold boot, the hung kexec, the power cycle's cold boot, then the
  // hung job's kernel again and the other job's.
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(KexecsStarted(Console()), 3) << Console();
  EXPECT_EQ(CountPrefix(lines, "farm-lab: up "), 4) << Console();
  std::cout << "lab vm boot again: hung to matrix done " << absl::ToDoubleSeconds(hung_to_done_)
            << " s (boot hold 90 s, recovery, cold boot, both jobs)\n";
}

// A device that does not survive the kexec, under the job: on the first
// kernel in passthrough, once the agent starts the job, the guest's NVMe (its
// root's disk) leaves the PCI bus (integration_tests/lab_device_loss.service).
// The job fails, the agent's health job after it fails, the job is reported
// for another attempt and the host reboots into its default kernel by
// itself (no power command runs: its hold was never needed), and the job's
// second attempt runs.
class LabVmDeviceLossPgTest : public LabVmPgTest {
 protected:
  LabVmDeviceLossPgTest() {
    units_.push_back(std::string(FARM_SOURCE_DIR) + "/integration_tests/lab_device_loss.service");
  }
};

TEST_F(LabVmDeviceLossPgTest, AHostWhoseDiskGoesAwayUnderAJobRebootsAndTheJobRunsAgain) {
  BuildImage();
  if (HasFatalFailure()) return;
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  const int64_t id = Submit(commands, {kernels_[1].commit}, "[passthrough]");
  ASSERT_GT(id, 0);
  BootGuest();
  const absl::Time start = absl::Now();
  const pb::Matrix done = WaitForMatrix(id, absl::Minutes(15));
  const absl::Duration took = absl::Now() - start;
  ASSERT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << done.ShortDebugString();
  auto results = commands.FetchResults(id, /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pb::Result& r = (*results)[0];
  // Attempt 2, or later when the NVMe hang of BootGuest came as well: each
  // failed attempt is one kexec and one cold boot more.
  EXPECT_GE(r.attempt(), 2);
  EXPECT_EQ(BootedAgain(*results), 1);
  const std::string reason =
      SqlText(absl::StrCat("SELECT failure_reason FROM jobs WHERE id = ", r.job().id()));
  EXPECT_TRUE(absl::StrContains(reason,
                                "came back in mode passthrough, but the host's health job "
                                "failed on it"))
      << reason;
  EXPECT_FALSE(absl::StrContains(reason, "power-cycled")) << reason;
  EXPECT_EQ(r.host().kernel_release(), kernels_[1].release);
  EXPECT_EQ(r.host().iommu_mode(), pb::IOMMU_MODE_PASSTHROUGH) << r.host().iommu_detail();

  // The cold boot, the job's kernel (its disk removed), the host's reboot
  // into its default kernel, the job's kernel again.
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(CountPrefix(lines, "farm-lab: removing the NVMe"), 1) << Console();
  EXPECT_EQ(KexecsStarted(Console()), r.attempt()) << Console();
  EXPECT_EQ(CountPrefix(lines, "farm-lab: up "), 2 * r.attempt()) << Console();
  std::cout << "lab vm device loss: matrix done in " << absl::ToDoubleSeconds(took)
            << " s (a kexec, the job's failure, the health job, a reboot, a kexec, the job)\n";
}

}  // namespace
}  // namespace farm::lab_vm
