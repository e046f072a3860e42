// integration_tests/lab_vm_fixture.h: the VM lab host the lab tests share.
// A QEMU q35 + intel-iommu guest (TCG) with a Debian root and systemd
// (scripts/build-lab-root) plays a bare-metal lab host: the shipped
// farm-agent-kexec.service runs the test's farm-agent, which registers over
// QEMU's user networking with the in-process scheduler on this host's
// loopback (10.0.2.2 from the guest) and kexecs into each job's kernel. The
// fixture loads a catalog of the two newest Debian amd64 cloud kernels of
// the kernel cache (the first is the guest's default kernel), builds the
// guest's disk, boots it and reads its serial console. Missing kernels,
// root or QEMU fail (never skip): the message says what to run.
// Tests only, header-only; one fixture per test, not thread-safe. It owns
// the guest's QEMU process (terminated in TearDown).
#ifndef INTEGRATION_TESTS_LAB_VM_FIXTURE_H_
#define INTEGRATION_TESTS_LAB_VM_FIXTURE_H_

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
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
#include "lib/kstore/kernel_store.h"
#include "lib/process/process.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm::lab_vm {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

inline constexpr char kKernelHint[] =
    "run scripts/fetch-test-kernels --arch amd64 --previous (as root: two Debian amd64 cloud "
    "kernels; scripts/install-deps installs qemu-system-x86)";
inline constexpr char kAgentName[] = "lab-vm-1";

struct StoreKernel {
  std::string release;
  std::string commit;
};

// The newest two *-cloud-amd64 builds of the store, newest first, with the
// commit their manifest names.
inline std::vector<StoreKernel> TwoCloudKernels(const std::string& cache) {
  const std::vector<std::string> releases = CachedAmd64CloudReleases(cache);
  std::vector<StoreKernel> out;
  for (const std::string& r : releases) {
    if (out.size() == 2) break;
    absl::StatusOr<kstore::KernelBuild> build = kstore::ReadBuild((fs::path(cache) / r).string());
    if (build.ok() && !build->commit.empty()) out.push_back({r, build->commit});
  }
  return out;
}

// The "farm-lab: ..." lines of the guest's console.
inline std::vector<std::string> LabLines(const std::string& console) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(console, '\n')) {
    const size_t at = line.find("farm-lab: ");
    if (at != absl::string_view::npos) {
      out.emplace_back(absl::StripTrailingAsciiWhitespace(line.substr(at)));
    }
  }
  return out;
}

inline int CountPrefix(const std::vector<std::string>& lines, absl::string_view prefix) {
  return std::count_if(lines.begin(), lines.end(),
                       [&](const std::string& l) { return absl::StartsWith(l, prefix); });
}

// The kexecs the guest's kernels began: kernel_kexec()'s "Starting new
// kernel", printed after systemd has stopped the services.
inline int KexecsStarted(const std::string& console) {
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
    kernels_dir_ = KernelCacheDir();
    kernels_ = TwoCloudKernels(kernels_dir_);
    ASSERT_EQ(kernels_.size(), 2u)
        << "fewer than two *-cloud-amd64 kernels under " << kernels_dir_ << ": " << kKernelHint;
    ASSERT_NE(kernels_[0].commit, kernels_[1].commit);
    ASSERT_TRUE(process::ResolveExecutable("qemu-system-x86_64").ok())
        << "no qemu-system-x86_64: " << kKernelHint;

    StartScheduler(testing::FarmMode::kPlaintext, [this](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(60);
      options.config.max_boot_timeout = absl::Minutes(6);
      // Room for the NVMe hang below (BootGuest) to come twice to one job:
      // each time costs the job an attempt, and a run has seen it on two
      // kexecs in a row.
      options.config.max_attempts = 5;
      // The lab host's power switch and console, as a lab's hosts have
      // them: QEMU's monitor on a loopback port and its serial port's file
      // (LabRecovery). A kexec'd kernel that hangs (below, BootGuest) is
      // power-cycled and booted once more (RetryPolicy::boot_attempts).
      scheduler::LabHost& h = options.lab_hosts[kAgentName];
      h.power_cycle = {std::string(FARM_SOURCE_DIR) + "/integration_tests/qemu_monitor.sh",
                       absl::StrCat(monitor_port_), "system_reset", "cont"};
      h.console = {"tail", "-c", "16384", TestDir() + "/console.log"};
      h.console_lines = 20;
      h.timeout = absl::Seconds(30);
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
  // the agent, the two cloud kernels, `builds` (farm-built store entries),
  // the agent's flags and the test's own units (units_).
  void BuildImage(const std::vector<std::string>& builds = {}) {
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
    for (const std::string& b : builds) {
      p.argv.push_back("--build");
      p.argv.push_back(b);
    }
    for (const std::string& u : units_) {
      p.argv.push_back("--unit");
      p.argv.push_back(u);
    }
    // The host's own flags (FARM_AGENT_ARGS of the guest's farm.env); the
    // rest are the deployed unit's, with the first --release as the default
    // kernel.
    // A TCG guest's fio moves with the load of the test beside it on this
    // 2-core host, so its health baseline's band is looser than a real
    // host's 0.5.
    const std::vector<std::string> agent_args = {"--name",       kAgentName,      "--label",
                                                 "platform=lab", "--perf",        "false",
                                                 "--insecure",   "--health-band", "0.25"};
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
  // the host's, kept by every kexec. No interrupt remapping: one vCPU needs
  // none. A kernel kexec'd here now and then loses its NVMe I/O queue's
  // completions while it boots ("I/O ... QID 1 timeout, aborting", "Abort
  // status: 0x0", then "Aborting journal on device nvme0n1-8"): seen after
  // kexecs from strict into passthrough, with remapping on and off, and
  // without the farm (a guest that only kexecs and runs fio); not
  // root-caused. When it hangs the boot, the host never comes back, as a lab
  // host whose device did not survive a kexec would not: the scheduler
  // power-cycles it and boots the job once more. When it comes after the
  // boot, the agent's health job fails on the job's kernel: the agent
  // reports the job for another attempt and reboots the host into its
  // default kernel (BootedAgain accepts both).
  void BootGuest() {
    console_ = TestDir() + "/console.log";
    // One option and its value a line.
    // clang-format off
    std::vector<std::string> argv = {
        process::ResolveExecutable("qemu-system-x86_64").value(),
        "-M", "q35", "-accel", "tcg",
        "-nodefaults", "-no-user-config", "-display", "none",
        "-m", "1024M", "-smp", "1",
        "-device", "intel-iommu,intremap=off,caching-mode=on",
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

  // A spec of `catalog`'s `commits` x `modes` x a 2 s fio randread,
  // `repeats` of each, on the lab host's platform, then `more` (spec lines).
  static std::string Spec(const std::string& catalog, const std::vector<std::string>& commits,
                          const std::string& modes, const std::string& more = "", int repeats = 1) {
    return absl::StrCat(
        "name: lab-vm\ncatalog: ", catalog, "\nplatform: lab\ncommits: [\"",
        absl::StrJoin(commits, "\", \""), "\"]\nmodes: ", modes, "\n",
        "workloads:\n  - name: fio-nvme\n    params: {rw: randread, bs: 4k, size: "
        "16m, iodepth: 8, ioengine: libaio, direct: 1, runtime: 2, time_based: 1}\n",
        "repeats: ", repeats, "\nexecutor: fio\n", more);
  }

  // Submits `yaml`; its matrix's id, 0 (with a failure) when refused.
  int64_t SubmitYaml(cli::Commands& commands, const std::string& yaml) {
    auto submitted = commands.SubmitSpec(yaml, /*dry_run=*/false);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return 0;
    for (const std::string& w : submitted->warnings()) std::cout << "submit warning: " << w << "\n";
    return submitted->matrix().id();
  }

  // A matrix of the cloud kernels' `commits` x `modes`.
  int64_t Submit(cli::Commands& commands, const std::vector<std::string>& commits,
                 const std::string& modes) {
    return SubmitYaml(commands, Spec("lab-kernels", commits, modes));
  }

  // The last console line that says the guest lost its root disk, or "" (a
  // kexec'd kernel whose NVMe completions never arrive under TCG ends this
  // way; the farm power-cycles the hung host and boots the job again).
  std::string GuestDiskFailure() const {
    std::string last;
    for (absl::string_view line : absl::StrSplit(Console(), '\n')) {
      if (absl::StrContains(line, "Aborting journal on device")) last = std::string(line);
    }
    return last;
  }

  // Results on attempt 1, or on a later attempt after a boot that did not
  // come back, or came back to a disk that failed the host's health job
  // (the last failed attempt's reason says which): the hung kexec that BootGuest describes, which
  // the farm survives. Returns how many boots were made again: a result on
  // attempt N took N - 1 more (the NVMe hang has come twice in a row for
  // one job).
  int BootedAgain(const std::vector<pb::Result>& results) const {
    int again = 0;
    for (const pb::Result& r : results) {
      if (r.attempt() == 1) continue;
      const std::string reason =
          SqlText(absl::StrCat("SELECT failure_reason FROM jobs WHERE id = ", r.job().id()));
      EXPECT_GE(r.attempt(), 2) << reason;
      EXPECT_TRUE(absl::StrContains(reason,
                                    "did not come back within the boot timeout; it boots "
                                    "again") ||
                  absl::StrContains(reason, "but the host's health job failed on it"))
          << "job " << r.job().id() << " ran again for another reason: " << reason;
      std::cout << "lab vm: job " << r.job().id() << " ran again after its first attempt's "
                << "boot hung or its host failed its health job:\n"
                << reason << "\n";
      again += static_cast<int>(r.attempt()) - 1;
    }
    return again;
  }

  // Boots the guest, waits up to `limit` for matrix `id`, whose four jobs
  // must all succeed, and fetches their results into *results; *finished is
  // when the matrix was seen done. ASSERTs.
  void BootAndCollectFour(cli::Commands& commands, int64_t id, absl::Duration limit,
                          std::vector<pb::Result>* results, absl::Time* finished) {
    BootGuest();
    const pb::Matrix done = WaitForMatrix(id, limit);
    *finished = absl::Now();
    ASSERT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << done.ShortDebugString();
    EXPECT_EQ(done.counts().succeeded(), 4) << done.ShortDebugString();
    auto fetched = commands.FetchResults(id, /*include_raw=*/false);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    ASSERT_EQ(fetched->size(), 4u);
    *results = *std::move(fetched);
  }

  // Polls the matrix until it is done, the guest dies, or `limit` passes.
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
    const std::string disk_failure = GuestDiskFailure();
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
  // systemd units BuildImage installs in the guest (build-lab-root --unit).
  std::vector<std::string> units_;
  std::string kernels_dir_, image_, console_;
  std::vector<StoreKernel> kernels_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> qemu_;
};

}  // namespace farm::lab_vm

#endif  // INTEGRATION_TESTS_LAB_VM_FIXTURE_H_
