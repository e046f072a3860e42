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
// message says what to run.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "integration_tests/cached_kernels.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/base/file.h"
#include "lib/client/client.h"
#include "lib/process/process.h"
#include "proto/names.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

constexpr char kKernelHint[] =
    "run scripts/fetch-test-kernels --arch amd64 --previous (as root: two Debian amd64 cloud "
    "kernels; scripts/install-deps installs qemu-system-x86)";
constexpr char kAgentName[] = "lab-vm-1";

struct StoreKernel {
  std::string release;
  std::string commit;
};

// The newest two *-cloud-amd64 builds of the store, newest first, with the
// commit their manifest names.
std::vector<StoreKernel> TwoCloudKernels(const std::string& cache) {
  const std::vector<std::string> releases = CachedAmd64CloudReleases(cache);
  std::vector<StoreKernel> out;
  for (const std::string& r : releases) {
    if (out.size() == 2) break;
    StoreKernel k{r, ""};
    for (absl::string_view line : absl::StrSplit(
             base::ReadFileOrEmpty((fs::path(cache) / r / "kernel.yaml").string()), '\n')) {
      if (absl::ConsumePrefix(&line, "commit: ")) k.commit = std::string(line);
    }
    if (!k.commit.empty()) out.push_back(k);
  }
  return out;
}

// The "farm-lab: ..." lines of the guest's console.
std::vector<std::string> LabLines(const std::string& console) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(console, '\n')) {
    const size_t at = line.find("farm-lab: ");
    if (at != absl::string_view::npos) {
      out.emplace_back(absl::StripTrailingAsciiWhitespace(line.substr(at)));
    }
  }
  return out;
}

int CountPrefix(const std::vector<std::string>& lines, absl::string_view prefix) {
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return absl::StartsWith(l, prefix); });
}

// The kexecs the guest's kernels began: kernel_kexec()'s "Starting new
// kernel", printed after systemd has stopped the services.
int KexecsStarted(const std::string& console) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(console, '\n')) {
    if (absl::StrContains(line, "kexec_core: Starting new kernel")) ++n;
  }
  return n;
}

class LabVmPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    const char* env = std::getenv("FARM_KERNEL_CACHE");
    kernels_dir_ = env ? env : "/var/cache/iommu-farm/kernels";
    kernels_ = TwoCloudKernels(kernels_dir_);
    ASSERT_EQ(kernels_.size(), 2u)
        << "fewer than two *-cloud-amd64 kernels under " << kernels_dir_ << ": " << kKernelHint;
    ASSERT_NE(kernels_[0].commit, kernels_[1].commit);
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-x86_64").ok())
        << "no qemu-system-x86_64: " << kKernelHint;

    StartScheduler(testing::FarmMode::kPlaintext, [this](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
      options.config.max_boot_timeout = absl::Minutes(6);
      ConfigureScheduler(options);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();
    std::string catalog = "catalog: lab-kernels\ncommits:\n";
    for (const StoreKernel& k : kernels_) {
      absl::StrAppend(&catalog, "  - id: \"", k.commit, "\"\n    subject: \"Debian ", k.release,
                      "\"\n");
    }
    LoadCatalog(catalog);
  }

  // What a test of this fixture changes in the scheduler's options.
  virtual void ConfigureScheduler(scheduler::ServerOptions&) {}

  // scripts/build-lab-root: the cached Debian root, then this run's disk with
  // the agent, the two kernels and the agent's flags.
  void BuildImage() {
    const std::string address = SchedulerAddress();
    const std::string port = address.substr(address.rfind(':') + 1);
    image_ = TestDir() + "/lab-root.img";
    process::ProcessOptions p;
    // clang-format off
    p.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-lab-root",
              "--image", image_, "--agent", FARM_AGENT_BIN, "--kernels", kernels_dir_,
              "--scheduler", absl::StrCat("10.0.2.2:", port)};
    // clang-format on
    for (const StoreKernel& k : kernels_) {
      p.argv.push_back("--release");
      p.argv.push_back(k.release);
    }
    // The host's own flags (FARM_AGENT_ARGS of the guest's farm.env); the
    // rest are the deployed unit's, with the first --release as the default
    // kernel.
    const std::vector<std::string> agent_args = {"--name", kAgentName, "--label",   "platform=lab",
                                                 "--perf", "false",    "--insecure"};
    for (const std::string& a : agent_args) {
      p.argv.push_back("--agent-arg");
      p.argv.push_back(a);
    }
    // The first run debootstraps the root (minutes); later ones reuse it.
    p.timeout = absl::Minutes(20);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->ok()) << r->Describe() << "\n" << r->stderr_data;
    ASSERT_TRUE(fs::is_regular_file(image_)) << r->stdout_data;
  }

  // The guest, booted into the default kernel (the newer one) with the IOMMU
  // off, as a lab host's boot loader would start it: every job's mode needs
  // a kexec. no_timer_check: a kernel kexec'd under TCG on a busy host can
  // miss the IO-APIC timer check behind interrupt remapping and panic ("timer
  // doesn't work through Interrupt-remapped IO-APIC"); the command line is
  // the host's, kept by every kexec.
  void BootGuest() {
    console_ = TestDir() + "/console.log";
    // One option and its value a line.
    // clang-format off
    std::vector<std::string> argv = {
        process::ResolveExecutable("qemu-system-x86_64").value(),
        "-M", "q35", "-accel", "tcg",
        "-nodefaults", "-no-user-config", "-display", "none",
        "-m", "1024M", "-smp", "1",
        "-device", "intel-iommu,intremap=on,caching-mode=on",
        "-drive", absl::StrCat("file=", image_, ",if=none,id=root,format=raw"),
        "-device", "nvme,serial=farm-lab-root,drive=root",
        "-netdev", "user,id=net0",
        "-device", "virtio-net-pci,netdev=net0",
        "-serial", absl::StrCat("file:", console_),
        "-monitor", absl::StrCat("tcp:127.0.0.1:", monitor_port_, ",server,nowait"),
        "-kernel", absl::StrCat(kernels_dir_, "/", kernels_[0].release, "/vmlinuz"),
        "-append", "root=/dev/nvme0n1 rw console=ttyS0 panic=-1 "
                   "no_timer_check intel_iommu=off",
    };
    // clang-format on
    qemu_ = std::make_unique<testing::ChildProcess>(argv, TestDir() + "/qemu.log");
  }

  std::string Console() const { return base::ReadFileOrEmpty(console_); }

  // A matrix of `commits` x `modes` x a 2 s fio randread, one repeat each.
  int64_t Submit(cli::Commands& commands, const std::vector<std::string>& commits,
                 const std::string& modes) {
    auto submitted = commands.SubmitSpec(
        absl::StrCat("name: lab-vm\ncatalog: lab-kernels\nplatform: lab\ncommits: [\"",
                     absl::StrJoin(commits, "\", \""), "\"]\nmodes: ", modes, "\n",
                     "workloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k, size: "
                     "16m, iodepth: 8, ioengine: libaio, direct: 1, runtime: 2, time_based: 1}\n",
                     "repeats: 1\nexecutor: fio\n"),
        /*dry_run=*/false);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return 0;
    return submitted->matrix().id();
  }

  // The console line that says the guest lost its root disk, or "": its
  // agent can then neither finish a job nor reboot, and waiting for the
  // matrix's limit would only hide the cause (a kexec'd kernel whose NVMe
  // completions never arrive under TCG ends this way).
  std::string GuestDiskFailure() const {
    for (absl::string_view line : absl::StrSplit(Console(), '\n')) {
      if (absl::StrContains(line, "Aborting journal on device")) return std::string(line);
    }
    return "";
  }

  // Polls the matrix until it is done, the guest dies or loses its disk, or
  // `limit` passes.
  pb::Matrix WaitForMatrix(int64_t id, absl::Duration limit) {
    auto stub = Stub<pb::JobService>(client_);
    const absl::Time deadline = absl::Now() + limit;
    pb::Matrix m;
    std::string disk_failure;
    while (absl::Now() < deadline && qemu_->Alive() &&
           (disk_failure = GuestDiskFailure()).empty()) {
      pb::GetMatrixRequest req;
      req.set_matrix_id(id);
      auto ctx = client::NewContext(client_, absl::Seconds(30));
      if (stub->GetMatrix(ctx.get(), req, &m).ok() &&
          (m.state() == pb::MATRIX_STATE_COMPLETED || m.state() == pb::MATRIX_STATE_FAILED ||
           m.state() == pb::MATRIX_STATE_CANCELLED)) {
        return m;
      }
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    ADD_FAILURE() << "matrix " << id << " not done in " << limit
                  << (qemu_->Alive() ? "" : " (QEMU exited)")
                  << (disk_failure.empty()
                          ? ""
                          : " (the guest lost its root disk: " + disk_failure + ")")
                  << ": " << m.counts().ShortDebugString() << "\nconsole:\n"
                  << Console();
    return m;
  }

  void TearDown() override {
    if (qemu_) {
      qemu_->Terminate();
      if (HasFailure()) std::cerr << "guest console:\n" << Console() << "\n";
    }
    qemu_.reset();
    FarmTest::TearDown();
  }

  // The guest's QEMU monitor (HMP over TCP): the lab host's power switch.
  const int monitor_port_ = testing::PickFreePort();
  std::string kernels_dir_, image_, console_;
  std::vector<StoreKernel> kernels_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> qemu_;
};

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

  BootGuest();
  const pb::Matrix done = WaitForMatrix(matrix_id, absl::Minutes(15));
  const absl::Time finished = absl::Now();
  ASSERT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << done.ShortDebugString();
  EXPECT_EQ(done.counts().succeeded(), 4) << done.ShortDebugString();

  auto results = commands.FetchResults(matrix_id, /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  std::map<std::string, std::string> release_of;
  for (const StoreKernel& k : kernels_) release_of[k.commit] = k.release;
  std::set<std::string> cells;
  for (const pb::Result& r : *results) {
    const std::string mode = proto::ModeName(r.job().mode());
    const std::string cell = absl::StrCat(r.job().commit_id(), "/", mode);
    cells.insert(cell);
    EXPECT_EQ(r.agent(), kAgentName) << cell;
    EXPECT_EQ(r.attempt(), 1) << cell;
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
  // through systemd's kexec.target with the job's kernel loaded.
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(CountPrefix(lines, "farm-lab: kexec.target, kexec_loaded=1"), 4) << Console();
  EXPECT_EQ(KexecsStarted(Console()), 4) << Console();
  EXPECT_EQ(CountPrefix(lines, "farm-lab: up "), 5) << Console();
  for (const std::string& l : lines) {
    if (absl::StartsWith(l, "farm-lab: up ")) std::cout << "lab vm boot: " << l << "\n";
  }
  std::cout << "lab vm: image " << absl::ToDoubleSeconds(built - start) << " s, matrix of 4 jobs "
            << absl::ToDoubleSeconds(finished - built) << " s ("
            << absl::ToDoubleSeconds(finished - built) / 4 << " s a job, kexec to result), "
            << "4 kexec reboots\n";
}

// A kernel that hangs after the kexec: the guest is stopped through QEMU's
// monitor the moment its agent kexecs, which is what a hung kernel looks like
// from outside (no console, no network). The scheduler's hold passes, the
// reaper fails the job as not booting, LabRecovery reads the serial console
// and cycles the power through the same monitor (system_reset, cont), and
// the host, back on its default kernel, runs the matrix's next job.
class LabVmRecoveryPgTest : public LabVmPgTest {
 protected:
  void ConfigureScheduler(scheduler::ServerOptions& options) override {
    options.config.max_boot_timeout = absl::Seconds(90);
    scheduler::LabHost& h = options.lab_hosts[kAgentName];
    h.power_cycle = {std::string(FARM_SOURCE_DIR) + "/integration_tests/qemu_monitor.sh",
                     absl::StrCat(monitor_port_), "system_reset", "cont"};
    h.console = {"tail", "-c", "16384", TestDir() + "/console.log"};
    h.console_lines = 20;
    h.timeout = absl::Seconds(30);
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
};

TEST_F(LabVmRecoveryPgTest, AHungKernelIsPowerCycledAndTheHostRunsTheNextJob) {
  BuildImage();
  if (HasFatalFailure()) return;
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  // One kernel, two modes, one slot: the first job's kernel hangs, the
  // second job runs after the recovery. Neither is the default kernel.
  const int64_t matrix_id = Submit(commands, {kernels_[1].commit}, "[strict, passthrough]");
  if (HasFatalFailure()) return;
  BootGuest();
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (KexecsStarted(Console()) == 0 && absl::Now() < deadline && qemu_->Alive()) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(KexecsStarted(Console()), 1) << Console();
  Monitor("stop");
  const absl::Time hung = absl::Now();

  const pb::Matrix done = WaitForMatrix(matrix_id, absl::Minutes(12));
  const absl::Time finished = absl::Now();
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
  std::cout << "lab vm recovery: hung to matrix done " << absl::ToDoubleSeconds(finished - hung)
            << " s (boot hold 90 s, recovery, cold boot, the next job)\n";
}

}  // namespace
}  // namespace farm
