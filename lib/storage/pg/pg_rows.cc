#include "lib/storage/pg/pg_rows.h"

#include "absl/strings/str_cat.h"
#include "lib/storage/row_codec.h"
#include "lib/storage/run_eligibility.h"

namespace farm::storage {

const std::string kJobCols =
    std::string(
        "j.id, j.matrix_id, j.catalog, j.commit_id, j.commit_index, j.platform, j.workload, ") +
    kJobParamsSql +
    std::string(
        "::text, j.mode, j.repeat, j.executor, j.priority, j.kind, j.state, j.attempt, "
        "j.max_attempts, j.failure_reason, "
        // The matrix's shared documents on top of the row's own (migration 8).
        "(j.model_set || coalesce((SELECT jcs.settings FROM matrix_commit_settings jcs "
        "WHERE jcs.matrix_id = j.matrix_id AND jcs.commit_index = j.commit_index), '{}'::jsonb) || "
        "coalesce((SELECT jm.model_set FROM matrices jm WHERE jm.id = j.matrix_id), "
        "'{}'::jsonb))::text, "
        "j.seed, j.lease_owner, "
        "coalesce((extract(epoch from j.lease_expires_at) * 1000000)::bigint, 0), j.waits_for, "
        "coalesce((SELECT jm.labels FROM matrices jm WHERE jm.id = j.matrix_id), "
        "'{}'::jsonb)::text");

std::string QuotedArrayLiteral(const std::vector<std::string>& v) {
  size_t n = 2;
  for (const std::string& s : v) n += s.size() + 3;
  std::string out;
  out.reserve(n);
  out.push_back('{');
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != 0) out.push_back(',');
    out.push_back('"');
    AppendEscaped(
        &out, v[i], [](unsigned char c) { return c == '"' || c == '\\'; },
        [](unsigned char c, std::string* o) {
          o->push_back('\\');
          o->push_back(static_cast<char>(c));
        });
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

pb::Job RowToJob(const pqxx::row& r, int base) { return JobRowDecoder().Decode(r, base); }

const google::protobuf::Map<std::string, std::string>& JobRowDecoder::ParsedMap::Of(
    const pqxx::field& f) {
  const std::string_view t(f.c_str(), f.size());
  if (!valid || t != text) {
    text.assign(t);
    map.clear();
    JsonToMap(text, &map);
    valid = true;
  }
  return map;
}

pb::Job JobRowDecoder::Decode(const pqxx::row& r, int base) {
  pb::Job j;
  j.set_id(r[base + 0].as<int64_t>());
  j.set_matrix_id(r[base + 1].as<int64_t>());
  j.set_catalog(r[base + 2].as<std::string>());
  j.set_commit_id(r[base + 3].as<std::string>());
  j.set_commit_index(r[base + 4].as<int>());
  j.set_platform(r[base + 5].as<std::string>());
  j.mutable_workload()->set_name(r[base + 6].as<std::string>());
  *j.mutable_workload()->mutable_params() = params_.Of(r[base + 7]);
  j.set_mode(static_cast<pb::IommuMode>(r[base + 8].as<int>()));
  j.set_repeat(r[base + 9].as<int>());
  j.set_executor(static_cast<pb::Executor>(r[base + 10].as<int>()));
  j.set_priority(r[base + 11].as<int>());
  j.set_kind(static_cast<pb::JobKind>(r[base + 12].as<int>()));
  j.set_state(static_cast<pb::JobState>(r[base + 13].as<int>()));
  j.set_attempt(r[base + 14].as<int>());
  j.set_max_attempts(r[base + 15].as<int>());
  j.set_failure_reason(r[base + 16].as<std::string>());
  *j.mutable_model_set() = model_set_.Of(r[base + 17]);
  j.set_seed(static_cast<uint64_t>(r[base + 18].as<int64_t>()));
  j.set_lease_owner(r[base + 19].as<std::string>());
  const int64_t exp = r[base + 20].as<int64_t>();
  if (exp != 0) SetMicros(exp, j.mutable_lease_expires_at());
  j.set_waits_for_job(r[base + 21].as<int64_t>());
  *j.mutable_labels() = labels_.Of(r[base + 22]);
  return j;
}

const char* const kMatrixSelect =
    "SELECT m.id, m.name, m.spec_yaml, m.catalog, m.platform, m.executor, m.submitted_by, "
    "m.cancelled, (extract(epoch from m.created_at) * 1000000)::bigint, "
    "count(j.id), count(j.id) FILTER (WHERE j.state = 1), count(j.id) FILTER (WHERE j.state = 2), "
    "count(j.id) FILTER (WHERE j.state = 3), count(j.id) FILTER (WHERE j.state = 4), "
    "count(j.id) FILTER (WHERE j.state = 5), "
    "coalesce((extract(epoch from max(j.finished_at)) * 1000000)::bigint, 0), "
    "count(j.id) FILTER (WHERE j.state = 1 AND j.waits_for <> 0 AND NOT EXISTS "
    "  (SELECT 1 FROM jobs b WHERE b.id = j.waits_for AND b.state = 3)), "
    "coalesce((SELECT s.value::text FROM analyzer_state s WHERE s.key = 'matrix:' || m.id), '') "
    "FROM matrices m LEFT JOIN jobs j ON j.matrix_id = m.id ";

pb::Matrix RowToMatrix(const pqxx::row& r) {
  pb::Matrix m;
  m.set_id(r[0].as<int64_t>());
  m.set_name(r[1].as<std::string>());
  m.set_spec_yaml(r[2].as<std::string>());
  m.set_catalog(r[3].as<std::string>());
  m.set_platform(r[4].as<std::string>());
  m.set_executor(static_cast<pb::Executor>(r[5].as<int>()));
  m.set_submitted_by(r[6].as<std::string>());
  const bool cancelled = r[7].as<bool>();
  SetMicros(r[8].as<int64_t>(), m.mutable_created_at());
  pb::MatrixCounts* c = m.mutable_counts();
  c->set_total(r[9].as<int64_t>());
  c->set_queued(r[10].as<int64_t>());
  c->set_leased(r[11].as<int64_t>());
  c->set_succeeded(r[12].as<int64_t>());
  c->set_failed(r[13].as<int64_t>());
  c->set_cancelled(r[14].as<int64_t>());
  c->set_waiting_for_build(r[16].as<int64_t>());
  m.set_analysis(AnalysisSummary(r[17].as<std::string>()));
  DeriveMatrixState(cancelled, r[15].as<int64_t>(), &m);
  return m;
}

absl::StatusOr<pb::Matrix> LoadMatrix(pqxx::transaction_base& t, int64_t id) {
  pqxx::result res =
      t.exec_params(std::string(kMatrixSelect) + "WHERE m.id = $1 GROUP BY m.id", id);
  if (res.empty()) return absl::NotFoundError(absl::StrCat("matrix ", id, " not found"));
  return RowToMatrix(res[0]);
}

const char* const kRegressionCols =
    "id, state, change_class, direction, platform, workload, metric, mode, overhead_series, "
    "catalog, last_good, first_bad, magnitude, p_value, per_mode::text, "
    "coalesce(bisect_id, 0), culprit_id, culprit_subject, alert_firing, "
    "(extract(epoch from detected_at) * 1000000)::bigint, note, coalesce(matrix_id, 0), "
    "metric_rank, array_to_json(primary_metrics)::text, fix_check, fix_check_commit, "
    "fix_check_change, confirmed_by, confirm_matrix_id, confirm_note, params::text, kind, "
    "coalesce(group_id, 0)";

pb::Regression RowToRegression(const pqxx::row& r) {
  pb::Regression g;
  g.set_id(r[0].as<int64_t>());
  g.set_state(static_cast<pb::RegressionState>(r[1].as<int>()));
  g.set_change_class(static_cast<pb::ChangeClass>(r[2].as<int>()));
  g.set_direction(static_cast<pb::ChangeDirection>(r[3].as<int>()));
  g.set_platform(r[4].as<std::string>());
  g.set_workload(r[5].as<std::string>());
  g.set_metric(r[6].as<std::string>());
  g.set_mode(static_cast<pb::IommuMode>(r[7].as<int>()));
  g.set_overhead_series(r[8].as<bool>());
  g.set_catalog(r[9].as<std::string>());
  g.set_last_good(r[10].as<std::string>());
  g.set_first_bad(r[11].as<std::string>());
  g.set_magnitude(r[12].as<double>());
  g.set_p_value(r[13].as<double>());
  JsonToPerMode(r[14].as<std::string>(), &g);
  g.set_bisect_id(r[15].as<int64_t>());
  g.set_culprit_id(r[16].as<std::string>());
  g.set_culprit_subject(r[17].as<std::string>());
  g.set_alert_firing(r[18].as<bool>());
  SetMicros(r[19].as<int64_t>(), g.mutable_detected_at());
  g.set_note(r[20].as<std::string>());
  g.set_matrix_id(r[21].as<int64_t>());
  g.set_metric_rank(r[22].as<std::string>());
  // JSON rather than the array text format: no quoting rules to reimplement.
  JsonToPrimaryMetrics(r[23].as<std::string>(), &g);
  g.set_fix_check(r[24].as<std::string>());
  g.set_fix_check_commit(r[25].as<std::string>());
  g.set_fix_check_change(r[26].as<double>());
  g.set_confirmed_by(r[27].as<std::string>());
  g.set_confirm_matrix_id(r[28].as<int64_t>());
  g.set_confirm_note(r[29].as<std::string>());
  JsonToMap(r[30].as<std::string>(), g.mutable_params());
  g.set_kind(r[31].as<std::string>());
  g.set_group_id(r[32].as<int64_t>());
  return g;
}

}  // namespace farm::storage
