// farm::agent::Agent: the host agent's session and lease loop.
//
// Registers with the scheduler (AgentService), heartbeats every lease it
// holds (with the latest progress a running job reported through
// LeaseContext.progress), leases up to its free slots of jobs whose executor it has, runs them
// on `slots` worker threads through the Executor interface and reports each
// result (or failure) fenced by its lease. Results go out through a
// ReportBatcher (agent/report_batcher.h: results that finish close together
// share one ReportResults call, each settled from its own item). Failed
// calls follow the farm's error model (docs/architecture.md, "Error model")
// through the one retry policy of lib/client/retry.h:
//   - transient (UNAVAILABLE, DEADLINE_EXCEEDED, ...): retried with backoff
//     (100 ms doubling to 5 s); results are idempotent per (job, attempt).
//   - NOT_FOUND on Heartbeat / LeaseJobs: the session is unknown, so every
//     lease is dropped (running jobs cancelled) and the agent re-registers.
//   - FAILED_PRECONDITION on a report: the lease is stale; dropped.
//     PERMISSION_DENIED: not this agent's lease; dropped.
//   - INVALID_ARGUMENT on a result: the job is reported failed (permanent)
//     with the reason; INTERNAL / UNKNOWN: retried up to
//     client::kMaxServerFaultRetries times, then the job is reported failed
//     (retryable). In a ReportResults reply these come per item and settle
//     that job only.
//   - a lease in HeartbeatResponse.revoked: its job is cancelled and never
//     reported.
//   - UNAUTHENTICATED: fatal; Run() returns it.
// Shutdown(): stop leasing, hand unstarted leases back (ReleaseLeases), let
// running jobs finish for up to drain_timeout, then cancel (abandon) the rest;
// their leases expire on the scheduler.
//
// Kexec hosts (AgentOptions::kexec, one slot): the first registration names
// the lease of a pending boot and the job is resumed, reported failed or
// dropped as agent/kexec_resume.h decides. A job whose executor reboots the
// host (ExecutionResult::rebooting, after the scheduler agreed to hold its
// lease) is not reported: the agent stops leasing and Run() returns once
// drained.
//
// Test hook agreed with the scheduler's fault tests: a job whose model_set
// holds "agent.hold_ms" = N sleeps N ms (cancellable) before it runs; keys
// starting with "agent." are never passed to an executor.
//
// Thread-safety: Run() once, from one thread; Shutdown() and stats() from any
// thread (not from a signal handler). Ownership: the Agent owns its executors;
// metrics (nullable) must outlive it. Run() returns once the drain is over;
// worker threads still inside an executor that ignores its CancelToken are
// joined by the destructor.
#ifndef AGENT_AGENT_H_
#define AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "agent/health_baseline.h"
#include "agent/health_check.h"
#include "agent/kernels/kexec_provider.h"
#include "agent/kexec_resume.h"
#include "agent/report_batcher.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/client/retry.h"
#include "lib/metrics/metrics.h"

namespace farm::agent {

struct AgentOptions {
  client::ClientOptions client;
  std::string name;
  int slots = 1;
  absl::Duration drain_timeout = absl::Seconds(30);
  // Pause between LeaseJobs calls that returned nothing.
  absl::Duration idle_poll = absl::Milliseconds(200);
  iommufarm::v1::HostFacts host;
  // Called after every successful Register (first and re-registrations).
  std::function<void(const std::string& name, int64_t agent_id, bool first)> on_registered;
  // The host's kexec provider (nullable), shared with the executors that
  // boot through it; requires slots == 1.
  std::shared_ptr<kernels::KexecKernelProvider> kexec;
  // Run the executors' health jobs (health_check.h) before registering, and
  // while they fail, again every health_retry (then register again with
  // the new outcome). A failed agent stays registered and leases nothing.
  bool health_jobs = true;
  absl::Duration health_retry = absl::Minutes(10);
  // The host's health baseline (health_baseline.h): its file ("" keeps
  // none) and the band a health figure must reach of its key's median.
  std::string health_baseline;
  double health_band = 0.5;
  // Reads the host's measurement hygiene when each job on the host's own
  // kernel ends, so a governor or binding changed under a running agent is
  // the result's, not the start's (host.hygiene keeps governor_set). Empty:
  // host.hygiene as given.
  std::function<iommufarm::v1::Hygiene()> read_hygiene;
  // Likewise for host.iommu_environment (agent/host_iommu_environment.h
  // RefreshIommuEnvironment). Empty: host.iommu_environment as given.
  std::function<iommufarm::v1::IommuEnvironment()> read_iommu_environment;
};

// Capability name <-> executor kind ("emulator" <-> EXECUTOR_EMULATOR).
iommufarm::v1::Executor ExecutorKindFromCapability(const std::string& name);

class Agent {
 public:
  struct Stats {
    int64_t succeeded = 0;  // results accepted (including duplicates)
    int64_t failed = 0;     // failures reported
    int64_t revoked = 0;    // dropped because the scheduler revoked them
    int64_t stale = 0;      // reports answered FAILED_PRECONDITION
    int64_t released = 0;   // handed back at shutdown
    int64_t abandoned = 0;  // still running when the drain timed out
    int64_t registrations = 0;
    int64_t report_calls = 0;  // ReportResults / ReportResult RPCs sent
    int64_t reboots = 0;       // jobs that rebooted the host into their kernel
    int64_t resumed = 0;       // held leases the scheduler kept after a reboot
  };

  Agent(AgentOptions options, std::vector<std::unique_ptr<Executor>> executors,
        metrics::AgentMetrics* metrics);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  absl::Status Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  Stats stats() const;

 private:
  struct LeaseEntry {
    iommufarm::v1::JobLease lease;
    bool running = false;
    bool resumed = false;  // resumed after the reboot into its kernel
    std::shared_ptr<CancelToken> cancel = std::make_shared<CancelToken>();
    // The running job's latest progress, sent with each heartbeat.
    std::optional<iommufarm::v1::JobProgress> progress;
  };
  // What the lease loop does after one LeaseJobs call.
  enum class Next { kLease, kStop, kRegister };

  // Session: registration and heartbeats (agent_session.cc).
  // Registers, retrying while the server is away. Returns non-OK only when
  // fatal or when shutting down before it succeeded.
  absl::Status EnsureRegistered() ABSL_LOCKS_EXCLUDED(mu_);
  iommufarm::v1::RegisterRequest RegisterRequestFor() const ABSL_LOCKS_EXCLUDED(mu_);
  // What the executors offer now: a kernel store's offers change as builds
  // land, so the lease loop sends them again when they differ.
  std::vector<iommufarm::v1::Capability> Capabilities() const;
  void Registered(const iommufarm::v1::RegisterResponse& response) ABSL_LOCKS_EXCLUDED(mu_);
  void HeartbeatLoop() ABSL_LOCKS_EXCLUDED(mu_);
  struct HeartbeatTurn {
    bool stop = false;
    bool registered = false;
    absl::Duration interval;
    iommufarm::v1::HeartbeatRequest request;  // when registered
  };
  // Waits out `wait` (only a stop ends it early) and builds the next heartbeat.
  HeartbeatTurn NextHeartbeat(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  void DropRevokedLocked(const iommufarm::v1::HeartbeatResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets every lease (session lost): pending dropped, running cancelled.
  void DropAllLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session's agent id and token as a heartbeat names them.
  iommufarm::v1::HeartbeatRequest SessionHeartbeat() const ABSL_LOCKS_EXCLUDED(mu_);

  // The lease loop and the drain (agent.cc).
  absl::Status CheckPendingBoot();
  void LeaseLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the health jobs and keeps their outcome for the next Register.
  void CheckHealth() ABSL_LOCKS_EXCLUDED(mu_, baseline_mu_);
  // The health figures judged against the host's baseline, which is loaded
  // at the first call (a file that does not parse is started afresh, with a
  // warning) and saved after each.
  void JudgeBaseline(const std::vector<HealthFigure>& figures, iommufarm::v1::AgentHealth* health)
      ABSL_LOCKS_EXCLUDED(baseline_mu_);
  // The last health check as a status: OK when it passed or none ran,
  // UNAVAILABLE with its detail when it failed.
  absl::Status HealthLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `result` of a job that ran on the kernel a kexec booted, or, when the
  // health job fails after it, a failure for another attempt (a result
  // measured on a device that then failed is not kept), the host marked for
  // its default kernel and taking no more work.
  absl::StatusOr<ExecutionResult> CheckHostAfterRun(absl::StatusOr<ExecutionResult> result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // kLease when the last health check passed (or none ran). Otherwise waits
  // health_retry, checks again and has the agent register anew with the
  // outcome (kRegister); kStop when shutdown came first.
  Next AwaitHealthy() ABSL_LOCKS_EXCLUDED(mu_);
  Next LeaseOnce(client::Backoff& backoff) ABSL_LOCKS_EXCLUDED(mu_);
  // The pending kexec boot after the registration that named its lease:
  // queued to run, reported failed, or dropped when the lease was not kept.
  void ResumeBoot() ABSL_LOCKS_EXCLUDED(mu_);
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseUnstarted() ABSL_LOCKS_EXCLUDED(mu_);
  void AwaitRunning() ABSL_LOCKS_EXCLUDED(mu_);

  // Workers: running and reporting jobs (agent_worker.cc).
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void RunOne(const iommufarm::v1::JobLease& lease, CancelToken& cancel, bool resumed)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ExecutionResult> Execute(const iommufarm::v1::JobLease& lease, CancelToken& cancel,
                                          bool resumed);
  // The job stops here: the host reboots into its kernel with the lease held.
  void StopForReboot(const iommufarm::v1::JobLease& lease) ABSL_LOCKS_EXCLUDED(mu_);
  void Report(const iommufarm::v1::JobLease& lease, CancelToken& cancel,
              const absl::StatusOr<ExecutionResult>& result, absl::Duration wall_time)
      ABSL_LOCKS_EXCLUDED(mu_);
  iommufarm::v1::ReportResultRequest ResultRequestFor(int64_t agent_id,
                                                      const iommufarm::v1::JobLease& lease,
                                                      const ExecutionResult& result,
                                                      absl::Duration wall_time) const;
  // A report answered FAILED_PRECONDITION or PERMISSION_DENIED: dropped.
  bool DroppedByScheduler(const iommufarm::v1::JobLease& lease, const grpc::Status& status);

  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;
  void Count(std::atomic<int64_t>& stat, prometheus::Counter* counter);
  // A running job stopped by its CancelToken: revoked, unless abandoned.
  void CountCancelled() ABSL_LOCKS_EXCLUDED(mu_);
  void CountRpcError();
  // Backoff sleep that only a shutdown cuts short.
  void WaitUntilShutdownLocked(absl::Time until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AgentOptions options_;
  std::map<iommufarm::v1::Executor, std::unique_ptr<Executor>> executors_;
  metrics::AgentMetrics* const metrics_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<iommufarm::v1::AgentService::Stub> stub_;
  std::unique_ptr<ReportBatcher> batcher_;
  // Null unless options_.kexec.
  std::unique_ptr<KexecResume> kexec_;

  // Serialises the health checks' use of the baseline file.
  absl::Mutex baseline_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Loaded at the first check that has a figure and a baseline file.
  std::optional<HealthBaseline> baseline_ ABSL_GUARDED_BY(baseline_mu_);

  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // any change of the fields below
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  iommufarm::v1::AgentHealth health_ ABSL_GUARDED_BY(mu_);
  int64_t agent_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::string session_ ABSL_GUARDED_BY(mu_);
  // The capabilities the scheduler last took (serialized); "" before the
  // first lease of a session.
  std::string sent_capabilities_ ABSL_GUARDED_BY(mu_);
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(2);
  std::map<int64_t, LeaseEntry> leases_ ABSL_GUARDED_BY(mu_);  // by job id
  // Sent with the next Register (then cleared); what it kept.
  std::vector<iommufarm::v1::LeaseRef> resumes_ ABSL_GUARDED_BY(mu_);
  std::vector<iommufarm::v1::LeaseRef> resumed_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> pending_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_workers_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_heartbeat_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> succeeded_{0}, failed_{0}, revoked_{0}, stale_{0}, released_{0},
      abandoned_{0}, registrations_{0}, reboots_{0}, resumed_jobs_{0};
  std::vector<std::thread> workers_;
  std::thread heartbeat_thread_;
};

}  // namespace farm::agent

#endif  // AGENT_AGENT_H_
