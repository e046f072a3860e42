// Smoke tests of PrometheusInstance and AlertmanagerInstance against the real
// Debian binaries: a scrape of a prometheus-cpp exposer living in this test,
// readiness, Alertmanager's v2 API, and a rule firing from Prometheus into
// Alertmanager.
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/child_process.h"
#include "testing/service_harness.h"

namespace farm::testing {
namespace {

using nlohmann::json;

// Value of the first sample of an instant-query answer, or "" if none yet.
std::string FirstSampleValue(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "";
  const json& result = j["data"]["result"];
  if (!result.is_array() || result.empty()) return "";
  return result[0]["value"][1].get<std::string>();
}

bool AlertPresent(const AlertmanagerInstance& am, const std::string& alertname,
                  absl::Status* error) {
  absl::StatusOr<HttpResponse> r = HttpGet(am.BaseUrl() + "/api/v2/alerts");
  if (!r.ok()) {
    *error = r.status();
    return false;
  }
  json alerts = json::parse(r->body, nullptr, false);
  if (!alerts.is_array()) return false;
  for (const json& a : alerts) {
    if (a["labels"].value("alertname", "") == alertname) return true;
  }
  return false;
}

TEST(PrometheusHarness, ScrapesExposerInThisTest) {
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::Counter& counter = prometheus::BuildCounter()
                                     .Name("farm_harness_smoke_total")
                                     .Help("Harness smoke test counter.")
                                     .Register(*registry)
                                     .Add({{"case", "scrape"}});
  counter.Increment(42);
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(registry);
  ASSERT_EQ(exposer.GetListeningPorts().size(), 1u);
  const int exposer_port = exposer.GetListeningPorts()[0];

  PrometheusOptions options;
  options.scrape_targets = {absl::StrCat("127.0.0.1:", exposer_port)};
  options.scrape_interval = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<PrometheusInstance>> prom = PrometheusInstance::Start(options);
  ASSERT_TRUE(prom.ok()) << prom.status();

  absl::StatusOr<HttpResponse> ready = HttpGet((*prom)->BaseUrl() + "/-/ready");
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->status, 200);

  std::string value;
  absl::Status scraped = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        absl::StatusOr<std::string> body =
            (*prom)->Query("farm_harness_smoke_total{case=\"scrape\"}");
        if (!body.ok()) return body.status();
        value = FirstSampleValue(*body);
        return !value.empty();
      },
      absl::Seconds(30), "the exposer's counter to be scraped");
  ASSERT_TRUE(scraped.ok()) << scraped << "\nprometheus log:\n" << (*prom)->LogTail();
  EXPECT_EQ(value, "42");

  absl::StatusOr<std::string> up = (*prom)->Query("up{job=\"farm\"}");
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(FirstSampleValue(*up), "1");

  // A bad query is reported, not swallowed.
  EXPECT_FALSE((*prom)->Query("sum(").ok());

  const std::string dir = (*prom)->dir();
  const std::string base = (*prom)->BaseUrl();
  ASSERT_TRUE((*prom)->Stop().ok());
  EXPECT_FALSE(HttpGet(base + "/-/ready", absl::Seconds(2)).ok());
  prom->reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(AlertmanagerHarness, StatusAndAlertRoundTrip) {
  absl::StatusOr<std::unique_ptr<AlertmanagerInstance>> am = AlertmanagerInstance::Start();
  ASSERT_TRUE(am.ok()) << am.status();

  absl::StatusOr<HttpResponse> status = HttpGet((*am)->BaseUrl() + "/api/v2/status");
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->status, 200) << status->body;
  json s = json::parse(status->body, nullptr, false);
  ASSERT_TRUE(s.is_object()) << status->body;
  EXPECT_TRUE(s.contains("cluster")) << status->body;
  EXPECT_TRUE(s.contains("versionInfo")) << status->body;
  EXPECT_EQ(s["cluster"].value("status", ""), "disabled") << status->body;

  json alert = json::array({{
      {"labels", {{"alertname", "FarmHarnessSmoke"}, {"severity", "info"}}},
      {"annotations", {{"summary", "posted by harness_test"}}},
  }});
  absl::StatusOr<HttpResponse> posted =
      HttpPost((*am)->BaseUrl() + "/api/v2/alerts", alert.dump(), "application/json");
  ASSERT_TRUE(posted.ok()) << posted.status();
  EXPECT_EQ(posted->status, 200) << posted->body;

  absl::Status last;
  absl::Status seen = PollUntil(
      [&]() -> absl::StatusOr<bool> { return AlertPresent(**am, "FarmHarnessSmoke", &last); },
      absl::Seconds(10), "the posted alert to be listed");
  EXPECT_TRUE(seen.ok()) << seen << " " << last;
  EXPECT_FALSE(AlertPresent(**am, "NeverPosted", &last));
}

// The wiring farm-analyzer relies on: a Prometheus rule fires and reaches
// Alertmanager.
TEST(PrometheusHarness, RuleFiresIntoAlertmanager) {
  absl::StatusOr<std::unique_ptr<AlertmanagerInstance>> am = AlertmanagerInstance::Start();
  ASSERT_TRUE(am.ok()) << am.status();

  PrometheusOptions options;
  options.alertmanager_url = (*am)->BaseUrl();
  options.inline_rules =
      "groups:\n"
      "  - name: harness\n"
      "    rules:\n"
      "      - alert: FarmHarnessAlwaysFiring\n"
      "        expr: vector(1)\n"
      "        labels: {severity: info}\n";
  absl::StatusOr<std::unique_ptr<PrometheusInstance>> prom = PrometheusInstance::Start(options);
  ASSERT_TRUE(prom.ok()) << prom.status();

  absl::Status last;
  absl::Status arrived = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        return AlertPresent(**am, "FarmHarnessAlwaysFiring", &last);
      },
      absl::Seconds(30), "the rule's alert to reach Alertmanager");
  EXPECT_TRUE(arrived.ok()) << arrived << " " << last << "\nprometheus log:\n"
                            << (*prom)->LogTail();
}

TEST(HarnessHelpers, PickFreePortAndUrlEncode) {
  const int port = PickFreePort();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_EQ(UrlEncode("up{job=\"farm\"} a-b_c.d~"), "up%7Bjob%3D%22farm%22%7D%20a-b_c.d~");
  // Nothing listens on a port we just picked: a transport error, not an HTTP code.
  absl::StatusOr<HttpResponse> r = HttpGet(absl::StrCat("http://127.0.0.1:", port, "/"));
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

TEST(ChildProcessTest, CapturesOutputExitCodeAndSignals) {
  const std::string base = HarnessTempBase() + "/farm-child-" + std::to_string(getpid());
  {
    ChildProcess p({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, base + ".out",
                   base + ".err");
    const int status = p.Wait();
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 3);
    EXPECT_EQ(p.Out(), "out\n");
    EXPECT_EQ(p.Err(), "err\n");
    EXPECT_FALSE(p.Alive());
  }
  {
    ChildProcess p({"/bin/sh", "-c", "echo ready >&2; exec sleep 60"}, base + ".log");
    ASSERT_TRUE(p.WaitFor("ready", /*in_stderr=*/true, absl::Seconds(30)).ok()) << p.Err();
    EXPECT_TRUE(p.Alive());
    EXPECT_EQ(p.Terminate(), -1);  // ended by SIGTERM
    EXPECT_FALSE(p.Alive());
  }
  {
    // Exits before printing what we wait for: an error, not a timeout.
    ChildProcess p({"/bin/sh", "-c", "echo bye >&2"}, base + ".log");
    absl::Status st = p.WaitFor("never", true, absl::Seconds(30));
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  }
  {
    ChildProcess p({"/nonexistent/binary"}, base + ".log");
    const int status = p.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);
  }
  for (const char* ext : {".out", ".err", ".log"}) std::filesystem::remove(base + ext);
}

}  // namespace
}  // namespace farm::testing
