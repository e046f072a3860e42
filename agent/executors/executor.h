// farm::agent executors: how a leased job is run.
//
// The agent hands each job to the Executor registered for its executor kind
// (executor kinds: emulator, fio, iozone, dma-map-bench, kbuild; executors.h
// makes them from --capabilities). An executor runs one job synchronously on
// the calling worker thread and returns the samples and raw output to report.
//
// Error contract of Run():
//   - CANCELLED: the CancelToken fired (lease revoked or shutdown); nothing is
//     reported.
//   - INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, UNIMPLEMENTED: the job
//     itself cannot run (unknown platform, commit, workload, refused spec);
//     reported as a non-retryable failure.
//   - anything else: reported as a retryable failure.
//
// Thread-safety: Run() is called concurrently from up to --slots worker
// threads, so implementations must be safe for concurrent calls.
// CancelToken is shared between the worker and the thread that cancels.
#ifndef AGENT_EXECUTORS_EXECUTOR_H_
#define AGENT_EXECUTORS_EXECUTOR_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// One-shot cancellation flag that long-running work polls or sleeps on.
// cancelled() is a lock-free load (executors poll it in hot loops); the flag
// is set with mu_ held so that a SleepFor() waiting on mu_ cannot miss it.
class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  void Cancel() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    cancelled_.store(true);
  }
  bool cancelled() const { return cancelled_.load(); }
  // Sleeps up to `d`; returns true if cancelled (early or already).
  bool SleepFor(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    // Await re-evaluates the condition whenever mu_ is released (Cancel()).
    return mu_.AwaitWithTimeout(absl::Condition(this, &CancelToken::cancelled), d);
  }

 private:
  absl::Mutex mu_;
  std::atomic<bool> cancelled_{false};
};

struct ExecutionResult {
  std::vector<iommufarm::v1::Sample> samples;
  std::string raw_output;
  std::string raw_format;  // "emu-json", "fio-json", "iozone", ...
  std::string tool_version;
  // Simulated events and their rate per wall-clock second (emulator only;
  // 0 otherwise).
  double events = 0;
  double events_per_second = 0;
  // The kernel the job really ran under when it was not the agent's host
  // kernel (a VM guest): reported as the result's host facts instead of the
  // agent's own (the agent keeps its hostname).
  std::optional<iommufarm::v1::HostFacts> ran_on;
  // The job's kernel was modelled (the emulator): the IOMMU mode that kernel
  // really ran for the job's and what decided it. Reported in the result's
  // host facts over the agent's own (whose kernel did not run the job):
  // iommu_mode = effective, iommu_detail = detail, and guest facts with
  // provider "emulator", requested_mode and domain_type, as a guest run's.
  struct EmulatedKernel {
    iommufarm::v1::IommuMode requested = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
    iommufarm::v1::IommuMode effective = iommufarm::v1::IOMMU_MODE_UNSPECIFIED;
    std::string detail;
    std::string domain_type;  // "DMA", "DMA-FQ", "identity", "" (off)
  };
  std::optional<EmulatedKernel> emulated;
  // What the kernel counted around the tool (agent/monitors/): real runs
  // only, on the host or in the guest whose kernel ran it.
  std::optional<iommufarm::v1::Monitors> monitors;
  // The host is rebooting into the job's kernel (kexec) with the lease held
  // by the scheduler: nothing is reported; the agent stops leasing and the
  // agent that starts on the job's kernel resumes the job.
  bool rebooting = false;
};

// The lease a job runs under, for executors that reboot the host into the
// job's kernel (kernel_executor.h, the kexec provider).
struct LeaseContext {
  iommufarm::v1::LeaseRef lease;
  // Asks the scheduler to hold the lease through a reboot for up to the
  // given time; OK once it does. Empty: holds are not available.
  std::function<absl::Status(absl::Duration)> hold;
  // The job resumes after its reboot: its kernel runs (the agent checked it
  // at start), so it must run here and never boot again.
  bool resumed = false;
  // Reports the running job's progress (a kernel build's); the agent sends
  // the latest with its next heartbeat. Empty: nobody follows it.
  std::function<void(const iommufarm::v1::JobProgress&)> progress;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // The capability name advertised at registration ("emulator", "fio", ...).
  virtual std::string capability() const = 0;
  virtual std::string version() const = 0;
  virtual absl::StatusOr<ExecutionResult> Run(const iommufarm::v1::Job& job,
                                              CancelToken& cancel) = 0;
  // Run() with the job's lease; what the agent calls. Only an executor that
  // may reboot the host needs more than Run().
  virtual absl::StatusOr<ExecutionResult> RunLeased(const iommufarm::v1::Job& job,
                                                    CancelToken& cancel,
                                                    const LeaseContext& lease) {
    (void)lease;
    return Run(job, cancel);
  }
  // Real executors: the kernels (and modes) this capability runs jobs
  // under, advertised at registration (proto/kernel_offers.h). Empty: the
  // host's kernel in its detected mode.
  virtual std::vector<iommufarm::v1::KernelOffer> kernels() const { return {}; }
  // kbuild: the catalogs and architectures it builds kernels for.
  virtual std::vector<iommufarm::v1::BuildOffer> builds() const { return {}; }
};

// True for error codes that mean the job can never succeed as specified.
inline bool IsPermanentFailure(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
         code == absl::StatusCode::kFailedPrecondition || code == absl::StatusCode::kUnimplemented;
}

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_EXECUTOR_H_
