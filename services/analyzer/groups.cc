#include "services/analyzer/groups.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/catalog_dag.h"
#include "services/analyzer/log.h"
#include "services/analyzer/series.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

// (last good, first bad] ranges overlap: they may hold one culprit.
bool Overlap(int lg_a, int fb_a, int lg_b, int fb_b) { return lg_a < fb_b && lg_b < fb_a; }

// Open or acknowledged, or not triaged yet: a member that may still lead.
bool Standing(int state) {
  return state == pb::REGRESSION_STATE_SUSPECTED || state == pb::REGRESSION_STATE_CONFIRMED ||
         state == pb::REGRESSION_STATE_ACKNOWLEDGED;
}

const RegressionGroup::Member* MemberOf(const RegressionGroup& g, int64_t id) {
  for (const RegressionGroup::Member& m : g.members) {
    if (m.regression_id == id) return &m;
  }
  return nullptr;
}

int SeverityRank(const std::string& s) {
  return s == "critical" ? 3 : s == "warning" ? 2 : s == "info" ? 1 : 0;
}

// The representative's rank: lower is preferred.
int RepresentativeRank(const AlertWork& a) {
  if (a.state == pb::REGRESSION_STATE_CONFIRMED) return 0;
  if (AlertFires(a.state)) return 1;
  if (a.alert_firing) return 2;
  return a.alert_exists ? 3 : 4;
}

// "regression 12: intel-vtd-2s12c iozone-nfsrdma throughput/write strict -20.0%"
std::string MemberLine(const AlertWork& a) {
  const std::string params = ParamsLabel(a.params);
  return absl::StrCat("regression ", a.regression_id, ": ", a.platform, " ", a.workload,
                      params.empty() ? "" : "{" + params + "}", " ", a.metric, " ",
                      AlertModeLabel(a), " ", Percent(a.magnitude),
                      AlertFires(a.state) ? "" : " (closed)");
}

Alert GroupAlert(int64_t group_id, const std::vector<const AlertWork*>& members, Alert alert,
                 const AlertOptions& options, const std::string& now) {
  std::set<std::string> cells, modes;
  std::vector<std::string> lines;
  std::vector<int64_t> open;
  std::string severity = alert.labels["severity"];
  for (const AlertWork* m : members) {
    cells.insert(absl::StrCat(m->platform, "/", m->workload));
    modes.insert(AlertModeLabel(*m));
    lines.push_back(MemberLine(*m));
    if (!AlertFires(m->state)) continue;
    open.push_back(m->regression_id);
    const std::optional<Alert> own = BuildAlert(*m, options, now);
    if (own.has_value() && SeverityRank(own->labels.at("severity")) > SeverityRank(severity)) {
      severity = own->labels.at("severity");
    }
  }
  // The representative's id stays readable: the mail names it for
  // `farmctl report --mail`.
  alert.annotations["regression_id"] = alert.labels["regression_id"];
  for (const char* label : {"platform", "workload", "params", "mode", "metric", "regression_id"}) {
    alert.labels.erase(label);
  }
  alert.labels["severity"] = severity;
  alert.labels["alert_group"] = absl::StrCat("group-", group_id);
  alert.labels["group_id"] = std::to_string(group_id);
  alert.labels["members"] = std::to_string(members.size());
  alert.annotations["summary"] =
      absl::StrCat(members.size(), " regression", members.size() == 1 ? "" : "s", " of group ",
                   group_id, ": ", alert.annotations["summary"]);
  alert.annotations["members"] = absl::StrJoin(lines, "\n");
  alert.annotations["cells"] = absl::StrJoin(cells, ", ");
  alert.annotations["modes"] = absl::StrJoin(modes, ", ");
  alert.annotations["group"] =
      absl::StrCat("group ", group_id, ": ", open.size(), " open of ", members.size(),
                   " regressions found together over overlapping commit ranges; one bisect "
                   "(of the strongest) names the culprit of all: ",
                   absl::StrJoin(open, ", "));
  return alert;
}

// Whether the commit at `index` is a suspect of (last_good, first_bad]:
// in a history graph an ancestor of first_bad that last_good lacks, as git
// bisect's suspects (a commit listed between the two may lie on a branch
// first_bad never merged); in a linear catalog, any commit between them.
absl::StatusOr<bool> Suspect(AnalyzerStore& store, const std::string& catalog,
                             const CommitRef& last_good, const CommitRef& first_bad, int index) {
  if (index <= last_good.index || index > first_bad.index) return false;
  absl::StatusOr<std::vector<CommitRow>> rows = store.Commits(catalog, 0, first_bad.index);
  if (!rows.ok()) return rows.status();
  std::vector<std::string> ids;
  std::vector<std::vector<std::string>> parent_ids;
  for (const CommitRow& r : *rows) {
    ids.push_back(r.id);
    parent_ids.push_back(r.parents);
  }
  if (static_cast<int>(ids.size()) != first_bad.index + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("catalog ", catalog, " changed under group of ", first_bad.id));
  }
  const std::vector<std::vector<int>> parents = proto::ParentPositions(ids, parent_ids);
  return proto::Ancestors(parents, first_bad.index)[index] &&
         !proto::Ancestors(parents, last_good.index)[index];
}

}  // namespace

double Strength(const Finding& f) {
  // Every run states its mode exactly: a mode change leads any group it is
  // in, its bisect (one run a step, no test) the cheapest and surest.
  if (f.change_class == ChangeClass::kModeChanged) return kModeChangeStrength;
  double best = 0;
  for (const ChangePoint& cp : f.change_points) {
    const double half = (cp.interval.hi - cp.interval.lo) / 2;
    if (half > 0 && std::isfinite(half))
      best = std::max(best, std::fabs(cp.relative_change) / half);
  }
  return best > 0 ? best : std::fabs(f.magnitude);
}

void AssignGroups(const std::vector<RegressionGroup>& open, const std::vector<bool>& groupable,
                  std::vector<NewRegression>& found) {
  struct Opened {
    int64_t number;
    int lg, fb;
  };
  std::vector<RegressionGroup> known = open;
  std::vector<Opened> opened;
  for (size_t i = 0; i < found.size(); ++i) {
    if (i >= groupable.size() || !groupable[i]) continue;
    NewRegression& n = found[i];
    const RegressionFinding& f = n.finding;
    n.group_id = 0;
    for (RegressionGroup& g : known) {
      if (!Overlap(g.last_good_index, g.first_bad_index, f.last_good_index, f.first_bad_index))
        continue;
      n.group_id = g.id;
      g.last_good_index = std::max(g.last_good_index, f.last_good_index);
      g.first_bad_index = std::min(g.first_bad_index, f.first_bad_index);
      break;
    }
    for (size_t k = 0; n.group_id == 0 && k < opened.size(); ++k) {
      Opened& o = opened[k];
      if (!Overlap(o.lg, o.fb, f.last_good_index, f.first_bad_index)) continue;
      n.group_id = o.number;
      o.lg = std::max(o.lg, f.last_good_index);
      o.fb = std::min(o.fb, f.first_bad_index);
    }
    if (n.group_id != 0) continue;
    const int64_t number = -static_cast<int64_t>(opened.size()) - 1;
    opened.push_back({number, f.last_good_index, f.first_bad_index});
    n.group_id = number;
  }
}

absl::Status GroupFindings(AnalyzerStore& store, const MatrixInfo& m,
                           const std::vector<Finding>& findings, bool bisect_secondary,
                           const GroupOptions& options, std::vector<NewRegression>& found) {
  std::vector<bool> groupable(found.size(), false);
  bool any = false;
  for (size_t i = 0; i < found.size() && i < findings.size(); ++i) {
    const Finding& f = findings[i];
    found[i].strength = Strength(f);
    groupable[i] = options.window > absl::ZeroDuration() && m.analysis_bisect && f.regression &&
                   (f.primary_metric || bisect_secondary);
    any = any || groupable[i];
  }
  if (!any) return absl::OkStatus();
  absl::StatusOr<std::vector<RegressionGroup>> open = store.OpenGroups(m.catalog, options.window);
  if (!open.ok()) return open.status();
  AssignGroups(*open, groupable, found);
  return absl::OkStatus();
}

int64_t GroupLeader(const RegressionGroup& group) {
  const RegressionGroup::Member* best = nullptr;
  for (const RegressionGroup::Member& m : group.members) {
    if (!Standing(m.state)) continue;
    if (best == nullptr || m.strength > best->strength) best = &m;
  }
  return best == nullptr ? 0 : best->regression_id;
}

absl::StatusOr<GroupTurn> GroupGate::Turn(int64_t regression_id, const CommitRef& last_good,
                                          const CommitRef& first_bad) {
  absl::StatusOr<RegressionGroup> got = store_->GroupOf(regression_id);
  if (absl::IsNotFound(got.status())) return GroupTurn{};
  if (!got.ok()) return got.status();
  RegressionGroup& g = *got;
  GroupTurn turn;
  turn.group_id = g.id;
  if (g.state == "failed") return turn;
  if (g.state == "culprit") return Culprit(g, regression_id, last_good, first_bad);
  if (g.state == "open") {
    const int64_t leader = GroupLeader(g);
    const RegressionGroup::Member* l = MemberOf(g, leader);
    // A leader done without a bisect of the group's (its range was one
    // commit): its culprit is the group's at once.
    const bool done = l != nullptr && leader != regression_id && l->bisect_state == "done";
    const std::string state = leader == regression_id ? "bisecting"
                              : !done                 ? "open"
                              : l->culprit_id.empty() ? "failed"
                                                      : "culprit";
    if (leader != g.leader_id || state != g.state) {
      if (absl::Status s = store_->SaveGroup(g.id, leader, state, done ? l->culprit_id : "");
          !s.ok())
        return s;
      if (state == "bisecting") {
        Log(absl::StrCat("group ", g.id, ": regression ", leader, " bisects for its ",
                         g.members.size(), " members"));
      }
    }
    g.leader_id = leader;
    g.state = state;
    if (done) g.culprit_id = l->culprit_id;
  }
  turn.leader_id = g.leader_id;
  if (g.state == "culprit") return Culprit(g, regression_id, last_good, first_bad);
  if (g.state == "open") {
    turn.kind = GroupTurn::Kind::kWait;
    return turn;
  }
  if (g.state != "bisecting" || g.leader_id == regression_id) return turn;  // failed: its own
  const RegressionGroup::Member* l = MemberOf(g, g.leader_id);
  if (l == nullptr || l->bisect_state == "running") {
    turn.kind = l == nullptr ? GroupTurn::Kind::kBisect : GroupTurn::Kind::kWait;
    return turn;
  }
  const std::string state =
      l->bisect_state == "done" && !l->culprit_id.empty() ? "culprit" : "failed";
  if (absl::Status s = store_->SaveGroup(g.id, g.leader_id, state, l->culprit_id); !s.ok())
    return s;
  Log(absl::StrCat("group ", g.id, ": leader ", g.leader_id,
                   state == "culprit" ? " named culprit " + l->culprit_id
                                      : " named no culprit; its members bisect on their own"));
  g.state = state;
  g.culprit_id = l->culprit_id;
  if (state == "failed") return turn;
  return Culprit(g, regression_id, last_good, first_bad);
}

// The group's culprit is known: inherited when it lies in the member's own
// range; else the member leaves for a group of its own and bisects.
absl::StatusOr<GroupTurn> GroupGate::Culprit(const RegressionGroup& g, int64_t regression_id,
                                             const CommitRef& last_good,
                                             const CommitRef& first_bad) {
  GroupTurn turn;
  turn.group_id = g.id;
  turn.leader_id = g.leader_id;
  const RegressionGroup::Member* l = MemberOf(g, g.leader_id);
  // The leader's range ends at its culprit once its bisect is done.
  bool inside = l != nullptr && l->culprit_id == g.culprit_id;
  if (inside) {
    absl::StatusOr<bool> suspect =
        Suspect(*store_, g.catalog, last_good, first_bad, l->first_bad_index);
    if (!suspect.ok()) return suspect.status();
    inside = *suspect;
  }
  if (inside) {
    turn.kind = GroupTurn::Kind::kInherit;
    turn.culprit_id = g.culprit_id;
    turn.culprit_subject = l->culprit_subject;
    turn.culprit_index = l->first_bad_index;
    turn.culprit_last_good = CommitRef{l->last_good_index, l->last_good};
    return turn;
  }
  absl::StatusOr<int64_t> own = store_->SplitFromGroup(regression_id);
  if (!own.ok()) return own.status();
  Log(absl::StrCat("group ", g.id, ": culprit ", g.culprit_id, " is outside regression ",
                   regression_id, "'s range ", last_good.id, "..", first_bad.id,
                   "; split into group ", *own, " and bisected"));
  turn.group_id = *own;
  turn.leader_id = regression_id;
  return turn;
}

void InheritCulprit(const GroupTurn& turn, BisectState& st, BisectUpdate& u) {
  st.phase = BisectPhase::kDone;
  u.bisect_state = "done";
  u.last_good = turn.culprit_last_good.id;
  u.first_bad = turn.culprit_id;
  u.culprit_id = turn.culprit_id;
  u.culprit_subject = turn.culprit_subject;
  u.culprits.push_back(BisectUpdate::CulpritRow{storage::Culprit{turn.culprit_last_good.index,
                                                                 turn.culprit_index,
                                                                 turn.culprit_id,
                                                                 st.expected_change,
                                                                 1,
                                                                 {}},
                                                turn.culprit_last_good.id, turn.culprit_subject});
}

GroupAlertPlan PlanGroupAlerts(const std::vector<AlertWork>& work, const AlertOptions& options,
                               const std::string& now) {
  std::map<int64_t, std::vector<const AlertWork*>> groups;
  for (const AlertWork& a : work) {
    if (a.group_id != 0) groups[a.group_id].push_back(&a);
  }
  GroupAlertPlan plan;
  for (const auto& [id, members] : groups) {
    if (members.size() < 2) continue;
    const AlertWork* rep = members.front();
    for (const AlertWork* m : members) {
      const int a = RepresentativeRank(*m), b = RepresentativeRank(*rep);
      if (a < b || (a == b && m->strength > rep->strength)) rep = m;
    }
    for (const AlertWork* m : members) {
      if (m != rep) plan.quiet.insert(m->regression_id);
    }
    std::optional<Alert> alert = BuildAlert(*rep, options, now);
    if (alert.has_value()) alert = GroupAlert(id, members, *std::move(alert), options, now);
    plan.alerts[rep->regression_id] = std::move(alert);
    plan.representative[id] = rep->regression_id;
  }
  return plan;
}

}  // namespace farm::analyzer
