#include "scheduler/retention_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace farm::scheduler {

absl::StatusOr<storage::PruneOptions> PruneOptionsOf(const pb::PruneRequest& req, absl::Time now) {
  const absl::Duration age =
      absl::Seconds(req.older_than().seconds()) + absl::Nanoseconds(req.older_than().nanos());
  if (age < kMinPruneAge) {
    return absl::InvalidArgumentError(absl::StrCat("older_than ", absl::FormatDuration(age),
                                                   " is below the least, ",
                                                   absl::FormatDuration(kMinPruneAge)));
  }
  const int keep = req.keep_per_series() == 0 ? kMinKeepPerSeries : req.keep_per_series();
  if (keep < kMinKeepPerSeries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "keep_per_series ", keep, " is below the analyzer's history depth, ", kMinKeepPerSeries));
  }
  storage::PruneOptions o;
  o.cutoff = now - age;
  o.raw_only = req.raw_only();
  o.dry_run = req.dry_run();
  o.history_depth = keep;
  return o;
}

absl::StatusOr<pb::PruneResponse> RetentionService::Prune(const pb::PruneRequest& req) {
  absl::StatusOr<storage::PruneOptions> options = PruneOptionsOf(req, clock_());
  if (!options.ok()) return options.status();
  absl::StatusOr<pb::PruneResponse> out = store_->Prune(*options);
  if (!out.ok()) return out.status();
  const pb::PruneCounts& c = out->pruned();
  spdlog::info("prune{}{} before {}: {} matrices, {} jobs, {} results, {} samples, {} raw bytes",
               req.dry_run() ? " (dry run)" : "", req.raw_only() ? " raw-only" : "",
               absl::FormatTime(options->cutoff), c.matrices(), c.jobs(), c.results(), c.samples(),
               c.raw_bytes());
  return out;
}

}  // namespace farm::scheduler
