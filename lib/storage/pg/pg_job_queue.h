// PgJobQueue: JobQueue in PostgreSQL (agents, jobs, results). All fencing
// is in SQL: a lease is the row's (attempt, lease_token) while state = 2.
// The lease claim and the result report run as prepared statements
// (PgPool::Prepare: defined again on every new connection, so a PostgreSQL
// restart costs one re-prepare per connection, not an error).
//
// Contract: thread-safe (each call checks out its own pooled connection);
// does not own the pool, which must outlive it. Requires the schema of
// migrations.h (ApplyMigrations) to be applied.
#ifndef LIB_STORAGE_PG_PG_JOB_QUEUE_H_
#define LIB_STORAGE_PG_PG_JOB_QUEUE_H_

#include <string>
#include <utility>
#include <vector>

#include "lib/storage/job_queue.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {

class PgJobQueue : public JobQueue {
 public:
  // Registers the hot queue statements (claim, report) as prepared
  // statements on the pool's connections.
  explicit PgJobQueue(PgPool* pool);
  PgJobQueue(const PgJobQueue&) = delete;
  PgJobQueue& operator=(const PgJobQueue&) = delete;

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
  using JobQueue::ReportResults;
  absl::StatusOr<std::vector<absl::StatusOr<ReportOutcome>>> ReportResults(
      absl::Span<const pb::ReportResultRequest* const> reqs) override;
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
  PgPool* const pool_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_JOB_QUEUE_H_
