// RetentionStore: what may be deleted from a farm's history, and the
// deletion (farmctl prune, RetentionService.Prune).
//
// A full prune deletes matrices that finished (every job terminal, the last
// one finished) before a cutoff, with their jobs, results, samples and raw
// output, and the analyzer's marker of each. A raw-only prune empties the
// raw output of results finished before the cutoff and stamps them
// (Result.raw_pruned_at); samples and rows stay. Both keep what the farm's
// answers still use (PlanPrune): matrices a regression references, the
// newest `history_depth` matrices of every analyser series (full prune
// only: the analyzer's baseline, AnalyzerOptions::history_matrices), the
// matrices of kernel builds a waiting job needs, and every unfinished one.
//
// Deletion runs in transactions of about `batch_jobs` jobs with their
// results (PrunePlan::batches): a matrix goes whole in one of them, so a crash
// leaves every matrix either whole or gone, and running the prune again
// finishes it. The keep rules are checked again inside each transaction, so
// a regression recorded while the prune runs still keeps its matrices.
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_RETENTION_STORE_H_
#define LIB_STORAGE_RETENTION_STORE_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

struct PruneOptions {
  absl::Time cutoff;
  bool raw_only = false;
  bool dry_run = false;
  // Matrices kept per analyser series; at least the analyzer's
  // history_matrices (100 by default).
  int history_depth = 100;
  // Jobs per transaction; a matrix is never split, so a larger one is a
  // transaction of its own.
  int64_t batch_jobs = 5000;
};

// One matrix as the retention policy sees it (a store gathers these).
struct MatrixRetentionFacts {
  int64_t id = 0;
  bool finished = false;   // no queued or leased job
  absl::Time finished_at;  // its last job's finish (created_at if it has no jobs)
  int64_t jobs = 0;
  bool regression = false;    // a regression references it (see the header comment)
  bool build_needed = false;  // holds a kernel build job an unfinished job waits for
  // The analyser series its bulk jobs measured: catalog, executor,
  // platform, workload, params and the matrix's shared model keys, one
  // string each (any encoding, the same for equal series).
  std::set<std::string> series;
};

// Which matrices go, and the response's kept counts (pruned counts and
// batches are the store's to fill).
struct PrunePlan {
  std::vector<int64_t> prune;  // ascending ids
  // `prune` cut into transactions of about batch_jobs jobs.
  std::vector<std::vector<int64_t>> batches;
  pb::PruneResponse report;
};

// The policy, the same for every store: among matrices finished before
// options.cutoff, keeps those a regression references, then (full prune)
// those among the newest history_depth finished matrices (by id) of any of their
// series, then (full prune) those holding a needed build; the rest go.
PrunePlan PlanPrune(const std::vector<MatrixRetentionFacts>& matrices, const PruneOptions& options);

class RetentionStore {
 public:
  virtual ~RetentionStore() = default;
  // Prunes (or, with dry_run, counts) as the header says. kInvalidArgument
  // for a history_depth or batch_jobs below 1.
  virtual absl::StatusOr<pb::PruneResponse> Prune(const PruneOptions& options) = 0;
};

// Adds every count of `from` to `to`.
void AddPruneCounts(const pb::PruneCounts& from, pb::PruneCounts* to);

// kInvalidArgument unless the options can be run.
absl::Status CheckPruneOptions(const PruneOptions& options);

}  // namespace farm::storage

#endif  // LIB_STORAGE_RETENTION_STORE_H_
