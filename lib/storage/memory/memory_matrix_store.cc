#include "lib/storage/memory/memory_matrix_store.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "lib/storage/row_codec.h"
#include "lib/storage/run_eligibility.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"

namespace farm::storage {

using Tables = MemoryDatabase::Tables;
using Changes = MemoryDatabase::Changes;

namespace {

// What the database's unique index jobs_live_build_key_idx refuses: a second
// live kernel build job of one (catalog, commit, platform, kernel config).
absl::Status CheckOneLiveBuildPerKey(const Tables& t, const NewMatrix& m) {
  std::set<::farm::proto::BuildKey> live;
  for (const auto& [id, j] : t.jobs) {
    const pb::Job& job = j.job;
    if (job.executor() == pb::EXECUTOR_KBUILD && IsLiveBuildState(job.state())) {
      live.insert(::farm::proto::BuildKeyOf(job));
    }
  }
  for (const pb::Job& j : m.jobs) {
    if (j.executor() != pb::EXECUTOR_KBUILD) continue;
    if (!live.insert(::farm::proto::BuildKeyOf(j)).second) {
      const std::string config = ::farm::proto::JobConfigId(j);
      return absl::AlreadyExistsError(absl::StrCat(
          "a live kernel build job of ", j.catalog(), " ", j.commit_id(), " for ", j.platform(),
          config.empty() ? "" : absl::StrCat(" with kernel config ", config),
          " exists (jobs_live_build_key_idx)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CreatedMatrix> MemoryMatrixStore::CreateMatrix(const NewMatrix& m) {
  return db_->Write([&](Tables& t, Changes&) -> absl::StatusOr<CreatedMatrix> {
    if (!m.idempotency_key.empty()) {
      for (const auto& [id, row] : t.matrices) {
        if (row.idempotency_key != m.idempotency_key) continue;
        absl::StatusOr<pb::Matrix> mat = MatrixFromTables(t, id);
        if (!mat.ok()) return mat.status();
        return CreatedMatrix{*mat, 0, true};
      }
    }
    if (absl::Status s = CheckOneLiveBuildPerKey(t, m); !s.ok()) return s;
    const absl::Time now = db_->Now();
    const pb::Matrix& mm = m.matrix;
    MatrixRow row;
    row.id = ++t.last_matrix_id;
    row.name = mm.name();
    row.spec_yaml = mm.spec_yaml();
    row.catalog = mm.catalog();
    row.platform = mm.platform();
    row.executor = mm.executor();
    row.analysis_bisect = m.analysis_bisect;
    row.submitted_by = mm.submitted_by();
    row.idempotency_key = m.idempotency_key;
    row.created_at = now;
    const int64_t id = row.id;
    t.matrices.emplace(id, std::move(row));
    // The COPY's columns; the rest take the column defaults.
    auto shared = m.model_set.empty()
                      ? nullptr
                      : std::make_shared<const std::map<std::string, std::string>>(m.model_set);
    int32_t rank = 0;
    for (const pb::Job& j : m.jobs) {
      JobRow r;
      r.fair_rank = rank++;
      r.shared_model_set = shared;
      pb::Job& job = r.job;
      job.set_id(++t.last_job_id);
      job.set_matrix_id(id);
      job.set_catalog(j.catalog());
      job.set_commit_id(j.commit_id());
      job.set_commit_index(j.commit_index());
      job.set_platform(j.platform());
      job.mutable_workload()->set_name(j.workload().name());
      JsonToMap(MapToJson(j.workload().params()), job.mutable_workload()->mutable_params());
      job.set_mode(j.mode());
      job.set_repeat(j.repeat());
      job.set_executor(j.executor());
      job.set_priority(j.priority());
      job.set_kind(j.kind());
      job.set_state(pb::JOB_STATE_QUEUED);
      job.set_max_attempts(j.max_attempts());
      JsonToMap(MapToJson(j.model_set()), job.mutable_model_set());
      job.set_seed(j.seed());
      job.set_waits_for_job(j.waits_for_job());
      // The matrix's labels, as the PostgreSQL read joins them in.
      job.mutable_labels()->insert(m.labels.begin(), m.labels.end());
      r.not_before = now;
      r.created_at = now;
      t.jobs.emplace(job.id(), std::move(r));
    }
    absl::StatusOr<pb::Matrix> mat = MatrixFromTables(t, id);
    if (!mat.ok()) return mat.status();
    return CreatedMatrix{*mat, static_cast<int64_t>(m.jobs.size()), false};
  });
}

absl::StatusOr<pb::Matrix> MemoryMatrixStore::GetMatrix(int64_t id) {
  return db_->Read([&](const Tables& t) { return MatrixFromTables(t, id); });
}

absl::StatusOr<std::vector<pb::JobFailure>> MemoryMatrixStore::ListFailures(int64_t matrix_id,
                                                                            int limit) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::JobFailure>> {
    std::map<std::pair<int, std::string>, pb::JobFailure> groups;
    for (const auto& [id, row] : t.jobs) {  // id order: the first job of a group comes first
      const pb::Job& j = row.job;
      if (j.matrix_id() != matrix_id ||
          (j.state() != pb::JOB_STATE_FAILED && j.state() != pb::JOB_STATE_CANCELLED)) {
        continue;
      }
      pb::JobFailure& f = groups[{j.state(), j.failure_reason()}];
      if (f.jobs() == 0) {
        f.set_state(j.state());
        f.set_reason(j.failure_reason());
        f.set_first_job_id(id);
      }
      f.set_jobs(f.jobs() + 1);
    }
    std::vector<pb::JobFailure> out;
    for (auto& [key, f] : groups) out.push_back(std::move(f));
    std::sort(out.begin(), out.end(), [](const pb::JobFailure& a, const pb::JobFailure& b) {
      return a.jobs() != b.jobs() ? a.jobs() > b.jobs() : a.first_job_id() < b.first_job_id();
    });
    if (static_cast<int>(out.size()) > limit) out.resize(limit);
    return out;
  });
}

absl::StatusOr<std::vector<pb::JobProgress>> MemoryMatrixStore::ListBuilding(int64_t matrix_id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::JobProgress>> {
    std::set<int64_t> ids;
    for (const auto& [id, row] : t.jobs) {
      if (row.job.matrix_id() != matrix_id) continue;
      ids.insert(id);
      if (row.job.state() == pb::JOB_STATE_QUEUED && row.job.waits_for_job() != 0) {
        ids.insert(row.job.waits_for_job());
      }
    }
    std::vector<pb::JobProgress> out;
    for (int64_t id : ids) {
      auto it = t.jobs.find(id);
      if (it == t.jobs.end() || it->second.job.state() != pb::JOB_STATE_LEASED) continue;
      const JobRow& row = it->second;
      if (!row.progress.has_value() || row.progress->attempt() != row.job.attempt()) continue;
      pb::JobProgress& p = out.emplace_back(*row.progress);
      p.set_job_id(id);
      p.set_commit_id(row.job.commit_id());
      p.set_platform(row.job.platform());
      if (static_cast<int>(out.size()) == kMaxBuilding) break;
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::Matrix>> MemoryMatrixStore::ListMatrices(int limit,
                                                                        int64_t before_id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::Matrix>> {
    std::vector<pb::Matrix> out;
    for (auto it = t.matrices.rbegin(); it != t.matrices.rend(); ++it) {  // id DESC
      if (static_cast<int>(out.size()) >= limit) break;
      if (before_id != 0 && it->first >= before_id) continue;
      absl::StatusOr<pb::Matrix> m = MatrixFromTables(t, it->first);
      if (m.ok()) out.push_back(*std::move(m));
    }
    return out;
  });
}

absl::StatusOr<std::pair<pb::Matrix, int64_t>> MemoryMatrixStore::CancelMatrix(
    int64_t id, const std::string& reason) {
  using Out = std::pair<pb::Matrix, int64_t>;
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<Out> {
    auto m = t.matrices.find(id);
    if (m == t.matrices.end())
      return absl::NotFoundError(absl::StrCat("matrix ", id, " not found"));
    m->second.cancelled = true;
    m->second.cancel_reason = reason;
    const absl::Time now = db_->Now();
    int64_t n = 0;
    // The lease token stays: a heartbeat carrying it finds the job no longer
    // leased and is told "revoked"; a result carrying it is stale.
    for (auto& [job_id, j] : t.jobs) {
      if (j.job.matrix_id() != id) continue;
      if (j.job.state() != pb::JOB_STATE_QUEUED && j.job.state() != pb::JOB_STATE_LEASED) continue;
      j.job.set_state(pb::JOB_STATE_CANCELLED);
      j.finished_at = now;
      j.lease_expires_at.reset();
      j.job.set_failure_reason(reason.empty() ? "cancelled" : "cancelled: " + reason);
      ++n;
    }
    if (n > 0) changes.insert(id);
    absl::StatusOr<pb::Matrix> mat = MatrixFromTables(t, id);
    if (!mat.ok()) return mat.status();
    return Out{*mat, n};
  });
}

absl::StatusOr<std::vector<pb::Result>> MemoryMatrixStore::ListResults(int64_t matrix_id,
                                                                       int64_t after_job_id,
                                                                       int limit, bool include_raw,
                                                                       int64_t max_raw_bytes) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::Result>> {
    std::vector<pb::Result> out;
    int64_t raw_bytes = 0;
    // results are keyed (job_id, attempt): ORDER BY r.job_id, r.attempt.
    for (auto it = t.results.upper_bound({after_job_id, std::numeric_limits<int>::max()});
         it != t.results.end(); ++it) {
      if (static_cast<int>(out.size()) >= limit) break;
      const ResultRow& r = it->second;
      if (r.matrix_id != matrix_id) continue;
      const auto n = static_cast<int64_t>(r.raw_output.size());
      if (include_raw && max_raw_bytes > 0 && !out.empty() && raw_bytes + n > max_raw_bytes) break;
      raw_bytes += n;
      auto job = t.jobs.find(it->first.first);
      if (job == t.jobs.end()) continue;
      pb::Result res;
      *res.mutable_job() = JobFromRow(job->second);
      res.set_job_id(it->first.first);
      res.set_attempt(it->first.second);
      res.set_agent(r.agent);
      *res.mutable_samples() = r.samples;
      res.set_raw_output(include_raw ? r.raw_output : "");
      res.set_raw_size(n);
      res.set_raw_format(r.raw_format);
      *res.mutable_host() = r.host;
      res.set_tool_version(r.tool_version);
      if (r.monitors.ByteSizeLong() > 0) *res.mutable_monitors() = r.monitors;
      res.mutable_wall_time()->set_seconds(r.wall_time_ns / 1000000000);
      res.mutable_wall_time()->set_nanos(static_cast<int32_t>(r.wall_time_ns % 1000000000));
      SetTime(r.finished_at, res.mutable_finished_at());
      if (r.raw_pruned_at.has_value()) SetTime(*r.raw_pruned_at, res.mutable_raw_pruned_at());
      out.push_back(std::move(res));
    }
    return out;
  });
}

absl::StatusOr<RawOutputSlice> MemoryMatrixStore::ReadRawOutput(int64_t job_id, int attempt,
                                                                int64_t from_char,
                                                                int64_t max_chars) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<RawOutputSlice> {
    // results are keyed (job_id, attempt): the latest is the last of the job's.
    auto it = attempt > 0 ? t.results.find({job_id, attempt})
                          : t.results.lower_bound({job_id + 1, std::numeric_limits<int>::min()});
    if (attempt <= 0) {
      it = it == t.results.begin() ? t.results.end() : std::prev(it);
      if (it != t.results.end() && it->first.first != job_id) it = t.results.end();
    }
    if (it == t.results.end()) {
      return absl::NotFoundError(absl::StrCat(
          "no result for job ", job_id, attempt > 0 ? absl::StrCat(" attempt ", attempt) : ""));
    }
    const std::string& raw = it->second.raw_output;
    // Characters as PostgreSQL's substr counts them in UTF-8: a byte that is
    // not a continuation byte (10xxxxxx) starts one.
    auto skip = [&raw](size_t at, int64_t chars) {
      while (at < raw.size()) {
        if ((static_cast<unsigned char>(raw[at]) & 0xC0) != 0x80 && chars-- == 0) break;
        ++at;
      }
      return at;
    };
    const size_t begin = skip(0, from_char);
    const size_t end = skip(begin, max_chars);
    RawOutputSlice out;
    out.data = raw.substr(begin, end - begin);
    out.total_bytes = static_cast<int64_t>(raw.size());
    out.raw_format = it->second.raw_format;
    out.attempt = it->first.second;
    out.raw_pruned_at = it->second.raw_pruned_at;
    return out;
  });
}

absl::StatusOr<std::vector<pb::Job>> MemoryMatrixStore::LiveBuildJobs(
    const std::string& catalog, const std::vector<std::string>& commits) {
  const std::set<std::string> wanted(commits.begin(), commits.end());
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::Job>> {
    std::vector<pb::Job> out;
    for (const auto& [id, j] : t.jobs) {
      const pb::Job& job = j.job;
      if (job.executor() == pb::EXECUTOR_KBUILD && job.catalog() == catalog &&
          wanted.count(job.commit_id()) != 0 && IsLiveBuildState(job.state())) {
        out.push_back(JobFromRow(j));
      }
    }
    return out;
  });
}

}  // namespace farm::storage
