// kexec_provider: the `kexec` KernelProvider, for bare-metal lab hosts under
// systemd. A job whose kernel is not the running one is run in three steps:
//
//   1. Boot (RunLeased on the wrong kernel): the pending boot (the job's
//      lease, commit, release, mode, command line, a deadline of now + boot
//      timeout, and the host's default kernel) is written to
//      <state_dir>/kexec-state.json (atomically: write, fsync, rename), then
//      `kexec -l <image> [--initrd=<initrd>] --append=<cmdline>` and
//      `systemctl kexec`. RunLeased returns UNAVAILABLE ("rebooting into
//      ...") when both succeeded: the job is neither done nor failed.
//   2. Resume (at agent start, before it registers): the state file, the
//      running kernel's facts and the clock decide (the boot is late only
//      when the wall clock is past the deadline and the kernel's uptime,
//      where read, is past the boot timeout too: a clock that steps after
//      the kexec, an RTC read as local time or an NTP correction, moves the
//      wall clock and not the uptime; the scheduler's hold stays the
//      authority on a boot that took too long before the kernel started).
//      No file: nothing pending. The job's kernel is running within the deadline and its
//      effective mode is the job's, or one the kernel chose itself under a
//      command line that asked for the job's (CheckRanMode; the result
//      reports the mode it ran): kRun, the lease is kept and the job runs
//      (RunLeased on the right kernel). Otherwise kFailed with a reason
//      naming what was wanted and what runs: the kernel did not come back
//      (the host runs its default kernel, or another one), it came back
//      after the boot timeout, or it runs another mode than the job's under
//      a command line that did not ask for it; a
//      host that is not on its default kernel then reboots into it
//      (`systemctl reboot`: kexec does not survive a reboot, the boot loader
//      picks the default). The state file is removed on kFailed.
//   3. Finish (after the job's result or failure is reported): the state
//      file goes; the host stays on the job's kernel until the next kexec.
//
// The job's command line is the host's own (KexecConfig::base_cmdline, with
// root= and the like) without the parameters that choose an IOMMU mode, then
// the job's allow-listed extra parameters, then the mode's parameter.
//
// Every command goes through a CommandRunner, so tests run a fake that
// records argv and returns a fake "booted" state through the facts
// function; nothing reboots in CI.
//
// The rest of the path lives elsewhere: the agent loop (agent/agent.h)
// resumes at start, re-registers naming the held lease and runs or fails the
// job; the fio executor (agent/executors/kernel_executor.h) asks for the
// hold before the boot (before_boot) and runs the tool once the job's
// kernel is proven; the scheduler holds the lease through the reboot
// (HeartbeatRequest.hold_for, capped by farm-scheduler --max-boot-timeout)
// and moves it to the new session (RegisterRequest.resumes), expiring it
// with a reason naming the boot timeout when the agent does not come back.
//
// Thread-safety: not thread-safe; one job at a time (a kexec host runs one
// slot). Error contract: kernel_provider.h, plus UNAVAILABLE from RunLeased
// while the host reboots.
#ifndef AGENT_KERNELS_KEXEC_PROVIDER_H_
#define AGENT_KERNELS_KEXEC_PROVIDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/kernels/kernel_provider.h"
#include "agent/kernels/root_mount.h"
#include "lib/kstore/store_watch.h"
#include "lib/process/process.h"

namespace farm::kernels {

// Runs one command (no shell). The system runner uses RunProcess.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual absl::StatusOr<process::ProcessResult> Run(const std::vector<std::string>& argv,
                                                     absl::Duration timeout) = 0;
};
std::unique_ptr<CommandRunner> SystemCommandRunner();

struct KexecConfig {
  std::string kernels_dir;  // the kernel store (lib/kstore)
  std::string state_dir;    // the agent's state directory
  std::string arch = "x86_64";
  std::string base_cmdline;     // the host's /proc/cmdline
  std::string default_release;  // the kernel the boot loader starts
  absl::Duration boot_timeout = absl::Minutes(10);
  absl::Duration margin = absl::Seconds(60);  // added to the tool's runtime
  std::string kexec = "kexec";
  std::string systemctl = "systemctl";
  // When `systemctl reboot` fails for a host whose devices need a reset
  // (Resumed::reset_devices), reboot(2) without a sync: a root device that
  // went away takes systemctl's own binary with it. Only farm-agent sets
  // it; a test's provider never reboots the machine it runs on.
  bool reboot_syscall_fallback = false;
  // What a kernel must build in to mount the host's root (root_mount.h
  // ReadRootNeeds); a build without an initramfs that lacks one fails its
  // job before the kexec. Empty: not judged.
  std::vector<RootNeed> root_needs;
};

// The job's lease, kept across the reboot.
struct LeaseHold {
  int64_t job_id = 0;
  int32_t attempt = 0;
  std::string lease_token;
  // The leased job itself (iommufarm.v1.Job as protobuf JSON; may be
  // empty), so that the agent can run it after the reboot.
  std::string job;
};

struct PendingBoot {
  LeaseHold lease;
  std::string commit;
  std::string release;
  iommufarm::v1::IommuMode mode = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
  std::string cmdline;
  absl::Time deadline;
  std::string default_release;
};

std::string PendingBootJson(const PendingBoot& boot);
// InvalidArgument naming what is wrong with the text.
absl::StatusOr<PendingBoot> ParsePendingBoot(const std::string& text);

// The host's command line for `mode`: `base` without the words that choose
// a mode (iommu_mode::IsModeParam: intel_iommu=, amd_iommu=, iommu=,
// iommu.strict=, iommu.passthrough=), then `extra` (each on the allow-list
// of proto/kernel_params.h: InvalidArgument naming a refused one), then
// ModeKernelParams(mode) for VT-d and AMD-Vi (off: intel_iommu=off
// amd_iommu=off, the host's IOMMU may be either).
absl::StatusOr<std::string> KexecCmdline(const std::string& base, iommufarm::v1::IommuMode mode,
                                         const std::vector<std::string>& extra);

// OK when config.kexec and config.systemctl are on PATH; FAILED_PRECONDITION
// naming the missing one otherwise.
absl::Status CheckKexecTools(const KexecConfig& config);

// The running kernel's facts read under `root` ("/" on a host):
// proc/sys/kernel/osrelease, proc/cmdline, sys/class/iommu,
// sys/kernel/iommu_groups/*/{type,devices} and sys/class/nvme/*/address
// with its namespaces; the machine is uname's. INTERNAL when the release
// cannot be read.
absl::StatusOr<KernelFacts> ReadRunningKernelFacts(const std::string& root = "/");

class KexecKernelProvider : public KernelProvider {
 public:
  // `read_facts` reads the running kernel's facts (release, IOMMU groups,
  // NVMe); `now` is the clock.
  KexecKernelProvider(KexecConfig config, std::unique_ptr<CommandRunner> runner,
                      std::function<absl::StatusOr<KernelFacts>()> read_facts,
                      std::function<absl::Time()> now = absl::Now);

  struct Resumed {
    enum Kind { kNothing, kRun, kFailed };
    Kind kind = kNothing;
    PendingBoot boot;     // kRun, kFailed: what was pending
    std::string reason;   // kFailed: why the job fails
    std::string running;  // kFailed: the release that runs
    // kRun: what the agent logs about the boot (a wall clock that jumped
    // past the deadline while the kernel's uptime says it came back in
    // time); "" for nothing.
    std::string note;
    // kFailed on a host whose devices failed after the kexec: Abandon
    // reboots through the firmware even into the same release.
    bool reset_devices = false;
  };
  // Step 2 above. INTERNAL when the state file or the facts cannot be read.
  absl::StatusOr<Resumed> Resume();
  // Step 2 in two parts, so that the agent reports a failed boot before the
  // host reboots into its default kernel: Check decides and changes
  // nothing; Abandon (kFailed) removes the state file and reboots into the
  // default kernel when another one runs or the devices need a reset
  // (ABORTED when that fails).
  // Resume() is Check, then Abandon on kFailed.
  absl::StatusOr<Resumed> Check();
  absl::Status Abandon(const Resumed& resumed);

  // Steps 1 and, on the job's kernel, the run itself: the tool's argv runs
  // on the host (an empty argv: the facts only) when the running kernel is
  // the request's release in the request's mode with the request's extra
  // parameters on its command line; otherwise the boot of step 1 (also
  // into the running release when only the mode or the parameters differ).
  // `before_boot` (may be empty) runs before the state is written: the
  // agent asks the scheduler to hold the lease through the reboot there; a
  // non-OK status stops the boot and is returned.
  absl::StatusOr<KernelRun> RunLeased(const KernelRequest& request, const LeaseHold& lease,
                                      const std::function<absl::Status()>& before_boot = {});

  // Step 3 above.
  absl::Status Finish();

  std::string StatePath() const;
  const KexecConfig& config() const { return config_; }

  // The store's builds of config().arch, each in every mode; the store is
  // read again only when it changed (kstore::StoreWatch).
  std::vector<iommufarm::v1::KernelOffer> Offers() const;

  std::string_view name() const override { return "kexec"; }
  // OK when the store has the request's build and the state dir exists.
  absl::Status CanRun(const KernelRequest& request) const override;
  absl::StatusOr<KernelRun> Run(const KernelRequest& request) override {
    return RunLeased(request, LeaseHold{});
  }

 private:
  absl::Status ReturnToDefault(const std::string& running, const std::string& default_release,
                               bool reset_devices = false);

  KexecConfig config_;
  std::unique_ptr<CommandRunner> runner_;
  std::function<absl::StatusOr<KernelFacts>()> read_facts_;
  std::function<absl::Time()> now_;
  std::unique_ptr<kstore::StoreWatch> store_;
};

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_KEXEC_PROVIDER_H_
