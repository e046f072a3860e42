#include "lib/storage/memory/memory_retention_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace farm::storage {
namespace {

using RetentionTables = MemoryDatabase::Tables;

bool RetentionTerminal(pb::JobState s) {
  return s == pb::JOB_STATE_SUCCEEDED || s == pb::JOB_STATE_FAILED || s == pb::JOB_STATE_CANCELLED;
}

// The analyser series of a bulk job (MatrixRetentionFacts::series).
std::string RetentionSeriesKey(const JobRow& row) {
  const pb::Job& j = row.job;
  std::string key = absl::StrCat(j.catalog(), "\x1f", static_cast<int>(j.executor()), "\x1f",
                                 j.platform(), "\x1f", j.workload().name(), "\x1e");
  const std::map<std::string, std::string> params(j.workload().params().begin(),
                                                  j.workload().params().end());
  for (const auto& kv : params) absl::StrAppend(&key, kv.first, "=", kv.second, "\x1f");
  absl::StrAppend(&key, "\x1e");
  if (row.shared_model_set != nullptr) {
    for (const auto& kv : *row.shared_model_set) {
      absl::StrAppend(&key, kv.first, "=", kv.second, "\x1f");
    }
  }
  return key;
}

std::string RegressionCellCommit(const std::string& catalog, const std::string& platform,
                                 const std::string& workload, const std::string& commit) {
  return absl::StrCat(catalog, "\x1f", platform, "\x1f", workload, "\x1f", commit);
}

// What the regressions reference: matrix ids, and (cell, commit) keys of
// their last good and first bad commits.
struct RegressionRefs {
  std::set<int64_t> matrices;
  std::set<std::string> cell_commits;
};

RegressionRefs CollectRegressionRefs(const RetentionTables& t) {
  RegressionRefs refs;
  for (const auto& entry : t.regressions) {
    const pb::Regression& g = entry.second.regression;
    refs.matrices.insert(g.matrix_id());
    refs.matrices.insert(g.confirm_matrix_id());
    for (const std::string& c : {g.last_good(), g.first_bad()}) {
      refs.cell_commits.insert(RegressionCellCommit(g.catalog(), g.platform(), g.workload(), c));
    }
  }
  return refs;
}

std::vector<MatrixRetentionFacts> GatherFacts(const RetentionTables& t) {
  const RegressionRefs refs = CollectRegressionRefs(t);
  std::set<int64_t> needed_builds;
  for (const auto& entry : t.jobs) {
    const pb::Job& j = entry.second.job;
    if (!RetentionTerminal(j.state()) && j.waits_for_job() != 0) {
      needed_builds.insert(j.waits_for_job());
    }
  }
  std::map<int64_t, MatrixRetentionFacts> by_id;
  for (const auto& entry : t.matrices) {
    MatrixRetentionFacts& f = by_id[entry.first];
    f.id = entry.first;
    f.finished = true;
    f.finished_at = entry.second.created_at;
    f.regression = refs.matrices.count(entry.first) != 0;
  }
  for (const auto& entry : t.jobs) {
    const pb::Job& j = entry.second.job;
    auto it = by_id.find(j.matrix_id());
    if (it == by_id.end()) continue;
    MatrixRetentionFacts& f = it->second;
    ++f.jobs;
    if (!RetentionTerminal(j.state())) f.finished = false;
    if (entry.second.finished_at.has_value()) {
      f.finished_at = std::max(f.finished_at, *entry.second.finished_at);
    }
    if (refs.cell_commits.count(RegressionCellCommit(j.catalog(), j.platform(), j.workload().name(),
                                                     j.commit_id())) != 0) {
      f.regression = true;
    }
    if (needed_builds.count(j.id()) != 0) f.build_needed = true;
    if (j.kind() == pb::JOB_KIND_BULK) f.series.insert(RetentionSeriesKey(entry.second));
  }
  std::vector<MatrixRetentionFacts> out;
  for (auto& entry : by_id) out.push_back(std::move(entry.second));
  return out;
}

// Adds matrix `id`'s rows (raw_only: its results with raw output, none if it has none) to `c`.
void CountMatrix(const RetentionTables& t, int64_t id, bool raw_only, pb::PruneCounts* c) {
  bool any = !raw_only;
  for (const auto& entry : t.results) {
    const ResultRow& r = entry.second;
    if (r.matrix_id != id || (raw_only && r.raw_output.empty())) continue;
    any = true;
    c->set_results(c->results() + 1);
    if (!raw_only) c->set_samples(c->samples() + r.samples.size());
    if (!r.raw_output.empty()) {
      c->set_raw_outputs(c->raw_outputs() + 1);
      c->set_raw_bytes(c->raw_bytes() + static_cast<int64_t>(r.raw_output.size()));
    }
  }
  if (!any) return;
  c->set_matrices(c->matrices() + 1);
  if (raw_only) return;
  for (const auto& entry : t.jobs) {
    if (entry.second.job.matrix_id() == id) c->set_jobs(c->jobs() + 1);
  }
}

void EraseMatrix(RetentionTables& t, int64_t id) {
  for (auto it = t.results.begin(); it != t.results.end();) {
    it = it->second.matrix_id == id ? t.results.erase(it) : std::next(it);
  }
  for (auto it = t.jobs.begin(); it != t.jobs.end();) {
    it = it->second.job.matrix_id() == id ? t.jobs.erase(it) : std::next(it);
  }
  t.matrices.erase(id);
  t.analyzer_state.erase(absl::StrCat("matrix:", id));
}

// Empties the raw output of matrix `id`'s results.
void DropRawOutput(RetentionTables& t, int64_t id, absl::Time now) {
  for (auto& entry : t.results) {
    ResultRow& r = entry.second;
    if (r.matrix_id != id || r.raw_output.empty()) continue;
    r.raw_output.clear();
    r.raw_pruned_at = now;
  }
}

// The matrices the policy prunes now (each batch checks again).
std::set<int64_t> StillPruned(const RetentionTables& t, const PruneOptions& options) {
  const PrunePlan again = PlanPrune(GatherFacts(t), options);
  return std::set<int64_t>(again.prune.begin(), again.prune.end());
}

// One batch of the plan in one transaction: the matrices the policy
// still prunes go (or lose their raw output) whole.
void PruneBatch(RetentionTables& t, const std::vector<int64_t>& batch, const PruneOptions& options,
                absl::Time now, pb::PruneCounts* counts) {
  const std::set<int64_t> still = StillPruned(t, options);
  for (int64_t id : batch) {
    if (still.count(id) == 0) continue;
    pb::PruneCounts c;
    CountMatrix(t, id, options.raw_only, &c);
    if (options.raw_only) {
      DropRawOutput(t, id, now);
    } else {
      EraseMatrix(t, id);
    }
    AddPruneCounts(c, counts);
  }
}

}  // namespace

absl::StatusOr<pb::PruneResponse> MemoryRetentionStore::Prune(const PruneOptions& options) {
  if (absl::Status st = CheckPruneOptions(options); !st.ok()) return st;
  const PrunePlan plan =
      db_->Read([&](const RetentionTables& t) { return PlanPrune(GatherFacts(t), options); });
  pb::PruneResponse report = plan.report;
  pb::PruneCounts* counts = report.mutable_pruned();
  if (options.dry_run) {
    db_->Read([&](const RetentionTables& t) {
      for (int64_t id : plan.prune) CountMatrix(t, id, options.raw_only, counts);
      return 0;
    });
    return report;
  }
  for (const std::vector<int64_t>& batch : plan.batches) {
    const absl::Time now = db_->Now();
    db_->Write([&](RetentionTables& t, MemoryDatabase::Changes&) {
      PruneBatch(t, batch, options, now, counts);
      return 0;
    });
    report.set_batches(report.batches() + 1);
  }
  return report;
}

}  // namespace farm::storage
