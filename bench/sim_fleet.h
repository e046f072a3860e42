// SimFleet: many simulated farm agents against one scheduler's
// AgentService, for queue_scale. Each agent behaves as farm-agent does on
// the wire without running anything: Register; Heartbeat every interval the
// scheduler handed out, naming the leases it holds; LeaseJobs when a slot
// is free (max_jobs = free slots; again after 200 ms, the agent's idle
// poll, when none was granted); after a job's simulated run time one
// ReportResults call with its result (what the agent's report batcher sends
// for a lone result), then the next lease.
//
// Every agent has its own channel and TCP connection. Calls are
// asynchronous (gRPC callback API): one event thread issues them when due,
// gRPC's threads run the completions, which record the latency (issue to
// completion) and schedule the agent's next step.
//
// Thread-safety: RegisterAll and Run are called from one thread, one after
// the other; the fleet's state is guarded by one mutex inside. Ownership:
// the fleet owns its channels; the scheduler must outlive Run.
#ifndef BENCH_SIM_FLEET_H_
#define BENCH_SIM_FLEET_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.grpc.pb.h"

namespace farm::bench {

// The raw output of the emulator result the benches report (~150 bytes).
inline constexpr char kEmulatorRawOutput[] =
    "{\"workload\":\"dma-map-bench\",\"throughput\":123.4,\"map_latency_mean\":512,"
    "\"unmap_latency_mean\":733,\"counters\":{\"invalidations\":1000,\"rcache_hits\":990}}";

// What an emulator agent reports for one job: 3 samples and
// kEmulatorRawOutput.
iommufarm::v1::ReportResultRequest EmulatorResultFor(int64_t agent_id,
                                                     const iommufarm::v1::LeaseRef& lease);

struct FleetOptions {
  std::string address;      // the scheduler's host:port (plaintext)
  std::string name_prefix;  // agents are named <prefix>-<i>
  int agents = 10;
  int slots = 1;
  absl::Duration job = absl::Seconds(10);  // mean simulated run time
  absl::Duration idle_poll = absl::Milliseconds(200);
};

// Latencies in milliseconds of the calls of one kind started in the window.
struct Latency {
  std::vector<double> ms;
  // The q-quantile (nearest rank); 0 without samples.
  double Quantile(double q) const;
};

struct FleetStats {
  int agents = 0;
  double window_s = 0;
  Latency lease, heartbeat, report;
  int64_t leased_jobs = 0;  // jobs granted by leases started in the window
  int64_t reports = 0;      // reports accepted that were started in the window
  int64_t failures = 0;     // failed calls, refused reports, revoked leases (any time)
  std::string first_failure;
  double scheduler_cpu = 0;  // CPU seconds per wall second in the window
  double postgres_cpu = 0;
  double reports_per_s() const { return window_s > 0 ? reports / window_s : 0; }
  // No failure, and every kind of call happened in the window.
  bool Healthy() const;
};

void PrintFleet(const std::string& name, const FleetStats& s);
// Each figure of `big` over the same of `small`.
void PrintRatios(const FleetStats& small, const FleetStats& big);

class SimFleet final {
 public:
  explicit SimFleet(FleetOptions options);
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;
  ~SimFleet();

  // Opens every agent's channel and registers it (blocking calls, a few
  // at a time). The first error stops it.
  absl::Status RegisterAll();
  // The heartbeat interval the scheduler handed out (RegisterAll first).
  absl::Duration heartbeat_interval() const { return heartbeat_interval_; }
  // Runs the agents: `warmup`, then the measured `window` (on_window(true)
  // at its start, on_window(false) at its end), then the drain: no new
  // leases, held jobs run out and are reported. Returns when no call is in
  // flight and no lease held.
  FleetStats Run(absl::Duration warmup, absl::Duration window,
                 const std::function<void(bool start)>& on_window);

 private:
  using Clock = std::chrono::steady_clock;
  enum class Step { kHeartbeat, kLease, kReport };
  struct Event {
    Clock::time_point due;
    int agent = 0;
    Step step = Step::kLease;
    iommufarm::v1::LeaseRef lease;  // kReport: the job that ran
    bool operator>(const Event& o) const { return due > o.due; }
  };
  struct Agent {
    std::unique_ptr<iommufarm::v1::AgentService::Stub> stub;
    int64_t id = 0;
    std::string session;
    std::vector<iommufarm::v1::LeaseRef> held;  // leased, not yet settled by a report
    std::vector<int64_t> reporting;             // jobs whose report is in flight
    int free_slots = 0;
    bool leasing = false;  // a LeaseJobs call in flight
  };

  // The event loop: issues each due call (outside the lock) until drained.
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // What to issue for `e`, or an empty function when the agent has nothing
  // to do (stopping, or no free slot).
  std::function<void()> Prepare(const Event& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::function<void()> Heartbeat(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::function<void()> Lease(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::function<void()> Report(int i, const iommufarm::v1::LeaseRef& lease)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnHeartbeat(int i, Clock::time_point start, const grpc::Status& st,
                   const iommufarm::v1::HeartbeatResponse& resp) ABSL_LOCKS_EXCLUDED(mu_);
  void OnLease(int i, Clock::time_point start, const grpc::Status& st,
               const iommufarm::v1::LeaseJobsResponse& resp) ABSL_LOCKS_EXCLUDED(mu_);
  void OnReport(int i, Clock::time_point start, const grpc::Status& st,
                const iommufarm::v1::ReportResultsResponse& resp, int64_t job_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The call's latency into `into` when it started in the window.
  void Record(Clock::time_point start, Latency* into) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InWindow(Clock::time_point t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(Event e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job's run time: the mean, jittered 0.5x-1.5x.
  Clock::duration JobTime() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first lease and heartbeat of every agent, spread over one job
  // length and one heartbeat interval.
  void ScheduleStart() ABSL_LOCKS_EXCLUDED(mu_);

  const FleetOptions options_;
  absl::Duration heartbeat_interval_ = absl::Seconds(10);
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<Agent> agents_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_){42};
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Clock::time_point window_start_ ABSL_GUARDED_BY(mu_) = Clock::time_point::max();
  Clock::time_point window_end_ ABSL_GUARDED_BY(mu_) = Clock::time_point::max();
  FleetStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace farm::bench

#endif  // BENCH_SIM_FLEET_H_
