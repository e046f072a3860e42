// Repository interfaces over the farm's durable state (PostgreSQL).
//
// The data model is the API's protobuf messages (iommufarm.v1): they are the
// farm's vocabulary, and using them here avoids a parallel set of structs
// that would only be copied field by field. Nothing here knows about gRPC.
//
// Contract for every interface:
//  - Implementations are thread-safe; every method is one or a few database
//    transactions and holds no in-memory authority: fencing (lease tokens,
//    attempts, sessions) is decided in SQL, so several schedulers may share
//    one database.
//  - Errors: kUnavailable when the database cannot be reached (retryable),
//    kNotFound for unknown ids, kFailedPrecondition for stale leases,
//    kInvalidArgument for bad input, kAlreadyExists for duplicates.
//  - Times are the database's clock.
#ifndef LIB_STORAGE_REPOSITORIES_H_
#define LIB_STORAGE_REPOSITORIES_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

// ------------------------------------------------------------------ catalogs

class CatalogStore {
 public:
  virtual ~CatalogStore() = default;
  // Stores `catalog` (name, source, commits in order; indexes are
  // renumbered 0..n-1). kAlreadyExists if present and !replace.
  virtual absl::StatusOr<pb::Catalog> PutCatalog(const pb::Catalog& catalog, bool replace) = 0;
  // Appends the commits whose id is not yet in the catalog (creating the
  // catalog if needed), in the given order. Returns the catalog (without
  // commits) and how many were added.
  virtual absl::StatusOr<std::pair<pb::Catalog, int>> AppendCommits(
      const std::string& catalog, const std::string& source,
      const std::vector<pb::CatalogCommit>& commits) = 0;
  // Catalogs without their commits.
  virtual absl::StatusOr<std::vector<pb::Catalog>> ListCatalogs() = 0;
  // One catalog with its commits (id, subject, index, set), oldest first.
  virtual absl::StatusOr<pb::Catalog> GetCatalog(const std::string& name) = 0;
};

// ------------------------------------------------------------------ matrices

struct NewMatrix {
  // name, spec_yaml, catalog, platform, executor, submitted_by are used.
  pb::Matrix matrix;
  bool analysis_bisect = false;
  std::string idempotency_key;  // empty: none
  // Fully expanded jobs; state/attempt/lease fields are ignored.
  std::vector<pb::Job> jobs;
};

struct CreatedMatrix {
  pb::Matrix matrix;
  int64_t jobs_created = 0;
  bool existing = false;  // idempotency key matched an earlier submit
};

class MatrixStore {
 public:
  virtual ~MatrixStore() = default;
  // Creates the matrix and all its jobs in one transaction (jobs by COPY).
  virtual absl::StatusOr<CreatedMatrix> CreateMatrix(const NewMatrix& m) = 0;
  // With counts and the state derived from them.
  virtual absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) = 0;
  virtual absl::StatusOr<std::vector<pb::Matrix>> ListMatrices(int limit, int64_t before_id) = 0;
  // Cancels every non-terminal job (revoking leases). Returns the matrix
  // afterwards and the number of jobs cancelled.
  virtual absl::StatusOr<std::pair<pb::Matrix, int64_t>> CancelMatrix(
      int64_t id, const std::string& reason) = 0;
  // Accepted results of the matrix's jobs with job_id > after_job_id, in
  // job order, at most `limit`.
  virtual absl::StatusOr<std::vector<pb::Result>> ListResults(int64_t matrix_id,
                                                              int64_t after_job_id, int limit,
                                                              bool include_raw) = 0;
};

// --------------------------------------------------------------------- queue

// What a leasing agent looks like to the eligibility hook.
struct AgentView {
  int64_t id = 0;
  std::string name;
  std::vector<pb::Capability> capabilities;
  pb::HostFacts host;
};

// Extra eligibility test applied to candidate jobs after the executor
// match; the hook for host-fact matching of real (fio/iozone) runs. Must be
// cheap and thread-safe. Empty function: every candidate is eligible.
using JobPredicate = std::function<bool(const pb::Job& job, const AgentView& agent)>;

struct RetryPolicy {
  absl::Duration base_backoff = absl::Seconds(1);  // doubled per spent attempt
  absl::Duration max_backoff = absl::Minutes(5);
};

struct ReportOutcome {
  bool accepted = false;
  bool duplicate = false;
  pb::Executor executor = pb::EXECUTOR_UNSPECIFIED;
  double duration_seconds = 0;  // lease start to acceptance (first acceptance only)
};

struct ReapOutcome {
  int64_t requeued = 0;
  int64_t failed = 0;
};

class JobQueue {
 public:
  virtual ~JobQueue() = default;
  // Upserts the agent by name with a fresh session; the old session's leases
  // are expired (attempt spent, like the reaper). Fills agent_id, session.
  virtual absl::StatusOr<pb::RegisterResponse> RegisterAgent(const pb::RegisterRequest& req,
                                                             const RetryPolicy& retry) = 0;
  // kNotFound for an unknown agent/session. Fills extended/revoked/expiry.
  virtual absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& req,
                                                          absl::Duration ttl) = 0;
  // Claims up to max_jobs queued jobs (FOR UPDATE SKIP LOCKED, priority desc,
  // id) whose executor the agent can run and that pass `eligible`.
  virtual absl::StatusOr<std::vector<pb::JobLease>> LeaseJobs(int64_t agent_id,
                                                              const std::string& session,
                                                              int max_jobs, absl::Duration ttl,
                                                              const JobPredicate& eligible) = 0;
  // Fenced by (job, attempt, token); kFailedPrecondition when stale.
  // The result row records the agent's current name.
  virtual absl::StatusOr<ReportOutcome> ReportResult(const pb::ReportResultRequest& req) = 0;
  virtual absl::StatusOr<pb::JobState> ReportFailure(const pb::ReportFailureRequest& req,
                                                     const RetryPolicy& retry) = 0;
  // Back to queued without spending an attempt. kNotFound on bad session.
  virtual absl::StatusOr<int> ReleaseLeases(const pb::ReleaseLeasesRequest& req) = 0;
  // Requeues (or fails, at max attempts) up to `limit` expired leases.
  virtual absl::StatusOr<ReapOutcome> ReapExpired(const RetryPolicy& retry, int limit) = 0;
  // Job counts over all matrices, indexed by pb::JobState number.
  virtual absl::StatusOr<std::array<int64_t, 6>> QueueCounts() = 0;
  // Agents; `connected` means a heartbeat within `liveness`.
  virtual absl::StatusOr<std::vector<pb::Agent>> ListAgents(absl::Duration liveness) = 0;
  // The agent's name, for results (kNotFound if unknown).
  virtual absl::StatusOr<std::string> AgentName(int64_t agent_id) = 0;
};

// ------------------------------------------------------------ change events

// Wake-ups for readers that follow a matrix (WatchMatrix). A wake-up says
// "look again", never what changed: callers re-read the matrix. It may be
// spurious, and delivery is best effort (a notification can be lost while
// the database is away), so callers keep a slow fallback poll; after a
// reconnect every subscriber is woken once, since changes may have been
// missed meanwhile.
class MatrixEvents {
 public:
  using Handle = uint64_t;
  virtual ~MatrixEvents() = default;
  // `wake` runs on the events thread: it must be cheap and must not block
  // (post work elsewhere). It may run before Subscribe returns.
  virtual Handle Subscribe(int64_t matrix_id, std::function<void()> wake) = 0;
  // After this returns, `wake` of that subscription is not running and is
  // never called again.
  virtual void Unsubscribe(Handle handle) = 0;
};

// ------------------------------------------------------------------ analysis

class AnalysisStore {
 public:
  virtual ~AnalysisStore() = default;
  virtual absl::StatusOr<std::vector<pb::Regression>> ListRegressions(
      const pb::ListRegressionsRequest& req) = 0;
  virtual absl::StatusOr<pb::Regression> GetRegression(int64_t id) = 0;
  // By bisect id, or by regression id (its latest bisect) when bisect_id == 0.
  virtual absl::StatusOr<pb::Bisect> GetBisect(int64_t bisect_id, int64_t regression_id) = 0;
  virtual absl::StatusOr<pb::Regression> UpdateRegression(int64_t id, pb::RegressionState state,
                                                          const std::string& note) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_REPOSITORIES_H_
