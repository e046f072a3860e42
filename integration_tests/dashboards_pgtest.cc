// The dashboards and rules against the real farm: PostgreSQL (harness), the
// farm-scheduler, farm-agent and farm-analyzer binaries, and a real
// Prometheus scraping them with dashboards/prometheus-rules.yml loaded.
//  - every metric name a dashboard panel or a rule selects is exported by one
//    of the components' /metrics (histogram _bucket/_sum/_count included),
//    or is a recording rule's output, or Prometheus' own `up`;
//  - label values the queries match on (state="queued", metric_rank=...)
//    occur on the exported series;
//  - Prometheus evaluates every dashboard expression and every rule without
//    error;
//  - every SQL panel / variable query of the dashboards plans (EXPLAIN)
//    against the migrated farm schema.

#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "dashboards/dashboard_checks.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/base/file.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm::dashboards {
namespace {

namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

const std::string kDir = std::string(FARM_SOURCE_DIR) + "/dashboards";

// Everything a farm child process logged, for failure messages.
std::string Log(const testing::ChildProcess& p) {
  const std::string out = p.Out(), err = p.Err();
  return out == err ? out : out + err;
}

// The HOST:PORT `p` printed after `prefix` (e.g. "metrics on "), waiting for it.
std::string WaitAddress(const testing::ChildProcess& p, const std::string& prefix) {
  std::string found;
  const absl::Status s = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        std::smatch m;
        const std::string log = Log(p);
        const std::regex re(prefix + "([0-9.]+:[0-9]+)");
        if (std::regex_search(log, m, re)) found = m[1];
        return !found.empty();
      },
      absl::Seconds(60), prefix);
  EXPECT_TRUE(s.ok()) << s << "\n" << Log(p);
  return found;
}

std::string Scrape(const std::string& address) {
  auto r = testing::HttpGet("http://" + address + "/metrics");
  EXPECT_TRUE(r.ok()) << address << ": " << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->status, 200) << address;
  return r->body;
}

// Sum of the values of every sample of `name` on a /metrics page.
double SampleSum(const std::string& body, const std::string& name) {
  double sum = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != ' ' && line[name.size()] != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Grafana variables in queries get plain values for checking.
std::string Substitute(std::string q) {
  return absl::StrReplaceAll(q, {{"$__rate_interval", "1m"},
                                 {"$__interval", "1m"},
                                 {"$catalog", "linux-iommu"},
                                 {"$platform", "intel-vtd-2s12c"},
                                 {"$workload", "dma-map-bench"},
                                 {"$metric", "throughput"},
                                 {"$phase", "(none)"},
                                 {"$kind", "1"}});
}

// $catalog and $platform avoid a scan of every job (docs/scheduler.md, "A year
// of results"); they must still list what the jobs hold. Checked with two
// more matrices' jobs (so the platform walk takes several steps), added in a
// transaction that is rolled back.
void ExpectVariablesListWhatTheJobsHold(pqxx::connection& c, const std::vector<Query>& queries) {
  const std::map<std::string, std::string> reference = {
      {"$catalog", "SELECT DISTINCT catalog FROM jobs ORDER BY 1"},
      {"$platform", "SELECT DISTINCT platform FROM jobs ORDER BY 1"}};
  pqxx::work t(c);
  t.exec(
      "INSERT INTO matrices (id, name, spec_yaml, catalog) VALUES "
      "(9001, 'a', '', 'a-catalog'), (9002, 'z', '', 'z-catalog')");
  t.exec(
      "INSERT INTO jobs (matrix_id, catalog, commit_id, platform, workload, mode, executor, "
      "state) VALUES (9001, 'a-catalog', 'c', 'a-platform', 'w', 1, 1, 1), "
      "(9002, 'z-catalog', 'c', 'z-platform', 'w', 1, 1, 1), "
      "(9002, 'z-catalog', 'c', 'm-platform', 'w', 1, 1, 1)");
  auto column = [&](const std::string& sql) {
    std::vector<std::string> out;
    for (const auto& row : t.exec(sql)) out.push_back(row[0].as<std::string>());
    return out;
  };
  int seen = 0;
  for (const Query& q : queries) {
    for (const auto& [variable, sql] : reference) {
      if (!absl::EndsWith(q.where, " variable " + variable)) continue;
      ++seen;
      const std::vector<std::string> want = column(sql);
      EXPECT_EQ(column(q.text), want) << q.where << ": " << q.text;
      EXPECT_GE(want.size(), 3u);
    }
  }
  EXPECT_EQ(seen, 2) << "the dashboards define $catalog and $platform once";
  t.abort();
}

class DashboardsFarmPgTest : public testing::FarmTest {};

TEST_F(DashboardsFarmPgTest, EveryReferencedMetricIsExportedAndEveryQueryRuns) {
  const std::string db = DbUri();
  // A lab host with a power command: its recovery counters start at 0, so
  // the lab rules' series exist before any host needs recovering.
  const std::string lab_hosts = TestDir() + "/lab-hosts.yaml";
  ASSERT_TRUE(base::WriteFile(lab_hosts, "hosts:\n  lab-1:\n    power_cycle: [\"true\"]\n").ok());
  testing::ChildProcess* scheduler = &StartSchedulerProcess(
      testing::FarmMode::kPlaintext, {"--metrics", "127.0.0.1:0", "--lab-hosts", lab_hosts});
  const std::string sched_addr = SchedulerAddress();
  const std::string sched_metrics = WaitAddress(*scheduler, "metrics on ");
  ASSERT_FALSE(sched_addr.empty());
  ASSERT_FALSE(sched_metrics.empty());
  auto agent = StartAgent(
      {.name = "dash-agent", .slots = 1, .metrics = true, .drain_timeout = absl::Seconds(2)});
  auto analyzer = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{FARM_ANALYZER_BIN, "--db", db, "--scheduler", sched_addr,
                               "--metrics", "127.0.0.1:0", "--poll-interval", "200ms"},
      TestDir() + "/analyzer.log");
  const std::map<std::string, std::string> metrics{
      {"farm-scheduler", sched_metrics},
      {"farm-agent", WaitAddress(*agent, "metrics on ")},
      {"farm-analyzer", WaitAddress(*analyzer, "metrics on ")}};
  for (const auto& [who, addr] : metrics) ASSERT_FALSE(addr.empty()) << who;

  // One small job, so job/result series carry samples as in a working farm.
  auto jobs =
      pb::JobService::NewStub(grpc::CreateChannel(sched_addr, grpc::InsecureChannelCredentials()));
  pb::SubmitMatrixRequest req;
  req.set_spec_yaml(
      "name: dashboards\ncatalog: linux-iommu\nplatform: intel-vtd-snb16c\ncommits: [v5.10]\n"
      "modes: [off, strict]\nworkloads:\n  - name: dma-map-bench\n"
      "    params: {threads: 1, seconds: 0.001, granule: 1}\nrepeats: 1\nexecutor: emulator\n");
  pb::SubmitMatrixResponse resp;
  {
    grpc::ClientContext ctx;
    const grpc::Status s = jobs->SubmitMatrix(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << Log(*scheduler);
  }
  const absl::Status ran = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        return SampleSum(Scrape(metrics.at("farm-scheduler")), "farm_results_ingested_total") >= 1;
      },
      absl::Seconds(60), "the job's result ingested");
  EXPECT_TRUE(ran.ok()) << ran << "\n" << Log(*agent);
  // The analyzer's latest-result gauges exist once it has analysed the
  // matrix (off and strict: the overhead ratio too).
  const absl::Status analysed = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        return SampleSum(Scrape(metrics.at("farm-analyzer")), "farm_result_overhead_ratio") > 0;
      },
      absl::Seconds(60), "the analyzer's latest-result gauges");
  EXPECT_TRUE(analysed.ok()) << analysed << "\n" << Log(*analyzer);

  std::map<std::string, Exposition> exported;
  for (const auto& [who, addr] : metrics) exported[who] = ParseExposition(Scrape(addr));

  // Everything the dashboards and rules select.
  std::vector<Query> queries;
  for (const std::string& path : JsonFilesIn(kDir)) {
    auto d = LoadJson(path);
    ASSERT_TRUE(d.ok()) << d.status();
    for (Query& q : DashboardQueries(*d, path.substr(path.rfind('/') + 1)))
      queries.push_back(std::move(q));
  }
  auto rules = LoadRules(kDir + "/prometheus-rules.yml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  for (const Query& q : rules->exprs) queries.push_back(q);

  std::set<std::string> checked;
  std::map<std::string, std::string> checked_by;
  for (const Query& q : queries) {
    if (q.kind != "promql") continue;
    for (const std::string& name : PromqlMetricNames(q.text)) {
      checked.insert(name);
      if (name == "up" || rules->recorded.count(name)) continue;
      std::string by;
      for (const auto& [who, e] : exported)
        if (Exports(e, name)) by = who;
      if (by.empty()) {
        ADD_FAILURE() << q.where << ": metric " << name
                      << " is exported by no farm component (scheduler, agent, analyzer)";
        continue;
      }
      if (checked_by.emplace(name, by).second) std::cout << name << ": " << by << "\n";
      // Label values matched with = must be ones the component sets.
      const Exposition& e = exported[by];
      auto samples = e.samples.find(name);
      for (const auto& [label, value] : EqualityMatchers(q.text, name)) {
        bool seen = false;
        if (samples != e.samples.end())
          for (const auto& labels : samples->second) {
            auto l = labels.find(label);
            seen |= l != labels.end() && l->second == value;
          }
        EXPECT_TRUE(seen) << q.where << ": " << by << " exports no " << name << "{" << label
                          << "=\"" << value << "\"}";
      }
    }
  }
  EXPECT_GE(checked.size(), 10u);

  // A real Prometheus scraping the three, with the shipped rules.
  testing::PrometheusOptions po;
  for (const auto& [who, addr] : metrics) po.scrape_targets.push_back(addr);
  po.job_name = "farm";
  po.rule_files = {kDir + "/prometheus-rules.yml"};
  auto prom = testing::PrometheusInstance::Start(po);
  ASSERT_TRUE(prom.ok()) << prom.status();
  const absl::Status evaluated = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        auto r = testing::HttpGet((*prom)->BaseUrl() + "/api/v1/rules");
        if (!r.ok()) return r.status();
        const json j = json::parse(r->body, nullptr, false);
        if (j.is_discarded() || !j.contains("data")) return false;
        int rules_seen = 0;
        for (const json& g : j["data"]["groups"]) {
          for (const json& rule : g["rules"]) {
            ++rules_seen;
            const std::string health = rule.value("health", "");
            if (health == "err") {
              return absl::InternalError(
                  absl::StrCat("rule ", rule.value("name", ""), ": ", rule.value("lastError", "")));
            }
            if (health != "ok") return false;
          }
        }
        return rules_seen == static_cast<int>(rules->exprs.size());
      },
      absl::Seconds(60), "every rule evaluated by Prometheus with health ok");
  EXPECT_TRUE(evaluated.ok()) << evaluated;
  const absl::Status scraped = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        auto r = testing::HttpGet((*prom)->BaseUrl() +
                                  "/api/v1/query?query=" + testing::UrlEncode("count(up == 1)"));
        if (!r.ok()) return r.status();
        const json j = json::parse(r->body, nullptr, false);
        return !j.is_discarded() && j["data"]["result"].size() == 1 &&
               j["data"]["result"][0]["value"][1] == "3";
      },
      absl::Seconds(60), "Prometheus scraped all three components");
  EXPECT_TRUE(scraped.ok()) << scraped;
  for (const Query& q : queries) {
    if (q.kind != "promql") continue;
    auto r = testing::HttpGet((*prom)->BaseUrl() +
                              "/api/v1/query?query=" + testing::UrlEncode(Substitute(q.text)));
    ASSERT_TRUE(r.ok()) << r.status();
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_EQ(j.value("status", ""), "success") << q.where << ": " << q.text << "\n" << r->body;
  }

  // SQL panels plan against the farm schema the scheduler migrated.
  pqxx::connection c(db);
  int sql = 0;
  for (const Query& q : queries) {
    if (q.kind != "sql") continue;
    ++sql;
    try {
      pqxx::read_transaction t(c);
      t.exec("EXPLAIN " + Substitute(q.text));
    } catch (const std::exception& e) {
      ADD_FAILURE() << q.where << ": " << e.what() << "\n" << q.text;
    }
  }
  EXPECT_GT(sql, 0);
  ExpectVariablesListWhatTheJobsHold(c, queries);
}

}  // namespace
}  // namespace farm::dashboards
