#include "lib/metrics/metrics.h"

#include <chrono>
#include <exception>
#include <sstream>
#include <thread>

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>
#include <prometheus/text_serializer.h>

#include "proto/names.h"

namespace farm::metrics {
namespace {

namespace pb = ::iommufarm::v1;

prometheus::Histogram::BucketBoundaries DurationBuckets() {
  // 1 ms .. ~1 h, roughly x3 per bucket: emulator jobs are short, real runs long.
  return {0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000, 3600};
}

}  // namespace

std::string MetricsRegistry::Serialize() const {
  prometheus::TextSerializer s;
  return s.Serialize(registry_->Collect());
}

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& r)
    : leases_granted(prometheus::BuildCounter()
                         .Name("farm_leases_granted_total")
                         .Help("Job leases granted to agents")
                         .Register(r)
                         .Add({})),
      leases_expired(prometheus::BuildCounter()
                         .Name("farm_leases_expired_total")
                         .Help("Leases that expired and were requeued or failed by the reaper")
                         .Register(r)
                         .Add({})),
      stale_results_rejected(prometheus::BuildCounter()
                                 .Name("farm_stale_results_rejected_total")
                                 .Help("Results/failures rejected for a stale lease token")
                                 .Register(r)
                                 .Add({})),
      agents_connected(prometheus::BuildGauge()
                           .Name("farm_agents_connected")
                           .Help("Agents with a heartbeat within the liveness window")
                           .Register(r)
                           .Add({})),
      results_ingested(prometheus::BuildCounter()
                           .Name("farm_results_ingested_total")
                           .Help("Results accepted and stored (duplicates not counted)")
                           .Register(r)
                           .Add({})),
      matrices_submitted(prometheus::BuildCounter()
                             .Name("farm_matrices_submitted_total")
                             .Help("Matrices created by SubmitMatrix")
                             .Register(r)
                             .Add({})),
      jobs_failed(prometheus::BuildCounter()
                      .Name("farm_jobs_failed_total")
                      .Help("Jobs that ended FAILED (out of attempts or non-retryable)")
                      .Register(r)
                      .Add({})) {
  auto& q = prometheus::BuildGauge()
                .Name("farm_queue_jobs")
                .Help("Jobs in the queue by state (all matrices)")
                .Register(r);
  for (int s = 1; s < 6; ++s) {
    queue_[s] = &q.Add({{"state", proto::JobStateName(static_cast<pb::JobState>(s))}});
  }
  queue_[0] = queue_[1];
  auto& d = prometheus::BuildHistogram()
                .Name("farm_job_duration_seconds")
                .Help("Lease grant to accepted result, by executor")
                .Register(r);
  auto& queued = prometheus::BuildGauge()
                     .Name("farm_queue_queued_jobs")
                     .Help("Queued jobs by executor (all matrices)")
                     .Register(r);
  for (int e = 1; e < kExecutors; ++e) {
    const prometheus::Labels executor = {
        {"executor", proto::ExecutorName(static_cast<pb::Executor>(e))}};
    duration_[e] = &d.Add(executor, DurationBuckets());
    queued_[e] = &queued.Add(executor);
  }
  duration_[0] = duration_[1];
  queued_[0] = queued_[1];
  power_cycles_ = &prometheus::BuildCounter()
                       .Name("farm_lab_power_cycles_total")
                       .Help(
                           "Lab hosts power-cycled after a job's kernel did not come back, "
                           "by agent and outcome (power_cycled, failed, no_command)")
                       .Register(r);
}

prometheus::Counter& SchedulerMetrics::power_cycles(const std::string& agent,
                                                    const std::string& outcome) {
  return power_cycles_->Add({{"agent", agent}, {"outcome", outcome}});
}

prometheus::Gauge& SchedulerMetrics::queue_jobs(int job_state) {
  return *queue_[(job_state >= 0 && job_state < 6) ? job_state : 0];
}

prometheus::Histogram& SchedulerMetrics::job_duration(int executor) {
  return *duration_[(executor >= 0 && executor < kExecutors) ? executor : 0];
}

prometheus::Gauge& SchedulerMetrics::queued_jobs(int executor) {
  return *queued_[(executor >= 0 && executor < kExecutors) ? executor : 0];
}

namespace {
prometheus::Family<prometheus::Counter>& AgentJobs(prometheus::Registry& r) {
  return prometheus::BuildCounter()
      .Name("farm_agent_jobs_total")
      .Help("Jobs finished or handed back by this agent, by result")
      .Register(r);
}
}  // namespace

AgentMetrics::AgentMetrics(prometheus::Registry& r)
    : jobs_running(prometheus::BuildGauge()
                       .Name("farm_agent_jobs_running")
                       .Help("Jobs running on this agent now")
                       .Register(r)
                       .Add({})),
      jobs_succeeded(AgentJobs(r).Add({{"result", "succeeded"}})),
      jobs_failed(AgentJobs(r).Add({{"result", "failed"}})),
      jobs_revoked(AgentJobs(r).Add({{"result", "revoked"}})),
      jobs_stale(AgentJobs(r).Add({{"result", "stale"}})),
      jobs_released(AgentJobs(r).Add({{"result", "released"}})),
      jobs_abandoned(AgentJobs(r).Add({{"result", "abandoned"}})),
      emulator_events(prometheus::BuildCounter()
                          .Name("farm_agent_emulator_events_total")
                          .Help("Emulator events processed")
                          .Register(r)
                          .Add({})),
      emulator_events_per_second(prometheus::BuildGauge()
                                     .Name("farm_agent_emulator_events_per_second")
                                     .Help("Emulator events per host second, recent jobs")
                                     .Register(r)
                                     .Add({})),
      rpc_errors(prometheus::BuildCounter()
                     .Name("farm_agent_rpc_errors_total")
                     .Help("Failed RPCs to the scheduler")
                     .Register(r)
                     .Add({})),
      job_duration(prometheus::BuildHistogram()
                       .Name("farm_agent_job_duration_seconds")
                       .Help("Wall time of jobs run by this agent")
                       .Register(r)
                       .Add({}, DurationBuckets())) {}

// The HTTPS endpoint: one server thread answering GET /metrics.
struct MetricsExposer::Https {
  explicit Https(const MetricsTls& tls) : server(tls.cert_file.c_str(), tls.key_file.c_str()) {}
  ~Https() {
    server.stop();
    if (thread.joinable()) thread.join();
  }
  httplib::SSLServer server;
  std::thread thread;
};

MetricsExposer::MetricsExposer() = default;

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(const std::string& address,
                                                                      MetricsRegistry& registry,
                                                                      const MetricsTls& tls) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError("metrics address \"" + address +
                                      "\": expected host:port (port 0 picks a free one)");
  }
  std::unique_ptr<MetricsExposer> out(new MetricsExposer());
  out->host_ = address.substr(0, colon);
  if (tls.enabled()) {
    if (tls.cert_file.empty() || tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          "metrics TLS needs both a certificate and a key file (--metrics-tls-cert and "
          "--metrics-tls-key)");
    }
    int port = 0;
    try {
      port = std::stoi(address.substr(colon + 1));
    } catch (const std::exception&) {
      return absl::InvalidArgumentError("metrics address \"" + address + "\": bad port");
    }
    std::string host = out->host_;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    out->https_ = std::make_unique<Https>(tls);
    if (!out->https_->server.is_valid()) {
      return absl::InvalidArgumentError("metrics TLS: cannot load certificate " + tls.cert_file +
                                        " with key " + tls.key_file + " (PEM files)");
    }
    std::weak_ptr<prometheus::Registry> weak = registry.shared();
    out->https_->server.Get("/metrics", [weak](const httplib::Request&, httplib::Response& res) {
      std::shared_ptr<prometheus::Registry> r = weak.lock();
      if (r == nullptr) {
        res.status = 503;
        return;
      }
      prometheus::TextSerializer text;
      res.set_content(text.Serialize(r->Collect()), "text/plain; version=0.0.4");
    });
    if (port == 0) {
      port = out->https_->server.bind_to_any_port(host);
      if (port < 0) port = 0;
    } else if (!out->https_->server.bind_to_port(host, port)) {
      port = 0;
    }
    if (port <= 0) return absl::UnavailableError("metrics: cannot listen on " + address);
    out->port_ = port;
    Https* h = out->https_.get();
    h->thread = std::thread([h] { h->server.listen_after_bind(); });
    // stop() before the loop runs would be lost (and the join would hang).
    for (int i = 0; i < 5000 && !h->server.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return out;
  }
  try {
    out->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError("metrics: cannot listen on " + address + ": " + e.what());
  }
  out->exposer_->RegisterCollectable(registry.shared());
  const std::vector<int> ports = out->exposer_->GetListeningPorts();
  out->port_ = ports.empty() ? 0 : ports.front();
  return out;
}

MetricsExposer::~MetricsExposer() = default;

}  // namespace farm::metrics
