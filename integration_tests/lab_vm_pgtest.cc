// The VM lab host: the kexec provider for real. A QEMU q35 + intel-iommu
// guest (TCG) with a Debian root (scripts/build-lab-root) plays a bare-metal
// lab host: its farm-agent, the test's build, registers over QEMU's user
// networking with the in-process scheduler on this host's loopback
// (10.0.2.2 from the guest) and PostgreSQL, leases each job of a matrix of
// two Debian cloud kernels (scripts/fetch-test-kernels --previous) x strict
// and passthrough, writes the pending boot, holds the lease, `kexec -l`s the
// job's kernel with the job's mode on its command line and kexecs into it
// (the guest's systemctl stand-in runs `kexec -e`); on the new kernel the
// agent resumes with its lease, proves the effective mode, runs fio on the
// guest's NVMe (through the vIOMMU) and reports, then moves on to the next
// kernel and mode. Every result must carry the kernel and mode it really ran.
// The test prints its phases' wall times and each boot's "farm-lab: up" line.
// Missing kernels, root or QEMU fail (never skip): the message says what to
// run.
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

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
      options.config.max_boot_timeout = absl::Minutes(6);
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
    // One a line in the guest's /etc/farm-lab/agent.args.
    // clang-format off
    const std::vector<std::string> agent_args = {
        "--name", kAgentName, "--slots", "1", "--capabilities", "fio",
        "--kernel-store", "/farm/kernels", "--kexec-state-dir", "/farm/state",
        "--kexec-boot-timeout", "4m", "--kexec-default-release", kernels_[0].release,
        "--allow-dir", "/farm/scratch", "--label", "platform=lab", "--perf", "false",
        "--drain-timeout", "10s", "--insecure"};
    // clang-format on
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
        "-kernel", absl::StrCat(kernels_dir_, "/", kernels_[0].release, "/vmlinuz"),
        "-append", "root=/dev/nvme0n1 rw console=ttyS0 init=/sbin/farm-lab-init panic=-1 "
                   "no_timer_check intel_iommu=off",
    };
    // clang-format on
    qemu_ = std::make_unique<testing::ChildProcess>(argv, TestDir() + "/qemu.log");
  }

  std::string Console() const { return base::ReadFileOrEmpty(console_); }

  // Polls the matrix until it is done, the guest dies or `limit` passes.
  pb::Matrix WaitForMatrix(int64_t id, absl::Duration limit) {
    auto stub = Stub<pb::JobService>(client_);
    const absl::Time deadline = absl::Now() + limit;
    pb::Matrix m;
    while (absl::Now() < deadline && qemu_->Alive()) {
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
                  << (qemu_->Alive() ? "" : " (QEMU exited)") << ": "
                  << m.counts().ShortDebugString() << "\nconsole:\n"
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
  auto submitted = commands.SubmitSpec(
      absl::StrCat("name: lab-vm\ncatalog: lab-kernels\nplatform: lab\ncommits: [\"",
                   kernels_[0].commit, "\", \"", kernels_[1].commit,
                   "\"]\nmodes: [strict, passthrough]\n",
                   "workloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k, size: 16m, "
                   "iodepth: 8, ioengine: libaio, direct: 1, runtime: 2, time_based: 1}\n",
                   "repeats: 1\nexecutor: fio\n"),
      /*dry_run=*/false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t matrix_id = submitted->matrix().id();

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

  // Every job was a reboot: the cold boot, then one kexec per job.
  const std::vector<std::string> lines = LabLines(Console());
  EXPECT_EQ(CountPrefix(lines, "farm-lab: systemctl kexec"), 4) << Console();
  EXPECT_EQ(CountPrefix(lines, "farm-lab: up "), 5) << Console();
  for (const std::string& l : lines) {
    if (absl::StartsWith(l, "farm-lab: up ")) std::cout << "lab vm boot: " << l << "\n";
  }
  std::cout << "lab vm: image " << absl::ToDoubleSeconds(built - start) << " s, matrix of 4 jobs "
            << absl::ToDoubleSeconds(finished - built) << " s ("
            << absl::ToDoubleSeconds(finished - built) / 4 << " s a job, kexec to result), "
            << "4 kexec reboots\n";
}

}  // namespace
}  // namespace farm
