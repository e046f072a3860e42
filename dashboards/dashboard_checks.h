// Static checks of the shipped dashboards and alerting config
// (dashboards/*.json, prometheus-rules.yml), used by dashboards_test (no
// services) and dashboards_pgtest (against the running farm components):
//  - Grafana dashboard JSON: unique panel ids, datasource references that
//    resolve to a datasource variable of the same type, a query per target;
//  - PromQL: the metric names an expression selects (so a test can require
//    that some farm component exports each of them);
//  - Prometheus text exposition: the metric families a /metrics page offers.
//
// Pure functions over strings and files; thread-safe. Errors: kNotFound /
// kInvalidArgument naming the file (and panel / rule) at fault.
#ifndef DASHBOARDS_DASHBOARD_CHECKS_H_
#define DASHBOARDS_DASHBOARD_CHECKS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace farm::dashboards {

// One query of a dashboard panel or a rule, with where it comes from.
struct Query {
  std::string where;  // e.g. "iommu-farm.json panel 11 \"Job duration\" target B"
  std::string kind;   // "promql" or "sql"
  std::string text;
};

// Problems of one parsed dashboard (empty: none): duplicate panel ids,
// panels/targets without a datasource, a datasource uid that is not
// "${var}" of a templating variable of type "datasource" whose query is the
// same plugin type, a target whose datasource differs from its panel's, a
// Prometheus target without `expr`, an SQL target without `rawSql`.
// `name` prefixes every message.
std::vector<std::string> DashboardProblems(const nlohmann::json& dashboard,
                                           const std::string& name);

// Every query of a dashboard: panel targets (nested rows included) and
// templating variables' queries.
std::vector<Query> DashboardQueries(const nlohmann::json& dashboard, const std::string& name);

// A Prometheus rule file: its expressions and the series names its
// recording rules produce.
struct RuleFile {
  std::vector<Query> exprs;
  std::set<std::string> recorded;
};
absl::StatusOr<RuleFile> LoadRules(const std::string& path);

absl::StatusOr<nlohmann::json> LoadJson(const std::string& path);
// Sorted paths of dir/*.json.
std::vector<std::string> JsonFilesIn(const std::string& dir);

// Metric names selected by a PromQL expression: identifiers that are not
// functions or aggregations (followed by '('), keywords, label names inside
// {...} or by/without/on/ignoring/group_left/group_right (...), range or
// subquery durations, strings, numbers or Grafana $variables.
std::set<std::string> PromqlMetricNames(const std::string& expr);

// Families offered by a /metrics page in the text format, from `# TYPE`
// lines and from sample lines: name -> type ("counter", "gauge",
// "histogram", "summary", "untyped"); and per family the label sets seen.
struct Exposition {
  std::map<std::string, std::string> types;
  std::map<std::string, std::vector<std::map<std::string, std::string>>> samples;
};
Exposition ParseExposition(const std::string& text);

// True when `name` is a family of `e`, or a _bucket/_sum/_count series of
// a histogram (or _sum/_count of a summary) family of `e`.
bool Exports(const Exposition& e, const std::string& name);

// Equality matchers `label="value"` of the selectors of metric `name` in
// `expr` (for checking that the value is one the component sets).
std::vector<std::pair<std::string, std::string>> EqualityMatchers(const std::string& expr,
                                                                  const std::string& name);

}  // namespace farm::dashboards

#endif  // DASHBOARDS_DASHBOARD_CHECKS_H_
