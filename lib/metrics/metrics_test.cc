#include "lib/metrics/metrics.h"

#include <gtest/gtest.h>

namespace farm::metrics {
namespace {

TEST(SchedulerMetricsTest, FamiliesRenderWithStateAndExecutorLabels) {
  MetricsRegistry reg;
  SchedulerMetrics m(reg.registry());
  m.queue_jobs(1).Set(7);
  m.leases_granted.Increment(3);
  m.job_duration(1).Observe(0.5);
  const std::string text = reg.Serialize();
  EXPECT_NE(text.find("farm_queue_jobs{state=\"queued\"} 7"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_leases_granted_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_job_duration_seconds_count{executor=\"emulator\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("farm_stale_results_rejected_total 0"), std::string::npos) << text;
}

TEST(AgentMetricsTest, ResultLabelAndEventsGauge) {
  MetricsRegistry reg;
  AgentMetrics m(reg.registry());
  m.jobs_stale.Increment();
  m.emulator_events_per_second.Set(12.5);
  const std::string text = reg.Serialize();
  EXPECT_NE(text.find("farm_agent_jobs_total{result=\"stale\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_agent_emulator_events_per_second 12.5"), std::string::npos) << text;
}

TEST(MetricsExposerTest, RejectsAddressWithoutPort) {
  MetricsRegistry reg;
  auto e = MetricsExposer::Start("127.0.0.1", reg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("host:port"), std::string::npos);
}

TEST(MetricsExposerTest, PortZeroBindsAFreePort) {
  MetricsRegistry reg;
  auto e = MetricsExposer::Start("127.0.0.1:0", reg);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT((*e)->port(), 0);
}

}  // namespace
}  // namespace farm::metrics
