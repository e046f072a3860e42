// farm::testing::MemoryScheduler: the real scheduler gRPC services
// (AgentService, JobService) in-process on a free loopback port, over the
// in-memory repositories (lib/storage/memory/memory_store.h), for hermetic
// tests of farm clients such as the agent: no PostgreSQL, no child process,
// ready in milliseconds.
//
// Faults a client must survive are one call away: Stop() takes the server
// away (calls fail UNAVAILABLE) and Restart() serves again on the same port
// with every row kept, as a scheduler restarted over one database would;
// FailNext() answers the next calls of one AgentService method with a code
// of the test's choosing before they reach the service. No reaper runs:
// tests reap with reaper().RunOnce(), on the store's clock (options.clock,
// e.g. a manual one so leases expire only when the test says so).
// Calls are unauthenticated (loopback, no token): every caller is admin.
//
// Thread-safety: Stop()/Restart() from the test's thread; every other
// member from any thread. Ownership: owns the store, the services and the
// server; references it returns live as long as it does.
#ifndef TESTING_MEMORY_SCHEDULER_H_
#define TESTING_MEMORY_SCHEDULER_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/metrics/metrics.h"
#include "lib/storage/memory/memory_store.h"
#include "scheduler/authz.h"
#include "scheduler/grpc_services.h"
#include "scheduler/scheduler_service.h"
#include "scheduler/worker_pool.h"
#include "testing/manual_clock.h"

namespace farm::testing {

struct MemorySchedulerOptions {
  scheduler::SchedulerConfig config;
  std::function<absl::Time()> clock = absl::Now;  // the store's clock
};

class MemoryScheduler final {
 public:
  static absl::StatusOr<std::unique_ptr<MemoryScheduler>> Start(
      MemorySchedulerOptions options = {});
  MemoryScheduler(const MemoryScheduler&) = delete;
  MemoryScheduler& operator=(const MemoryScheduler&) = delete;
  ~MemoryScheduler();

  // 127.0.0.1:PORT, the same across Restart().
  std::string address() const { return address_; }
  // Stops serving (running calls are cancelled after `deadline`).
  void Stop(absl::Duration deadline = absl::Milliseconds(200));
  // Serves again on the same port.
  absl::Status Restart();

  // The next `n` calls of AgentService/`rpc` (e.g. "ReportResults") are
  // answered `code` without reaching the service.
  void FailNext(const std::string& rpc, int n, grpc::StatusCode code);
  // The result count of every ReportResults call that reached the service.
  std::vector<int> report_batches() const;

  storage::MemoryStore& store() { return store_; }
  scheduler::JobService& jobs() { return jobs_; }
  scheduler::AgentService& agents() { return agents_; }
  scheduler::Reaper& reaper() { return reaper_; }

 private:
  class FaultyAgentService;
  explicit MemoryScheduler(MemorySchedulerOptions options);
  // Builds and starts the gRPC server on `listen`; sets port_.
  absl::Status Serve(const std::string& listen);

  storage::MemoryStore store_;
  metrics::MetricsRegistry registry_;
  metrics::SchedulerMetrics metrics_;
  scheduler::JobService jobs_;
  scheduler::AgentService agents_;
  scheduler::Reaper reaper_;
  scheduler::Authorizer authz_;
  scheduler::WorkerPool pool_;
  scheduler::JobServiceGrpc job_grpc_;
  scheduler::AgentServiceGrpc agent_grpc_;
  std::unique_ptr<FaultyAgentService> faulty_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;

  mutable absl::Mutex mu_;
  struct Fault {
    int left = 0;
    grpc::StatusCode code = grpc::StatusCode::OK;
  };
  std::map<std::string, Fault> faults_ ABSL_GUARDED_BY(mu_);
  std::vector<int> report_batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace farm::testing

#endif  // TESTING_MEMORY_SCHEDULER_H_
