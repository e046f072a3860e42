// MatrixStore: submitted matrices, their expanded jobs (created with the
// matrix) and the accepted results read back per matrix.
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_MATRIX_STORE_H_
#define LIB_STORAGE_MATRIX_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

struct NewMatrix {
  // name, spec_yaml, catalog, platform, executor, submitted_by are used.
  pb::Matrix matrix;
  bool analysis_bisect = false;
  std::string idempotency_key;  // empty: none
  // Fully expanded jobs; state/attempt/lease fields are ignored.
  std::vector<pb::Job> jobs;
  // Keys every job carries on top of its own model_set (the spec's `set:`),
  // stored once with the matrix; a job's model_set reads back as its own
  // keys with these over them.
  std::map<std::string, std::string> model_set;
  // The agent labels every job needs (the spec's `labels:`), stored once
  // with the matrix; every job reads back with them as Job.labels.
  std::map<std::string, std::string> labels;
};

struct CreatedMatrix {
  pb::Matrix matrix;
  int64_t jobs_created = 0;
  bool existing = false;  // idempotency key matched an earlier submit
};

// A slice of one result's raw output (ReadRawOutput).
struct RawOutputSlice {
  std::string data;         // up to max_chars characters, from from_char on
  int64_t total_bytes = 0;  // octet length of the whole raw output
  std::string raw_format;
  int attempt = 0;  // the result's attempt (the one asked for, or the latest)
  // Set when retention emptied the raw output (RetentionStore).
  std::optional<absl::Time> raw_pruned_at;
};

class MatrixStore {
 public:
  virtual ~MatrixStore() = default;
  // Creates the matrix and all its jobs in one transaction (jobs by COPY).
  // Jobs of one commit that share a model_set store it once per matrix.
  // AlreadyExists, creating nothing, when a kernel build job of `m` would be
  // a second live one (LiveBuildJobs) of its (catalog, commit, platform,
  // kernel config: proto::BuildKeyOf).
  virtual absl::StatusOr<CreatedMatrix> CreateMatrix(const NewMatrix& m) = 0;
  // With counts and the state derived from them.
  virtual absl::StatusOr<pb::Matrix> GetMatrix(int64_t id) = 0;
  virtual absl::StatusOr<std::vector<pb::Matrix>> ListMatrices(int limit, int64_t before_id) = 0;
  // The matrix's failed and cancelled jobs grouped by (state, reason), most
  // jobs first (ties: the group's first job id), at most `limit` groups.
  virtual absl::StatusOr<std::vector<pb::JobFailure>> ListFailures(int64_t matrix_id,
                                                                   int limit) = 0;
  // Cancels every non-terminal job (revoking leases). Returns the matrix
  // afterwards and the number of jobs cancelled.
  virtual absl::StatusOr<std::pair<pb::Matrix, int64_t>> CancelMatrix(
      int64_t id, const std::string& reason) = 0;
  // Accepted results of the matrix's jobs with job_id > after_job_id, in
  // job order, at most `limit`. With max_raw_bytes > 0 the page also ends
  // before the result whose raw output would take the page's raw outputs
  // past it (the first result always comes), so a page's size is bounded by
  // bytes too. raw_size is set whether or not raw output is included.
  virtual absl::StatusOr<std::vector<pb::Result>> ListResults(int64_t matrix_id,
                                                              int64_t after_job_id, int limit,
                                                              bool include_raw,
                                                              int64_t max_raw_bytes = 0) = 0;
  // Characters [from_char, from_char + max_chars) of the raw output of
  // result (job_id, attempt) (attempt 0: the job's latest result), counted in characters so a slice
  // never splits one (at most 4 * max_chars bytes); only that slice is read into memory. NOT_FOUND
  // if there is no such result.
  virtual absl::StatusOr<RawOutputSlice> ReadRawOutput(int64_t job_id, int attempt,
                                                       int64_t from_char, int64_t max_chars) = 0;
  // Kernel build jobs (EXECUTOR_KBUILD) of `catalog` for any of `commits`
  // that are queued, leased or succeeded (a failed or cancelled build does
  // not count: it is built again), in job id order. Real jobs of any matrix
  // share them (Job.waits_for_job).
  virtual absl::StatusOr<std::vector<pb::Job>> LiveBuildJobs(
      const std::string& catalog, const std::vector<std::string>& commits) = 0;
  // The leased jobs running for the matrix that reported progress for
  // their current attempt (JobQueue::Heartbeat): its own (a build matrix's
  // builds) and those its queued jobs wait for (Job.waits_for_job), in job
  // id order, at most kMaxBuilding; commit_id and platform are the job's.
  static constexpr int kMaxBuilding = 20;
  virtual absl::StatusOr<std::vector<pb::JobProgress>> ListBuilding(int64_t matrix_id) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MATRIX_STORE_H_
