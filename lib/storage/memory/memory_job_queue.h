// MemoryJobQueue: JobQueue over a MemoryDatabase, with the fencing of
// PgJobQueue (lib/storage/pg/pg_job_queue.cc) statement by statement: a lease
// is the job's (attempt, lease_token) while it is leased; stale reports are
// refused with the same codes and messages, an identical retried report is a
// duplicate, expired leases spend their attempt (requeued after the backoff,
// failed at max_attempts), and claims go by priority desc, then the job's
// rank within its matrix (fair_rank: matrices of one priority take turns),
// then id -- the SQL's ORDER BY priority DESC, fair_rank, id.
//
// Contract: thread-safe (one database lock per call, like one
// transaction); does not own the database, which must outlive it. Lease
// tokens are random UUID text, like gen_random_uuid().
#ifndef LIB_STORAGE_MEMORY_MEMORY_JOB_QUEUE_H_
#define LIB_STORAGE_MEMORY_MEMORY_JOB_QUEUE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "lib/storage/job_queue.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryJobQueue : public JobQueue {
 public:
  explicit MemoryJobQueue(MemoryDatabase* db) : db_(db) {}
  MemoryJobQueue(const MemoryJobQueue&) = delete;
  MemoryJobQueue& operator=(const MemoryJobQueue&) = delete;

  absl::StatusOr<pb::RegisterResponse> RegisterAgent(const pb::RegisterRequest& req,
                                                     const RetryPolicy& retry) override;
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(
      const pb::HeartbeatRequest& req, absl::Duration ttl,
      absl::Duration max_hold = absl::ZeroDuration()) override;
  absl::StatusOr<std::vector<pb::JobLease>> LeaseJobs(int64_t agent_id, const std::string& session,
                                                      int max_jobs, absl::Duration ttl,
                                                      const JobPredicate& eligible,
                                                      const ClaimRules& rules = {}) override;
  absl::StatusOr<ReportOutcome> ReportResult(const pb::ReportResultRequest& req) override;
  absl::StatusOr<pb::JobState> ReportFailure(const pb::ReportFailureRequest& req,
                                             const RetryPolicy& retry) override;
  absl::StatusOr<int> ReleaseLeases(const pb::ReleaseLeasesRequest& req) override;
  absl::StatusOr<ReapOutcome> ReapExpired(const RetryPolicy& retry, int limit) override;
  absl::StatusOr<bool> AnnotateFailure(int64_t job_id, int32_t attempt,
                                       const std::string& detail) override;
  absl::StatusOr<std::array<int64_t, 6>> QueueCounts() override;
  absl::StatusOr<std::map<int, int64_t>> QueuedByExecutor() override;
  absl::StatusOr<int64_t> CountConnectedAgents(absl::Duration liveness) override;
  absl::StatusOr<std::vector<pb::Agent>> ListAgentsPage(absl::Duration liveness,
                                                        const std::string& after_name,
                                                        int limit) override;
  absl::StatusOr<std::string> AgentName(int64_t agent_id) override;
  absl::Status UpdateCapabilities(int64_t agent_id, const std::string& session,
                                  const std::vector<pb::Capability>& capabilities) override;
  absl::StatusOr<int64_t> FailBlockedJobs(absl::Duration unrunnable_after, int limit) override;

 private:
  // gen_random_uuid()::text.
  std::string NewUuid();

  MemoryDatabase* const db_;  // not owned
  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_JOB_QUEUE_H_
