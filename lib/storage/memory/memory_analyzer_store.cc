// MemoryAnalyzerStore: each method follows the SQL of its PostgreSQL
// counterpart (lib/storage/pg/pg_analyzer_store.cc) over the MemoryDatabase
// tables.
#include "lib/storage/memory/memory_analyzer_store.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/storage/row_codec.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"

namespace farm::storage {

namespace {

using Tables = MemoryDatabase::Tables;
using Changes = MemoryDatabase::Changes;

std::string MatrixKey(int64_t id) { return absl::StrCat("matrix:", id); }
std::string BisectKey(int64_t id) { return absl::StrCat("bisect:", id); }
std::string FixCheckKey(int64_t id) { return absl::StrCat("fixcheck:", id); }

bool Listed(const std::vector<int64_t>& ids, int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

bool Live(pb::JobState s) { return s == pb::JOB_STATE_QUEUED || s == pb::JOB_STATE_LEASED; }

// A jsonb cast of `text` fails the statement (and its transaction).
absl::Status CheckJson(const std::string& what, const std::string& text) {
  if (nlohmann::json::accept(text)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": invalid input syntax for type json"));
}

// Suspected, confirmed or acknowledged.
bool Open(pb::RegressionState s) {
  return s == pb::REGRESSION_STATE_SUSPECTED || s == pb::REGRESSION_STATE_CONFIRMED ||
         s == pb::REGRESSION_STATE_ACKNOWLEDGED;
}

// Confirmed or acknowledged: what alerts and the open gauges count.
bool Alerting(pb::RegressionState s) {
  return s == pb::REGRESSION_STATE_CONFIRMED || s == pb::REGRESSION_STATE_ACKNOWLEDGED;
}

// The analyzer_state 'matrix_floor' cursor; 0 before the first analysis.
int64_t Floor(const Tables& t) {
  auto it = t.analyzer_state.find("matrix_floor");
  int64_t floor = 0;
  if (it == t.analyzer_state.end() || !absl::SimpleAtoi(it->second, &floor)) return 0;
  return floor;
}

// The result's stated effective mode as a sample (analyzer_rows.h
// kEffectiveModeMetric), as the PostgreSQL store's EffectiveModeSql.
std::optional<pb::Sample> EffectiveModeSample(const pb::HostFacts& host) {
  if (host.guest().requested_mode() == pb::IOMMU_MODE_UNSPECIFIED ||
      host.iommu_mode() == pb::IOMMU_MODE_UNSPECIFIED)
    return std::nullopt;
  pb::Sample s;
  s.set_metric(kEffectiveModeMetric);
  s.set_value(static_cast<double>(host.iommu_mode()));
  return s;
}

// Every numeric sample of the accepted results (the latest attempt of each
// succeeded job) of the jobs `picked` says yes to, in job order.
template <typename Picked>
std::vector<SampleRow> SamplesOf(const Tables& t, const Picked& picked) {
  std::vector<SampleRow> out;
  for (auto it = t.results.begin(); it != t.results.end(); ++it) {  // by (job, attempt)
    const auto& [key, result] = *it;
    // Only the job's latest attempt.
    auto next = std::next(it);
    if (next != t.results.end() && next->first.first == key.first) continue;
    auto job = t.jobs.find(key.first);
    if (job == t.jobs.end() || job->second.job.state() != pb::JOB_STATE_SUCCEEDED) continue;
    const pb::Job& j = job->second.job;
    if (!picked(j)) continue;
    std::vector<pb::Sample> samples(result.samples.begin(), result.samples.end());
    if (std::optional<pb::Sample> m = EffectiveModeSample(result.host)) samples.push_back(*m);
    for (const pb::Sample& s : samples) {
      // Non-finite values are stored as strings, not JSON numbers.
      if (!std::isfinite(s.value())) continue;
      SampleRow row;
      row.sample_id = j.id();
      row.matrix_id = result.matrix_id;
      row.catalog = j.catalog();
      row.commit_id = j.commit_id();
      row.commit_index = j.commit_index();
      row.platform = j.platform();
      row.workload = j.workload().name();
      row.params = MapToJson(j.workload().params());
      row.mode = ModeName(static_cast<int>(j.mode()));
      row.repeat = j.repeat();
      row.metric = s.metric();
      row.phase = s.phase();
      row.value = s.value();
      row.intervals.assign(s.intervals().begin(), s.intervals().end());
      row.unit = s.unit();
      const pb::Hygiene& h = result.host.hygiene();
      row.timing = ResultTiming(proto::IsRealExecutor(j.executor()), result.host.guest().accel(),
                                std::to_string(result.host.guest().icount_shift()),
                                {h.governor(), h.turbo(), h.smt(), h.cpus_allowed(),
                                 h.mems_allowed(), h.kernel_counters()},
                                result.host.iommu_environment().digest());
      out.push_back(std::move(row));
    }
  }
  return out;
}

MatrixInfo InfoOf(const MatrixRow& m) {
  return MatrixInfo{m.id, m.catalog, m.analysis_bisect,
                    ExecutorFromNumber(static_cast<int>(m.executor)), m.spec_yaml};
}

// What MatricesToAnalyze and the floor ask of a matrix's jobs.
struct MatrixJobs {
  bool bulk = false;  // has a bulk job
  bool live = false;  // has a queued or leased job
};

std::map<int64_t, MatrixJobs> JobsByMatrix(const Tables& t) {
  std::map<int64_t, MatrixJobs> out;
  for (const auto& [id, row] : t.jobs) {
    MatrixJobs& m = out[row.job.matrix_id()];
    m.bulk = m.bulk || row.job.kind() == pb::JOB_KIND_BULK;
    m.live = m.live || Live(row.job.state());
  }
  return out;
}

// kAdvanceFloor: just below the lowest matrix above the floor that has bulk
// jobs and no analysis yet; else the highest matrix id; else 0.
void AdvanceFloor(Tables& t) {
  const int64_t floor = Floor(t);
  const std::map<int64_t, MatrixJobs> jobs = JobsByMatrix(t);
  int64_t next = t.matrices.empty() ? 0 : t.matrices.rbegin()->first;
  for (auto it = t.matrices.upper_bound(floor); it != t.matrices.end(); ++it) {
    auto j = jobs.find(it->first);
    if (j == jobs.end() || !j->second.bulk) continue;
    if (t.analyzer_state.count(MatrixKey(it->first)) != 0) continue;
    next = it->first - 1;
    break;
  }
  t.analyzer_state["matrix_floor"] = absl::StrCat(next);
}

// The index of commit `id` in `catalog`, if it has one.
std::optional<int> CommitIndex(const Tables& t, const std::string& catalog, const std::string& id) {
  auto c = t.catalogs.find(catalog);
  if (c == t.catalogs.end()) return std::nullopt;
  for (const pb::CatalogCommit& commit : c->second.commits) {
    if (commit.id() == id) return commit.index();
  }
  return std::nullopt;
}

bool OpenWithKey(const Tables& t, const std::string& series_key) {
  for (const auto& [id, row] : t.regressions) {
    if (row.series_key == series_key && Open(row.regression.state())) return true;
  }
  return false;
}

// An open or ignored regression of the same change as `f`: catalog,
// platform, workload and params, metric and direction, with an overlapping
// (last good, first bad] range; its leading mode may differ.
bool SameChangeKnown(const Tables& t, const std::string& catalog, const RegressionFinding& f) {
  const pb::ChangeDirection direction =
      f.regression ? pb::CHANGE_DIRECTION_REGRESSION : pb::CHANGE_DIRECTION_IMPROVEMENT;
  for (const auto& [id, row] : t.regressions) {
    const pb::Regression& g = row.regression;
    if (g.kind() == "decay") continue;  // a fall within runs, not a change between commits
    if ((!Open(g.state()) && g.state() != pb::REGRESSION_STATE_IGNORED) || g.catalog() != catalog ||
        g.platform() != f.platform || g.workload() != f.workload ||
        MapToJson(g.params()) != f.params || g.metric() != f.metric || g.direction() != direction) {
      continue;
    }
    const std::optional<int> lg = CommitIndex(t, g.catalog(), g.last_good());
    const std::optional<int> fb = CommitIndex(t, g.catalog(), g.first_bad());
    if (lg && fb && *lg < f.first_bad_index && f.last_good_index < *fb) return true;
  }
  return false;
}

// Inserts the regression row of `n`, its running bisect and the bisect's
// analyzer state; returns the bisect id.
int64_t InsertRegression(Tables& t, const NewRegression& n, int64_t matrix_id,
                         const std::string& catalog, absl::Time now) {
  const RegressionFinding& f = n.finding;
  RegressionRow row;
  pb::Regression& g = row.regression;
  g.set_id(++t.last_regression_id);
  g.set_state(n.state);
  g.set_change_class(f.change_class);
  g.set_direction(f.regression ? pb::CHANGE_DIRECTION_REGRESSION
                               : pb::CHANGE_DIRECTION_IMPROVEMENT);
  g.set_platform(f.platform);
  g.set_workload(f.workload);
  JsonToMap(f.params, g.mutable_params());
  g.set_metric(f.metric);
  g.set_mode(static_cast<pb::IommuMode>(ModeNumber(f.mode)));
  g.set_overhead_series(f.overhead_series);
  g.set_catalog(catalog);
  g.set_last_good(f.last_good);
  g.set_first_bad(f.first_bad);
  g.set_magnitude(f.magnitude);
  g.set_p_value(f.p_value);
  JsonToPerMode(PerModeJson(f), &g);
  g.set_matrix_id(matrix_id);
  g.set_note(n.note);
  g.set_metric_rank(n.metric_rank);
  g.set_kind(n.kind);
  for (const std::string& m : n.primary_metrics) g.add_primary_metrics(m);
  SetTime(now, g.mutable_detected_at());
  row.updated_at = now;
  row.series_key = n.series_key;

  pb::Bisect b;
  b.set_id(++t.last_bisect_id);
  b.set_regression_id(g.id());
  b.set_state(n.kind == "decay" ? "done" : "running");
  b.set_last_good(f.last_good);
  b.set_first_bad(f.first_bad);
  g.set_bisect_id(b.id());
  t.analyzer_state[BisectKey(b.id())] = n.bisect_state_json;
  t.regressions.emplace(g.id(), std::move(row));
  const int64_t bisect_id = b.id();
  t.bisects.emplace(bisect_id, std::move(b));
  return bisect_id;
}

// JoinGroup of the SQL: the new regression `g` into n.group_id's group,
// whose range narrows to the overlap; a negative number opens one on the
// first finding that carries it (`opened`: number -> id).
void JoinGroup(Tables& t, const NewRegression& n, pb::Regression& g,
               std::map<int64_t, int64_t>& opened, absl::Time now) {
  if (n.group_id == 0) return;
  const RegressionFinding& f = n.finding;
  int64_t id = n.group_id;
  if (id < 0) {
    auto it = opened.find(id);
    if (it == opened.end()) {
      RegressionGroup group;
      group.id = ++t.last_group_id;
      group.catalog = g.catalog();
      group.opened_at = now;
      group.last_good = f.last_good;
      group.last_good_index = f.last_good_index;
      group.first_bad = f.first_bad;
      group.first_bad_index = f.first_bad_index;
      t.regression_groups.emplace(group.id, group);
      it = opened.emplace(id, group.id).first;
    }
    id = it->second;
  }
  auto group = t.regression_groups.find(id);
  if (group == t.regression_groups.end()) return;  // the SQL's UPDATE of no row
  RegressionGroup& r = group->second;
  if (f.last_good_index > r.last_good_index) {
    r.last_good_index = f.last_good_index;
    r.last_good = f.last_good;
  }
  if (f.first_bad_index < r.first_bad_index) {
    r.first_bad_index = f.first_bad_index;
    r.first_bad = f.first_bad;
  }
  g.set_group_id(id);
}

// A stored group with its members, as GroupFromRow of the SQL reads it.
RegressionGroup WithMembers(const Tables& t, const RegressionGroup& stored) {
  RegressionGroup out = stored;
  out.members.clear();
  for (const auto& [id, row] : t.regressions) {
    const pb::Regression& g = row.regression;
    if (g.group_id() != stored.id) continue;
    RegressionGroup::Member m;
    m.regression_id = id;
    m.state = static_cast<int>(g.state());
    m.strength = row.strength;
    m.last_good = g.last_good();
    m.last_good_index = CommitIndex(t, g.catalog(), g.last_good()).value_or(0);
    m.first_bad = g.first_bad();
    m.first_bad_index = CommitIndex(t, g.catalog(), g.first_bad()).value_or(0);
    if (auto b = t.bisects.find(g.bisect_id()); b != t.bisects.end()) {
      m.bisect_state = b->second.state();
    }
    m.culprit_id = g.culprit_id();
    m.culprit_subject = g.culprit_subject();
    out.members.push_back(std::move(m));
  }
  return out;
}

// The UPDATE of regressions in SaveBisect.
void UpdateRegressionFromBisect(RegressionRow& row, const BisectUpdate& u, absl::Time now) {
  pb::Regression& g = row.regression;
  const pb::RegressionState next = u.regression_state.value_or(pb::REGRESSION_STATE_UNSPECIFIED);
  // A person's triage (acknowledged/fixed/false positive) is never overwritten.
  if (next != pb::REGRESSION_STATE_UNSPECIFIED && (g.state() == pb::REGRESSION_STATE_SUSPECTED ||
                                                   g.state() == pb::REGRESSION_STATE_CONFIRMED)) {
    g.set_state(next);
  }
  g.set_culprit_id(u.culprit_id);
  g.set_culprit_subject(u.culprit_subject);
  if (u.bisect_state == "done") {
    if (!u.last_good.empty()) g.set_last_good(u.last_good);
    if (!u.first_bad.empty()) g.set_first_bad(u.first_bad);
  }
  if (u.magnitude.has_value()) {
    g.set_magnitude(*u.magnitude);
    g.set_p_value(u.p_value.value_or(1));
  }
  if (!u.confirmed_by.empty()) g.set_confirmed_by(u.confirmed_by);
  if (u.confirm_matrix_id != 0) g.set_confirm_matrix_id(u.confirm_matrix_id);
  if (!u.confirm_note.empty()) g.set_confirm_note(u.confirm_note);
  row.updated_at = now;
}

// The upsert of one bisect_steps row: `at` moves only with the verdict, the
// executor only when the update names one.
void UpsertStep(pb::Bisect& b, const BisectUpdate::Step& u, absl::Time now) {
  const BisectStepRecord& r = u.record;
  pb::BisectStep* step = nullptr;
  for (pb::BisectStep& s : *b.mutable_steps()) {
    if (s.step() == r.step) step = &s;
  }
  if (step == nullptr) {
    step = b.add_steps();
    step->set_step(r.step);
    SetTime(now, step->mutable_at());
  } else if (step->verdict() != r.verdict) {
    SetTime(now, step->mutable_at());
  }
  step->set_commit_id(r.commit_id);
  step->set_commit_index(r.commit_index);
  step->set_verdict(r.verdict);
  step->set_repeats(r.repeats);
  step->set_mean(r.mean);
  step->set_p_value(r.p_value);
  step->set_relative_change(r.relative_change);
  if (!u.executor.empty()) {
    step->set_executor(u.executor);
    step->set_real_kernel(proto::IsRealExecutor(proto::ExecutorFromName(u.executor)));
  }
}

// to_char(... AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"').
std::string Rfc3339Seconds(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

// The regression's latest alert (highest id), or nullptr.
std::map<int64_t, const AlertRow*> LatestAlerts(const Tables& t) {
  std::map<int64_t, const AlertRow*> out;
  for (const auto& [id, a] : t.alerts) out[a.regression_id] = &a;
  return out;
}

// AlertCandidates' WHERE on a regression of direction regression.
bool WantsAlert(const RegressionRow& row, const AlertRow* a, absl::Time resolved_after) {
  const pb::RegressionState state = row.regression.state();
  const bool closed = state > pb::REGRESSION_STATE_ACKNOWLEDGED;
  if (Alerting(state) || !row.silence_id.empty()) return true;
  if (a == nullptr || !closed) return false;
  return a->firing || (a->ends_at.has_value() && *a->ends_at > resolved_after);
}

AlertWork AlertWorkOf(const Tables& t, const RegressionRow& row, const AlertRow* a,
                      absl::Time now) {
  const pb::Regression& g = row.regression;
  AlertWork w;
  w.regression_id = g.id();
  w.state = static_cast<int>(g.state());
  w.kind = g.kind().empty() ? "change" : g.kind();
  w.platform = g.platform();
  w.workload = g.workload();
  w.metric = g.metric();
  w.mode_name = ModeName(static_cast<int>(g.mode()));
  w.catalog = g.catalog();
  w.params = MapToJson(g.params());
  w.overhead = g.overhead_series();
  w.change_class = static_cast<int>(g.change_class());
  w.magnitude = g.magnitude();
  w.last_good = g.last_good();
  w.first_bad = g.first_bad();
  w.culprit_id = g.culprit_id();
  w.culprit_subject = g.culprit_subject();
  if (auto cat = t.catalogs.find(g.catalog()); cat != t.catalogs.end()) {
    for (const pb::CatalogCommit& c : cat->second.commits)
      if (!g.culprit_id().empty() && c.id() == g.culprit_id()) w.culprit_author = c.author();
  }
  auto b = g.bisect_id() == 0 ? t.bisects.end() : t.bisects.find(g.bisect_id());
  if (b != t.bisects.end()) {
    w.bisect_done = b->second.state() == "done";
    w.bisect_steps =
        static_cast<int>(std::count_if(b->second.steps().begin(), b->second.steps().end(),
                                       [](const pb::BisectStep& s) { return s.step() > 0; }));
    for (const pb::Culprit& c : b->second.culprits()) {
      w.culprits.push_back({c.commit_id(), c.share()});
    }
  }
  w.primary_metric = g.metric_rank() == "primary";
  w.primary_metrics = absl::StrJoin(g.primary_metrics(), ",");
  w.silence_id = row.silence_id;
  if (a != nullptr) {
    w.alert_exists = true;
    w.alert_firing = a->firing;
    w.starts_at = Rfc3339Seconds(a->starts_at);
    if (a->ends_at.has_value()) w.ends_at = Rfc3339Seconds(*a->ends_at);
    if (a->last_sent_at.has_value()) {
      w.seconds_since_sent = absl::ToDoubleSeconds(now - *a->last_sent_at);
    }
    w.labels_json = a->labels_json;
    w.annotations_json = a->annotations_json;
  }
  if (auto st = t.analyzer_state.find(BisectKey(g.bisect_id())); st != t.analyzer_state.end()) {
    w.bisect_state_json = st->second;
  }
  w.group_id = g.group_id();
  w.strength = row.strength;
  return w;
}

bool KnownFixCheck(const std::string& fix_check) {
  return fix_check.empty() || fix_check == "checking" || fix_check == "back" ||
         fix_check == "not-back" || fix_check == "no-later-commit";
}

}  // namespace

absl::StatusOr<std::vector<MatrixInfo>> MemoryAnalyzerStore::MatricesToAnalyze() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<MatrixInfo>> {
    const std::map<int64_t, MatrixJobs> jobs = JobsByMatrix(t);
    std::vector<MatrixInfo> out;
    for (auto it = t.matrices.upper_bound(Floor(t));
         it != t.matrices.end() && out.size() < kAnalyzeBatch; ++it) {
      const MatrixRow& m = it->second;
      auto j = jobs.find(m.id);
      if (j == jobs.end() || !j->second.bulk || j->second.live) continue;
      if (t.analyzer_state.count(MatrixKey(m.id)) != 0) continue;
      out.push_back(InfoOf(m));
    }
    return out;
  });
}

absl::StatusOr<std::vector<MatrixInfo>> MemoryAnalyzerStore::LatestAnalysedMatrices() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<MatrixInfo>> {
    const int64_t floor = Floor(t);
    std::map<std::pair<std::string, std::string>, int64_t> newest;  // (platform, workload)
    for (const auto& [id, row] : t.jobs) {
      const pb::Job& j = row.job;
      if (j.kind() != pb::JOB_KIND_BULK) continue;
      const int64_t m = j.matrix_id();
      if (m > floor && t.analyzer_state.count(MatrixKey(m)) == 0) continue;
      int64_t& at = newest[{j.platform(), j.workload().name()}];
      at = std::max(at, m);
    }
    std::set<int64_t> ids;
    for (const auto& [cell, id] : newest) ids.insert(id);
    std::vector<MatrixInfo> out;
    for (int64_t id : ids) out.push_back(InfoOf(t.matrices.at(id)));
    return out;
  });
}

absl::StatusOr<std::vector<SampleRow>> MemoryAnalyzerStore::Samples(
    const std::vector<int64_t>& matrices) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<SampleRow>> {
    return SamplesOf(t, [&](const pb::Job& j) { return Listed(matrices, j.matrix_id()); });
  });
}

absl::StatusOr<std::vector<SampleRow>> MemoryAnalyzerStore::HistorySamples(
    const std::string& catalog, pb::Executor executor, const std::vector<HistoryCell>& cells,
    int64_t except_matrix, int max_matrices) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<SampleRow>> {
    const int64_t floor = Floor(t);
    // The spec's `set:` of a matrix, parsed once per matrix: equal sets
    // compare equal.
    std::map<int64_t, nlohmann::json> sets;
    auto set_of = [&](int64_t m) -> const nlohmann::json& {
      auto [at, fresh] = sets.try_emplace(m);
      if (!fresh) return at->second;
      auto it = t.matrices.find(m);
      absl::StatusOr<std::string> set = it == t.matrices.end()
                                            ? absl::NotFoundError("no such matrix")
                                            : MatrixSpecSetJson(it->second.spec_yaml);
      at->second = nlohmann::json::parse(set.ok() ? *set : "{}", nullptr, false);
      return at->second;
    };
    const nlohmann::json own_set = set_of(except_matrix);  // a copy: `sets` grows
    auto qualifies = [&](const pb::Job& j) {
      const int64_t m = j.matrix_id();
      bool cell = false;
      for (const HistoryCell& c : cells) {
        cell = cell || (c.platform == j.platform() && c.workload == j.workload().name() &&
                        c.params == MapToJson(j.workload().params()));
      }
      return cell && j.catalog() == catalog && j.executor() == executor &&
             j.kind() == pb::JOB_KIND_BULK && m != except_matrix &&
             (m <= floor || t.analyzer_state.count(MatrixKey(m)) != 0) && set_of(m) == own_set;
    };
    std::set<int64_t> newest;  // the newest max_matrices qualifying matrices
    for (const auto& [id, row] : t.jobs) {
      if (!qualifies(row.job)) continue;
      newest.insert(row.job.matrix_id());
      if (static_cast<int>(newest.size()) > max_matrices) newest.erase(newest.begin());
    }
    return SamplesOf(
        t, [&](const pb::Job& j) { return newest.count(j.matrix_id()) != 0 && qualifies(j); });
  });
}

absl::StatusOr<bool> MemoryAnalyzerStore::MatricesTerminal(const std::vector<int64_t>& matrices) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<bool> {
    for (const auto& [id, row] : t.jobs) {
      if (Listed(matrices, row.job.matrix_id()) && Live(row.job.state())) return false;
    }
    return true;
  });
}

absl::StatusOr<std::vector<std::string>> MemoryAnalyzerStore::FailureReasons(
    const std::vector<int64_t>& matrices) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<std::string>> {
    std::vector<std::string> out;
    for (const auto& [id, row] : t.jobs) {  // by id
      if (Listed(matrices, row.job.matrix_id()) && row.job.state() == pb::JOB_STATE_FAILED) {
        out.push_back(row.job.failure_reason());
      }
    }
    return out;
  });
}

absl::StatusOr<std::vector<CommitRow>> MemoryAnalyzerStore::Commits(const std::string& catalog,
                                                                    int lo, int hi) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<CommitRow>> {
    std::vector<CommitRow> out;
    auto c = t.catalogs.find(catalog);
    if (c != t.catalogs.end()) {
      for (const pb::CatalogCommit& commit : c->second.commits) {  // by index
        if (commit.index() >= lo && commit.index() <= hi) {
          out.push_back(CommitRow{commit.index(),
                                  commit.id(),
                                  commit.subject(),
                                  {commit.parents().begin(), commit.parents().end()}});
        }
      }
    }
    if (out.empty()) {
      return absl::NotFoundError(
          absl::StrCat("catalog ", catalog, " has no commits in [", lo, ", ", hi, "]"));
    }
    return out;
  });
}

absl::StatusOr<SeriesSpec> MemoryAnalyzerStore::Cell(int64_t matrix_id, const std::string& platform,
                                                     const std::string& workload,
                                                     const std::string& params) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<SeriesSpec> {
    auto m = t.matrices.find(matrix_id);
    const pb::Job* job = nullptr;
    for (const auto& [id, row] : t.jobs) {  // the first by id
      const pb::Job& j = row.job;
      if (j.matrix_id() == matrix_id && j.platform() == platform &&
          j.workload().name() == workload && MapToJson(j.workload().params()) == params) {
        job = &j;
        break;
      }
    }
    if (m == t.matrices.end() || job == nullptr) {
      return absl::NotFoundError(absl::StrCat("matrix ", matrix_id, " has no job for ", platform,
                                              " ", workload, " ", params));
    }
    SeriesSpec s;
    s.platform = platform;
    s.workload = workload;
    s.params_json = MapToJson(job->workload().params());
    s.executor = ExecutorFromNumber(static_cast<int>(job->executor()));
    s.catalog = job->catalog();
    if (absl::Status st = FillFromMatrixSpec(m->second.spec_yaml, &s); !st.ok()) return st;
    return s;
  });
}

absl::StatusOr<std::vector<int64_t>> MemoryAnalyzerStore::RecordAnalysis(
    int64_t matrix_id, const std::string& catalog, const std::vector<NewRegression>& found,
    const std::vector<std::string>& skipped_series) {
  using Out = std::vector<int64_t>;
  return db_->Write([&](Tables& t, Changes&) -> absl::StatusOr<Out> {
    const std::string marker = MatrixKey(matrix_id);
    if (t.analyzer_state.count(marker) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("duplicate key value violates unique constraint: ", marker));
    }
    // Rows are written as they are decided, so a later finding sees the
    // earlier ones (as the SQL does in its transaction); a value that is not
    // JSON undoes them all.
    const int64_t last_regression = t.last_regression_id, last_bisect = t.last_bisect_id;
    const int64_t last_group = t.last_group_id;
    const std::map<int64_t, RegressionGroup> groups_before = t.regression_groups;
    auto undo = [&] {
      t.regression_groups = groups_before;
      t.last_group_id = last_group;
      for (int64_t id = last_bisect + 1; id <= t.last_bisect_id; ++id) {
        t.bisects.erase(id);
        t.analyzer_state.erase(BisectKey(id));
      }
      for (int64_t id = last_regression + 1; id <= t.last_regression_id; ++id) {
        t.regressions.erase(id);
      }
      t.last_regression_id = last_regression;
      t.last_bisect_id = last_bisect;
    };
    const absl::Time now = db_->Now();
    Out bisects;
    std::map<int64_t, int64_t> opened_groups;
    for (const NewRegression& n : found) {
      // A decay is one commit's: only its own key (cell and commit) repeats it.
      if (OpenWithKey(t, n.series_key) ||
          (n.kind != "decay" && SameChangeKnown(t, catalog, n.finding)))
        continue;
      if (absl::Status st = CheckJson("analyzer_state", n.bisect_state_json); !st.ok()) {
        undo();
        return st;
      }
      bisects.push_back(InsertRegression(t, n, matrix_id, catalog, now));
      RegressionRow& row = t.regressions.at(t.last_regression_id);
      row.strength = n.strength;
      JoinGroup(t, n, row.regression, opened_groups, now);
    }
    t.analyzer_state[marker] = AnalysedMarkerJson(found.size(), skipped_series);
    AdvanceFloor(t);
    return bisects;
  });
}

absl::Status MemoryAnalyzerStore::RecordAnalysisFailure(int64_t matrix_id,
                                                        const std::string& reason) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    const std::string marker = MatrixKey(matrix_id);
    if (t.analyzer_state.count(marker) != 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("duplicate key value violates unique constraint: ", marker));
    }
    t.analyzer_state[marker] = FailedMarkerJson(reason);
    AdvanceFloor(t);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ActiveBisect>> MemoryAnalyzerStore::ActiveBisects() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<ActiveBisect>> {
    std::vector<ActiveBisect> out;
    for (const auto& [id, b] : t.bisects) {
      if (b.state() != "running") continue;
      auto st = t.analyzer_state.find(BisectKey(id));
      if (st == t.analyzer_state.end()) continue;
      out.push_back(ActiveBisect{id, b.regression_id(), st->second});
    }
    return out;
  });
}

absl::Status MemoryAnalyzerStore::SaveBisect(const BisectUpdate& u) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    if (absl::Status st = CheckJson("analyzer_state", u.state_json); !st.ok()) return st;
    auto b = t.bisects.find(u.bisect_id);
    if (b == t.bisects.end() && (!u.culprits.empty() || !u.steps.empty())) {
      return absl::InternalError(
          absl::StrCat("bisect ", u.bisect_id, ": steps and culprits need their bisect"));
    }
    const absl::Time now = db_->Now();
    if (auto st = t.analyzer_state.find(BisectKey(u.bisect_id)); st != t.analyzer_state.end()) {
      st->second = u.state_json;
    }
    if (auto g = t.regressions.find(u.regression_id); g != t.regressions.end()) {
      UpdateRegressionFromBisect(g->second, u, now);
    }
    if (b == t.bisects.end()) return absl::OkStatus();
    pb::Bisect& bisect = b->second;
    bisect.set_state(u.bisect_state);
    bisect.set_last_good(u.last_good);
    bisect.set_first_bad(u.first_bad);
    bisect.set_culprit_id(u.culprit_id);
    bisect.set_culprit_subject(u.culprit_subject);
    if (!u.culprits.empty()) {
      bisect.clear_culprits();
      for (const BisectUpdate::CulpritRow& row : u.culprits) {
        pb::Culprit* c = bisect.add_culprits();
        c->set_commit_id(row.culprit.commit_id);
        c->set_commit_index(row.culprit.index);
        c->set_last_good(row.last_good);
        c->set_subject(row.subject);
        c->set_relative_change(row.culprit.relative_change);
        c->set_share(row.culprit.share);
      }
    }
    for (const BisectUpdate::Step& s : u.steps) UpsertStep(bisect, s, now);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<AlertWork>> MemoryAnalyzerStore::AlertCandidates(
    absl::Duration resolved_window) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<AlertWork>> {
    const absl::Time now = db_->Now();
    const std::map<int64_t, const AlertRow*> latest = LatestAlerts(t);
    std::vector<AlertWork> out;
    for (const auto& [id, row] : t.regressions) {
      if (row.regression.direction() != pb::CHANGE_DIRECTION_REGRESSION) continue;
      auto a = latest.find(id);
      const AlertRow* alert = a == latest.end() ? nullptr : a->second;
      if (!WantsAlert(row, alert, now - resolved_window)) continue;
      out.push_back(AlertWorkOf(t, row, alert, now));
    }
    return out;
  });
}

absl::Status MemoryAnalyzerStore::SetSilence(int64_t regression_id, const std::string& silence_id) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    if (auto g = t.regressions.find(regression_id); g != t.regressions.end()) {
      g->second.silence_id = silence_id;
    }
    return absl::OkStatus();
  });
}

absl::Status MemoryAnalyzerStore::MarkAlertSent(int64_t regression_id, bool firing,
                                                const std::string& labels_json,
                                                const std::string& annotations_json) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    if (absl::Status st = CheckJson("alerts.labels", labels_json); !st.ok()) return st;
    if (absl::Status st = CheckJson("alerts.annotations", annotations_json); !st.ok()) return st;
    const absl::Time now = db_->Now();
    AlertRow* latest = nullptr;
    for (auto& [id, a] : t.alerts) {
      if (a.regression_id == regression_id) latest = &a;
    }
    auto g = t.regressions.find(regression_id);
    if (latest == nullptr) {
      if (g == t.regressions.end()) {
        return absl::InternalError(
            absl::StrCat("alerts: regression ", regression_id, " does not exist"));
      }
      AlertRow a;
      a.id = ++t.last_alert_id;
      a.regression_id = regression_id;
      a.name = "IommuPerfRegression";
      a.starts_at = now;
      latest = &t.alerts.emplace(a.id, std::move(a)).first->second;
      latest->ends_at = firing ? std::nullopt : std::optional<absl::Time>(now);
    } else if (firing) {
      latest->ends_at.reset();
    } else if (!latest->ends_at.has_value()) {
      latest->ends_at = now;
    }
    latest->firing = firing;
    latest->labels_json = labels_json;
    latest->annotations_json = annotations_json;
    latest->last_sent_at = now;
    if (g != t.regressions.end()) g->second.regression.set_alert_firing(firing);
    return absl::OkStatus();
  });
}

absl::StatusOr<AnalyzerStore::OpenCounts> MemoryAnalyzerStore::CountOpenRegressions() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<OpenCounts> {
    OpenCounts out;
    for (const auto& [id, row] : t.regressions) {
      const pb::Regression& g = row.regression;
      if (g.direction() != pb::CHANGE_DIRECTION_REGRESSION || !Alerting(g.state())) continue;
      if (g.metric_rank() == "primary") ++out.primary;
      if (g.metric_rank() == "secondary") ++out.secondary;
    }
    return out;
  });
}

absl::StatusOr<std::vector<FixCheckWork>> MemoryAnalyzerStore::FixChecks() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<FixCheckWork>> {
    std::vector<FixCheckWork> out;
    for (const auto& [id, row] : t.regressions) {
      const pb::Regression& g = row.regression;
      if (g.state() != pb::REGRESSION_STATE_FIXED ||
          g.direction() != pb::CHANGE_DIRECTION_REGRESSION ||
          (!g.fix_check().empty() && g.fix_check() != "checking") || g.bisect_id() == 0) {
        continue;
      }
      auto bisect = t.analyzer_state.find(BisectKey(g.bisect_id()));
      if (bisect == t.analyzer_state.end()) continue;
      auto check = t.analyzer_state.find(FixCheckKey(id));
      out.push_back(FixCheckWork{id, g.fix_check(), bisect->second,
                                 check == t.analyzer_state.end() ? "" : check->second});
    }
    return out;
  });
}

absl::StatusOr<CommitRow> MemoryAnalyzerStore::LatestCommit(const std::string& catalog) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<CommitRow> {
    auto c = t.catalogs.find(catalog);
    if (c == t.catalogs.end() || c->second.commits.empty()) {
      return absl::NotFoundError(absl::StrCat("catalog ", catalog, " is empty"));
    }
    const pb::CatalogCommit& last = c->second.commits.back();  // by index
    return CommitRow{last.index(), last.id(), last.subject()};
  });
}

absl::StatusOr<std::vector<pb::KernelOffer>> MemoryAnalyzerStore::LiveOffers(pb::Executor executor,
                                                                             absl::Duration live) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::KernelOffer>> {
    const absl::Time since = db_->Now() - live;
    std::vector<pb::KernelOffer> out;
    for (const auto& [id, a] : t.agents) {  // by id
      if (a.last_heartbeat <= since) continue;
      const std::vector<pb::KernelOffer> offers =
          proto::OffersFor({a.capabilities.begin(), a.capabilities.end()}, executor, a.host);
      out.insert(out.end(), offers.begin(), offers.end());
    }
    return out;
  });
}

absl::StatusOr<std::vector<std::vector<pb::Capability>>> MemoryAnalyzerStore::AgentCapabilities() {
  using Out = std::vector<std::vector<pb::Capability>>;
  return db_->Read([&](const Tables& t) -> absl::StatusOr<Out> {
    Out out;
    for (const auto& [id, a] : t.agents)
      out.emplace_back(a.capabilities.begin(), a.capabilities.end());
    return out;
  });
}

absl::Status MemoryAnalyzerStore::SaveFixCheck(int64_t regression_id, const std::string& fix_check,
                                               const std::string& commit, double change,
                                               const std::string& state_json,
                                               const std::string& reopen_note) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    if (absl::Status st = CheckJson("analyzer_state", state_json); !st.ok()) return st;
    auto g = t.regressions.find(regression_id);
    const bool fixed =
        g != t.regressions.end() && g->second.regression.state() == pb::REGRESSION_STATE_FIXED;
    if (fixed && !KnownFixCheck(fix_check)) {
      return absl::InternalError(
          absl::StrCat("regressions.fix_check: \"", fix_check, "\" violates its check"));
    }
    t.analyzer_state[FixCheckKey(regression_id)] = state_json;
    if (!fixed) return absl::OkStatus();
    pb::Regression& r = g->second.regression;
    r.set_fix_check(fix_check);
    r.set_fix_check_commit(commit);
    r.set_fix_check_change(change);
    if (!reopen_note.empty()) {
      r.set_state(pb::REGRESSION_STATE_CONFIRMED);
      r.set_note(r.note().empty() ? reopen_note : absl::StrCat(r.note(), "\n", reopen_note));
    }
    g->second.updated_at = db_->Now();
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<RegressionGroup>> MemoryAnalyzerStore::OpenGroups(
    const std::string& catalog, absl::Duration window) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<RegressionGroup>> {
    const absl::Time since = db_->Now() - window;
    std::vector<RegressionGroup> out;
    for (const auto& [id, g] : t.regression_groups) {
      if (g.catalog == catalog && g.opened_at >= since) out.push_back(WithMembers(t, g));
    }
    return out;
  });
}

absl::StatusOr<RegressionGroup> MemoryAnalyzerStore::GroupOf(int64_t regression_id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<RegressionGroup> {
    auto r = t.regressions.find(regression_id);
    auto g = r == t.regressions.end() ? t.regression_groups.end()
                                      : t.regression_groups.find(r->second.regression.group_id());
    if (g == t.regression_groups.end()) {
      return absl::NotFoundError(absl::StrCat("regression ", regression_id, " is in no group"));
    }
    return WithMembers(t, g->second);
  });
}

absl::Status MemoryAnalyzerStore::SaveGroup(int64_t group_id, int64_t leader_id,
                                            const std::string& state,
                                            const std::string& culprit_id) {
  return db_->Write([&](Tables& t, Changes&) -> absl::Status {
    auto g = t.regression_groups.find(group_id);
    if (g == t.regression_groups.end()) return absl::OkStatus();  // the UPDATE of no row
    g->second.leader_id = leader_id;
    g->second.state = state;
    g->second.culprit_id = culprit_id;
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> MemoryAnalyzerStore::SplitFromGroup(int64_t regression_id) {
  return db_->Write([&](Tables& t, Changes&) -> absl::StatusOr<int64_t> {
    auto r = t.regressions.find(regression_id);
    if (r == t.regressions.end()) {
      return absl::NotFoundError(absl::StrCat("regression ", regression_id));
    }
    pb::Regression& g = r->second.regression;
    RegressionGroup group;
    group.id = ++t.last_group_id;
    group.catalog = g.catalog();
    group.opened_at = db_->Now();
    group.last_good = g.last_good();
    group.last_good_index = CommitIndex(t, g.catalog(), g.last_good()).value_or(0);
    group.first_bad = g.first_bad();
    group.first_bad_index = CommitIndex(t, g.catalog(), g.first_bad()).value_or(0);
    group.leader_id = regression_id;
    group.state = "bisecting";
    t.regression_groups.emplace(group.id, group);
    g.set_group_id(group.id);
    return group.id;
  });
}

}  // namespace farm::storage
