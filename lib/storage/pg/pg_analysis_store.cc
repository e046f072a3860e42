#include "lib/storage/pg/pg_analysis_store.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/row_codec.h"

namespace farm::storage {

namespace {

// Every culprit of the given bisects (bisect_culprits), by bisect id, in
// commit order.
std::map<int64_t, std::vector<pb::Culprit>> ReadCulprits(pqxx::transaction_base& t,
                                                         const std::vector<int64_t>& bisect_ids) {
  std::map<int64_t, std::vector<pb::Culprit>> out;
  if (bisect_ids.empty()) return out;
  for (const pqxx::row& r : t.exec_params(
           "SELECT bisect_id, commit_id, subject, last_good, relative_change, share, "
           "commit_index FROM bisect_culprits "
           "WHERE bisect_id = ANY(string_to_array($1, ',')::bigint[]) ORDER BY bisect_id, ordinal",
           absl::StrJoin(bisect_ids, ","))) {
    pb::Culprit& c = out[r[0].as<int64_t>()].emplace_back();
    c.set_commit_id(r[1].as<std::string>());
    c.set_subject(r[2].as<std::string>());
    c.set_last_good(r[3].as<std::string>());
    c.set_relative_change(r[4].as<double>());
    c.set_share(r[5].as<double>());
    c.set_commit_index(r[6].as<int>());
  }
  return out;
}

// A regression's culprits are those of its bisect.
void FillCulprits(pqxx::transaction_base& t, std::vector<pb::Regression>& regs) {
  std::vector<int64_t> ids;
  for (const pb::Regression& g : regs) {
    if (g.bisect_id() != 0) ids.push_back(g.bisect_id());
  }
  const std::map<int64_t, std::vector<pb::Culprit>> culprits = ReadCulprits(t, ids);
  for (pb::Regression& g : regs) {
    auto it = culprits.find(g.bisect_id());
    if (it == culprits.end()) continue;
    for (const pb::Culprit& c : it->second) *g.add_culprits() = c;
  }
}

}  // namespace

PgAnalysisStore::PgAnalysisStore(PgPool* pool) : pool_(pool) {}

absl::StatusOr<std::vector<pb::Regression>> PgAnalysisStore::ListRegressions(
    const pb::ListRegressionsRequest& req) {
  using Out = std::vector<pb::Regression>;
  return pool_->Call<Out>([&](pqxx::connection& c) -> absl::StatusOr<Out> {
    pqxx::read_transaction t(c);
    Out out;
    for (const pqxx::row& r :
         t.exec_params(std::string("SELECT ") + kRegressionCols +
                           " FROM regressions WHERE ($1 OR state NOT IN (4, 5, 6, 7)) "
                           "AND ($2 OR direction <> 2) AND ($3 = 0 OR matrix_id = $3) "
                           "AND ($6 = 0 OR group_id = $6) "
                           "AND id > $4 ORDER BY id LIMIT CASE WHEN $5 > 0 THEN $5 END",
                       req.include_closed(), req.include_improvements(), req.matrix_id(),
                       RegressionPageAfter(req), req.page_size(), req.group_id())) {
      out.push_back(RowToRegression(r));
    }
    FillCulprits(t, out);
    return out;
  });
}

absl::StatusOr<pb::Regression> PgAnalysisStore::GetRegression(int64_t id) {
  return pool_->Call<pb::Regression>([&](pqxx::connection& c) -> absl::StatusOr<pb::Regression> {
    pqxx::read_transaction t(c);
    pqxx::result r = t.exec_params(
        std::string("SELECT ") + kRegressionCols + " FROM regressions WHERE id = $1", id);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("regression ", id, " not found"));
    std::vector<pb::Regression> regs{RowToRegression(r[0])};
    FillCulprits(t, regs);
    return regs.front();
  });
}

absl::StatusOr<pb::Bisect> PgAnalysisStore::GetBisect(int64_t bisect_id, int64_t regression_id) {
  return pool_->Call<pb::Bisect>([&](pqxx::connection& c) -> absl::StatusOr<pb::Bisect> {
    pqxx::read_transaction t(c);
    pqxx::result r = t.exec_params(
        "SELECT id, regression_id, state, last_good, first_bad, culprit_id, culprit_subject "
        "FROM bisects WHERE ($1 <> 0 AND id = $1) OR ($1 = 0 AND regression_id = $2) "
        "ORDER BY id DESC LIMIT 1",
        bisect_id, regression_id);
    if (r.empty()) {
      return absl::NotFoundError(bisect_id != 0
                                     ? absl::StrCat("bisect ", bisect_id, " not found")
                                     : absl::StrCat("no bisect for regression ", regression_id));
    }
    pb::Bisect b;
    b.set_id(r[0][0].as<int64_t>());
    b.set_regression_id(r[0][1].as<int64_t>());
    b.set_state(r[0][2].as<std::string>());
    b.set_last_good(r[0][3].as<std::string>());
    b.set_first_bad(r[0][4].as<std::string>());
    b.set_culprit_id(r[0][5].as<std::string>());
    b.set_culprit_subject(r[0][6].as<std::string>());
    for (const pqxx::row& s :
         t.exec_params("SELECT step, commit_id, commit_index, verdict, repeats, mean, p_value, "
                       "relative_change, (extract(epoch from at) * 1000000)::bigint, executor, "
                       "real_kernel "
                       "FROM bisect_steps WHERE bisect_id = $1 ORDER BY step",
                       b.id())) {
      pb::BisectStep* st = b.add_steps();
      st->set_step(s[0].as<int>());
      st->set_commit_id(s[1].as<std::string>());
      st->set_commit_index(s[2].as<int>());
      st->set_verdict(s[3].as<std::string>());
      st->set_repeats(s[4].as<int>());
      st->set_mean(s[5].as<double>());
      st->set_p_value(s[6].as<double>());
      st->set_relative_change(s[7].as<double>());
      SetMicros(s[8].as<int64_t>(), st->mutable_at());
      st->set_executor(s[9].as<std::string>());
      st->set_real_kernel(s[10].as<bool>());
    }
    std::map<int64_t, std::vector<pb::Culprit>> culprits = ReadCulprits(t, {b.id()});
    for (const pb::Culprit& cu : culprits[b.id()]) *b.add_culprits() = cu;
    return b;
  });
}

absl::StatusOr<pb::Regression> PgAnalysisStore::UpdateRegression(int64_t id,
                                                                 pb::RegressionState state,
                                                                 const std::string& note) {
  return pool_->Call<pb::Regression>([&](pqxx::connection& c) -> absl::StatusOr<pb::Regression> {
    pqxx::work w(c);
    pqxx::result r = w.exec_params(
        "UPDATE regressions SET state = CASE WHEN $2 = 0 THEN state ELSE $2 END, "
        "note = CASE WHEN $3 = '' THEN note ELSE $3 END, updated_at = now(), "
        // Another triage state starts a new fix check when it is fixed again.
        "fix_check = CASE WHEN $2 <> 0 AND $2 <> state THEN '' ELSE fix_check END "
        "WHERE id = $1 RETURNING " +
            std::string(kRegressionCols),
        id, static_cast<int>(state), note);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("regression ", id, " not found"));
    std::vector<pb::Regression> regs{RowToRegression(r[0])};
    FillCulprits(w, regs);
    w.commit();
    return regs.front();
  });
}

}  // namespace farm::storage
