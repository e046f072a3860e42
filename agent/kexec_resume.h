// farm::agent::KexecResume: the agent's side of the kexec reboot protocol
// (docs/kernels.md), after the host came back from a reboot into a job's
// kernel.
//
// Before the agent first registers, Check() looks for a pending boot
// (KexecKernelProvider::Check, which decides and changes nothing) and
// pending_lease() is the lease to name in RegisterRequest.resumes. Once the
// scheduler answered with the leases it kept, Decide() says what becomes of
// the job:
//   - kDropped: the lease was not kept (the hold passed, or the job was
//     cancelled); the scheduler retries the job by its attempt rules. The
//     boot is already ended.
//   - kReportFailure: the kernel did not come back in the job's mode (or the
//     state holds no readable job): the job is reported failed, permanently,
//     with the reason, then End(). Or it came back, but the host's health
//     job failed on it: the job is reported failed for another attempt (the
//     device may not have survived the kexec, as much as the kernel may have
//     broken it), then End() returns the host to its default kernel through
//     a firmware reboot, which resets its devices. The agent runs the
//     health job again after a job that failed on the booted kernel, with
//     the same outcome when it fails (MarkHostUnhealthy).
//   - kRun: the job's kernel runs: the job runs (the executor's resumed
//     path) and is reported, then End().
// End() finishes the boot (KexecKernelProvider::Finish), or for a failed one
// returns the host to its default kernel (Abandon); errors are logged.
//
// HoldLeaseThroughReboot is the step before a reboot: the agent asks the
// scheduler to hold the job's lease while the host is away.
//
// Thread-safety: not thread-safe; the calls are sequential (Check, then
// Decide, then End once, from the thread that settles the job, which the
// agent hands over under its own lock). Ownership: shares the provider
// with the executors that boot through it.
#ifndef AGENT_KEXEC_RESUME_H_
#define AGENT_KEXEC_RESUME_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/kernels/kexec_provider.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"

namespace farm::agent {

class KexecResume {
 public:
  explicit KexecResume(std::shared_ptr<kernels::KexecKernelProvider> provider)
      : provider_(std::move(provider)) {}

  // Reads the pending boot, if any; the provider's error when it cannot.
  absl::Status Check();
  // The lease of the pending boot, until Decide() was called.
  std::optional<iommufarm::v1::LeaseRef> pending_lease() const;

  struct Decision {
    enum Kind { kNothing, kDropped, kReportFailure, kRun };
    Kind kind = kNothing;
    iommufarm::v1::JobLease lease;  // kReportFailure, kRun
    absl::Status failure;           // kReportFailure
  };
  // What becomes of the pending boot's job now that the scheduler kept the
  // leases in `kept` (RegisterResponse.resumed) and the host's health job
  // on the running kernel ended with `health` (OK when it passed or the
  // agent has none). kNothing without a pending boot.
  Decision Decide(const std::vector<iommufarm::v1::LeaseRef>& kept,
                  const absl::Status& health = absl::OkStatus());
  // The host's health job failed on the job's kernel (`health` says how),
  // before the job ran (Decide) or after it failed: End() will return the
  // host to its default kernel. Returns the reason to report, for another
  // attempt. Precondition: a pending boot.
  std::string MarkHostUnhealthy(const absl::Status& health);
  // The boot is over (see above). Precondition: Decide() said
  // kReportFailure or kRun.
  void End();

 private:
  const std::shared_ptr<kernels::KexecKernelProvider> provider_;
  std::optional<kernels::KexecKernelProvider::Resumed> boot_;
  bool decided_ = false;
};

// Asks the scheduler to hold `lease` through a reboot for `d`: a Heartbeat
// (`request` names the agent and its session) with hold_for. Retryable
// failures are retried a few times, each counted through on_rpc_error
// (may be empty). FailedPrecondition when the lease is no longer current or
// the scheduler holds no leases through reboots.
absl::Status HoldLeaseThroughReboot(iommufarm::v1::AgentService::StubInterface& stub,
                                    const client::ClientOptions& options,
                                    iommufarm::v1::HeartbeatRequest request,
                                    const iommufarm::v1::LeaseRef& lease, absl::Duration d,
                                    const std::function<void()>& on_rpc_error);

}  // namespace farm::agent

#endif  // AGENT_KEXEC_RESUME_H_
