// farm-analyzer: regression detection, confirmation, bisection and alerts
// over the farm's PostgreSQL. Parses flags, wires the pieces, runs Tick()
// every --poll-interval until SIGINT/SIGTERM.
#include <cstdio>
#include <string>
#include <vector>

#include <prometheus/gauge.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/metrics/metrics.h"
#include "lib/metrics/metrics_flags.h"
#include "lib/service/flags.h"
#include "lib/service/shutdown.h"
#include "lib/service/tls.h"
#include "lib/storage/migrations.h"
#include "lib/storage/pg_analyzer_store.h"
#include "lib/storage/pg_pool.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "farm-analyzer: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-analyzer: finds performance changes along catalog commit order in the farm's "
      "results, confirms them, bisects them to the first bad commit through the scheduler, "
      "and alerts Alertmanager."};
  std::string db;
  std::string scheduler;
  std::string alertmanager;
  std::string metrics_address;
  absl::Duration poll_interval;
  farm::analyzer::AnalyzerOptions options;
  double magnitude = 0.03;
  double alpha = 0.01;
  int confirm_repeats = 8;
  int initial_repeats = 3;
  int max_repeats = 12;
  bool bisect_improvements = false;
  std::vector<std::string> primary_metric_flags;
  std::string secondary_severity = "info";
  bool bisect_secondary = false;
  bool once = false;
  app.add_option("--db", db, "PostgreSQL URI")->envname("FARM_DB");
  app.add_option("--scheduler", scheduler,
                 "scheduler HOST:PORT (or several IP:PORT, comma-separated) for submitting "
                 "confirm/bisect matrices")
      ->envname("FARM_SERVER");
  app.add_option(
      "--alertmanager", alertmanager,
      "Alertmanager base URL, e.g. http://127.0.0.1:9093 or https://am.lab:9093 (empty: no "
      "alerts)");
  app.add_option("--metrics", metrics_address,
                 "serve Prometheus /metrics on HOST:PORT (port 0: any free port; the bound "
                 "address is printed)");
  farm::metrics::MetricsTls metrics_tls;
  farm::metrics::AddMetricsTlsOptions(app, &metrics_tls);
  farm::client::SecurityFlags security;
  farm::client::AddSecurityOptions(app, &security);
  std::string am_ca, am_bearer_file, am_basic_file;
  app.add_option("--alertmanager-ca", am_ca, "PEM CA bundle verifying an https Alertmanager")
      ->envname("FARM_ALERTMANAGER_CA");
  app.add_option("--alertmanager-bearer-file", am_bearer_file,
                 "file whose first line is a bearer token for Alertmanager (https only)")
      ->envname("FARM_ALERTMANAGER_BEARER_FILE");
  app.add_option("--alertmanager-basic-file", am_basic_file,
                 "file whose first line is USER:PASSWORD for Alertmanager basic auth (https "
                 "only)")
      ->envname("FARM_ALERTMANAGER_BASIC_FILE");
  farm::service::AddDurationOption(app, "--poll-interval", &poll_interval, "2s",
                                   "time between passes, e.g. 500ms, 2s");
  farm::service::AddDurationOption(app, "--alert-resend", &options.alert_resend, "60s",
                                   "re-send open alerts (and recently resolved ones) this often");
  farm::service::AddDurationOption(app, "--resolved-resend", &options.resolved_resend, "15m",
                                   "keep re-sending a resolved alert for this long, so that an "
                                   "Alertmanager restart does not lose the resolution");
  app.add_option("--magnitude", magnitude, "minimal relative change reported (0.03 = 3%)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--alpha", alpha,
                 "family-wise significance; divided by the number of series tested")
      ->capture_default_str()
      ->check(CLI::Range(1e-12, 0.5));
  app.add_option("--confirm-repeats", confirm_repeats,
                 "interleaved re-runs of last good and first bad before a regression counts")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  app.add_option("--bisect-repeats", initial_repeats, "first repeats of a bisect step")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  app.add_option("--max-repeats", max_repeats,
                 "repeats a weak bisect verdict may grow to before it is acted on")
      ->capture_default_str()
      ->check(CLI::Range(2, 10000));
  app.add_flag("--bisect-improvements", bisect_improvements,
               "bisect confirmed improvements too (default: record them only)");
  app.add_option("--primary-metric", primary_metric_flags,
                 "WORKLOAD=METRIC[,METRIC...]: the metrics users bisect WORKLOAD on, instead of "
                 "the derived ones (its `throughput`/`throughput_<unit>` metrics, else its "
                 "work rates such as iops); repeatable");
  app.add_option("--secondary-severity", secondary_severity,
                 "severity label of alerts for regressions of secondary metrics (latency, hit "
                 "rates, CPU time ...); none: record them without alerting")
      ->capture_default_str()
      ->check(CLI::IsMember({"info", "warning", "critical", "none"}));
  app.add_flag("--bisect-secondary", bisect_secondary,
               "bisect confirmed regressions of secondary metrics too (default: confirm and "
               "record them only)");
  app.add_flag("--once", once, "run one pass and exit (exit status 1 if it had errors)");
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;

  if (db.empty()) return Fail("--db (or FARM_DB) is required");
  if (scheduler.empty()) return Fail("--scheduler (or FARM_SERVER) is required");
  farm::analyzer::PrimaryOverrides primary_overrides;
  for (const std::string& p : primary_metric_flags) {
    if (!farm::analyzer::ParsePrimaryOverride(p, &primary_overrides))
      return Fail("--primary-metric: expected WORKLOAD=METRIC[,METRIC...], got \"" + p + "\"");
  }

  // Before any thread starts, so that no pool, gRPC or HTTP thread takes a signal.
  farm::service::ShutdownSignals signals;
  spdlog::set_default_logger(spdlog::stderr_color_mt("farm-analyzer"));

  farm::storage::PgPool pool(farm::storage::PgPoolOptions{db, 2, 5});
  absl::StatusOr<int> version = farm::storage::ApplyMigrations(pool);
  if (!version.ok()) return Fail("--db: " + version.status().ToString());

  std::unique_ptr<farm::analyzer::AlertSink> sink;
  if (!alertmanager.empty()) {
    absl::StatusOr<farm::analyzer::AlertmanagerAuth> am_auth =
        farm::analyzer::LoadAlertmanagerAuth(am_ca, am_bearer_file, am_basic_file);
    if (!am_auth.ok()) return Fail(std::string(am_auth.status().message()));
    auto s = farm::analyzer::NewAlertmanagerSink(alertmanager, *std::move(am_auth));
    if (!s.ok()) return Fail(std::string(s.status().message()));
    sink = std::move(*s);
  }
  farm::metrics::MetricsRegistry registry;
  auto& open_family =
      prometheus::BuildGauge()
          .Name("farm_regressions_open")
          .Help(
              "Confirmed or acknowledged regressions not yet closed, by the rank of their "
              "metric (primary: the workload's throughput)")
          .Register(registry.registry());
  prometheus::Gauge& open_primary = open_family.Add({{"metric_rank", "primary"}});
  prometheus::Gauge& open_secondary = open_family.Add({{"metric_rank", "secondary"}});
  prometheus::Gauge& last_pass = prometheus::BuildGauge()
                                     .Name("farm_analyzer_last_pass_timestamp_seconds")
                                     .Help("Unix time of the last analyzer pass without errors")
                                     .Register(registry.registry())
                                     .Add({});
  farm::analyzer::ResultGauges results(registry.registry());
  std::unique_ptr<farm::metrics::MetricsExposer> exposer;
  if (!metrics_address.empty()) {
    auto e = farm::metrics::MetricsExposer::Start(metrics_address, registry, metrics_tls);
    if (!e.ok()) return Fail("--metrics: " + e.status().ToString());
    exposer = std::move(*e);
    std::fprintf(stderr, "metrics on %s\n", exposer->address().c_str());
  }

  auto store = farm::storage::NewPgAnalyzerStore(&pool);
  farm::client::ClientOptions client_options;
  client_options.server = scheduler;
  if (absl::Status st = farm::client::ApplySecurity(security, &client_options); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  auto submitter = farm::analyzer::NewGrpcJobSubmitter(std::move(client_options));
  options.detect.magnitude = magnitude;
  options.detect.alpha = alpha;
  options.bisect.magnitude = magnitude;
  options.bisect.confirm_repeats = confirm_repeats;
  options.bisect.initial_repeats = initial_repeats;
  options.bisect.max_repeats = std::max(max_repeats, initial_repeats);
  options.bisect_improvements = bisect_improvements;
  options.primary_metrics = primary_overrides;
  options.secondary_severity = secondary_severity;
  options.bisect_secondary = bisect_secondary;
  farm::analyzer::Analyzer analyzer(store.get(), submitter.get(), sink.get(),
                                    {&open_primary, &open_secondary, &results}, options);

  std::fprintf(stderr,
               "farm-analyzer: schema v%d, scheduler %s, alertmanager %s, polling every %s\n",
               *version, scheduler.c_str(), alertmanager.empty() ? "(none)" : alertmanager.c_str(),
               absl::FormatDuration(poll_interval).c_str());
  while (!signals.stop_requested()) {
    const absl::Status s = analyzer.Tick();
    if (s.ok()) last_pass.Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    if (once) return s.ok() ? 0 : 1;
    signals.WaitFor(poll_interval);
  }
  std::fprintf(stderr, "farm-analyzer: stopped\n");
  return 0;
}
