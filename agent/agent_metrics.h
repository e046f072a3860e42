// farm::agent::AgentMetrics: the agent's Prometheus series, built once.
//
//   farm_agent_jobs_running                      gauge
//   farm_agent_jobs_total{result}                counter; result is one of
//       succeeded, failed, revoked, stale, released, abandoned
//   farm_agent_emulator_events_per_second        gauge, last emulator job
//
// No job or commit labels: the series stay few whatever runs.
// Thread-safety: prometheus-cpp metrics are thread-safe; the struct holds
// references into the registry, which must outlive it.
#ifndef FARM_AGENT_AGENT_METRICS_H_
#define FARM_AGENT_AGENT_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <string>

namespace farm::agent {

class AgentMetrics {
 public:
  explicit AgentMetrics(prometheus::Registry& registry);
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  prometheus::Gauge& jobs_running;
  prometheus::Family<prometheus::Counter>& jobs_total_family;
  prometheus::Counter& succeeded;
  prometheus::Counter& failed;
  prometheus::Counter& revoked;
  prometheus::Counter& stale;
  prometheus::Counter& released;
  prometheus::Counter& abandoned;
  prometheus::Gauge& emulator_events_per_second;
};

}  // namespace farm::agent

#endif  // FARM_AGENT_AGENT_METRICS_H_
