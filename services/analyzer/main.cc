// farm-analyzer: regression detection, confirmation, bisection and alerts
// over the farm's PostgreSQL. Parses flags, wires the pieces, runs Tick()
// every --poll-interval until SIGINT/SIGTERM.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/gauge.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/metrics/metrics.h"
#include "lib/metrics/metrics_flags.h"
#include "lib/service/flags.h"
#include "lib/service/shutdown.h"
#include "lib/service/tls.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "services/analyzer/analyzer.h"
#include "services/analyzer/clients.h"

namespace {

using farm::analyzer::AlertSink;
using farm::analyzer::AnalyzerOptions;

int Fail(const std::string& msg) {
  std::fprintf(stderr, "farm-analyzer: %s\n", msg.c_str());
  return 2;
}

// The command line as parsed; ResolveOptions turns the analysis flags into
// AnalyzerOptions.
struct Flags {
  std::string db;
  std::string scheduler;
  std::string alertmanager;
  std::string metrics_address;
  farm::metrics::MetricsTls metrics_tls;
  farm::client::SecurityFlags security;
  std::string am_ca, am_bearer_file, am_basic_file;
  absl::Duration poll_interval;
  AnalyzerOptions options;  // alert_resend, resolved_resend
  double magnitude = 0.03;
  double alpha = 0.01;
  int confirm_repeats = 8;
  int initial_repeats = 6;
  int max_repeats = 48;
  int top_up_max = 4;
  bool bisect_improvements = false;
  std::vector<std::string> primary_metric_flags;
  std::string secondary_severity = "info";
  std::string report_url;
  bool bisect_secondary = false;
  bool once = false;
};

void AddFlags(CLI::App& app, Flags* f) {
  app.add_option("--db", f->db, "PostgreSQL URI")->envname("FARM_DB");
  app.add_option("--scheduler", f->scheduler,
                 "scheduler HOST:PORT (or several IP:PORT, comma-separated) for submitting "
                 "confirm/bisect matrices")
      ->envname("FARM_SERVER");
  app.add_option(
      "--alertmanager", f->alertmanager,
      "Alertmanager base URL, e.g. http://127.0.0.1:9093 or https://am.lab:9093 (empty: no "
      "alerts)");
  app.add_option("--metrics", f->metrics_address,
                 "serve Prometheus /metrics on HOST:PORT (port 0: any free port; the bound "
                 "address is printed)");
  farm::metrics::AddMetricsTlsOptions(app, &f->metrics_tls);
  farm::client::AddSecurityOptions(app, &f->security);
  app.add_option("--alertmanager-ca", f->am_ca, "PEM CA bundle verifying an https Alertmanager")
      ->envname("FARM_ALERTMANAGER_CA");
  app.add_option("--alertmanager-bearer-file", f->am_bearer_file,
                 "file whose first line is a bearer token for Alertmanager (https only)")
      ->envname("FARM_ALERTMANAGER_BEARER_FILE");
  app.add_option("--alertmanager-basic-file", f->am_basic_file,
                 "file whose first line is USER:PASSWORD for Alertmanager basic auth (https "
                 "only)")
      ->envname("FARM_ALERTMANAGER_BASIC_FILE");
  farm::service::AddDurationOption(app, "--poll-interval", &f->poll_interval, "2s",
                                   "time between passes, e.g. 500ms, 2s");
  farm::service::AddDurationOption(app, "--alert-resend", &f->options.alert_resend, "60s",
                                   "re-send open alerts (and recently resolved ones) this often");
  farm::service::AddDurationOption(app, "--resolved-resend", &f->options.resolved_resend, "15m",
                                   "keep re-sending a resolved alert for this long, so that an "
                                   "Alertmanager restart does not lose the resolution");
  farm::service::AddDurationOption(
      app, "--group-window", &f->options.groups.window, "30m",
      "regressions found within this long of their group's first whose commit ranges overlap "
      "are one group: one bisect (of the strongest) and one alert; 0 turns groups off");
  app.add_option("--magnitude", f->magnitude, "minimal relative change reported (0.03 = 3%)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--alpha", f->alpha,
                 "family-wise significance; divided by the number of series tested")
      ->capture_default_str()
      ->check(CLI::Range(1e-12, 0.5));
  app.add_option("--decay-magnitude", f->options.decay.magnitude,
                 "a run's own series (throughput per interval) falling by this much of its "
                 "start, beyond its noise, is a decay finding (0.05 = 5%)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--confirm-repeats", f->confirm_repeats,
                 "interleaved re-runs of last good and first bad before a regression counts")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  app.add_option("--bisect-repeats", f->initial_repeats, "first repeats of a bisect step")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  app.add_option("--max-repeats", f->max_repeats,
                 "repeats a weak bisect verdict may grow to before it is acted on")
      ->capture_default_str()
      ->check(CLI::Range(2, 10000));
  app.add_option("--top-up-max", f->top_up_max,
                 "where a matrix's scan is suggestive but not significant, its commits there are "
                 "measured again (doubling) until one holds this many times the series' bulk "
                 "repeats, before a candidate is opened; 1: never")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_flag("--bisect-improvements", f->bisect_improvements,
               "bisect confirmed improvements too (default: record them only)");
  app.add_option("--primary-metric", f->primary_metric_flags,
                 "WORKLOAD=METRIC[,METRIC...]: the metrics users bisect WORKLOAD on, instead of "
                 "the derived ones (its `throughput`/`throughput_<unit>` metrics, else its "
                 "work rates such as iops); repeatable");
  app.add_option("--secondary-severity", f->secondary_severity,
                 "severity label of alerts for regressions of secondary metrics (latency, hit "
                 "rates, CPU time ...); none: record them without alerting")
      ->capture_default_str()
      ->check(CLI::IsMember({"info", "warning", "critical", "none"}));
  app.add_option("--report-url", f->report_url,
                 "base URL of a `farmctl report --serve` (http://reports.lab:8088): every alert "
                 "links its regression's HTML report, <URL>/regressions/<id> (annotation "
                 "`report` and generatorURL)")
      ->envname("FARM_REPORT_URL");
  app.add_flag("--bisect-secondary", f->bisect_secondary,
               "bisect confirmed regressions of secondary metrics too (default: confirm and "
               "record them only)");
  app.add_flag("--once", f->once, "run one pass and exit (exit status 1 if it had errors)");
}

// The engine's options from the flags; an error is the usage message to
// print (exit status 2).
absl::StatusOr<AnalyzerOptions> ResolveOptions(const Flags& f) {
  if (f.db.empty()) return absl::InvalidArgumentError("--db (or FARM_DB) is required");
  if (f.scheduler.empty()) {
    return absl::InvalidArgumentError("--scheduler (or FARM_SERVER) is required");
  }
  AnalyzerOptions options = f.options;
  for (const std::string& p : f.primary_metric_flags) {
    if (!farm::analyzer::ParsePrimaryOverride(p, &options.primary_metrics)) {
      return absl::InvalidArgumentError(
          "--primary-metric: expected WORKLOAD=METRIC[,METRIC...], got \"" + p + "\"");
    }
  }
  options.detect.magnitude = f.magnitude;
  options.detect.alpha = f.alpha;
  options.detect.max_top_up_factor = f.top_up_max;
  options.bisect.magnitude = f.magnitude;
  options.bisect.confirm_repeats = f.confirm_repeats;
  options.bisect.initial_repeats = f.initial_repeats;
  options.bisect.max_repeats = std::max(f.max_repeats, f.initial_repeats);
  options.bisect_improvements = f.bisect_improvements;
  options.alert.secondary_severity = f.secondary_severity;
  options.alert.report_url = f.report_url;
  options.alert.reproduce_repeats = std::max(2, f.confirm_repeats);
  options.bisect_secondary = f.bisect_secondary;
  return options;
}

// The Alertmanager sink of --alertmanager with its TLS and credentials;
// nullptr (no alerts) without one.
absl::StatusOr<std::unique_ptr<AlertSink>> NewSink(const Flags& f) {
  if (f.alertmanager.empty()) return nullptr;
  absl::StatusOr<farm::analyzer::AlertmanagerAuth> auth =
      farm::analyzer::LoadAlertmanagerAuth(f.am_ca, f.am_bearer_file, f.am_basic_file);
  if (!auth.ok()) return auth.status();
  return farm::analyzer::NewAlertmanagerSink(f.alertmanager, *std::move(auth));
}

// The analyzer's gauges, registered once: the open regressions by metric
// rank, the last good pass and the latest results.
struct Gauges {
  prometheus::Gauge* open_primary = nullptr;
  prometheus::Gauge* open_secondary = nullptr;
  prometheus::Gauge* last_pass = nullptr;
  std::unique_ptr<farm::analyzer::ResultGauges> results;
};

Gauges RegisterGauges(farm::metrics::MetricsRegistry& registry) {
  Gauges g;
  auto& open_family =
      prometheus::BuildGauge()
          .Name("farm_regressions_open")
          .Help(
              "Confirmed or acknowledged regressions not yet closed, by the rank of their "
              "metric (primary: the workload's throughput)")
          .Register(registry.registry());
  g.open_primary = &open_family.Add({{"metric_rank", "primary"}});
  g.open_secondary = &open_family.Add({{"metric_rank", "secondary"}});
  g.last_pass = &prometheus::BuildGauge()
                     .Name("farm_analyzer_last_pass_timestamp_seconds")
                     .Help("Unix time of the last analyzer pass without errors")
                     .Register(registry.registry())
                     .Add({});
  g.results = std::make_unique<farm::analyzer::ResultGauges>(registry.registry());
  return g;
}

// /metrics on --metrics, its bound address printed; nullptr without one.
absl::StatusOr<std::unique_ptr<farm::metrics::MetricsExposer>> StartMetrics(
    const Flags& f, farm::metrics::MetricsRegistry& registry) {
  if (f.metrics_address.empty()) return nullptr;
  auto exposer = farm::metrics::MetricsExposer::Start(f.metrics_address, registry, f.metrics_tls);
  if (!exposer.ok())
    return absl::Status(exposer.status().code(), "--metrics: " + exposer.status().ToString());
  std::fprintf(stderr, "metrics on %s\n", (*exposer)->address().c_str());
  return exposer;
}

// The scheduler client confirm and bisect matrices are submitted through.
absl::StatusOr<std::unique_ptr<farm::analyzer::JobSubmitter>> NewSubmitter(const Flags& f) {
  farm::client::ClientOptions client_options;
  client_options.server = f.scheduler;
  if (absl::Status st = farm::client::ApplySecurity(f.security, &client_options); !st.ok()) {
    return st;
  }
  return farm::analyzer::NewGrpcJobSubmitter(std::move(client_options));
}

// One pass every --poll-interval until SIGINT/SIGTERM; with --once a single
// pass, exit status 1 when it had errors.
int RunPasses(farm::analyzer::Analyzer& analyzer, prometheus::Gauge& last_pass, const Flags& f,
              farm::service::ShutdownSignals& signals) {
  while (!signals.stop_requested()) {
    const absl::Status s = analyzer.Tick();
    if (s.ok()) last_pass.Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    if (f.once) return s.ok() ? 0 : 1;
    signals.WaitFor(f.poll_interval);
  }
  std::fprintf(stderr, "farm-analyzer: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-analyzer: finds performance changes along catalog commit order in the farm's "
      "results, confirms them, bisects them to the first bad commit through the scheduler, "
      "and alerts Alertmanager."};
  Flags flags;
  AddFlags(app, &flags);
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;
  absl::StatusOr<AnalyzerOptions> options = ResolveOptions(flags);
  if (!options.ok()) return Fail(std::string(options.status().message()));

  // Before any thread starts, so that no pool, gRPC or HTTP thread takes a signal.
  farm::service::ShutdownSignals signals;
  spdlog::set_default_logger(spdlog::stderr_color_mt("farm-analyzer"));

  farm::storage::PgPool pool(farm::storage::PgPoolOptions{flags.db, 2, 5});
  absl::StatusOr<int> version = farm::storage::ApplyMigrations(pool);
  if (!version.ok()) return Fail("--db: " + version.status().ToString());
  absl::StatusOr<std::unique_ptr<AlertSink>> sink = NewSink(flags);
  if (!sink.ok()) return Fail(std::string(sink.status().message()));
  farm::metrics::MetricsRegistry registry;
  Gauges gauges = RegisterGauges(registry);
  absl::StatusOr<std::unique_ptr<farm::metrics::MetricsExposer>> exposer =
      StartMetrics(flags, registry);
  if (!exposer.ok()) return Fail(std::string(exposer.status().message()));

  std::unique_ptr<farm::storage::AnalyzerStore> store = farm::storage::NewPgAnalyzerStore(&pool);
  absl::StatusOr<std::unique_ptr<farm::analyzer::JobSubmitter>> submitter = NewSubmitter(flags);
  if (!submitter.ok()) return Fail(std::string(submitter.status().message()));
  farm::analyzer::Analyzer analyzer(
      store.get(), submitter->get(), sink->get(),
      {gauges.open_primary, gauges.open_secondary, gauges.results.get()}, *options);

  std::fprintf(stderr,
               "farm-analyzer: schema v%d, scheduler %s, alertmanager %s, polling every %s\n",
               *version, flags.scheduler.c_str(),
               flags.alertmanager.empty() ? "(none)" : flags.alertmanager.c_str(),
               absl::FormatDuration(flags.poll_interval).c_str());
  return RunPasses(analyzer, *gauges.last_pass, flags, signals);
}
