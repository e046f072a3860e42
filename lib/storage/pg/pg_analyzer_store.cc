// libpqxx implementation of AnalyzerStore over the scheduler's schema.
#include "lib/storage/pg/pg_analyzer_store.h"

#include <map>

#include <pqxx/pqxx>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/row_codec.h"
#include "lib/storage/run_eligibility.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"

namespace farm::storage {

namespace {

namespace pb = ::iommufarm::v1;

// Lowest matrix id still to analyse, minus one: matrices at or below it are
// never looked at again (the cursor). Confirm/bisect matrices carry no bulk
// jobs and never hold it back.
constexpr const char* kAdvanceFloor =
    "INSERT INTO analyzer_state (key, value, updated_at) "
    "SELECT 'matrix_floor', to_jsonb(coalesce("
    "  (SELECT min(m.id) - 1 FROM matrices m WHERE m.id > $1 "
    "     AND NOT EXISTS (SELECT 1 FROM analyzer_state s WHERE s.key = 'matrix:' || m.id) "
    "     AND EXISTS (SELECT 1 FROM jobs j WHERE j.matrix_id = m.id AND j.kind = 1)),"
    "  (SELECT max(id) FROM matrices), 0)), now() "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()";

// Puts the new regression `reg_id` into its group (NewRegression.group_id):
// an existing one's range narrows to the overlap; a negative number opens a
// group on the first finding that carries it (`opened`: number -> id).
void JoinGroup(pqxx::work& w, const std::string& catalog, const NewRegression& n, int64_t reg_id,
               std::map<int64_t, int64_t>& opened) {
  if (n.group_id == 0) return;
  const RegressionFinding& f = n.finding;
  int64_t id = n.group_id;
  if (id < 0) {
    auto it = opened.find(id);
    if (it == opened.end()) {
      const pqxx::row g = w.exec_params1(
          "INSERT INTO regression_groups (catalog, last_good, last_good_index, first_bad, "
          "  first_bad_index) VALUES ($1, $2, $3, $4, $5) RETURNING id",
          catalog, f.last_good, f.last_good_index, f.first_bad, f.first_bad_index);
      it = opened.emplace(id, g[0].as<int64_t>()).first;
    }
    id = it->second;
  }
  w.exec_params(
      "UPDATE regression_groups SET "
      "  last_good = CASE WHEN $2 > last_good_index THEN $3 ELSE last_good END, "
      "  last_good_index = greatest(last_good_index, $2), "
      "  first_bad = CASE WHEN $4 < first_bad_index THEN $5 ELSE first_bad END, "
      "  first_bad_index = least(first_bad_index, $4), updated_at = now() WHERE id = $1",
      id, f.last_good_index, f.last_good, f.first_bad_index, f.first_bad);
  w.exec_params("UPDATE regressions SET group_id = $2 WHERE id = $1", reg_id, id);
}

// A regression_groups row (id, catalog, opened_at as epoch microseconds,
// last_good, last_good_index, first_bad, first_bad_index, leader_id, state,
// culprit_id) with its members.
constexpr const char* kGroupCols =
    "id, catalog, (extract(epoch from opened_at) * 1000000)::bigint, last_good, "
    "last_good_index, first_bad, first_bad_index, coalesce(leader_id, 0), state, culprit_id";

RegressionGroup GroupFromRow(pqxx::transaction_base& t, const pqxx::row& r) {
  RegressionGroup g;
  g.id = r[0].as<int64_t>();
  g.catalog = r[1].as<std::string>();
  g.opened_at = absl::FromUnixMicros(r[2].as<int64_t>());
  g.last_good = r[3].as<std::string>();
  g.last_good_index = r[4].as<int>();
  g.first_bad = r[5].as<std::string>();
  g.first_bad_index = r[6].as<int>();
  g.leader_id = r[7].as<int64_t>();
  g.state = r[8].as<std::string>();
  g.culprit_id = r[9].as<std::string>();
  for (const pqxx::row& m : t.exec_params(
           "SELECT g.id, g.state, g.strength, g.last_good, coalesce(lg.idx, 0), g.first_bad, "
           "  coalesce(fb.idx, 0), coalesce(b.state, ''), g.culprit_id, g.culprit_subject "
           "FROM regressions g LEFT JOIN bisects b ON b.id = g.bisect_id "
           "LEFT JOIN catalog_commits lg ON lg.catalog = g.catalog AND lg.id = g.last_good "
           "LEFT JOIN catalog_commits fb ON fb.catalog = g.catalog AND fb.id = g.first_bad "
           "WHERE g.group_id = $1 ORDER BY g.id",
           g.id)) {
    g.members.push_back({m[0].as<int64_t>(), m[1].as<int>(), m[2].as<double>(),
                         m[3].as<std::string>(), m[4].as<int>(), m[5].as<std::string>(),
                         m[6].as<int>(), m[7].as<std::string>(), m[8].as<std::string>(),
                         m[9].as<std::string>()});
  }
  return g;
}

class PgAnalyzerStore final : public AnalyzerStore {
 public:
  explicit PgAnalyzerStore(PgPool* pool) : pool_(pool) {}

  // The matrices `where` picks (a condition on matrices m, the analysis
  // floor as $1), as MatrixInfo in id order; at most `limit` (0: all).
  absl::StatusOr<std::vector<MatrixInfo>> MatricesWhere(const std::string& where,
                                                        size_t limit = 0) {
    using Out = std::vector<MatrixInfo>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      const std::string sql = absl::StrCat(
          "SELECT m.id, m.catalog, m.analysis_bisect, m.executor, m.spec_yaml FROM matrices m "
          "WHERE ",
          where, " ORDER BY m.id", limit > 0 ? absl::StrCat(" LIMIT ", limit) : "");
      for (const pqxx::row& r : t.exec_params(sql, Floor(t))) {
        out.push_back(MatrixInfo{r[0].as<int64_t>(), r[1].as<std::string>(), r[2].as<bool>(),
                                 ExecutorFromNumber(r[3].as<int>()), r[4].as<std::string>()});
      }
      return out;
    });
  }

  absl::StatusOr<std::vector<MatrixInfo>> MatricesToAnalyze() override {
    return MatricesWhere(
        "m.id > $1 "
        "  AND NOT EXISTS (SELECT 1 FROM analyzer_state s WHERE s.key = 'matrix:' || m.id) "
        "  AND EXISTS (SELECT 1 FROM jobs j WHERE j.matrix_id = m.id AND j.kind = 1) "
        "  AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.matrix_id = m.id "
        "                  AND j.state IN (1, 2))",
        kAnalyzeBatch);
  }

  absl::StatusOr<std::vector<MatrixInfo>> LatestAnalysedMatrices() override {
    // Analysed: below the floor, or with its analysis recorded.
    return MatricesWhere(
        "m.id IN (SELECT DISTINCT ON (j.platform, j.workload) j.matrix_id FROM jobs j "
        "  WHERE j.kind = 1 AND (j.matrix_id <= $1 OR EXISTS ("
        "    SELECT 1 FROM analyzer_state s WHERE s.key = 'matrix:' || j.matrix_id)) "
        "  ORDER BY j.platform, j.workload, j.matrix_id DESC)");
  }

  // A result's samples (metric, phase, value, unit, intervals, ord) and,
  // last, its stated effective mode as one more sample
  // (analyzer_rows.h kEffectiveModeMetric) when it states one.
  static std::string ResultSamplesSql() {
    return absl::StrCat(
        "SELECT k.metric, k.phase, u.value, k.unit, "
        "  r.sample_series -> (u.ord::int - 1) -> 'intervals' AS intervals, u.ord "
        "FROM unnest(r.sample_key_ids, r.sample_values) WITH ORDINALITY AS u(key_id, value, ord) "
        "JOIN sample_keys k ON k.id = u.key_id "
        "UNION ALL SELECT '",
        kEffectiveModeMetric,
        "', '', (rh.host->>'iommu_mode')::int::float8, '', NULL, "
        "  cardinality(r.sample_values) + 1 "
        "WHERE coalesce((rh.host->'guest'->>'requested_mode')::int, 0) <> 0 "
        "AND coalesce((rh.host->>'iommu_mode')::int, 0) <> 0");
  }

  // Every finite sample of the accepted results of the jobs `where` picks
  // (a condition on results r and jobs j), in job order.
  static std::string SamplesSql(const std::string& where) {
    return "SELECT r.matrix_id, j.catalog, j.commit_id, j.commit_index, j.platform, "
           "  j.workload, j.mode, j.repeat, s.metric, s.phase, "
           "  s.value, r.job_id, s.unit, "
           "  coalesce(rh.host->'guest'->>'accel', ''), "
           "  coalesce(rh.host->'guest'->>'icount_shift', '0'), " +
           std::string(kJobParamsSql) +
           "::text, j.executor, "
           "  coalesce(rh.host->'hygiene'->>'governor', ''), "
           "  coalesce(rh.host->'hygiene'->>'turbo', ''), "
           "  coalesce(rh.host->'hygiene'->>'smt', ''), "
           "  coalesce(rh.host->'hygiene'->>'cpus_allowed', ''), "
           "  coalesce(rh.host->'hygiene'->>'mems_allowed', ''), "
           "  coalesce(s.intervals, '[]'::jsonb)::text, "
           "  coalesce(rh.host->'hygiene'->>'kernel_counters', ''), "
           "  coalesce(rh.host->'iommu_environment'->>'digest', '') "
           "FROM results r JOIN jobs j ON j.id = r.job_id "
           "LEFT JOIN result_hosts rh ON rh.id = r.host_id "
           "CROSS JOIN LATERAL (" +
           ResultSamplesSql() +
           ") s "
           "WHERE " +
           where +
           " AND j.state = 3 "
           "  AND r.attempt = (SELECT max(r2.attempt) FROM results r2 "
           "                   WHERE r2.job_id = r.job_id) "
           "  AND s.value NOT IN ('NaN', 'Infinity', '-Infinity') "
           "ORDER BY r.job_id, s.ord";
  }

  static SampleRow SampleFromRow(const pqxx::row& r) {
    SampleRow s;
    s.sample_id = r[11].as<int64_t>();
    s.matrix_id = r[0].as<int64_t>();
    s.catalog = r[1].as<std::string>();
    s.commit_id = r[2].as<std::string>();
    s.commit_index = r[3].as<int>();
    s.platform = r[4].as<std::string>();
    s.workload = r[5].as<std::string>();
    s.mode = ModeName(r[6].as<int>());
    s.repeat = r[7].as<int>();
    s.metric = r[8].is_null() ? "" : r[8].as<std::string>();
    s.phase = r[9].as<std::string>();
    s.value = r[10].as<double>();
    s.unit = r[12].as<std::string>();
    const HostHygiene hygiene{r[17].as<std::string>(), r[18].as<std::string>(),
                              r[19].as<std::string>(), r[20].as<std::string>(),
                              r[21].as<std::string>(), r[23].as<std::string>()};
    s.timing = ResultTiming(proto::IsRealExecutor(static_cast<pb::Executor>(r[16].as<int>())),
                            r[13].as<std::string>(), r[14].as<std::string>(), hygiene,
                            r[24].as<std::string>());
    s.params = CanonicalJsonObject(r[15].as<std::string>());
    s.intervals = JsonNumbers(r[22].as<std::string>());
    return s;
  }

  absl::StatusOr<std::vector<SampleRow>> Samples(const std::vector<int64_t>& matrices) override {
    using Out = std::vector<SampleRow>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r :
           t.exec_params(SamplesSql("r.matrix_id = ANY($1::bigint[])"), ArrayLiteral(matrices))) {
        out.push_back(SampleFromRow(r));
      }
      return out;
    });
  }

  absl::StatusOr<std::vector<SampleRow>> HistorySamples(const std::string& catalog,
                                                        pb::Executor executor,
                                                        const std::vector<HistoryCell>& cells,
                                                        int64_t except_matrix,
                                                        int max_matrices) override {
    using Out = std::vector<SampleRow>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      std::vector<std::string> platforms, workloads, params;
      for (const HistoryCell& cell : cells) {
        platforms.push_back(cell.platform);
        workloads.push_back(cell.workload);
        params.push_back(cell.params);
      }
      const std::string of_cells =
          absl::StrCat("(j.platform, j.workload, ", kJobParamsSql,
                       ") IN (SELECT u.p, u.w, u.pa::jsonb FROM unnest($1::text[], $2::text[], "
                       "$3::text[]) AS u(p, w, pa))");
      // The newest qualifying matrices. Analysed: below the floor, or with
      // its analysis recorded.
      std::vector<int64_t> ids;
      for (const pqxx::row& r : t.exec_params(
               absl::StrCat(
                   "SELECT DISTINCT j.matrix_id FROM jobs j WHERE ", of_cells,
                   " AND j.catalog = $4 AND j.executor = $5 AND j.kind = 1 "
                   "AND j.matrix_id <> $6 AND (j.matrix_id <= $7 OR EXISTS ("
                   "  SELECT 1 FROM analyzer_state a WHERE a.key = 'matrix:' || j.matrix_id)) "
                   "AND (SELECT model_set FROM matrices WHERE id = j.matrix_id) = "
                   "  (SELECT model_set FROM matrices WHERE id = $6) "
                   "ORDER BY j.matrix_id DESC LIMIT $8"),
               QuotedArrayLiteral(platforms), QuotedArrayLiteral(workloads),
               QuotedArrayLiteral(params), catalog, static_cast<int>(executor), except_matrix,
               Floor(t), max_matrices)) {
        ids.push_back(r[0].as<int64_t>());
      }
      Out out;
      if (ids.empty()) return out;
      // The matrices on jobs as well as results: the planner then reads
      // the cells' jobs of those matrices (two index scans) instead of
      // every job of the cells.
      for (const pqxx::row& r :
           t.exec_params(SamplesSql(absl::StrCat(of_cells,
                                                 " AND j.kind = 1 AND j.matrix_id = "
                                                 "ANY($4::bigint[]) AND r.matrix_id = "
                                                 "ANY($4::bigint[])")),
                         QuotedArrayLiteral(platforms), QuotedArrayLiteral(workloads),
                         QuotedArrayLiteral(params), ArrayLiteral(ids))) {
        out.push_back(SampleFromRow(r));
      }
      return out;
    });
  }

  absl::StatusOr<bool> MatricesTerminal(const std::vector<int64_t>& matrices) override {
    return pool_->Call<bool>([&](pqxx::connection& c) -> absl::StatusOr<bool> {
      pqxx::read_transaction t(c);
      const pqxx::row r = t.exec_params1(
          "SELECT count(*) FILTER (WHERE state IN (1, 2)), count(DISTINCT matrix_id) "
          "FROM jobs WHERE matrix_id = ANY($1::bigint[])",
          ArrayLiteral(matrices));
      return r[0].as<int64_t>() == 0;
    });
  }

  absl::StatusOr<std::vector<std::string>> FailureReasons(
      const std::vector<int64_t>& matrices) override {
    using Out = std::vector<std::string>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r :
           t.exec_params("SELECT failure_reason FROM jobs "
                         "WHERE matrix_id = ANY($1::bigint[]) AND state = 4 ORDER BY id",
                         ArrayLiteral(matrices))) {
        out.push_back(r[0].as<std::string>());
      }
      return out;
    });
  }

  absl::StatusOr<std::vector<CommitRow>> Commits(const std::string& catalog, int lo,
                                                 int hi) override {
    using Out = std::vector<CommitRow>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r :
           t.exec_params("SELECT idx, id, subject, parents FROM catalog_commits "
                         "WHERE catalog = $1 AND idx BETWEEN $2 AND $3 ORDER BY idx",
                         catalog, lo, hi)) {
        out.push_back(CommitRow{r[0].as<int>(), r[1].as<std::string>(), r[2].as<std::string>(),
                                absl::StrSplit(r[3].as<std::string>(), ' ', absl::SkipEmpty())});
      }
      if (out.empty()) {
        return absl::NotFoundError(
            absl::StrCat("catalog ", catalog, " has no commits in [", lo, ", ", hi, "]"));
      }
      return out;
    });
  }

  absl::StatusOr<SeriesSpec> Cell(int64_t matrix_id, const std::string& platform,
                                  const std::string& workload, const std::string& params) override {
    return pool_->Call<SeriesSpec>([&](pqxx::connection& c) -> absl::StatusOr<SeriesSpec> {
      pqxx::read_transaction t(c);
      pqxx::result r =
          t.exec_params("SELECT " + std::string(kJobParamsSql) +
                            "::text, j.executor, j.catalog, m.spec_yaml FROM jobs j "
                            "JOIN matrices m ON m.id = j.matrix_id "
                            "WHERE j.matrix_id = $1 AND j.platform = $2 AND "
                            "j.workload = $3 AND " +
                            std::string(kJobParamsSql) + " = $4::jsonb ORDER BY j.id LIMIT 1",
                        matrix_id, platform, workload, params);
      if (r.empty()) {
        return absl::NotFoundError(absl::StrCat("matrix ", matrix_id, " has no job for ", platform,
                                                " ", workload, " ", params));
      }
      SeriesSpec s;
      s.platform = platform;
      s.workload = workload;
      s.params_json = CanonicalJsonObject(r[0][0].as<std::string>());
      s.executor = ExecutorFromNumber(r[0][1].as<int>());
      s.catalog = r[0][2].as<std::string>();
      // jobs.model_set holds the commit's catalog settings plus the spec's
      // `set:`; only the latter may be carried to other commits.
      if (absl::Status st = FillFromMatrixSpec(r[0][3].as<std::string>(), &s); !st.ok()) return st;
      return s;
    });
  }

  absl::StatusOr<std::vector<int64_t>> RecordAnalysis(
      int64_t matrix_id, const std::string& catalog, const std::vector<NewRegression>& found,
      const std::vector<std::string>& skipped_series) override {
    using Out = std::vector<int64_t>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::work w(c);
      Out bisects;
      std::map<int64_t, int64_t> opened_groups;
      // Marker first: a concurrent second analyzer conflicts here and rolls back.
      w.exec_params("INSERT INTO analyzer_state (key, value) VALUES ('matrix:' || $1, $2::jsonb)",
                    matrix_id, AnalysedMarkerJson(found.size(), skipped_series));
      for (const NewRegression& n : found) {
        const RegressionFinding& f = n.finding;
        if (!w.exec_params("SELECT 1 FROM regressions WHERE series_key = $1 "
                           "AND state IN (1, 2, 3)",
                           n.series_key)
                 .empty())
          continue;
        // The same change open or ignored: catalog, cell, metric and
        // direction, commit ranges overlapping ((lg, fb] intervals), any mode.
        // A decay is one commit's: only its own key (cell and commit) repeats it.
        if (n.kind != "decay" &&
            !w.exec_params(
                  "SELECT 1 FROM regressions g "
                  "JOIN catalog_commits lg ON lg.catalog = g.catalog AND lg.id = g.last_good "
                  "JOIN catalog_commits fb ON fb.catalog = g.catalog AND fb.id = g.first_bad "
                  "WHERE g.state IN (1, 2, 3, 7) AND g.kind <> 'decay' "
                  "  AND g.catalog = $1 AND g.platform = $2 "
                  "  AND g.workload = $3 AND g.params = $4::jsonb AND g.metric = $5 "
                  "  AND g.direction = $6 AND lg.idx < $8 AND $7 < fb.idx",
                  catalog, f.platform, f.workload, f.params, f.metric, f.regression ? 1 : 2,
                  f.last_good_index, f.first_bad_index)
                 .empty())
          continue;
        const std::string per_mode = PerModeJson(f);
        const pqxx::row reg = w.exec_params1(
            "INSERT INTO regressions (state, change_class, direction, platform, workload, "
            "  metric, mode, overhead_series, catalog, last_good, first_bad, magnitude, p_value, "
            "  per_mode, matrix_id, series_key, note, metric_rank, primary_metrics, params, kind) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::jsonb, $15, $16, "
            "  $17, $18, ARRAY(SELECT jsonb_array_elements_text($19::jsonb)), $20::jsonb, $21) "
            "RETURNING id",
            static_cast<int>(n.state), static_cast<int>(f.change_class), f.regression ? 1 : 2,
            f.platform, f.workload, f.metric, ModeNumber(f.mode), f.overhead_series, catalog,
            f.last_good, f.first_bad, f.magnitude, f.p_value, per_mode, matrix_id, n.series_key,
            n.note, n.metric_rank, nlohmann::json(n.primary_metrics).dump(), f.params, n.kind);
        const int64_t reg_id = reg[0].as<int64_t>();
        const pqxx::row b = w.exec_params1(
            "INSERT INTO bisects (regression_id, state, last_good, first_bad) "
            "VALUES ($1, $4, $2, $3) RETURNING id",
            reg_id, f.last_good, f.first_bad, n.kind == "decay" ? "done" : "running");
        const int64_t bisect_id = b[0].as<int64_t>();
        w.exec_params("UPDATE regressions SET bisect_id = $2, strength = $3 WHERE id = $1", reg_id,
                      bisect_id, n.strength);
        JoinGroup(w, catalog, n, reg_id, opened_groups);
        w.exec_params("INSERT INTO analyzer_state (key, value) VALUES ('bisect:' || $1, $2::jsonb)",
                      bisect_id, n.bisect_state_json);
        bisects.push_back(bisect_id);
      }
      w.exec_params(kAdvanceFloor, Floor(w));
      w.commit();
      return bisects;
    });
  }

  absl::Status RecordAnalysisFailure(int64_t matrix_id, const std::string& reason) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      w.exec_params("INSERT INTO analyzer_state (key, value) VALUES ('matrix:' || $1, $2::jsonb)",
                    matrix_id, FailedMarkerJson(reason));
      w.exec_params(kAdvanceFloor, Floor(w));
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<ActiveBisect>> ActiveBisects() override {
    using Out = std::vector<ActiveBisect>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r : t.exec("SELECT b.id, b.regression_id, s.value::text FROM bisects b "
                                       "JOIN analyzer_state s ON s.key = 'bisect:' || b.id "
                                       "WHERE b.state = 'running' ORDER BY b.id")) {
        out.push_back(ActiveBisect{r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<std::string>()});
      }
      return out;
    });
  }

  absl::Status SaveBisect(const BisectUpdate& u) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      w.exec_params(
          "UPDATE analyzer_state SET value = $2::jsonb, updated_at = now() "
          "WHERE key = 'bisect:' || $1",
          u.bisect_id, u.state_json);
      w.exec_params(
          "UPDATE bisects SET state = $2, last_good = $3, first_bad = $4, culprit_id = $5, "
          "culprit_subject = $6, updated_at = now() WHERE id = $1",
          u.bisect_id, u.bisect_state, u.last_good, u.first_bad, u.culprit_id, u.culprit_subject);
      // A person's triage (acknowledged/fixed/false positive) is never overwritten.
      w.exec_params(
          "UPDATE regressions SET "
          " state = CASE WHEN $2 > 0 AND state IN (1, 2) THEN $2 ELSE state END, "
          " culprit_id = $3, culprit_subject = $4, "
          " last_good = CASE WHEN $5 = '' THEN last_good ELSE $5 END, "
          " first_bad = CASE WHEN $6 = '' THEN first_bad ELSE $6 END, "
          " magnitude = CASE WHEN $7 THEN $8 ELSE magnitude END, "
          " p_value = CASE WHEN $7 THEN $9 ELSE p_value END, "
          " confirmed_by = CASE WHEN $10 = '' THEN confirmed_by ELSE $10 END, "
          " confirm_matrix_id = CASE WHEN $11 = 0 THEN confirm_matrix_id ELSE $11 END, "
          " confirm_note = CASE WHEN $12 = '' THEN confirm_note ELSE $12 END, "
          " updated_at = now() "
          "WHERE id = $1",
          u.regression_id,
          static_cast<int>(u.regression_state.value_or(pb::REGRESSION_STATE_UNSPECIFIED)),
          u.culprit_id, u.culprit_subject, u.bisect_state == "done" ? u.last_good : std::string(),
          u.bisect_state == "done" ? u.first_bad : std::string(), u.magnitude.has_value(),
          u.magnitude.value_or(0), u.p_value.value_or(1), u.confirmed_by, u.confirm_matrix_id,
          u.confirm_note);
      if (!u.culprits.empty()) {
        w.exec_params("DELETE FROM bisect_culprits WHERE bisect_id = $1", u.bisect_id);
        int ordinal = 0;
        for (const BisectUpdate::CulpritRow& row : u.culprits) {
          w.exec_params(
              "INSERT INTO bisect_culprits (bisect_id, ordinal, commit_id, commit_index, "
              "  last_good, subject, relative_change, share) "
              "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
              u.bisect_id, ++ordinal, row.culprit.commit_id, row.culprit.index, row.last_good,
              row.subject, row.culprit.relative_change, row.culprit.share);
        }
      }
      for (const BisectUpdate::Step& s : u.steps) {
        const BisectStepRecord& r = s.record;
        w.exec_params(
            "INSERT INTO bisect_steps (bisect_id, step, commit_id, commit_index, verdict, "
            "  repeats, mean, p_value, relative_change, matrix_id, executor, real_kernel) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, 0), $11, $12) "
            "ON CONFLICT (bisect_id, step) DO UPDATE SET commit_id = excluded.commit_id, "
            "  commit_index = excluded.commit_index, "
            "  at = CASE WHEN bisect_steps.verdict = excluded.verdict THEN bisect_steps.at "
            "            ELSE now() END, "
            "  verdict = excluded.verdict, repeats = excluded.repeats, mean = excluded.mean, "
            "  p_value = excluded.p_value, relative_change = excluded.relative_change, "
            "  matrix_id = coalesce(excluded.matrix_id, bisect_steps.matrix_id), "
            "  executor = CASE WHEN excluded.executor = '' THEN bisect_steps.executor "
            "                  ELSE excluded.executor END, "
            "  real_kernel = CASE WHEN excluded.executor = '' THEN bisect_steps.real_kernel "
            "                     ELSE excluded.real_kernel END",
            u.bisect_id, r.step, r.commit_id, r.commit_index, r.verdict, r.repeats, r.mean,
            r.p_value, r.relative_change, s.matrix_id, s.executor,
            proto::IsRealExecutor(proto::ExecutorFromName(s.executor)));
      }
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<AlertWork>> AlertCandidates(absl::Duration resolved_window) override {
    using Out = std::vector<AlertWork>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r : t.exec_params(
               "SELECT g.id, g.state, coalesce(b.state, '') = 'done', g.platform, g.workload, "
               "  g.metric, g.mode, g.catalog, g.overhead_series, g.change_class, g.magnitude, "
               "  g.last_good, g.first_bad, g.culprit_id, g.culprit_subject, "
               "  (SELECT count(*) FROM bisect_steps st WHERE st.bisect_id = g.bisect_id "
               "     AND st.step > 0), "
               "  a.id IS NOT NULL, coalesce(a.firing, false), "
               "  coalesce(to_char(a.starts_at AT TIME ZONE 'UTC', "
               "     'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), "
               "  coalesce(extract(epoch from now() - a.last_sent_at)::float8, 1e18), "
               "  coalesce(a.annotations::text, '{}'), "
               "  g.metric_rank = 'primary', array_to_string(g.primary_metrics, ','), "
               "  (SELECT coalesce(json_agg(json_build_array(bc.commit_id, bc.share) "
               "     ORDER BY bc.ordinal)::text, '[]') "
               "   FROM bisect_culprits bc WHERE bc.bisect_id = g.bisect_id), "
               "  coalesce(to_char(a.ends_at AT TIME ZONE 'UTC', "
               "     'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), ''), "
               "  g.silence_id, g.params::text, coalesce(a.labels::text, '{}'), "
               "  coalesce((SELECT s.value::text FROM analyzer_state s "
               "     WHERE s.key = 'bisect:' || g.bisect_id), ''), g.kind, "
               "  coalesce((SELECT cc.author FROM catalog_commits cc "
               "     WHERE cc.catalog = g.catalog AND cc.id = g.culprit_id), ''), "
               "  coalesce(g.group_id, 0), g.strength "
               "FROM regressions g LEFT JOIN bisects b ON b.id = g.bisect_id "
               "LEFT JOIN LATERAL (SELECT * FROM alerts x WHERE x.regression_id = g.id "
               "   ORDER BY x.id DESC LIMIT 1) a ON true "
               "WHERE g.direction = 1 AND (g.state IN (2, 3) OR (a.firing AND g.state > 3) "
               "  OR g.silence_id <> '' "
               "  OR (g.state > 3 AND NOT a.firing "
               "      AND a.ends_at > now() - make_interval(secs => $1))) "
               "ORDER BY g.id",
               absl::ToDoubleSeconds(resolved_window))) {
        AlertWork a;
        a.regression_id = r[0].as<int64_t>();
        a.state = r[1].as<int>();
        a.bisect_done = r[2].as<bool>();
        a.platform = r[3].as<std::string>();
        a.workload = r[4].as<std::string>();
        a.metric = r[5].as<std::string>();
        a.mode_name = ModeName(r[6].as<int>());
        a.catalog = r[7].as<std::string>();
        a.overhead = r[8].as<bool>();
        a.change_class = r[9].as<int>();
        a.magnitude = r[10].as<double>();
        a.last_good = r[11].as<std::string>();
        a.first_bad = r[12].as<std::string>();
        a.culprit_id = r[13].as<std::string>();
        a.culprit_subject = r[14].as<std::string>();
        a.bisect_steps = r[15].as<int>();
        a.alert_exists = r[16].as<bool>();
        a.alert_firing = r[17].as<bool>();
        a.starts_at = r[18].as<std::string>();
        a.seconds_since_sent = r[19].as<double>();
        a.annotations_json = r[20].as<std::string>();
        a.primary_metric = r[21].as<bool>();
        a.primary_metrics = r[22].as<std::string>();
        for (const nlohmann::json& culprit : nlohmann::json::parse(r[23].as<std::string>())) {
          a.culprits.push_back({culprit.at(0).get<std::string>(), culprit.at(1).get<double>()});
        }
        a.ends_at = r[24].as<std::string>();
        a.silence_id = r[25].as<std::string>();
        a.params = r[26].as<std::string>();
        a.labels_json = r[27].as<std::string>();
        a.bisect_state_json = r[28].as<std::string>();
        a.kind = r[29].as<std::string>();
        a.culprit_author = r[30].as<std::string>();
        a.group_id = r[31].as<int64_t>();
        a.strength = r[32].as<double>();
        out.push_back(std::move(a));
      }
      return out;
    });
  }

  absl::Status MarkAlertSent(int64_t regression_id, bool firing, const std::string& labels_json,
                             const std::string& annotations_json) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      pqxx::result r = w.exec_params(
          "UPDATE alerts SET firing = $2, labels = $3::jsonb, annotations = $4::jsonb, "
          "  last_sent_at = now(), "
          "  ends_at = CASE WHEN $2 THEN NULL ELSE coalesce(ends_at, now()) END "
          "WHERE id = (SELECT max(id) FROM alerts WHERE regression_id = $1) RETURNING id",
          regression_id, firing, labels_json, annotations_json);
      if (r.empty()) {
        w.exec_params(
            "INSERT INTO alerts (regression_id, name, labels, annotations, firing, last_sent_at, "
            "  ends_at) VALUES ($1, 'IommuPerfRegression', $3::jsonb, $4::jsonb, $2, now(), "
            "  CASE WHEN $2 THEN NULL ELSE now() END)",
            regression_id, firing, labels_json, annotations_json);
      }
      w.exec_params("UPDATE regressions SET alert_firing = $2 WHERE id = $1", regression_id,
                    firing);
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<OpenCounts> CountOpenRegressions() override {
    return pool_->Call<OpenCounts>([&](pqxx::connection& c) -> absl::StatusOr<OpenCounts> {
      pqxx::read_transaction t(c);
      const pqxx::row r = t.exec1(
          "SELECT count(*) FILTER (WHERE g.metric_rank = 'primary'), "
          "  count(*) FILTER (WHERE g.metric_rank = 'secondary') "
          "FROM regressions g "
          "WHERE g.direction = 1 AND g.state IN (2, 3)");
      return OpenCounts{r[0].as<int64_t>(), r[1].as<int64_t>()};
    });
  }

  absl::Status SetSilence(int64_t regression_id, const std::string& silence_id) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      w.exec_params("UPDATE regressions SET silence_id = $2 WHERE id = $1", regression_id,
                    silence_id);
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<FixCheckWork>> FixChecks() override {
    using Out = std::vector<FixCheckWork>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r :
           t.exec("SELECT g.id, g.fix_check, s.value::text, coalesce(f.value::text, '') "
                  "FROM regressions g JOIN analyzer_state s ON s.key = 'bisect:' || g.bisect_id "
                  "LEFT JOIN analyzer_state f ON f.key = 'fixcheck:' || g.id "
                  "WHERE g.state = 4 AND g.direction = 1 AND g.fix_check IN ('', 'checking') "
                  "ORDER BY g.id")) {
        out.push_back(FixCheckWork{r[0].as<int64_t>(), r[1].as<std::string>(),
                                   r[2].as<std::string>(), r[3].as<std::string>()});
      }
      return out;
    });
  }

  absl::StatusOr<CommitRow> LatestCommit(const std::string& catalog) override {
    return pool_->Call<CommitRow>([&](pqxx::connection& c) -> absl::StatusOr<CommitRow> {
      pqxx::read_transaction t(c);
      pqxx::result r = t.exec_params(
          "SELECT idx, id, subject FROM catalog_commits WHERE catalog = $1 "
          "ORDER BY idx DESC LIMIT 1",
          catalog);
      if (r.empty()) return absl::NotFoundError(absl::StrCat("catalog ", catalog, " is empty"));
      return CommitRow{r[0][0].as<int>(), r[0][1].as<std::string>(), r[0][2].as<std::string>(), {}};
    });
  }

  absl::StatusOr<std::vector<pb::KernelOffer>> LiveOffers(pb::Executor executor,
                                                          absl::Duration live) override {
    using Out = std::vector<pb::KernelOffer>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r :
           t.exec_params("SELECT capabilities::text, host::text FROM agents "
                         "WHERE last_heartbeat > now() - make_interval(secs => $1) ORDER BY id",
                         absl::ToDoubleSeconds(live))) {
        google::protobuf::RepeatedPtrField<pb::Capability> caps;
        JsonToCaps(r[0].as<std::string>(), &caps);
        pb::HostFacts host;
        JsonToHost(r[1].as<std::string>(), &host);
        const std::vector<pb::KernelOffer> offers =
            proto::OffersFor({caps.begin(), caps.end()}, executor, host);
        out.insert(out.end(), offers.begin(), offers.end());
      }
      return out;
    });
  }

  absl::StatusOr<std::vector<std::vector<pb::Capability>>> AgentCapabilities() override {
    using Out = std::vector<std::vector<pb::Capability>>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r : t.exec("SELECT capabilities::text FROM agents ORDER BY id")) {
        google::protobuf::RepeatedPtrField<pb::Capability> caps;
        JsonToCaps(r[0].as<std::string>(), &caps);
        out.emplace_back(caps.begin(), caps.end());
      }
      return out;
    });
  }

  absl::Status SaveFixCheck(int64_t regression_id, const std::string& fix_check,
                            const std::string& commit, double change, const std::string& state_json,
                            const std::string& reopen_note) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      w.exec_params(
          "INSERT INTO analyzer_state (key, value, updated_at) "
          "VALUES ('fixcheck:' || $1, $2::jsonb, now()) "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()",
          regression_id, state_json);
      // Re-opened: CONFIRMED (2), and the note says why.
      w.exec_params(
          "UPDATE regressions SET fix_check = $2, fix_check_commit = $3, fix_check_change = $4, "
          "  state = CASE WHEN $5 = '' THEN state ELSE 2 END, "
          "  note = CASE WHEN $5 = '' THEN note WHEN note = '' THEN $5 "
          "              ELSE note || E'\\n' || $5 END, "
          "  updated_at = now() WHERE id = $1 AND state = 4",
          regression_id, fix_check, commit, change, reopen_note);
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::vector<RegressionGroup>> OpenGroups(const std::string& catalog,
                                                          absl::Duration window) override {
    using Out = std::vector<RegressionGroup>;
    return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
      pqxx::read_transaction t(c);
      Out out;
      for (const pqxx::row& r : t.exec_params(
               absl::StrCat("SELECT ", kGroupCols,
                            " FROM regression_groups WHERE catalog = $1 "
                            "AND opened_at >= now() - make_interval(secs => $2) ORDER BY id"),
               catalog, absl::ToDoubleSeconds(window))) {
        out.push_back(GroupFromRow(t, r));
      }
      return out;
    });
  }

  absl::StatusOr<RegressionGroup> GroupOf(int64_t regression_id) override {
    return pool_->Call<RegressionGroup>(
        [&](pqxx::connection& c) -> absl::StatusOr<RegressionGroup> {
          pqxx::read_transaction t(c);
          const pqxx::result r =
              t.exec_params(absl::StrCat("SELECT ", kGroupCols,
                                         " FROM regression_groups WHERE id = "
                                         "(SELECT group_id FROM regressions WHERE id = $1)"),
                            regression_id);
          if (r.empty()) {
            return absl::NotFoundError(
                absl::StrCat("regression ", regression_id, " is in no group"));
          }
          return GroupFromRow(t, r[0]);
        });
  }

  absl::Status SaveGroup(int64_t group_id, int64_t leader_id, const std::string& state,
                         const std::string& culprit_id) override {
    return pool_->Run([&](pqxx::connection& c) -> absl::Status {
      pqxx::work w(c);
      w.exec_params(
          "UPDATE regression_groups SET leader_id = nullif($2, 0::bigint), state = $3, "
          "  culprit_id = $4, updated_at = now() WHERE id = $1",
          group_id, leader_id, state, culprit_id);
      w.commit();
      return absl::OkStatus();
    });
  }

  absl::StatusOr<int64_t> SplitFromGroup(int64_t regression_id) override {
    return pool_->Call<int64_t>([&](pqxx::connection& c) -> absl::StatusOr<int64_t> {
      pqxx::work w(c);
      const pqxx::result r = w.exec_params(
          "INSERT INTO regression_groups (catalog, last_good, last_good_index, first_bad, "
          "  first_bad_index, leader_id, state) "
          "SELECT g.catalog, g.last_good, coalesce(lg.idx, 0), g.first_bad, coalesce(fb.idx, 0), "
          "  g.id, 'bisecting' FROM regressions g "
          "LEFT JOIN catalog_commits lg ON lg.catalog = g.catalog AND lg.id = g.last_good "
          "LEFT JOIN catalog_commits fb ON fb.catalog = g.catalog AND fb.id = g.first_bad "
          "WHERE g.id = $1 RETURNING id",
          regression_id);
      if (r.empty()) return absl::NotFoundError(absl::StrCat("regression ", regression_id));
      const int64_t id = r[0][0].as<int64_t>();
      w.exec_params("UPDATE regressions SET group_id = $2 WHERE id = $1", regression_id, id);
      w.commit();
      return id;
    });
  }

 private:
  static int64_t Floor(pqxx::transaction_base& t) {
    pqxx::result r =
        t.exec("SELECT (value #>> '{}')::bigint FROM analyzer_state WHERE key = 'matrix_floor'");
    return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<int64_t>();
  }

  PgPool* pool_;
};

}  // namespace

std::unique_ptr<AnalyzerStore> NewPgAnalyzerStore(PgPool* pool) {
  return std::make_unique<PgAnalyzerStore>(pool);
}

}  // namespace farm::storage
