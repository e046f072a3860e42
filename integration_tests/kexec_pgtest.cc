// The kexec provider end to end: PostgreSQL, the real scheduler
// (in-process) and in-process agents whose kexec provider runs a fake kexec
// (the command runner records argv) and reads a fake "booted" kernel (the
// facts function). An agent on the host's default kernel leases a job for a
// store kernel that is not running, has its lease held and "reboots" (kexec
// -l with the mode on --append, systemctl kexec; its loop stops); a second
// agent with the same state dir starts on the "booted" kernel, re-registers,
// keeps the lease and runs the job. Also: a kernel that never comes back
// (the lease expires after its hold and the job is retried) and a kernel that
// came back as another release (the job fails permanently, naming both), and
// a kernel that came back on a host whose health job then fails (the job
// runs again after a firmware reboot into the default kernel).
// The tool behind the kexec provider is a fake fio executor that counts its
// runs: what is under test is the lease's way through the reboot.
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <pqxx/pqxx>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/executors/kernel_executor.h"  // and the kexec provider
#include "cli/commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "proto/failure_marks.h"
#include "scheduler/server.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using ::testing::ElementsAre;

constexpr char kDefault[] = "6.1.0-13-amd64";
constexpr char kJobKernel[] = "6.1.0-57-cloud-amd64";
constexpr char kBaseCmdline[] = "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro iommu.strict=0";
constexpr char kJobCmdline[] = "BOOT_IMAGE=/vmlinuz root=UUID=1234 ro iommu.strict=1";

// The lab host: what it runs and every command the providers ran on it.
struct FakeHost {
  absl::Mutex mu;
  std::vector<std::vector<std::string>> commands ABSL_GUARDED_BY(mu);
  kernels::KernelFacts facts ABSL_GUARDED_BY(mu);
  // Runs before each command is recorded (set before any agent starts).
  std::function<void(const std::vector<std::string>&)> on_command;
};

class FakeRunner : public kernels::CommandRunner {
 public:
  explicit FakeRunner(FakeHost* host) : host_(host) {}
  absl::StatusOr<process::ProcessResult> Run(const std::vector<std::string>& argv,
                                             absl::Duration) override {
    if (host_->on_command) host_->on_command(argv);
    absl::MutexLock lock(&host_->mu);
    host_->commands.push_back(argv);
    process::ProcessResult r;
    r.exit_code = 0;
    return r;
  }

 private:
  FakeHost* host_;
};

// A kernel whose NVMe sits in an IOMMU group of `type`.
kernels::KernelFacts Facts(const std::string& release, const std::string& type,
                           const std::string& cmdline) {
  kernels::KernelFacts f;
  f.release = release;
  f.machine = "x86_64";
  f.cmdline = cmdline;
  f.iommu = "dmar0";
  kernels::NvmeController n;
  n.name = "nvme0";
  n.pci_address = "0000:01:00.0";
  n.group = "7";
  n.namespaces = {"nvme0n1"};
  f.groups.push_back({"7", type, {"0000:01:00.0"}});
  f.nvme.push_back(n);
  return f;
}

// How the host's disk dies under the fake fio.
enum class DiskDies { kNever, kUnderTheJobWhichFails, kUnderTheJobWhichReturnsFigures };

// The host's fio, faked: counts its runs and returns one sample. When
// `failing_health` is set, the agent's health job fails as it does on a host
// whose disk stopped answering; `dies` says whether a job sets it, and
// whether that job fails or still returns its figures.
class CountingFio : public agent::Executor {
 public:
  CountingFio(std::atomic<int>* runs, std::atomic<bool>* failing_health,
              const std::atomic<DiskDies>* dies)
      : runs_(runs), failing_health_(failing_health), dies_(dies) {}
  std::string capability() const override { return "fio"; }
  std::string version() const override { return "fio-3.33"; }
  absl::StatusOr<agent::ExecutionResult> Run(const pb::Job& job, agent::CancelToken&) override {
    runs_->fetch_add(1);
    const bool health = job.platform() == "health";
    if (health && failing_health_->load()) {
      return absl::InternalError(
          "fio: io_u error on file /var/lib/farm/health: Input/output error");
    }
    if (!health && dies_->load() != DiskDies::kNever) {
      // From now on the disk fails every job, the health job too.
      failing_health_->store(true);
      if (dies_->load() == DiskDies::kUnderTheJobWhichFails) {
        return absl::InternalError("fio: io_u error on file /var/lib/farm/job: Input/output error");
      }
    }
    agent::ExecutionResult r;
    pb::Sample& s = r.samples.emplace_back();
    s.set_metric("iops");
    s.set_value(1234);
    s.set_unit("IO/s");
    s.set_phase("read");
    r.raw_output = "{\"fio version\": \"fio-3.33\"}";
    r.raw_format = "fio-json";
    r.tool_version = "fio-3.33";
    return r;
  }

 private:
  std::atomic<int>* runs_;
  std::atomic<bool>* failing_health_;
  const std::atomic<DiskDies>* dies_;
};

struct JobRow {
  int state = 0;
  int attempt = 0;
  std::string reason;
};

class KexecPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    root_ = TestDir();
    fs::create_directories(root_ / "state");
    const fs::path build = root_ / "store" / "kernel-a1";
    fs::create_directories(build);
    std::ofstream(build / "kernel.yaml") << "commit: kernel-a1\nrelease: " << kJobKernel
                                         << "\narch: x86_64\nimage: vmlinuz\ninitrd: initrd.img\n";
    std::ofstream(build / "vmlinuz") << "image";
    std::ofstream(build / "initrd.img") << "initrd";
  }

  // The scheduler, a catalog with the store's commit and one fio job for it
  // in strict mode.
  void StartFarm(absl::Duration max_boot_timeout, int boot_attempts = 2) {
    StartScheduler(testing::FarmMode::kPlaintext, [&](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(1);
      options.config.max_boot_timeout = max_boot_timeout;
      options.config.retry.boot_attempts = boot_attempts;
    });
    ASSERT_TRUE(server_ != nullptr);
    client_.server = server_->address();
    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::LoadCatalogRequest load;
    load.set_yaml(
        "catalog: lab-kernels\ncommits:\n  - id: \"kernel-a1\"\n    subject: \"a store kernel\"\n");
    load.set_source_name("kexec_pgtest");
    pb::LoadCatalogResponse loaded;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->LoadCatalog(ctx.get(), load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();
    matrix_id_ = SubmitStrictJob();
  }

  // A matrix of one fio job on the store's kernel in strict mode; its id.
  int64_t SubmitStrictJob() {
    std::ostringstream out, err;
    cli::Commands commands(client_, out, err);
    auto submitted = commands.SubmitSpec(
        "name: kexec-strict\ncatalog: lab-kernels\nplatform: lab\ncommits: [\"kernel-a1\"]\n"
        "modes: [strict]\nworkloads:\n  - name: fio-nvme\n"
        "    params: {rw: randread, bs: 4k, size: 4m, runtime: 1}\nrepeats: 1\nexecutor: fio\n",
        /*dry_run=*/false);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    return submitted.ok() ? submitted->matrix().id() : 0;
  }

  // An agent named lab-1 on `host` whose kexec provider keeps its state in
  // `state_dir` and asks for `boot_timeout`.
  // With `health_job`, the agent runs its health job before it registers.
  std::unique_ptr<agent::Agent> MakeAgent(const kernels::KernelFacts& running,
                                          const std::string& state_dir,
                                          absl::Duration boot_timeout = absl::Minutes(10),
                                          bool health_job = false) {
    kernels::KexecConfig c;
    c.kernels_dir = (root_ / "store").string();
    c.state_dir = state_dir;
    c.base_cmdline = kBaseCmdline;
    c.default_release = kDefault;
    c.boot_timeout = boot_timeout;
    c.margin = absl::ZeroDuration();
    auto kexec = std::make_shared<kernels::KexecKernelProvider>(
        c, std::make_unique<FakeRunner>(&host_), [this]() -> absl::StatusOr<kernels::KernelFacts> {
          absl::MutexLock lock(&host_.mu);
          return host_.facts;
        });
    pb::HostFacts host;
    host.set_hostname("lab-host");
    host.set_kernel_release(running.release);
    host.set_architecture("x86_64");
    // The lab's platform, which the spec names (farm-agent --label).
    (*host.mutable_labels())["platform"] = "lab";
    host.set_iommu_mode(running.groups[0].type == "DMA" ? pb::IOMMU_MODE_STRICT
                                                        : pb::IOMMU_MODE_LAZY);
    agent::AgentOptions options;
    options.client = client_;
    options.name = "lab-1";
    options.slots = 1;
    // The tests count the tool's runs; a health job is one more.
    options.health_jobs = health_job;
    options.drain_timeout = absl::Seconds(5);
    options.idle_poll = absl::Milliseconds(50);
    options.host = host;
    options.kexec = kexec;
    std::vector<std::unique_ptr<agent::Executor>> executors;
    executors.push_back(std::make_unique<agent::KernelExecutor>(
        std::make_unique<CountingFio>(&tool_runs_, &failing_health_, &disk_dies_), host, nullptr,
        "", kexec));
    return std::make_unique<agent::Agent>(options, std::move(executors), nullptr);
  }

  void Boot(const kernels::KernelFacts& facts) {
    absl::MutexLock lock(&host_.mu);
    host_.facts = facts;
  }
  std::vector<std::vector<std::string>> Commands() {
    absl::MutexLock lock(&host_.mu);
    return host_.commands;
  }

  // The job of matrix `matrix` (0: the first matrix's).
  JobRow Job(int64_t matrix = 0) {
    pqxx::connection c(DbUri());
    pqxx::work w(c);
    pqxx::row r = w.exec1(absl::StrCat(
        "SELECT state, attempt, coalesce(failure_reason, '') FROM jobs WHERE matrix_id = ",
        matrix == 0 ? matrix_id_ : matrix));
    return {r[0].as<int>(), r[1].as<int>(), r[2].as<std::string>()};
  }
  int64_t ResultRows() {
    pqxx::connection c(DbUri());
    pqxx::work w(c);
    return w.exec1("SELECT count(*) FROM results")[0].as<int64_t>();
  }
  // Polls the job row until `done` holds (60 s at most).
  JobRow WaitForJob(const std::function<bool(const JobRow&)>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    JobRow j = Job();
    while (!done(j) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      j = Job();
    }
    return j;
  }

  // The first agent: on the default kernel it leases the job, has the lease
  // held and "reboots"; its Run() returns on its own.
  void FirstAgentReboots(absl::Duration boot_timeout = absl::Minutes(10)) {
    Boot(Facts(kDefault, "DMA-FQ", kBaseCmdline));
    auto first = MakeAgent(Facts(kDefault, "DMA-FQ", kBaseCmdline), (root_ / "state").string(),
                           boot_timeout);
    auto run = std::async(std::launch::async, [&] { return first->Run(); });
    if (run.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      first->Shutdown();
      run.wait();
      FAIL() << "the agent did not stop for the reboot";
    }
    ASSERT_TRUE(run.get().ok());
    EXPECT_EQ(first->stats().reboots, 1);
    EXPECT_EQ(first->stats().succeeded + first->stats().failed, 0);
    const fs::path store = root_ / "store" / "kernel-a1";
    EXPECT_THAT(Commands(), ElementsAre(ElementsAre("kexec", "-l", (store / "vmlinuz").string(),
                                                    "--initrd=" + (store / "initrd.img").string(),
                                                    std::string("--append=") + kJobCmdline),
                                        ElementsAre("systemctl", "kexec")));
    EXPECT_TRUE(fs::exists(root_ / "state" / "kexec-state.json"));
    EXPECT_EQ(tool_runs_.load(), 0);
    EXPECT_EQ(Job().state, pb::JOB_STATE_LEASED);
  }

  // The farm, the first agent's reboot into the job's kernel, then the
  // second agent there with its health job on, until the job is no longer
  // leased; the job's row then, and the job's state when the host was told
  // to reboot (-1: it was not).
  JobRow RebootThenResumeWithHealthJob(int* state_at_reboot) {
    StartFarm(absl::Minutes(15));
    if (HasFatalFailure()) return {};
    FirstAgentReboots();
    if (HasFatalFailure()) return {};
    auto at_reboot = std::make_shared<std::atomic<int>>(-1);
    host_.on_command = [this, at_reboot](const std::vector<std::string>& argv) {
      if (argv.size() == 2 && argv[1] == "reboot") *at_reboot = Job().state;
    };
    // Another job the host could take once it gave its own back.
    const int64_t other = SubmitStrictJob();
    const kernels::KernelFacts booted = Facts(kJobKernel, "DMA", kJobCmdline);
    Boot(booted);
    second_ = MakeAgent(booted, (root_ / "state").string(), absl::Minutes(10),
                        /*health_job=*/true);
    auto run = std::async(std::launch::async, [&] { return second_->Run(); });
    JobRow j = WaitForJob([](const JobRow& r) { return r.state != pb::JOB_STATE_LEASED; });
    // The reboot follows the report (10 s at most).
    for (int i = 0; i < 200 && *at_reboot == -1; ++i) absl::SleepFor(absl::Milliseconds(50));
    // Until the host goes down, an agent whose health failed leases
    // nothing: not the other job, not the one it gave back (its backoff is
    // 1 s).
    absl::SleepFor(absl::Seconds(3));
    EXPECT_EQ(Job(other).state, pb::JOB_STATE_QUEUED) << "leased by a host that failed its health";
    EXPECT_EQ(Job().state, j.state) << "leased again by a host that failed its health job";
    second_->Shutdown();
    EXPECT_TRUE(run.get().ok());
    *state_at_reboot = at_reboot->load();
    return j;
  }

  // Another attempt, not a permanent failure and not a does-not-boot mark,
  // reported before the host went back to its default kernel.
  void ExpectRunsAgainAfterTheDefaultKernel(const JobRow& j, int state_at_reboot) {
    EXPECT_EQ(j.state, pb::JOB_STATE_QUEUED) << j.reason;
    EXPECT_THAT(j.reason,
                ::testing::HasSubstr("kernel 6.1.0-57-cloud-amd64 (commit kernel-a1) came back in "
                                     "mode strict, but the host's health job failed on it (fio: "));
    EXPECT_THAT(j.reason, ::testing::HasSubstr(
                              "the host reboots into its default kernel and the job runs again"));
    EXPECT_FALSE(absl::StrContains(j.reason, std::string(proto::kDoesNotBootMark))) << j.reason;
    EXPECT_EQ(second_->stats().failed, 1);
    EXPECT_EQ(ResultRows(), 0);
    std::vector<std::vector<std::string>> commands = Commands();
    ASSERT_EQ(commands.size(), 3u);
    EXPECT_THAT(commands[2], ElementsAre("systemctl", "reboot"));
    EXPECT_EQ(state_at_reboot, pb::JOB_STATE_QUEUED) << "rebooted before reporting";
    EXPECT_FALSE(fs::exists(root_ / "state" / "kexec-state.json"));
  }

  std::unique_ptr<agent::Agent> second_;

  fs::path root_;
  FakeHost host_;
  std::atomic<int> tool_runs_{0};
  std::atomic<bool> failing_health_{false};
  std::atomic<DiskDies> disk_dies_{DiskDies::kNever};
  client::ClientOptions client_;
  int64_t matrix_id_ = 0;
};

TEST_F(KexecPgTest, LeaseSurvivesTheRebootAndTheResultLandsOnce) {
  StartFarm(absl::Minutes(15));
  FirstAgentReboots();
  // Well past the 1 s lease TTL, while nobody heartbeats: the hold keeps it.
  absl::SleepFor(absl::Seconds(3));
  ASSERT_EQ(Job().state, pb::JOB_STATE_LEASED) << Job().reason;

  // The job's kernel is up, strict, with the command line kexec was given.
  const kernels::KernelFacts booted = Facts(kJobKernel, "DMA", kJobCmdline);
  Boot(booted);
  auto second = MakeAgent(booted, (root_ / "state").string());
  auto run = std::async(std::launch::async, [&] { return second->Run(); });
  JobRow j = WaitForJob([](const JobRow& r) { return r.state != pb::JOB_STATE_LEASED; });
  second->Shutdown();
  ASSERT_TRUE(run.get().ok());
  EXPECT_EQ(j.state, pb::JOB_STATE_SUCCEEDED) << j.reason;
  EXPECT_EQ(j.attempt, 1) << "the lease did not survive the reboot: " << j.reason;
  EXPECT_EQ(second->stats().resumed, 1);
  EXPECT_EQ(second->stats().succeeded, 1);
  EXPECT_EQ(tool_runs_.load(), 1);
  EXPECT_EQ(ResultRows(), 1);
  EXPECT_EQ(Commands().size(), 2u) << "no reboot after the job";
  EXPECT_FALSE(fs::exists(root_ / "state" / "kexec-state.json"));

  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  auto results = commands.FetchResults(matrix_id_, /*include_raw=*/false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pb::Result& r = (*results)[0];
  EXPECT_EQ(r.host().kernel_release(), kJobKernel);
  EXPECT_EQ(r.host().iommu_mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(r.host().guest().provider(), "kexec");
  EXPECT_EQ(r.host().guest().requested_mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(r.host().guest().domain_type(), "DMA");
  EXPECT_EQ(r.host().guest().cmdline(), kJobCmdline);
  EXPECT_EQ(r.agent(), "lab-1");
}

TEST_F(KexecPgTest, AKernelThatNeverComesBackFailsItsJobAsNotBooting) {
  // The agent asks for 10 minutes; the scheduler holds 2 s at most. One boot
  // allowed: the first that does not come back marks the job (the queue's
  // second boot is the storage contract's).
  StartFarm(absl::Seconds(2), /*boot_attempts=*/1);
  FirstAgentReboots();
  // This scheduler has no lab hosts file: the recovery only says so.
  JobRow j = WaitForJob([](const JobRow& r) { return absl::StrContains(r.reason, "\n"); });
  EXPECT_EQ(j.state, pb::JOB_STATE_FAILED);
  EXPECT_EQ(j.reason,
            "attempt 1 of 3: lease held through the agent's reboot expired: the job's kernel did "
            "not come back within the boot timeout, so it does not boot on this host (agent "
            "lab-1)\nno power command for agent lab-1 (farm-scheduler --lab-hosts): the host was "
            "not power-cycled");

  // The host, back on its default kernel (its power cycled), resumes
  // nothing and the job stays failed: no second boot of that kernel.
  const kernels::KernelFacts back = Facts(kDefault, "DMA-FQ", kBaseCmdline);
  Boot(back);
  auto second = MakeAgent(back, (root_ / "state").string());
  auto run = std::async(std::launch::async, [&] { return second->Run(); });
  absl::SleepFor(absl::Seconds(2));
  second->Shutdown();
  ASSERT_TRUE(run.get().ok());
  EXPECT_EQ(Job().state, pb::JOB_STATE_FAILED);
  EXPECT_EQ(ResultRows(), 0);
}

TEST_F(KexecPgTest, WrongReleaseAfterTheBootFailsTheJobPermanently) {
  StartFarm(absl::Minutes(15));
  FirstAgentReboots();
  // Another kernel came up (a boot loader fallback, say).
  const kernels::KernelFacts other = Facts("6.1.0-99-other", "DMA", kBaseCmdline);
  std::atomic<int> state_at_reboot{-1};
  host_.on_command = [&](const std::vector<std::string>& argv) {
    if (argv.size() == 2 && argv[1] == "reboot") state_at_reboot = Job().state;
  };
  Boot(other);
  auto second = MakeAgent(other, (root_ / "state").string());
  auto run = std::async(std::launch::async, [&] { return second->Run(); });
  JobRow j = WaitForJob([](const JobRow& r) { return r.state != pb::JOB_STATE_LEASED; });
  second->Shutdown();
  ASSERT_TRUE(run.get().ok());
  EXPECT_EQ(j.state, pb::JOB_STATE_FAILED);
  EXPECT_EQ(j.reason,
            "attempt 1 of 3: booted kernel 6.1.0-99-other, wanted 6.1.0-57-cloud-amd64 (commit "
            "kernel-a1)");
  EXPECT_EQ(second->stats().failed, 1);
  EXPECT_EQ(tool_runs_.load(), 0);
  EXPECT_EQ(ResultRows(), 0);
  // The host goes back to its default kernel.
  std::vector<std::vector<std::string>> commands = Commands();
  ASSERT_EQ(commands.size(), 3u);
  EXPECT_THAT(commands[2], ElementsAre("systemctl", "reboot"));
  EXPECT_EQ(state_at_reboot.load(), pb::JOB_STATE_FAILED) << "rebooted before reporting";
  EXPECT_FALSE(fs::exists(root_ / "state" / "kexec-state.json"));
}

TEST_F(KexecPgTest, AHealthJobThatFailsOnTheJobsKernelRebootsTheHostAndTheJobRunsAgain) {
  // The job's kernel is up in its mode, but the host's disk does not answer
  // (a device that did not survive the kexec): the health job fails.
  failing_health_ = true;
  int state_at_reboot = -1;
  const JobRow j = RebootThenResumeWithHealthJob(&state_at_reboot);
  EXPECT_THAT(j.reason, ::testing::StartsWith("attempt 1 of 3: kernel 6.1.0-57-cloud-amd64"));
  EXPECT_THAT(j.reason, ::testing::HasSubstr("Input/output error"));
  EXPECT_EQ(tool_runs_.load(), 1) << "the job ran on a host that failed its health job";
  ExpectRunsAgainAfterTheDefaultKernel(j, state_at_reboot);
}

TEST_F(KexecPgTest, AJobThatFailsOnAHostThatThenFailsItsHealthJobRunsAgain) {
  // The health job passes, then the disk stops answering under the job.
  disk_dies_ = DiskDies::kUnderTheJobWhichFails;
  int state_at_reboot = -1;
  const JobRow j = RebootThenResumeWithHealthJob(&state_at_reboot);
  EXPECT_THAT(j.reason, ::testing::StartsWith("attempt 1 of 3: fio: io_u error on file /var/lib/"
                                              "farm/job: Input/output error; kernel "));
  EXPECT_EQ(tool_runs_.load(), 3) << "health job, job, health job";
  ExpectRunsAgainAfterTheDefaultKernel(j, state_at_reboot);
}

TEST_F(KexecPgTest, FiguresOfAJobOnADiskThatThenFailsItsHealthJobAreNotKept) {
  // fio returns figures, but the disk was dying under it.
  disk_dies_ = DiskDies::kUnderTheJobWhichReturnsFigures;
  int state_at_reboot = -1;
  const JobRow j = RebootThenResumeWithHealthJob(&state_at_reboot);
  EXPECT_THAT(j.reason, ::testing::StartsWith(
                            "attempt 1 of 3: the job ran, but its result is not kept; kernel "));
  EXPECT_EQ(tool_runs_.load(), 3) << "health job, job, health job";
  ExpectRunsAgainAfterTheDefaultKernel(j, state_at_reboot);
}

}  // namespace
}  // namespace farm
