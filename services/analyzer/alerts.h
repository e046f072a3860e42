// The Alertmanager alert of a regression: what a person gets, so that they
// can act on it without opening the farm first.
//
// Labels identify the series (platform, catalog, workload and its params,
// mode, metric) and the regression, plus
//   severity     critical / warning by size for a primary metric,
//                AlertOptions::secondary_severity for a secondary one,
//                critical for a mode change;
//   alert_group  the culprit commit once the bisect named one, else the
//                range LAST_GOOD..FIRST_BAD: Alertmanager, routed with
//                group_by [alertname, catalog, alert_group], sends one
//                notification for every series one commit broke, as
//                Chromeperf's alert groups do.
// Annotations say what changed and by how much, the culprit(s), the bisect,
// the other regressions of the group (`group`), how to reproduce the change
// (`reproduce`: a `farmctl try` command holding the cell's spec, which runs
// both commits interleaved and prints the change with its interval, p and a
// verdict) and, with AlertOptions::report_url, a link to the regression's
// HTML report (`report`, also the alert's generatorURL) as
// `farmctl report --serve` serves it. A mode change (CHANGE_CLASS_MODE_CHANGED)
// says the modes instead of a size: summary "effective IOMMU mode lazy ->
// strict (requested lazy): ...", mode_before, mode_after, requested_mode.
//
// Pure functions; thread-safe.
#ifndef SERVICES_ANALYZER_ALERTS_H_
#define SERVICES_ANALYZER_ALERTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "services/analyzer/clients.h"
#include "services/analyzer/store.h"

namespace farm::analyzer {

struct AlertOptions {
  // Severity label of alerts for confirmed secondary-metric regressions;
  // "none": they are recorded but not alerted.
  std::string secondary_severity = "info";
  // Base URL of a `farmctl report --serve` (http://reports.lab:8088); the
  // alert links <report_url>/regressions/<id>. "": no link.
  std::string report_url;
  // Repeats per commit in the reproduce command's spec.
  int reproduce_repeats = 5;
};

// Confirmed or acknowledged (iommufarm.v1.RegressionState): the alert fires.
bool AlertFires(int state);

// The alert_group label of a regression's alert (see above).
std::string AlertGroup(const AlertWork& work);

// The mode label of a regression's alert: "strict", or "strict/off" for an
// overhead regression (the mode measured against IOMMU off).
std::string AlertModeLabel(const AlertWork& work);

// The `farmctl try` command re-measuring the regression's cell at its last
// good (the base) and first bad commit (the patch), the spec inline as a
// shell here-document; "" when the regression has no bisect state to take
// the cell from.
std::string ReproduceCommand(const AlertWork& work, int repeats);

// The alert for a regression, or nullopt when its rank is not alerted
// (secondary_severity "none"). A closed one ends at its recorded ends_at, or
// at `now` (RFC 3339) when it was not resolved before. `group` lists the
// ids of the open regressions of its alert group, itself included.
std::optional<Alert> BuildAlert(const AlertWork& work, const AlertOptions& options,
                                const std::string& now, const std::vector<int64_t>& group = {});

// The silence of an acknowledged regression's alert: equality matchers on
// the alert's labels except severity (which follows the re-measured size)
// and alert_group (which follows the bisect); regression_id keeps it to one
// alert.
Silence BuildSilence(const Alert& alert, int64_t regression_id, const std::string& now,
                     const std::string& ends);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_ALERTS_H_
