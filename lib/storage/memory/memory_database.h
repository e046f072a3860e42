// MemoryDatabase: the farm's tables in memory, for the in-memory repositories
// (memory_store.h) that tests run instead of PostgreSQL. The rows keep what
// the SQL schema keeps (lib/storage/pg/migrations.cc), with NULL columns as
// std::optional, so the repositories over it can follow the SQL statement by
// statement.
//
// Contract:
//  - Thread-safe. One mutex guards every table: Write() runs its function
//    under it like one serializable transaction, Read() like a read-only
//    one. Functions must not call back into the database.
//  - Now() is the database's clock (absl::Now unless a clock is given),
//    kept to microseconds like PostgreSQL's timestamptz.
//  - Changes: a Write() reports the matrices whose jobs changed state; after
//    the lock is released every observer is called with them (on the writing
//    thread), as the jobs trigger's NOTIFY farm_matrix does.
//  - Tests may use Write() as a back door, the way PostgreSQL tests run SQL.
#ifndef LIB_STORAGE_MEMORY_MEMORY_DATABASE_H_
#define LIB_STORAGE_MEMORY_MEMORY_DATABASE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/storage/analyzer_store.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

struct CatalogRow {
  std::string source;
  absl::Time loaded_at;
  std::vector<pb::CatalogCommit> commits;  // by idx: index == position
};

struct MatrixRow {
  int64_t id = 0;
  std::string name, spec_yaml, catalog, platform, submitted_by;
  pb::Executor executor = pb::EXECUTOR_UNSPECIFIED;
  bool analysis_bisect = false;
  std::string idempotency_key;  // empty: NULL
  bool cancelled = false;
  std::string cancel_reason;
  absl::Time created_at;
};

struct AgentRow {
  int64_t id = 0;
  std::string name, session;
  google::protobuf::RepeatedPtrField<pb::Capability> capabilities;
  std::set<int> executors;
  pb::HostFacts host;
  pb::AgentHealth health;
  int slots = 1;
  absl::Time registered_at, last_heartbeat;
};

// jobs: `job` holds the plain columns (id .. lease_owner); the lease
// expiry is lease_expires_at, not job.lease_expires_at.
struct JobRow {
  pb::Job job;
  std::optional<int64_t> lease_agent;
  std::optional<std::string> lease_token;
  // The lease held through its agent's reboot (jobs.lease_hold_token).
  std::optional<std::string> lease_hold_token;
  // Boots of the job's kernel that did not come back (jobs.unbooted).
  int unbooted = 0;
  std::optional<absl::Time> lease_expires_at, started_at, finished_at;
  absl::Time not_before;
  absl::Time created_at;
  int32_t fair_rank = 0;  // position within its matrix: the claim's round robin
  // The matrix's shared keys (NewMatrix::model_set), one copy for all its
  // jobs, applied over job.model_set when the job is read (JobFromRow).
  std::shared_ptr<const std::map<std::string, std::string>> shared_model_set;
  // jobs.progress: the agent's last report of the running attempt.
  std::optional<pb::JobProgress> progress;
};

struct ResultRow {
  int64_t matrix_id = 0;
  int64_t agent_id = 0;
  std::string agent;
  google::protobuf::RepeatedPtrField<pb::Sample> samples;
  std::string raw_output, raw_format, tool_version;
  pb::HostFacts host;
  int64_t wall_time_ns = 0;
  absl::Time finished_at;
  pb::Monitors monitors;
  std::optional<absl::Time> raw_pruned_at;  // retention emptied raw_output
};

// regressions: `regression` holds the columns AnalysisStore reads (its
// culprits are the bisect's); the analyzer's own columns follow.
struct RegressionRow {
  pb::Regression regression;  // detected_at as stored
  absl::Time updated_at;
  std::string series_key;  // the analyzer's dedup key of an open regression
  std::string silence_id;  // the Alertmanager silence of an acknowledged one, or ""
  double strength = 0;     // regressions.strength
};

struct AlertRow {
  int64_t id = 0;
  int64_t regression_id = 0;
  std::string name;
  std::string labels_json = "{}", annotations_json = "{}";
  bool firing = true;
  absl::Time starts_at;
  std::optional<absl::Time> ends_at, last_sent_at;
};

class MemoryDatabase {
 public:
  struct Tables {
    std::map<std::string, CatalogRow> catalogs;            // by name
    std::map<int64_t, MatrixRow> matrices;                 // by id
    std::map<int64_t, AgentRow> agents;                    // by id
    std::map<int64_t, JobRow> jobs;                        // by id
    std::map<std::pair<int64_t, int>, ResultRow> results;  // by (job_id, attempt)
    std::map<int64_t, RegressionRow> regressions;          // by id
    std::map<int64_t, pb::Bisect> bisects;                 // by id, steps by step
    std::map<int64_t, AlertRow> alerts;                    // by id
    // regression_groups by id (RegressionGroup.members left empty: the
    // members are the regressions of that group_id).
    std::map<int64_t, RegressionGroup> regression_groups;
    std::map<std::string, std::string> analyzer_state;  // by key: the value as JSON text
    // bigserial sequences: the last id handed out.
    int64_t last_matrix_id = 0, last_agent_id = 0, last_job_id = 0;
    int64_t last_regression_id = 0, last_bisect_id = 0, last_alert_id = 0;
    int64_t last_group_id = 0;
  };
  // Matrices whose jobs changed state in one Write().
  using Changes = std::set<int64_t>;
  using Observer = std::function<void(const Changes&)>;

  explicit MemoryDatabase(std::function<absl::Time()> clock = absl::Now);
  MemoryDatabase(const MemoryDatabase&) = delete;
  MemoryDatabase& operator=(const MemoryDatabase&) = delete;

  absl::Time Now() const;

  template <typename F>
  auto Write(F&& fn) -> decltype(fn(std::declval<Tables&>(), std::declval<Changes&>())) {
    Changes changes;
    auto out = [&] {
      absl::MutexLock lock(&mu_);
      return fn(tables_, changes);
    }();
    if (!changes.empty()) Publish(changes);
    return out;
  }

  template <typename F>
  auto Read(F&& fn) const -> decltype(fn(std::declval<const Tables&>())) {
    absl::ReaderMutexLock lock(&mu_);
    return fn(tables_);
  }

  // Observers are called after each Write() that changed job states, with
  // no database lock held; they must not block or remove themselves.
  uint64_t AddObserver(Observer fn);
  void RemoveObserver(uint64_t handle);

 private:
  void Publish(const Changes& changes);

  const std::function<absl::Time()> clock_;
  mutable absl::Mutex mu_;
  Tables tables_ ABSL_GUARDED_BY(mu_);
  absl::Mutex observers_mu_;
  std::map<uint64_t, Observer> observers_ ABSL_GUARDED_BY(observers_mu_);
  uint64_t next_observer_ ABSL_GUARDED_BY(observers_mu_) = 1;
};

// Reads several memory repositories share (callers hold the lock).
// The job as RowToJob reads it (lease_expires_at filled from the row).
pb::Job JobFromRow(const JobRow& row);
// kBuildDoneSql: `job` waits for no kernel build, or its build succeeded.
bool BuildDone(const MemoryDatabase::Tables& t, const pb::Job& job);
// The matrix with its job counts and derived state, as LoadMatrix reads it;
// kNotFound if there is none.
absl::StatusOr<pb::Matrix> MatrixFromTables(const MemoryDatabase::Tables& t, int64_t id);

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_DATABASE_H_
