#include "lib/storage/pg/pg_matrix_store.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "lib/storage/pg/pg_raw_outputs.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/pg/pg_samples.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {
namespace {

// Below this many jobs a submit leaves the statistics to autovacuum.
constexpr double kAnalyzeAfterJobs = 1000;
// Workload params this large (as JSON) are stored once per matrix.
constexpr size_t kShareParamsBytes = 256;

}  // namespace

PgMatrixStore::PgMatrixStore(PgPool* pool) : pool_(pool) {}

absl::StatusOr<CreatedMatrix> PgMatrixStore::CreateMatrix(const NewMatrix& m) {
  return pool_->Call<CreatedMatrix>([&](pqxx::connection& c) -> absl::StatusOr<CreatedMatrix> {
    pqxx::work w(c);
    if (!m.idempotency_key.empty()) {
      pqxx::result ex =
          w.exec_params("SELECT id FROM matrices WHERE idempotency_key = $1", m.idempotency_key);
      if (!ex.empty()) {
        absl::StatusOr<pb::Matrix> mat = LoadMatrix(w, ex[0][0].as<int64_t>());
        if (!mat.ok()) return mat.status();
        return CreatedMatrix{*mat, 0, true};
      }
    }
    const pb::Matrix& mm = m.matrix;
    pqxx::row r = w.exec_params1(
        "INSERT INTO matrices (name, spec_yaml, catalog, platform, executor, analysis_bisect, "
        "submitted_by, idempotency_key, total_jobs, model_set, labels) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''), $9, $10::jsonb, $11::jsonb) "
        "RETURNING id",
        mm.name(), mm.spec_yaml(), mm.catalog(), mm.platform(), static_cast<int>(mm.executor()),
        m.analysis_bisect, mm.submitted_by(), m.idempotency_key,
        static_cast<int64_t>(m.jobs.size()),
        MapToJson(google::protobuf::Map<std::string, std::string>(m.model_set.begin(),
                                                                  m.model_set.end())),
        MapToJson(
            google::protobuf::Map<std::string, std::string>(m.labels.begin(), m.labels.end())));
    const int64_t id = r[0].as<int64_t>();
    // A commit whose jobs all carry one model_set (what expansion makes) has
    // it stored once and its jobs' rows hold none; otherwise each of its
    // jobs keeps its own in its row. Either way the read (kJobCols) is exact.
    const auto same_set = [](const pb::Job& a, const pb::Job& b) {
      if (a.model_set_size() != b.model_set_size()) return false;
      for (const auto& [k, v] : a.model_set()) {
        auto it = b.model_set().find(k);
        if (it == b.model_set().end() || it->second != v) return false;
      }
      return true;
    };
    std::map<int32_t, const pb::Job*> shared;  // nullptr: the commit's jobs differ
    for (const pb::Job& j : m.jobs) {
      auto [it, first] = shared.emplace(j.commit_index(), &j);
      if (!first && it->second != nullptr && !same_set(*it->second, j)) it->second = nullptr;
    }
    {
      pqxx::stream_to s(w, "matrix_commit_settings",
                        std::vector<std::string>{"matrix_id", "commit_index", "settings"});
      for (const auto& [index, j] : shared) {
        if (j != nullptr) s << std::make_tuple(id, index, MapToJson(j->model_set()));
      }
      s.complete();
    }
    // Params of kShareParamsBytes or more are stored once per matrix in
    // matrix_workloads and referenced by index; smaller ones stay in the row
    // (the claim then reads them without a lookup).
    std::map<std::string, int32_t> shared_params;  // params JSON -> workload_index
    {
      pqxx::stream_to s(
          w, "jobs",
          std::vector<std::string>{"matrix_id", "catalog", "commit_id", "commit_index", "platform",
                                   "workload", "params", "mode", "repeat", "executor", "priority",
                                   "kind", "max_attempts", "model_set", "seed", "fair_rank",
                                   "workload_index", "waits_for"});
      int32_t rank = 0;
      for (const pb::Job& j : m.jobs) {
        std::string params = MapToJson(j.workload().params());
        int32_t workload_index = -1;
        // A build job's params stay in its row: the unique index
        // jobs_live_build_key_idx reads its kernel config there.
        if (params.size() >= kShareParamsBytes && j.executor() != pb::EXECUTOR_KBUILD) {
          workload_index =
              shared_params.emplace(std::move(params), static_cast<int32_t>(shared_params.size()))
                  .first->second;
          params = "{}";
        }
        s << std::make_tuple(
            id, j.catalog(), j.commit_id(), j.commit_index(), j.platform(), j.workload().name(),
            params, static_cast<int>(j.mode()), j.repeat(), static_cast<int>(j.executor()),
            j.priority(), static_cast<int>(j.kind()), j.max_attempts(),
            shared.at(j.commit_index()) != nullptr ? std::string("{}") : MapToJson(j.model_set()),
            static_cast<int64_t>(j.seed()), rank++, workload_index, j.waits_for_job());
      }
      s.complete();
    }
    if (!shared_params.empty()) {
      pqxx::stream_to s(w, "matrix_workloads",
                        std::vector<std::string>{"matrix_id", "workload_index", "params"});
      for (const auto& [params, index] : shared_params) s << std::make_tuple(id, index, params);
      s.complete();
    }
    // A submit that grows the queue by a tenth or more refreshes the jobs
    // statistics now rather than at autovacuum's next pass (up to a minute
    // away): planned on the statistics of a near-empty table, the claim
    // sorts the whole queue (a 200-job claim took 700 ms at 200,000 queued
    // jobs, 10 ms with current statistics). ANALYZE holds a SHARE UPDATE
    // EXCLUSIVE lock on jobs until the submit commits: two large submits
    // analyze one after the other; claims and reports are not blocked.
    const double n = static_cast<double>(m.jobs.size());
    const double known =
        w.exec1("SELECT reltuples FROM pg_class WHERE oid = 'jobs'::regclass")[0].as<double>();
    if (n >= kAnalyzeAfterJobs && n >= 0.1 * std::max(0.0, known)) w.exec("ANALYZE jobs");
    absl::StatusOr<pb::Matrix> mat = LoadMatrix(w, id);
    if (!mat.ok()) return mat.status();
    w.commit();
    return CreatedMatrix{*mat, static_cast<int64_t>(m.jobs.size()), false};
  });
}

absl::StatusOr<pb::Matrix> PgMatrixStore::GetMatrix(int64_t id) {
  return pool_->Call<pb::Matrix>([&](pqxx::connection& c) -> absl::StatusOr<pb::Matrix> {
    pqxx::read_transaction t(c);
    return LoadMatrix(t, id);
  });
}

absl::StatusOr<std::vector<pb::JobFailure>> PgMatrixStore::ListFailures(int64_t matrix_id,
                                                                        int limit) {
  using Out = std::vector<pb::JobFailure>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    for (const pqxx::row& r :
         t.exec_params("SELECT state, failure_reason, count(*), min(id) FROM jobs "
                       "WHERE matrix_id = $1 AND state IN (4, 5) GROUP BY state, failure_reason "
                       "ORDER BY count(*) DESC, min(id) LIMIT $2",
                       matrix_id, limit)) {
      pb::JobFailure& f = out.emplace_back();
      f.set_state(static_cast<pb::JobState>(r[0].as<int>()));
      f.set_reason(r[1].as<std::string>());
      f.set_jobs(r[2].as<int64_t>());
      f.set_first_job_id(r[3].as<int64_t>());
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::JobProgress>> PgMatrixStore::ListBuilding(int64_t matrix_id) {
  using Out = std::vector<pb::JobProgress>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    for (const pqxx::row& r : t.exec_params(
             "SELECT j.id, j.attempt, j.progress::text, j.commit_id, j.platform FROM jobs j "
             "WHERE j.state = 2 AND j.progress IS NOT NULL AND (j.matrix_id = $1 OR j.id IN "
             "(SELECT DISTINCT w.waits_for FROM jobs w WHERE w.matrix_id = $1 AND w.state = 1 "
             "AND w.waits_for <> 0)) ORDER BY j.id LIMIT $2",
             matrix_id, kMaxBuilding)) {
      pb::JobProgress p;
      if (!JsonToProgress(r[2].as<std::string>(), &p) || p.attempt() != r[1].as<int>()) continue;
      p.set_job_id(r[0].as<int64_t>());
      p.set_commit_id(r[3].as<std::string>());
      p.set_platform(r[4].as<std::string>());
      out.push_back(std::move(p));
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::Matrix>> PgMatrixStore::ListMatrices(int limit, int64_t before_id) {
  using Out = std::vector<pb::Matrix>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    // Page the matrices first, then count each one's jobs through the
    // (matrix_id, state) index, instead of aggregating every job in the table.
    for (const pqxx::row& r : t.exec_params(
             "SELECT id FROM matrices WHERE ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $1", limit,
             before_id)) {
      absl::StatusOr<pb::Matrix> m = LoadMatrix(t, r[0].as<int64_t>());
      if (m.ok()) out.push_back(*std::move(m));
    }
    return out;
  });
}

absl::StatusOr<std::pair<pb::Matrix, int64_t>> PgMatrixStore::CancelMatrix(
    int64_t id, const std::string& reason) {
  using Out = std::pair<pb::Matrix, int64_t>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::work w(c);
    pqxx::result m = w.exec_params(
        "UPDATE matrices SET cancelled = true, cancel_reason = $2 WHERE id = $1 RETURNING id", id,
        reason);
    if (m.empty()) return absl::NotFoundError(absl::StrCat("matrix ", id, " not found"));
    // The lease token stays: a heartbeat carrying it finds the job no longer
    // leased and is told "revoked"; a result carrying it is stale.
    pqxx::result j = w.exec_params(
        "UPDATE jobs SET state = 5, finished_at = now(), lease_expires_at = NULL, "
        "failure_reason = 'cancelled' || CASE WHEN $2 <> '' THEN ': ' || $2 ELSE '' END "
        "WHERE matrix_id = $1 AND state IN (1, 2)",
        id, reason);
    const int64_t n = static_cast<int64_t>(j.affected_rows());
    absl::StatusOr<pb::Matrix> mat = LoadMatrix(w, id);
    if (!mat.ok()) return mat.status();
    w.commit();
    return Out{*mat, n};
  });
}

absl::StatusOr<std::vector<pb::Result>> PgMatrixStore::ListResults(int64_t matrix_id,
                                                                   int64_t after_job_id, int limit,
                                                                   bool include_raw,
                                                                   int64_t max_raw_bytes) {
  using Out = std::vector<pb::Result>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    JobRowDecoder decode;
    // The page's keys first, with the raw bytes before each (octet_length
    // reads an inline value's size without fetching it; an out-of-row one
    // has its size stored), then only the rows within the byte bound.
    for (const pqxx::row& r : t.exec_params(
             std::string("WITH keys AS (SELECT job_id, attempt, coalesce((SELECT o.size "
                         "  FROM raw_outputs o WHERE o.digest = raw_digest), "
                         "  octet_length(raw_output)) AS n "
                         "  FROM results WHERE matrix_id = $1 AND job_id > $2 "
                         "  ORDER BY job_id, attempt LIMIT $3), "
                         "page AS (SELECT job_id, attempt, n, "
                         "  sum(n) OVER (ORDER BY job_id, attempt) AS upto, "
                         "  row_number() OVER (ORDER BY job_id, attempt) AS k FROM keys) "
                         "SELECT ") +
                 kJobCols + ", r.attempt, r.agent, " + kResultSamplesJsonSql +
                 ", CASE WHEN $4 THEN r.raw_output ELSE '' "
                 "END, r.raw_format, coalesce(h.host, '{}')::text, r.tool_version, r.wall_time_ns, "
                 "(extract(epoch from r.finished_at) * 1000000)::bigint, p.n, r.monitors::text, "
                 "(extract(epoch from r.raw_pruned_at) * 1000000)::bigint, "
                 "CASE WHEN $4 THEN o.zstd END "
                 "FROM page p JOIN results r ON r.job_id = p.job_id AND r.attempt = p.attempt "
                 "JOIN jobs j ON j.id = r.job_id LEFT JOIN raw_outputs o ON o.digest = "
                 "r.raw_digest LEFT JOIN result_hosts h ON h.id = r.host_id "
                 "WHERE p.k = 1 OR NOT $4 OR $5 <= 0 OR p.upto <= $5 "
                 "ORDER BY r.job_id, r.attempt",
             matrix_id, after_job_id, limit, include_raw, max_raw_bytes)) {
      pb::Result res;
      *res.mutable_job() = decode.Decode(r, 0);
      const int b = kJobColCount;
      res.set_job_id(res.job().id());
      res.set_attempt(r[b + 0].as<int>());
      res.set_agent(r[b + 1].as<std::string>());
      JsonToSamples(r[b + 2].as<std::string>(), res.mutable_samples());
      if (r[b + 12].is_null()) {
        res.set_raw_output(r[b + 3].as<std::string>());
      } else {
        absl::StatusOr<std::string> raw = UnpackRaw(r[b + 12], r[b + 9].as<int64_t>());
        if (!raw.ok()) return raw.status();
        res.set_raw_output(*std::move(raw));
      }
      res.set_raw_format(r[b + 4].as<std::string>());
      JsonToHost(r[b + 5].as<std::string>(), res.mutable_host());
      res.set_tool_version(r[b + 6].as<std::string>());
      const int64_t ns = r[b + 7].as<int64_t>();
      res.mutable_wall_time()->set_seconds(ns / 1000000000);
      res.mutable_wall_time()->set_nanos(static_cast<int32_t>(ns % 1000000000));
      SetMicros(r[b + 8].as<int64_t>(), res.mutable_finished_at());
      res.set_raw_size(r[b + 9].as<int64_t>());
      pb::Monitors monitors;
      JsonToMonitors(r[b + 10].as<std::string>(), &monitors);
      if (monitors.ByteSizeLong() > 0) *res.mutable_monitors() = std::move(monitors);
      if (!r[b + 11].is_null()) SetMicros(r[b + 11].as<int64_t>(), res.mutable_raw_pruned_at());
      out.push_back(std::move(res));
    }
    return out;
  });
}

absl::StatusOr<RawOutputSlice> PgMatrixStore::ReadRawOutput(int64_t job_id, int attempt,
                                                            int64_t from_char, int64_t max_chars) {
  return pool_->Call<RawOutputSlice>([&](pqxx::connection& c) -> absl::StatusOr<RawOutputSlice> {
    pqxx::read_transaction t(c);
    // substr counts characters (1-based); octet_length reads the stored
    // size without fetching the value. An out-of-row output is read whole
    // (a few kB compressed) and sliced here alike.
    pqxx::result r = t.exec_params(
        "SELECT substr(r.raw_output, $3::int + 1, $4::int), "
        "coalesce(o.size, octet_length(r.raw_output)), r.raw_format, "
        "r.attempt, (extract(epoch from r.raw_pruned_at) * 1000000)::bigint, o.zstd "
        "FROM results r LEFT JOIN raw_outputs o ON o.digest = r.raw_digest "
        "WHERE r.job_id = $1 AND ($2 = 0 OR r.attempt = $2) "
        "ORDER BY r.attempt DESC LIMIT 1",
        job_id, attempt, from_char, max_chars);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "no result for job ", job_id, attempt > 0 ? absl::StrCat(" attempt ", attempt) : ""));
    }
    RawOutputSlice out;
    out.total_bytes = r[0][1].as<int64_t>();
    if (r[0][5].is_null()) {
      out.data = r[0][0].as<std::string>();
    } else {
      absl::StatusOr<std::string> raw = UnpackRaw(r[0][5], out.total_bytes);
      if (!raw.ok()) return raw.status();
      out.data = Utf8Slice(*raw, from_char, max_chars);
    }
    out.raw_format = r[0][2].as<std::string>();
    out.attempt = r[0][3].as<int>();
    if (!r[0][4].is_null()) out.raw_pruned_at = absl::FromUnixMicros(r[0][4].as<int64_t>());
    return out;
  });
}

absl::StatusOr<std::vector<pb::Job>> PgMatrixStore::LiveBuildJobs(
    const std::string& catalog, const std::vector<std::string>& commits) {
  using Out = std::vector<pb::Job>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    JobRowDecoder decode;
    for (const pqxx::row& r :
         t.exec_params(std::string("SELECT ") + kJobCols +
                           " FROM jobs j WHERE j.executor = 4 AND j.catalog = $1 "
                           "AND j.commit_id = ANY($2::text[]) AND j.state IN (1, 2, 3) "
                           "ORDER BY j.id",
                       catalog, QuotedArrayLiteral(commits))) {
      out.push_back(decode.Decode(r));
    }
    return out;
  });
}

}  // namespace farm::storage
