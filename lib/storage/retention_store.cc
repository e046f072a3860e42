#include "lib/storage/retention_store.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {
namespace {

constexpr int kListedRegressionMatrices = 100;

// The ids among the newest `depth` finished matrices of any series (the
// analyzer's history holds only matrices whose jobs all ended).
std::set<int64_t> NewestPerSeries(const std::vector<MatrixRetentionFacts>& matrices, int depth) {
  std::map<std::string, std::vector<int64_t>> by_series;
  for (const MatrixRetentionFacts& m : matrices) {
    if (!m.finished) continue;
    for (const std::string& s : m.series) by_series[s].push_back(m.id);
  }
  std::set<int64_t> keep;
  for (auto& entry : by_series) {
    std::vector<int64_t>& ids = entry.second;
    std::sort(ids.begin(), ids.end(), std::greater<int64_t>());
    const size_t n = std::min(ids.size(), static_cast<size_t>(depth));
    keep.insert(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return keep;
}

// `ids` in order, cut where a batch's jobs reach `budget`.
std::vector<std::vector<int64_t>> CutBatches(const std::vector<int64_t>& ids,
                                             const std::map<int64_t, int64_t>& jobs,
                                             int64_t budget) {
  std::vector<std::vector<int64_t>> out;
  int64_t spent = budget;
  for (int64_t id : ids) {
    if (spent >= budget) {
      out.emplace_back();
      spent = 0;
    }
    out.back().push_back(id);
    auto it = jobs.find(id);
    spent += std::max<int64_t>(it == jobs.end() ? 0 : it->second, 1);
  }
  return out;
}

}  // namespace

void AddPruneCounts(const pb::PruneCounts& from, pb::PruneCounts* to) {
  to->set_matrices(to->matrices() + from.matrices());
  to->set_jobs(to->jobs() + from.jobs());
  to->set_results(to->results() + from.results());
  to->set_samples(to->samples() + from.samples());
  to->set_raw_outputs(to->raw_outputs() + from.raw_outputs());
  to->set_raw_bytes(to->raw_bytes() + from.raw_bytes());
}

absl::Status CheckPruneOptions(const PruneOptions& options) {
  if (options.history_depth < 1) return absl::InvalidArgumentError("history depth below 1");
  if (options.batch_jobs < 1) return absl::InvalidArgumentError("batch size below 1");
  return absl::OkStatus();
}

PrunePlan PlanPrune(const std::vector<MatrixRetentionFacts>& matrices,
                    const PruneOptions& options) {
  PrunePlan plan;
  pb::PruneResponse& r = plan.report;
  r.set_dry_run(options.dry_run);
  r.set_raw_only(options.raw_only);
  SetTime(options.cutoff, r.mutable_cutoff());
  r.set_history_depth(options.raw_only ? 0 : options.history_depth);
  const std::set<int64_t> newest =
      options.raw_only ? std::set<int64_t>() : NewestPerSeries(matrices, options.history_depth);
  std::map<int64_t, int64_t> jobs;
  for (const MatrixRetentionFacts& m : matrices) {
    jobs[m.id] = m.jobs;
    if (!m.finished) {
      r.set_unfinished(r.unfinished() + 1);
      continue;
    }
    if (m.finished_at >= options.cutoff) continue;
    if (m.regression) {
      r.set_kept_for_regressions(r.kept_for_regressions() + 1);
      if (r.kept_regression_matrices_size() < kListedRegressionMatrices) {
        r.add_kept_regression_matrices(m.id);
      }
    } else if (newest.count(m.id) != 0) {
      r.set_kept_for_history(r.kept_for_history() + 1);
    } else if (m.build_needed && !options.raw_only) {
      r.set_kept_for_builds(r.kept_for_builds() + 1);
    } else {
      plan.prune.push_back(m.id);
    }
  }
  std::sort(plan.prune.begin(), plan.prune.end());
  plan.batches = CutBatches(plan.prune, jobs, options.batch_jobs);
  std::sort(r.mutable_kept_regression_matrices()->begin(),
            r.mutable_kept_regression_matrices()->end());
  return plan;
}

}  // namespace farm::storage
