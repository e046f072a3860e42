// Regression groups: regressions found within a window of each other
// (GroupOptions::window, default 30 min) whose commit ranges overlap are
// one group, as Chromeperf's alert groups and Skia Perf's anomaly
// groups gather the anomalies of one change across bots and tests. A group
// is one bisect and one alert:
//
//   assignment  a new regression that will be bisected joins the first open
//               group of its catalog (opened within the window) whose range
//               overlaps its own, the group's range narrowing to the
//               overlap; else it opens one (AssignGroups);
//   bisect      each member is confirmed on its own; a confirmed member
//               whose bisect is wanted asks GroupGate::Turn: the strongest
//               member still standing (largest change over its noise,
//               Strength) bisects, the others wait (BisectPhase::kWait).
//               The leader is chosen anew while none bisects (a stronger
//               member joining, or the leader rejected, moves it); once one
//               bisects it stays. Its culprit is inherited by every waiting
//               member whose own range holds it; a member whose range does
//               not is split into a group of its own and bisected. A
//               leader's bisect that names no culprit lets every member
//               bisect on its own;
//   alert       one Alertmanager alert per group (PlanGroupAlerts), posted
//               for its representative member (the strongest open one),
//               labelled with the group and its member count, the members,
//               cells and modes in its annotations; the other members post
//               none.
//
// Improvements and findings not bisected (secondary metrics without
// bisect_secondary, matrices without analysis.bisect) are in no group: they
// confirm and alert as single regressions.
//
// AssignGroups, Strength and PlanGroupAlerts are pure; GroupGate is
// thread-compatible and does not own its store.
#ifndef SERVICES_ANALYZER_GROUPS_H_
#define SERVICES_ANALYZER_GROUPS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/analyzer/alerts.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/detect.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

using storage::RegressionGroup;

struct GroupOptions {
  // How long after a group opened a new regression may still join it;
  // zero: no groups (every regression bisected and alerted on its own).
  absl::Duration window = absl::Minutes(30);
};

// A finding's change over its noise: |relative change| over the half width
// of its interval, of its strongest change point (0 without one); a mode
// change, which its runs state exactly, kModeChangeStrength, above any
// measured change.
inline constexpr double kModeChangeStrength = 1e9;
double Strength(const Finding& f);

// Sets NewRegression::group_id of each `found[i]` with `groupable[i]`: the
// first of `open` (OpenGroups: its catalog, within the window) whose range
// overlaps the finding's, else a group an earlier finding of `found` opened
// whose range (narrowed as they join) overlaps, else a new one (-1, -2, ...).
void AssignGroups(const std::vector<RegressionGroup>& open, const std::vector<bool>& groupable,
                  std::vector<NewRegression>& found);

// Sets the strength of each of `found` (found[i] is of findings[i]) and,
// with a window, assigns the groups of those that will be bisected:
// regressions of a matrix with analysis.bisect, of a primary metric or with
// `bisect_secondary`.
absl::Status GroupFindings(AnalyzerStore& store, const MatrixInfo& m,
                           const std::vector<Finding>& findings, bool bisect_secondary,
                           const GroupOptions& options, std::vector<NewRegression>& found);

// What a confirmed member does about its bisect.
struct GroupTurn {
  enum class Kind { kBisect, kWait, kInherit };
  Kind kind = Kind::kBisect;
  int64_t group_id = 0;
  int64_t leader_id = 0;
  // kInherit: the leader's culprit and the range its bisect ended with.
  std::string culprit_id;
  std::string culprit_subject;
  CommitRef culprit_last_good;
  int culprit_index = 0;
};

// The member of `group` that bisects for all: the strongest of those not
// rejected nor closed (lowest id on a tie); 0 when none is left.
int64_t GroupLeader(const RegressionGroup& group);

class GroupGate {
 public:
  explicit GroupGate(AnalyzerStore* store) : store_(store) {}

  // For regression `regression_id`, confirmed over (last_good, first_bad]
  // and wanting a bisect: bisect (it leads, it is in no group, or its group's
  // leader named no culprit), wait for the leader, or take the leader's
  // culprit. Records the group's leader and state as they move; splits the
  // member out (then kBisect) when the culprit is outside its range.
  absl::StatusOr<GroupTurn> Turn(int64_t regression_id, const CommitRef& last_good,
                                 const CommitRef& first_bad);

 private:
  absl::StatusOr<GroupTurn> Culprit(const RegressionGroup& g, int64_t regression_id,
                                    const CommitRef& last_good, const CommitRef& first_bad);

  AnalyzerStore* store_;
};

// The write of a member that takes its group leader's culprit: done, the
// culprit with the member's expected change, its range narrowed to the
// culprit's.
void InheritCulprit(const GroupTurn& turn, BisectState& st, BisectUpdate& u);

// The one alert of each group among `work` (AlertCandidates).
struct GroupAlertPlan {
  // Representative regression id -> the group's alert (nullopt: its rank is
  // not alerted).
  std::map<int64_t, std::optional<Alert>> alerts;
  // The other members: no alert of their own.
  std::set<int64_t> quiet;
  // Group id -> its representative's regression id.
  std::map<int64_t, int64_t> representative;

  // Whether regression `id`'s alert is its group's (a member of a group of
  // two or more); otherwise it is alerted on its own.
  bool Covers(int64_t id) const { return alerts.contains(id) || quiet.contains(id); }
};

// A group of one is no group to Alertmanager: its member's own alert
// (BuildAlert) stands, so a regression found alone keeps its alert's
// labels, and they move (the old set resolved) only when a second member
// joins. The representative of a group is its strongest open member (confirmed
// before acknowledged), else the member whose alert last fired, else the
// one last alerted (its resolution is re-sent). The alert is the
// representative's (BuildAlert) with the group's labels (alert_group
// "group-<id>", group_id, members; no member's own series labels), the
// highest severity of its open members, and annotations naming every
// member with its cell, mode and change (members, cells, modes, group).
GroupAlertPlan PlanGroupAlerts(const std::vector<AlertWork>& work, const AlertOptions& options,
                               const std::string& now);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_GROUPS_H_
