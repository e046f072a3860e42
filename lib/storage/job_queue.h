// JobQueue: agents and the fenced job queue. A lease is (job_id, attempt,
// lease_token); every report, heartbeat and release names one, and a stale
// one (expired, re-granted, cancelled) is refused, so a job's result is
// accepted exactly once whatever agents crash, retry or come back late.
// Claim order is priority desc (bisect > confirm > bulk by the priority
// bands the scheduler assigns), then round robin across matrices (a job's
// rank within its matrix, so a small matrix is not starved behind a large
// one submitted before it), then job id.
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_JOB_QUEUE_H_
#define LIB_STORAGE_JOB_QUEUE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

// What a leasing agent looks like to the eligibility hook.
struct AgentView {
  int64_t id = 0;
  std::string name;
  std::vector<pb::Capability> capabilities;
  pb::HostFacts host;
};

// Extra eligibility test applied to the claimed candidates (the first
// max_jobs jobs the claim selects); a candidate it refuses stays queued.
// Must be cheap and thread-safe. Empty function: every candidate is
// eligible. Rules that must not block the queue belong in ClaimRules, which
// the claim applies while it selects.
using JobPredicate = std::function<bool(const pb::Job& job, const AgentView& agent)>;

// What the claim itself selects on, beyond "queued, past its backoff, an
// executor the agent runs" (always). Off by default so the repository stays
// policy-free; the scheduler turns both on.
struct ClaimRules {
  // fio / iozone jobs only for a host whose detected IOMMU mode and kernel
  // release are the cell's (run_eligibility.h), so an unrunnable job never
  // holds a runnable one back.
  bool match_real_run_hosts = false;
  // At most the agent's registered slots minus the leases it holds.
  bool within_free_slots = false;
};

struct RetryPolicy {
  absl::Duration base_backoff = absl::Seconds(1);  // doubled per spent attempt
  absl::Duration max_backoff = absl::Minutes(5);
  // Boots of a job's kernel that do not come back (UnbootedLease) before the
  // job fails with proto::kDoesNotBootMark, a bisect skip. One is not proof:
  // a kexec'd kernel can hang on a device that did not survive the kexec,
  // and a skip beside the culprit leaves the bisect with a range, not a
  // commit. Each boot spends an attempt. At least 1.
  int boot_attempts = 2;
};

struct ReportOutcome {
  bool accepted = false;
  bool duplicate = false;
  pb::Executor executor = pb::EXECUTOR_UNSPECIFIED;
  double duration_seconds = 0;  // lease start to acceptance (first acceptance only)
};

// A lease held through its agent's reboot (kexec) whose hold passed: the
// job's kernel did not come back on that host. The reaper requeues the job,
// or at RetryPolicy::boot_attempts such boots fails it for good (its reason
// carries proto::kDoesNotBootMark), and names it here either way, so the
// host's power can be cycled (scheduler/lab_recovery.h).
struct UnbootedLease {
  int64_t job_id = 0;
  int32_t attempt = 0;
  std::string agent;  // the lease's owner by name
  bool operator==(const UnbootedLease&) const = default;
};

struct ReapOutcome {
  int64_t requeued = 0;
  int64_t failed = 0;  // out of attempts, or out of boots (UnbootedLease)
  std::vector<UnbootedLease> unbooted;
};

// The hold a heartbeat asks for, capped at max_hold; zero for none.
inline absl::Duration HoldFor(const pb::HeartbeatRequest& req, absl::Duration max_hold) {
  const absl::Duration asked =
      absl::Seconds(req.hold_for().seconds()) + absl::Nanoseconds(req.hold_for().nanos());
  if (asked <= absl::ZeroDuration() || max_hold <= absl::ZeroDuration()) {
    return absl::ZeroDuration();
  }
  return std::min(asked, max_hold);
}

class JobQueue {
 public:
  virtual ~JobQueue() = default;
  // Upserts the agent by name with a fresh session; the old session's leases
  // are expired (attempt spent, like the reaper), except those of
  // req.resumes still held through a reboot (Heartbeat's hold, its hold not
  // passed): they move to the new session, their hold cleared, and come
  // back in `resumed`. Fills agent_id, session, resumed.
  virtual absl::StatusOr<pb::RegisterResponse> RegisterAgent(const pb::RegisterRequest& req,
                                                             const RetryPolicy& retry) = 0;
  // kNotFound for an unknown agent/session. Fills extended/revoked/expiry.
  // req.hold_for > 0 and max_hold > 0: the current leases of req are held
  // until now + min(hold_for, max_hold) (held_until is set); the reaper
  // expires a held lease whose hold passed with a reason naming the boot
  // timeout. A plain heartbeat never shortens a hold. req.progress of a
  // lease extended is kept on its job (MatrixStore::ListBuilding).
  virtual absl::StatusOr<pb::HeartbeatResponse> Heartbeat(
      const pb::HeartbeatRequest& req, absl::Duration ttl,
      absl::Duration max_hold = absl::ZeroDuration()) = 0;
  // Claims up to max_jobs queued jobs (FOR UPDATE SKIP LOCKED, in claim
  // order) whose executor the agent can run and that meet `rules`, then
  // keeps those that pass `eligible`. Leases come back in claim order.
  virtual absl::StatusOr<std::vector<pb::JobLease>> LeaseJobs(int64_t agent_id,
                                                              const std::string& session,
                                                              int max_jobs, absl::Duration ttl,
                                                              const JobPredicate& eligible,
                                                              const ClaimRules& rules = {}) = 0;
  // Fenced by (job, attempt, token); kFailedPrecondition when stale.
  // Only the agent holding the lease (req.agent_id) reports it, or retries
  // an accepted report: a current lease of another agent is
  // kPermissionDenied and stores nothing. The result row records the
  // agent's current name.
  virtual absl::StatusOr<ReportOutcome> ReportResult(const pb::ReportResultRequest& req) = 0;
  // Several reports, each with ReportResult's outcome, in order. The
  // default reports them one by one; PostgreSQL stores the fresh ones in
  // one statement. The outer status is an outage (nothing known stored).
  virtual absl::StatusOr<std::vector<absl::StatusOr<ReportOutcome>>> ReportResults(
      absl::Span<const pb::ReportResultRequest* const> reqs) {
    std::vector<absl::StatusOr<ReportOutcome>> out;
    out.reserve(reqs.size());
    for (const pb::ReportResultRequest* r : reqs) out.push_back(ReportResult(*r));
    return out;
  }
  // The same over requests held by value.
  absl::StatusOr<std::vector<absl::StatusOr<ReportOutcome>>> ReportResults(
      const std::vector<pb::ReportResultRequest>& reqs) {
    std::vector<const pb::ReportResultRequest*> refs;
    refs.reserve(reqs.size());
    for (const pb::ReportResultRequest& r : reqs) refs.push_back(&r);
    return ReportResults(absl::MakeConstSpan(refs));
  }
  // Fenced and held like ReportResult (kFailedPrecondition, kPermissionDenied).
  virtual absl::StatusOr<pb::JobState> ReportFailure(const pb::ReportFailureRequest& req,
                                                     const RetryPolicy& retry) = 0;
  // Back to queued without spending an attempt. kNotFound on bad session.
  virtual absl::StatusOr<int> ReleaseLeases(const pb::ReleaseLeasesRequest& req) = 0;
  // Requeues (or fails, at max attempts) up to `limit` expired leases; a
  // lease held through a reboot fails its job at once (UnbootedLease).
  virtual absl::StatusOr<ReapOutcome> ReapExpired(const RetryPolicy& retry, int limit) = 0;
  // Appends `detail`, on a line of its own, to the failure reason of job
  // `job_id` when its attempt `attempt` failed and it has not run since
  // (queued again or failed for good); false otherwise.
  virtual absl::StatusOr<bool> AnnotateFailure(int64_t job_id, int32_t attempt,
                                               const std::string& detail) = 0;
  // Job counts over all matrices, indexed by pb::JobState number.
  virtual absl::StatusOr<std::array<int64_t, 6>> QueueCounts() = 0;
  // Queued jobs by executor (pb::Executor number; executors with none are
  // absent): what an autoscaler of one kind of agent reads.
  virtual absl::StatusOr<std::map<int, int64_t>> QueuedByExecutor() = 0;
  // Agents with a heartbeat within `liveness` (pb::Agent.connected), counted
  // without reading the agents (the reaper's gauge, every pass).
  virtual absl::StatusOr<int64_t> CountConnectedAgents(absl::Duration liveness) = 0;
  // One page of agents in name order (bytewise); `connected` means a
  // heartbeat within `liveness`: at most `limit` whose name
  // sorts after `after_name` ("" = from the first). Keyset paging: a page
  // reads `limit` agents whatever the farm's size.
  virtual absl::StatusOr<std::vector<pb::Agent>> ListAgentsPage(absl::Duration liveness,
                                                                const std::string& after_name,
                                                                int limit) = 0;
  // The agent's name, for results (kNotFound if unknown).
  virtual absl::StatusOr<std::string> AgentName(int64_t agent_id) = 0;
  // Replaces the capabilities (and the executors they name) of the agent's
  // current session, as LeaseJobsRequest.capabilities asks. kNotFound for an
  // unknown agent or session.
  virtual absl::Status UpdateCapabilities(int64_t agent_id, const std::string& session,
                                          const std::vector<pb::Capability>& capabilities) = 0;
  // Fails queued jobs that can never run, so none waits forever:
  //  - a job waiting for a kernel build that failed or was cancelled, its
  //    reason "kernel build <id> failed: <the build's reason>" (or "was
  //    cancelled");
  //  - a real or build job claimable for at least `unrunnable_after`
  //    (since it was created, or since its build succeeded) that no
  //    registered agent can run (its executor and run_eligibility.h's rule),
  //    its reason naming what it needs (run_eligibility.h's UnrunnableReason).
  // At most `limit` jobs of each kind a call. Returns how many it failed.
  virtual absl::StatusOr<int64_t> FailBlockedJobs(absl::Duration unrunnable_after, int limit) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_JOB_QUEUE_H_
