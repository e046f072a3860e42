// The shipped dashboards and alerting config, checked without running the
// farm: promtool and amtool accept them, Alertmanager routes each severity of
// IommuPerfRegression where docs/analyzer.md says, every Grafana dashboard is
// consistent, and the PromQL metric-name extraction the farm check
// (dashboards_pgtest) relies on does what it claims.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "dashboards/dashboard_checks.h"
#include "proto/names.h"

namespace farm::dashboards {
namespace {

const std::string kDir = std::string(FARM_SOURCE_DIR) + "/dashboards";

struct ToolRun {
  int status = -1;
  std::string output;
};

// Runs a fixed command line (no user input reaches it) and captures stdout
// and stderr.
ToolRun Shell(const std::string& cmd) {
  ToolRun r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int w = ::pclose(p);
  r.status = WIFEXITED(w) ? WEXITSTATUS(w) : -1;
  return r;
}

TEST(DashboardsToolsTest, PromtoolAcceptsTheRules) {
  const ToolRun r = Shell("promtool check rules " + kDir + "/prometheus-rules.yml");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("SUCCESS"), std::string::npos) << r.output;
}

TEST(DashboardsToolsTest, PromtoolRejectsABrokenRule) {
  // The check above can fail: a rule file with a PromQL syntax error.
  const std::string bad = ::testing::TempDir() + "/bad-rules.yml";
  FILE* f = std::fopen(bad.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: sum(rate(\n", f);
  std::fclose(f);
  EXPECT_NE(Shell("promtool check rules " + bad).status, 0);
}

TEST(DashboardsToolsTest, AmtoolAcceptsTheConfig) {
  const ToolRun r = Shell("amtool check-config " + kDir + "/alertmanager.yml");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("SUCCESS"), std::string::npos) << r.output;
}

TEST(DashboardsToolsTest, SecondaryMetricAlertsDoNotPage) {
  // farm-analyzer labels secondary-metric regressions severity="info".
  auto route = [](const std::string& labels) {
    ToolRun r =
        Shell("amtool config routes test --config.file=" + kDir + "/alertmanager.yml " + labels);
    const size_t nl = r.output.rfind('\n', r.output.size() - 2);
    std::string last = r.output.substr(nl == std::string::npos ? 0 : nl + 1);
    while (!last.empty() && std::isspace(static_cast<unsigned char>(last.back()))) last.pop_back();
    return last;
  };
  EXPECT_EQ(route("alertname=IommuPerfRegression severity=info metric_rank=secondary"),
            "iommu-perf-info");
  EXPECT_EQ(route("alertname=IommuPerfRegression severity=critical metric_rank=primary"),
            "iommu-perf");
  EXPECT_EQ(route("alertname=IommuPerfRegression severity=warning metric_rank=primary"),
            "iommu-perf");
  EXPECT_EQ(route("alertname=FarmTargetDown severity=warning"), "farm-default");
}

// A SQL panel that spells regressions.state out names every state the API
// has, as farmctl does (proto::RegressionStateName).
TEST(DashboardsJsonTest, RegressionStateLabelsCoverEveryState) {
  int panels = 0;
  for (const std::string& path : JsonFilesIn(kDir)) {
    auto d = LoadJson(path);
    ASSERT_TRUE(d.ok()) << d.status();
    for (const Query& q : DashboardQueries(*d, path)) {
      if (q.text.find("CASE g.state") == std::string::npos) continue;
      ++panels;
      for (int v = 1; iommufarm::v1::RegressionState_IsValid(v); ++v) {
        const std::string label = absl::StrCat(
            "WHEN ", v, " THEN '",
            proto::RegressionStateName(static_cast<iommufarm::v1::RegressionState>(v)), "'");
        EXPECT_NE(q.text.find(label), std::string::npos) << q.where << ": no " << label;
      }
    }
  }
  EXPECT_GT(panels, 0);
}

TEST(DashboardsJsonTest, EveryDashboardIsConsistent) {
  const std::vector<std::string> files = JsonFilesIn(kDir);
  ASSERT_FALSE(files.empty());
  for (const std::string& path : files) {
    auto d = LoadJson(path);
    ASSERT_TRUE(d.ok()) << d.status();
    const std::string name = path.substr(path.rfind('/') + 1);
    for (const std::string& p : DashboardProblems(*d, name)) ADD_FAILURE() << p;
    int promql = 0;
    for (const Query& q : DashboardQueries(*d, name)) {
      if (q.kind != "promql") continue;
      ++promql;
      EXPECT_FALSE(PromqlMetricNames(q.text).empty()) << q.where << ": " << q.text;
    }
    EXPECT_GT(promql, 0) << name;
  }
}

TEST(DashboardsJsonTest, ProblemsAreFound) {
  const nlohmann::json d = nlohmann::json::parse(R"({
    "templating": {"list": [{"name": "prometheus", "type": "datasource", "query": "prometheus"}]},
    "panels": [
      {"id": 1, "type": "row", "panels": [
        {"id": 2, "type": "stat", "datasource": {"type": "prometheus", "uid": "${prometheus}"},
         "targets": [{"refId": "A", "expr": "up"}]}]},
      {"id": 2, "type": "stat", "datasource": {"type": "prometheus", "uid": "abc"},
       "targets": [{"refId": "A", "expr": "up"}]},
      {"id": 3, "type": "table", "datasource": {"type": "grafana-postgresql-datasource",
                                                "uid": "${prometheus}"},
       "targets": [{"refId": "A"}]},
      {"id": 4, "type": "stat", "datasource": {"type": "prometheus", "uid": "${prom}"},
       "targets": [{"refId": "A", "expr": "up",
                    "datasource": {"type": "prometheus", "uid": "${prometheus}"}}]}
    ]})");
  const std::vector<std::string> p = DashboardProblems(d, "t.json");
  auto has = [&](const std::string& what) {
    for (const std::string& s : p)
      if (s.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("id 2 also used by")) << testing::PrintToString(p);
  EXPECT_TRUE(has("is not a ${variable}"));
  EXPECT_TRUE(has("selects \"prometheus\""));
  EXPECT_TRUE(has("SQL target without rawSql"));
  EXPECT_TRUE(has("\"prom\" is not defined"));
  EXPECT_TRUE(has("differs from the panel's"));
}

TEST(DashboardsJsonTest, UndefinedVariablesAndPooledSeriesAreFound) {
  const nlohmann::json d = nlohmann::json::parse(R"js({
    "templating": {"list": [
      {"name": "pg", "type": "datasource", "query": "grafana-postgresql-datasource"},
      {"name": "platform", "type": "custom", "query": "a,b"}]},
    "panels": [
      {"id": 1, "type": "table", "datasource": {"type": "grafana-postgresql-datasource", "uid": "${pg}"},
       "targets": [{"refId": "A", "rawSql": "SELECT avg(s.value) FROM result_samples s JOIN jobs j ON j.id = s.job_id WHERE j.platform = '$platform' AND j.workload = '${workload}' AND $__timeFilter(j.finished_at)"}]},
      {"id": 2, "type": "table", "datasource": {"type": "grafana-postgresql-datasource", "uid": "${pg}"},
       "targets": [{"refId": "A", "rawSql": "SELECT avg(s.value) FROM result_samples s JOIN jobs j ON j.id = s.job_id WHERE j.kind IN (1) AND s.phase = '' AND j.platform = '$platform'"}]}
    ]})js");
  const std::vector<std::string> p = DashboardProblems(d, "t.json");
  ASSERT_EQ(p.size(), 3u) << testing::PrintToString(p);
  EXPECT_NE(p[0].find("panel 1"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("uses $workload, which is not a variable"), std::string::npos) << p[0];
  EXPECT_NE(p[1].find("over every job kind"), std::string::npos) << p[1];
  EXPECT_NE(p[2].find("over every phase"), std::string::npos) << p[2];
}

TEST(PromqlNamesTest, SelectorsOnly) {
  using S = std::set<std::string>;
  EXPECT_EQ(
      PromqlMetricNames(
          "histogram_quantile(0.95, sum by (le) (rate(farm_job_duration_seconds_bucket[5m])))"),
      S{"farm_job_duration_seconds_bucket"});
  EXPECT_EQ(PromqlMetricNames("max(farm_agents_connected) == 0 and "
                              "sum(farm_queue_jobs{state=\"queued\", job=~\"farm.*\"}) > 0"),
            (S{"farm_agents_connected", "farm_queue_jobs"}));
  EXPECT_EQ(PromqlMetricNames("time() - max(farm_analyzer_last_pass_timestamp_seconds) > 300"),
            S{"farm_analyzer_last_pass_timestamp_seconds"});
  EXPECT_EQ(PromqlMetricNames("sum by (instance) (rate(farm_agent_rpc_errors_total[$__rate_"
                              "interval])) * 60 offset 5m"),
            S{"farm_agent_rpc_errors_total"});
  EXPECT_EQ(PromqlMetricNames("up{job=~\"farm.*\"} == 0"), S{"up"});
  EXPECT_EQ(PromqlMetricNames("a / on (instance) group_left (version) b unless c"),
            (S{"a", "b", "c"}));
  EXPECT_EQ(PromqlMetricNames("max by (metric_rank) (farm:regressions_open:by_rank)"),
            S{"farm:regressions_open:by_rank"});
  EXPECT_EQ(PromqlMetricNames("1e3 * 0.5"), S{});
  EXPECT_EQ(
      EqualityMatchers("sum(farm_queue_jobs{state=\"queued\",job=~\"x\"}) + "
                       "farm_queue_jobs{state != \"a\", kind=\"bulk\"} + other{state=\"z\"}",
                       "farm_queue_jobs"),
      (std::vector<std::pair<std::string, std::string>>{{"state", "queued"}, {"kind", "bulk"}}));
}

TEST(ExpositionTest, FamiliesAndHistogramSeries) {
  const Exposition e = ParseExposition(
      "# HELP farm_job_duration_seconds d\n# TYPE farm_job_duration_seconds histogram\n"
      "farm_job_duration_seconds_bucket{le=\"1\"} 2\nfarm_job_duration_seconds_sum 3\n"
      "farm_job_duration_seconds_count 2\n# TYPE farm_queue_jobs gauge\n"
      "farm_queue_jobs{state=\"queued\",x=\"a,b\"} 1\nfarm_untyped 4\n");
  EXPECT_TRUE(Exports(e, "farm_job_duration_seconds_bucket"));
  EXPECT_TRUE(Exports(e, "farm_job_duration_seconds_count"));
  EXPECT_TRUE(Exports(e, "farm_queue_jobs"));
  EXPECT_TRUE(Exports(e, "farm_untyped"));
  EXPECT_FALSE(Exports(e, "farm_queue_jobs_bucket"));
  EXPECT_FALSE(Exports(e, "farm_missing"));
  ASSERT_EQ(e.samples.at("farm_queue_jobs").size(), 1u);
  EXPECT_EQ(e.samples.at("farm_queue_jobs")[0].at("state"), "queued");
  EXPECT_EQ(e.samples.at("farm_queue_jobs")[0].at("x"), "a,b");
}

TEST(RulesTest, ExpressionsAndRecordedNames) {
  auto rules = LoadRules(kDir + "/prometheus-rules.yml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  EXPECT_GE(rules->exprs.size(), 6u);
  for (const Query& q : rules->exprs)
    EXPECT_FALSE(PromqlMetricNames(q.text).empty()) << q.where << ": " << q.text;
  EXPECT_EQ(rules->recorded.count("farm:regressions_open:by_rank"), 1u);
}

}  // namespace
}  // namespace farm::dashboards
