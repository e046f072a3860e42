#include "agent/agent_metrics.h"

namespace farm::agent {

AgentMetrics::AgentMetrics(prometheus::Registry& registry)
    : jobs_running(prometheus::BuildGauge()
                       .Name("farm_agent_jobs_running")
                       .Help("Jobs this agent is running now")
                       .Register(registry)
                       .Add({})),
      jobs_total_family(prometheus::BuildCounter()
                            .Name("farm_agent_jobs_total")
                            .Help("Jobs this agent finished, by result")
                            .Register(registry)),
      succeeded(jobs_total_family.Add({{"result", "succeeded"}})),
      failed(jobs_total_family.Add({{"result", "failed"}})),
      revoked(jobs_total_family.Add({{"result", "revoked"}})),
      stale(jobs_total_family.Add({{"result", "stale"}})),
      released(jobs_total_family.Add({{"result", "released"}})),
      abandoned(jobs_total_family.Add({{"result", "abandoned"}})),
      emulator_events_per_second(prometheus::BuildGauge()
                                     .Name("farm_agent_emulator_events_per_second")
                                     .Help("Simulated events per wall-clock second of the last "
                                           "emulator job")
                                     .Register(registry)
                                     .Add({})) {}

}  // namespace farm::agent
