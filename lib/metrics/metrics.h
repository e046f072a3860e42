// Prometheus metrics for farm services (prometheus-cpp).
//
// Contract:
//  - One prometheus::Registry per process, owned by MetricsRegistry. Metric
//    families are built once, in the constructors of SchedulerMetrics /
//    AgentMetrics, and the returned references are kept for the process's
//    life; hot paths only touch the kept Counter/Gauge/Histogram objects
//    (prometheus-cpp metrics are internally thread-safe).
//  - MetricsExposer serves /metrics over HTTP, or HTTPS with a certificate
//    and key (MetricsTls); create it in main only (tests of service code
//    need no HTTP listener). Port 0 picks a free port; port() tells which.
//    Plain HTTP is prometheus-cpp's civetweb Exposer. HTTPS is cpp-httplib
//    with OpenSSL: Debian bookworm's civetweb is built with TLS, but it
//    dlopen()s libssl through the OpenSSL 1.1 API and its worker calls a
//    NULL function pointer (SIGSEGV) on the first https request with
//    bookworm's OpenSSL 3, so its ssl_certificate option cannot be used.
//  - No commit id (or any other high-cardinality value) is ever a label.
#ifndef LIB_METRICS_METRICS_H_
#define LIB_METRICS_METRICS_H_

#include <array>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"

namespace farm::metrics {

class MetricsRegistry final {
 public:
  MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;
  prometheus::Registry& registry() { return *registry_; }
  std::shared_ptr<prometheus::Registry> shared() { return registry_; }
  // The text exposition of everything registered (for tests and debugging).
  std::string Serialize() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

// Scheduler-side families. Executor label values: emulator, fio, iozone.
class SchedulerMetrics final {
 public:
  explicit SchedulerMetrics(prometheus::Registry& registry);
  SchedulerMetrics(const SchedulerMetrics&) = delete;
  SchedulerMetrics& operator=(const SchedulerMetrics&) = delete;

  // farm_queue_jobs{state}: indexed by iommufarm.v1.JobState number (1..5).
  prometheus::Gauge& queue_jobs(int job_state);
  // farm_queue_queued_jobs{executor}: queued jobs of one executor
  // (iommufarm.v1.Executor number, 1..5), what scales that executor's agents.
  prometheus::Gauge& queued_jobs(int executor);
  prometheus::Counter& leases_granted;          // farm_leases_granted_total
  prometheus::Counter& leases_expired;          // farm_leases_expired_total
  prometheus::Counter& stale_results_rejected;  // farm_stale_results_rejected_total
  prometheus::Gauge& agents_connected;          // farm_agents_connected
  prometheus::Counter& results_ingested;        // farm_results_ingested_total
  prometheus::Counter& matrices_submitted;      // farm_matrices_submitted_total
  prometheus::Counter& jobs_failed;             // farm_jobs_failed_total
  // farm_job_duration_seconds{executor}: lease grant to accepted result.
  // `executor` is the iommufarm.v1.Executor number.
  prometheus::Histogram& job_duration(int executor);
  // farm_lab_power_cycles_total{agent, outcome}: lab hosts that did not come
  // back from a job's kernel (scheduler/lab_recovery.h), by agent and what
  // became of the power cycle: "power_cycled", "failed" (the command failed,
  // timed out or was stopped) or "no_command" (the agent has no lab hosts
  // entry: its host stays down). Agent names are a lab's hosts, few and
  // fixed. Thread-safe (the family adds a series under its own lock).
  prometheus::Counter& power_cycles(const std::string& agent, const std::string& outcome);

  // Executor numbers the per-executor families have a series for (1..5).
  static constexpr int kExecutors = 6;

 private:
  std::array<prometheus::Gauge*, 6> queue_{};
  std::array<prometheus::Gauge*, kExecutors> queued_{};
  std::array<prometheus::Histogram*, kExecutors> duration_{};
  prometheus::Family<prometheus::Counter>* power_cycles_ = nullptr;
};

// Agent-side families (farm-agent).
class AgentMetrics final {
 public:
  explicit AgentMetrics(prometheus::Registry& registry);
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  prometheus::Gauge& jobs_running;                // farm_agent_jobs_running
  prometheus::Counter& jobs_succeeded;            // farm_agent_jobs_total{result="succeeded"}
  prometheus::Counter& jobs_failed;               // farm_agent_jobs_total{result="failed"}
  prometheus::Counter& jobs_revoked;              // farm_agent_jobs_total{result="revoked"}
  prometheus::Counter& jobs_stale;                // farm_agent_jobs_total{result="stale"}
  prometheus::Counter& jobs_released;             // farm_agent_jobs_total{result="released"}
  prometheus::Counter& jobs_abandoned;            // farm_agent_jobs_total{result="abandoned"}
  prometheus::Counter& emulator_events;           // farm_agent_emulator_events_total
  prometheus::Gauge& emulator_events_per_second;  // farm_agent_emulator_events_per_second
  prometheus::Counter& rpc_errors;                // farm_agent_rpc_errors_total
  prometheus::Histogram& job_duration;            // farm_agent_job_duration_seconds
};

// PEM files for an HTTPS /metrics: both, or neither (plain HTTP).
struct MetricsTls {
  std::string cert_file;  // server certificate chain
  std::string key_file;   // its private key
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// HTTP(S) endpoint serving the registry at /metrics. The registry must
// outlive it.
class MetricsExposer final {
 public:
  // `address` is host:port; port 0 binds a free port. Errors (bad address,
  // port in use, unreadable certificate or key, only one of the two) come
  // back as kUnavailable / kInvalidArgument.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(const std::string& address,
                                                               MetricsRegistry& registry,
                                                               const MetricsTls& tls = {});
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;
  ~MetricsExposer();
  int port() const { return port_; }
  bool tls() const { return https_ != nullptr; }
  // host:port actually bound.
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  struct Https;
  MetricsExposer();
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<Https> https_;
  std::string host_;
  int port_ = 0;
};

}  // namespace farm::metrics

#endif  // LIB_METRICS_METRICS_H_
