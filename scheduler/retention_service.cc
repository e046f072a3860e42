#include "scheduler/retention_service.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::scheduler {
namespace {

// Why a prune without keep_used deletes nothing: the matrices in reach of
// its cutoff that a regression or its bisect uses (a dry run's report).
absl::Status RefuseUsedMatrices(const pb::PruneResponse& dry) {
  const bool all_listed = dry.kept_regression_matrices_size() == dry.kept_for_regressions();
  return absl::FailedPreconditionError(absl::StrCat(
      dry.kept_for_regressions(), " of the matrices that finished before ",
      absl::FormatTime(absl::FromUnixSeconds(dry.cutoff().seconds())),
      " are used by regressions or their bisects (matrices ",
      absl::StrJoin(dry.kept_regression_matrices(), " "), all_listed ? "" : " ...",
      "); nothing was deleted. Prune again with --keep-used to keep them and delete the rest, "
      "or with an --older-than that reaches past them"));
}

}  // namespace

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
  if (!options->dry_run && !req.keep_used()) {
    // The store re-checks its keep rules in every transaction, so a
    // regression recorded after this plan still keeps its matrices.
    storage::PruneOptions plan = *options;
    plan.dry_run = true;
    absl::StatusOr<pb::PruneResponse> dry = store_->Prune(plan);
    if (!dry.ok()) return dry.status();
    if (dry->kept_for_regressions() > 0) {
      spdlog::warn("prune before {} refused: {} matrices in use", absl::FormatTime(plan.cutoff),
                   dry->kept_for_regressions());
      return RefuseUsedMatrices(*dry);
    }
  }
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
