// RetentionService: farmctl prune behind the gRPC adapter. Turns a
// PruneRequest into PruneOptions (the cutoff on the scheduler's clock, the
// history depth never below the analyzer's) and runs it on the
// RetentionStore (lib/storage/retention_store.h says what is kept and how
// the deletion is batched). A prune whose cutoff reaches matrices that a
// regression or its bisect uses refuses unless the request says keep_used:
// deleting history from under an open question should be a decision, not
// a side effect of an age. Who may call it is roles.cc's table (admins).
//
// Thread-safety: thread-safe; the store is not owned and must outlive it.
// Prune blocks for the whole deletion: call it on the heavy worker pool.
#ifndef SCHEDULER_RETENTION_SERVICE_H_
#define SCHEDULER_RETENTION_SERVICE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/storage/retention_store.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

// The analyzer's history depth (AnalyzerOptions::history_matrices): the
// fewest matrices a prune keeps per series.
inline constexpr int kMinKeepPerSeries = 100;
// The shortest older_than a prune takes: a typo of "180s" for "180d" must
// not empty the farm.
inline constexpr absl::Duration kMinPruneAge = absl::Hours(1);

// The options of `req` at time `now`; kInvalidArgument for an older_than
// below kMinPruneAge or a keep_per_series below kMinKeepPerSeries.
absl::StatusOr<storage::PruneOptions> PruneOptionsOf(const pb::PruneRequest& req, absl::Time now);

class RetentionService {
 public:
  explicit RetentionService(storage::RetentionStore* store,
                            std::function<absl::Time()> clock = absl::Now)
      : store_(store), clock_(std::move(clock)) {}

  absl::StatusOr<pb::PruneResponse> Prune(const pb::PruneRequest& req);

 private:
  storage::RetentionStore* const store_;
  const std::function<absl::Time()> clock_;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_RETENTION_SERVICE_H_
