#include "lib/storage/memory/memory_database.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {

MemoryDatabase::MemoryDatabase(std::function<absl::Time()> clock) : clock_(std::move(clock)) {}

absl::Time MemoryDatabase::Now() const {
  // timestamptz keeps microseconds.
  return absl::FromUnixMicros(absl::ToUnixMicros(clock_()));
}

uint64_t MemoryDatabase::AddObserver(Observer fn) {
  absl::MutexLock lock(&observers_mu_);
  const uint64_t h = next_observer_++;
  observers_.emplace(h, std::move(fn));
  return h;
}

void MemoryDatabase::RemoveObserver(uint64_t handle) {
  absl::MutexLock lock(&observers_mu_);
  observers_.erase(handle);
}

void MemoryDatabase::Publish(const Changes& changes) {
  absl::MutexLock lock(&observers_mu_);
  for (const auto& [h, fn] : observers_) fn(changes);
}

pb::Job JobFromRow(const JobRow& row) {
  pb::Job j = row.job;
  if (row.shared_model_set != nullptr) {
    for (const auto& [k, v] : *row.shared_model_set) (*j.mutable_model_set())[k] = v;
  }
  j.clear_lease_expires_at();
  if (row.lease_expires_at.has_value())
    SetTime(*row.lease_expires_at, j.mutable_lease_expires_at());
  return j;
}

bool BuildDone(const MemoryDatabase::Tables& t, const pb::Job& job) {
  if (job.waits_for_job() == 0) return true;
  auto it = t.jobs.find(job.waits_for_job());
  return it != t.jobs.end() && it->second.job.state() == pb::JOB_STATE_SUCCEEDED;
}

absl::StatusOr<pb::Matrix> MatrixFromTables(const MemoryDatabase::Tables& t, int64_t id) {
  auto it = t.matrices.find(id);
  if (it == t.matrices.end()) return absl::NotFoundError(absl::StrCat("matrix ", id, " not found"));
  const MatrixRow& row = it->second;
  pb::Matrix m;
  m.set_id(row.id);
  m.set_name(row.name);
  m.set_spec_yaml(row.spec_yaml);
  m.set_catalog(row.catalog);
  m.set_platform(row.platform);
  m.set_executor(row.executor);
  m.set_submitted_by(row.submitted_by);
  SetTime(row.created_at, m.mutable_created_at());
  pb::MatrixCounts* c = m.mutable_counts();
  int64_t finished = 0;
  for (const auto& [job_id, j] : t.jobs) {
    if (j.job.matrix_id() != id) continue;
    c->set_total(c->total() + 1);
    switch (j.job.state()) {
      case pb::JOB_STATE_QUEUED:
        c->set_queued(c->queued() + 1);
        if (!BuildDone(t, j.job)) c->set_waiting_for_build(c->waiting_for_build() + 1);
        break;
      case pb::JOB_STATE_LEASED:
        c->set_leased(c->leased() + 1);
        break;
      case pb::JOB_STATE_SUCCEEDED:
        c->set_succeeded(c->succeeded() + 1);
        break;
      case pb::JOB_STATE_FAILED:
        c->set_failed(c->failed() + 1);
        break;
      case pb::JOB_STATE_CANCELLED:
        c->set_cancelled(c->cancelled() + 1);
        break;
      default:
        break;
    }
    if (j.finished_at.has_value())
      finished = std::max(finished, absl::ToUnixMicros(*j.finished_at));
  }
  DeriveMatrixState(row.cancelled, finished, &m);
  if (auto a = t.analyzer_state.find(absl::StrCat("matrix:", id)); a != t.analyzer_state.end())
    m.set_analysis(AnalysisSummary(a->second));
  return m;
}

}  // namespace farm::storage
