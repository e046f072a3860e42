#include "lib/storage/pg/pg_retention_store.h"

#include <map>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/run_eligibility.h"

namespace farm::storage {
namespace {

// SQL boolean over a matrices row aliased `m`: a regression references it
// (found in, confirmed by, a bisect step's runs, or a job of the
// regression's cell at its last good or first bad commit).
const char* const kRegressionRefSql =
    "(EXISTS (SELECT 1 FROM regressions g WHERE g.matrix_id = m.id OR g.confirm_matrix_id = m.id)"
    " OR EXISTS (SELECT 1 FROM bisect_steps s WHERE s.matrix_id = m.id)"
    " OR EXISTS (SELECT 1 FROM regressions g JOIN jobs j ON j.platform = g.platform"
    "   AND j.workload = g.workload AND j.catalog = g.catalog"
    "   AND j.commit_id IN (g.last_good, g.first_bad) WHERE j.matrix_id = m.id))";

// Rows: id, finished, finished_at (us), jobs, regression, build needed.
const char* const kFactsSql =
    "SELECT m.id, coalesce(a.open, 0) = 0, "
    "  (extract(epoch from greatest(m.created_at, a.last)) * 1000000)::bigint, "
    "  coalesce(a.n, 0), m.id IN (SELECT g.matrix_id FROM regressions g "
    "    WHERE g.matrix_id IS NOT NULL "
    "    UNION SELECT g.confirm_matrix_id FROM regressions g "
    "    UNION SELECT s.matrix_id FROM bisect_steps s WHERE s.matrix_id IS NOT NULL "
    "    UNION SELECT j.matrix_id FROM regressions g JOIN jobs j ON j.platform = g.platform "
    "      AND j.workload = g.workload AND j.catalog = g.catalog "
    "      AND j.commit_id IN (g.last_good, g.first_bad)), "
    "  m.id IN (SELECT b.matrix_id FROM jobs w JOIN jobs b ON b.id = w.waits_for "
    "    WHERE w.waits_for <> 0 AND w.state IN (1, 2)) "
    "FROM matrices m LEFT JOIN (SELECT matrix_id, count(*) AS n, "
    "  count(*) FILTER (WHERE state IN (1, 2)) AS open, max(finished_at) AS last "
    "  FROM jobs GROUP BY matrix_id) a ON a.matrix_id = m.id ORDER BY m.id";

// Rows: matrix id, one analyser series of its bulk jobs.
std::string SeriesSql() {
  return absl::StrCat(
      "SELECT j.matrix_id, concat_ws(chr(31), j.catalog, j.executor, j.platform, j.workload, ",
      kJobParamsSql,
      "::text, m.model_set::text) FROM (SELECT DISTINCT matrix_id, catalog, executor, platform, "
      "workload, workload_index, params FROM jobs WHERE kind = 1) j "
      "JOIN matrices m ON m.id = j.matrix_id");
}

// Rows of matrices `$1` as PruneCounts; raw_only: their results with raw output.
pb::PruneCounts CountRows(pqxx::transaction_base& t, const std::string& ids, bool raw_only) {
  pb::PruneCounts c;
  const pqxx::row r = t.exec_params1(
      "SELECT count(DISTINCT r.matrix_id), count(*), "
      "coalesce(sum(cardinality(r.sample_values)), 0), "
      "count(*) FILTER (WHERE r.raw_output <> '' OR r.raw_digest IS NOT NULL), "
      "coalesce(sum(coalesce(o.size, octet_length(r.raw_output))), 0) "
      "FROM results r LEFT JOIN raw_outputs o ON o.digest = r.raw_digest "
      "WHERE r.matrix_id = ANY($1::bigint[]) "
      "AND (NOT $2 OR r.raw_output <> '' OR r.raw_digest IS NOT NULL)",
      ids, raw_only);
  c.set_results(r[1].as<int64_t>());
  c.set_raw_outputs(r[3].as<int64_t>());
  c.set_raw_bytes(r[4].as<int64_t>());
  if (raw_only) {
    c.set_matrices(r[0].as<int64_t>());
    return c;
  }
  c.set_samples(r[2].as<int64_t>());
  const pqxx::row m = t.exec_params1(
      "SELECT (SELECT count(*) FROM matrices WHERE id = ANY($1::bigint[])), "
      "(SELECT count(*) FROM jobs WHERE matrix_id = ANY($1::bigint[]))",
      ids);
  c.set_matrices(m[0].as<int64_t>());
  c.set_jobs(m[1].as<int64_t>());
  return c;
}

// Deletes the raw outputs of `digests` (bytea column 0) that no result
// names. Locked first, then checked by a second statement: a report that
// stored a result naming one (and locked it, kRawUpsert in pg_job_queue.cc)
// has committed by then, and this statement's snapshot sees its result.
void DeleteUnnamedRawOutputs(pqxx::transaction_base& t, const pqxx::result& digests) {
  if (digests.empty()) return;
  std::vector<std::string> hex;
  hex.reserve(digests.size());
  for (const pqxx::row& r : digests) hex.push_back(r[0].as<std::string>());
  const std::string list = QuotedArrayLiteral(hex);
  t.exec_params(
      "SELECT 1 FROM raw_outputs WHERE digest = ANY($1::bytea[]) ORDER BY digest FOR UPDATE", list);
  t.exec_params(
      "DELETE FROM raw_outputs o WHERE o.digest = ANY($1::bytea[]) "
      "AND NOT EXISTS (SELECT 1 FROM results r WHERE r.raw_digest = o.digest)",
      list);
}

}  // namespace

absl::StatusOr<std::vector<MatrixRetentionFacts>> PgRetentionStore::ReadFacts() {
  using Out = std::vector<MatrixRetentionFacts>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    std::map<int64_t, size_t> at;
    for (const pqxx::row& r : t.exec(kFactsSql)) {
      MatrixRetentionFacts f;
      f.id = r[0].as<int64_t>();
      f.finished = r[1].as<bool>();
      f.finished_at = absl::FromUnixMicros(r[2].as<int64_t>());
      f.jobs = r[3].as<int64_t>();
      f.regression = r[4].as<bool>();
      f.build_needed = r[5].as<bool>();
      at[f.id] = out.size();
      out.push_back(std::move(f));
    }
    for (const pqxx::row& r : t.exec(SeriesSql())) {
      auto it = at.find(r[0].as<int64_t>());
      if (it != at.end()) out[it->second].series.insert(r[1].as<std::string>());
    }
    return out;
  });
}

absl::StatusOr<pb::PruneCounts> PgRetentionStore::CountOnly(const std::vector<int64_t>& ids,
                                                            bool raw_only) {
  return pool_->Call<pb::PruneCounts>([&](pqxx::connection& c) -> absl::StatusOr<pb::PruneCounts> {
    pqxx::read_transaction t(c);
    return CountRows(t, ArrayLiteral(ids), raw_only);
  });
}

absl::StatusOr<pb::PruneCounts> PgRetentionStore::RunBatch(const std::vector<int64_t>& batch,
                                                           const PruneOptions& options) {
  return pool_->Call<pb::PruneCounts>([&](pqxx::connection& c) -> absl::StatusOr<pb::PruneCounts> {
    pqxx::work w(c);
    // Locked, then checked again: still finished, still unreferenced.
    std::vector<int64_t> still;
    for (const pqxx::row& r :
         w.exec_params(absl::StrCat("SELECT m.id FROM matrices m WHERE m.id = ANY($1::bigint[]) "
                                    "AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.matrix_id = m.id "
                                    "AND j.state IN (1, 2)) AND NOT ",
                                    kRegressionRefSql, " ORDER BY m.id FOR UPDATE OF m"),
                       ArrayLiteral(batch))) {
      still.push_back(r[0].as<int64_t>());
    }
    const std::string ids = ArrayLiteral(still);
    const pb::PruneCounts counts = CountRows(w, ids, options.raw_only);
    // The out-of-row outputs these results name; deleted below once no
    // result names them.
    const pqxx::result named = w.exec_params(
        "SELECT DISTINCT raw_digest FROM results "
        "WHERE matrix_id = ANY($1::bigint[]) AND raw_digest IS NOT NULL",
        ids);
    if (options.raw_only) {
      w.exec_params(
          "UPDATE results SET raw_output = '', raw_digest = NULL, raw_pruned_at = now() "
          "WHERE matrix_id = ANY($1::bigint[]) AND (raw_output <> '' OR raw_digest IS NOT NULL)",
          ids);
    } else {
      w.exec_params(
          "DELETE FROM analyzer_state WHERE key = ANY(ARRAY(SELECT 'matrix:' || x "
          "FROM unnest($1::bigint[]) x))",
          ids);
      w.exec_params("DELETE FROM matrices WHERE id = ANY($1::bigint[])", ids);
    }
    DeleteUnnamedRawOutputs(w, named);
    w.commit();
    return counts;
  });
}

absl::StatusOr<pb::PruneResponse> PgRetentionStore::Prune(const PruneOptions& options) {
  if (absl::Status st = CheckPruneOptions(options); !st.ok()) return st;
  absl::StatusOr<std::vector<MatrixRetentionFacts>> facts = ReadFacts();
  if (!facts.ok()) return facts.status();
  const PrunePlan plan = PlanPrune(*facts, options);
  pb::PruneResponse report = plan.report;
  if (options.dry_run) {
    absl::StatusOr<pb::PruneCounts> c = CountOnly(plan.prune, options.raw_only);
    if (!c.ok()) return c.status();
    *report.mutable_pruned() = *c;
    return report;
  }
  for (const std::vector<int64_t>& batch : plan.batches) {
    absl::StatusOr<pb::PruneCounts> c = RunBatch(batch, options);
    if (!c.ok()) return c.status();
    AddPruneCounts(*c, report.mutable_pruned());
    report.set_batches(report.batches() + 1);
  }
  return report;
}

}  // namespace farm::storage
