#include "bench/sim_fleet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <tuple>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace farm::bench {
namespace {

namespace pb = ::iommufarm::v1;

// Generous: a call that takes this long is a failure of the run, not a tail.
constexpr std::chrono::seconds kCallDeadline(60);

// One asynchronous call's state, alive until its completion has run.
template <typename Req, typename Resp>
struct Call {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
  std::chrono::steady_clock::time_point start;
};

// The agent's own connection (a local subchannel pool: channels with equal
// arguments would otherwise share one), with lib/client's keepalive.
std::unique_ptr<pb::AgentService::Stub> AgentStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return pb::AgentService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

bool SameLease(const pb::LeaseRef& a, const pb::LeaseRef& b) {
  return a.job_id() == b.job_id() && a.attempt() == b.attempt() &&
         a.lease_token() == b.lease_token();
}

}  // namespace

pb::ReportResultRequest EmulatorResultFor(int64_t agent_id, const pb::LeaseRef& lease) {
  pb::ReportResultRequest rr;
  rr.set_agent_id(agent_id);
  *rr.mutable_lease() = lease;
  for (const auto& [metric, value, unit] :
       {std::tuple{"throughput", 123.4, "Mops"}, std::tuple{"map_latency_mean", 512.0, "ns"},
        std::tuple{"unmap_latency_mean", 733.0, "ns"}}) {
    pb::Sample* s = rr.add_samples();
    s->set_metric(metric);
    s->set_value(value);
    s->set_unit(unit);
  }
  rr.set_raw_output(kEmulatorRawOutput);
  rr.set_raw_format("emu-json");
  return rr;
}

double Latency::Quantile(double q) const {
  if (ms.empty()) return 0;
  std::vector<double> v = ms;
  const size_t k =
      std::min(v.size() - 1,
               static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

bool FleetStats::Healthy() const {
  return failures == 0 && !lease.ms.empty() && !heartbeat.ms.empty() && reports > 0;
}

void PrintFleet(const std::string& name, const FleetStats& s) {
  std::printf(
      "%s: %d agents, %.0f s window: lease p50 %.1f ms p99 %.1f ms (%zu calls, %lld jobs), "
      "heartbeat p50 %.1f ms p99 %.1f ms (%zu calls), report p50 %.1f ms p99 %.1f ms, "
      "%.1f reports/s, farm-scheduler CPU %.3f s/s, PostgreSQL CPU %.3f s/s, %lld failures\n",
      name.c_str(), s.agents, s.window_s, s.lease.Quantile(0.5), s.lease.Quantile(0.99),
      s.lease.ms.size(), static_cast<long long>(s.leased_jobs), s.heartbeat.Quantile(0.5),
      s.heartbeat.Quantile(0.99), s.heartbeat.ms.size(), s.report.Quantile(0.5),
      s.report.Quantile(0.99), s.reports_per_s(), s.scheduler_cpu, s.postgres_cpu,
      static_cast<long long>(s.failures));
  if (s.failures > 0) std::printf("%s: first failure: %s\n", name.c_str(), s.first_failure.c_str());
  std::fflush(stdout);
}

void PrintRatios(const FleetStats& small, const FleetStats& big) {
  std::printf("big / baseline (%d / %d agents):\n", big.agents, small.agents);
  for (const auto& [what, b, s] :
       {std::tuple{"lease p50", big.lease.Quantile(0.5), small.lease.Quantile(0.5)},
        std::tuple{"lease p99", big.lease.Quantile(0.99), small.lease.Quantile(0.99)},
        std::tuple{"heartbeat p50", big.heartbeat.Quantile(0.5), small.heartbeat.Quantile(0.5)},
        std::tuple{"heartbeat p99", big.heartbeat.Quantile(0.99), small.heartbeat.Quantile(0.99)},
        std::tuple{"report p99", big.report.Quantile(0.99), small.report.Quantile(0.99)},
        std::tuple{"reports/s", big.reports_per_s(), small.reports_per_s()},
        std::tuple{"farm-scheduler CPU s/s", big.scheduler_cpu, small.scheduler_cpu},
        std::tuple{"PostgreSQL CPU s/s", big.postgres_cpu, small.postgres_cpu}}) {
    if (s > 0) std::printf("  ratio %s: %.2f\n", what, b / s);
  }
  std::printf("heartbeat p99 at %d agents: %.1f ms (goal: under 200 ms)\n", big.agents,
              big.heartbeat.Quantile(0.99));
}

SimFleet::SimFleet(FleetOptions options) : options_(std::move(options)) {}

SimFleet::~SimFleet() = default;

absl::Status SimFleet::RegisterAll() {
  const int n = options_.agents;
  std::vector<Agent> agents(static_cast<size_t>(n));
  std::vector<absl::Status> errors(static_cast<size_t>(n));
  std::vector<absl::Duration> intervals(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  constexpr int kRegistrars = 8;
  for (int t = 0; t < kRegistrars; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < n; i += kRegistrars) {
        Agent& a = agents[static_cast<size_t>(i)];
        a.stub = AgentStub(options_.address);
        pb::RegisterRequest req;
        req.set_name(absl::StrCat(options_.name_prefix, "-", i));
        req.add_capabilities()->set_name("emulator");
        req.set_slots(options_.slots);
        pb::RegisterResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
        grpc::Status st = a.stub->Register(&ctx, req, &resp);
        if (!st.ok()) {
          errors[static_cast<size_t>(i)] = absl::UnavailableError(
              absl::StrCat("Register ", req.name(), ": ", st.error_message()));
          continue;
        }
        a.id = resp.agent_id();
        a.session = resp.session();
        a.free_slots = options_.slots;
        intervals[static_cast<size_t>(i)] = FromProto(resp.heartbeat_interval());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& st : errors) {
    if (!st.ok()) return st;
  }
  if (n > 0) heartbeat_interval_ = intervals[0];
  absl::MutexLock lock(&mu_);
  agents_ = std::move(agents);
  return absl::OkStatus();
}

void SimFleet::ScheduleStart() {
  absl::MutexLock lock(&mu_);
  const Clock::time_point now = Clock::now();
  const auto hb = absl::ToChronoNanoseconds(heartbeat_interval_);
  const auto job = absl::ToChronoNanoseconds(options_.job);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < static_cast<int>(agents_.size()); ++i) {
    Push(
        {now + std::chrono::duration_cast<Clock::duration>(hb * u(rng_)), i, Step::kHeartbeat, {}});
    Push({now + std::chrono::duration_cast<Clock::duration>(job * u(rng_)), i, Step::kLease, {}});
  }
}

FleetStats SimFleet::Run(absl::Duration warmup, absl::Duration window,
                         const std::function<void(bool start)>& on_window) {
  ScheduleStart();
  std::thread loop([this] { Loop(); });
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(warmup));
  on_window(true);
  {
    absl::MutexLock lock(&mu_);
    window_start_ = Clock::now();
    window_end_ = window_start_ + absl::ToChronoNanoseconds(window);
  }
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(window));
  on_window(false);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.Signal();
  }
  loop.join();
  absl::MutexLock lock(&mu_);
  stats_.agents = options_.agents;
  stats_.window_s = absl::ToDoubleSeconds(window);
  return stats_;
}

void SimFleet::Loop() {
  for (;;) {
    std::function<void()> issue;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ && in_flight_ == 0 && held_ == 0) return;
      const Clock::time_point now = Clock::now();
      if (events_.empty() || events_.top().due > now) {
        absl::Duration wait = absl::Milliseconds(50);
        if (!events_.empty()) wait = std::min(wait, absl::FromChrono(events_.top().due - now));
        cv_.WaitWithTimeout(&mu_, wait);
        continue;
      }
      const Event e = events_.top();
      events_.pop();
      issue = Prepare(e);
    }
    if (issue) issue();
  }
}

std::function<void()> SimFleet::Prepare(const Event& e) {
  switch (e.step) {
    case Step::kHeartbeat:
      return Heartbeat(e.agent);
    case Step::kLease:
      return Lease(e.agent);
    case Step::kReport:
      return Report(e.agent, e.lease);
  }
  return {};
}

std::function<void()> SimFleet::Heartbeat(int i) {
  Agent& a = agents_[static_cast<size_t>(i)];
  // Draining: an agent that holds nothing has stopped.
  if (stopping_ && a.held.empty() && !a.leasing) return {};
  auto call = std::make_shared<Call<pb::HeartbeatRequest, pb::HeartbeatResponse>>();
  call->req.set_agent_id(a.id);
  call->req.set_session(a.session);
  for (const pb::LeaseRef& l : a.held) *call->req.add_leases() = l;
  ++in_flight_;
  pb::AgentService::Stub* stub = a.stub.get();
  return [this, i, stub, call] {
    call->ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    call->start = Clock::now();
    stub->async()->Heartbeat(&call->ctx, &call->req, &call->resp, [this, i, call](grpc::Status st) {
      OnHeartbeat(i, call->start, st, call->resp);
    });
  };
}

std::function<void()> SimFleet::Lease(int i) {
  Agent& a = agents_[static_cast<size_t>(i)];
  if (stopping_ || a.leasing || a.free_slots <= 0) return {};
  a.leasing = true;
  auto call = std::make_shared<Call<pb::LeaseJobsRequest, pb::LeaseJobsResponse>>();
  call->req.set_agent_id(a.id);
  call->req.set_session(a.session);
  call->req.set_max_jobs(a.free_slots);
  ++in_flight_;
  pb::AgentService::Stub* stub = a.stub.get();
  return [this, i, stub, call] {
    call->ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    call->start = Clock::now();
    stub->async()->LeaseJobs(&call->ctx, &call->req, &call->resp, [this, i, call](grpc::Status st) {
      OnLease(i, call->start, st, call->resp);
    });
  };
}

std::function<void()> SimFleet::Report(int i, const pb::LeaseRef& lease) {
  Agent& a = agents_[static_cast<size_t>(i)];
  auto call = std::make_shared<Call<pb::ReportResultsRequest, pb::ReportResultsResponse>>();
  *call->req.add_results() = EmulatorResultFor(a.id, lease);
  a.reporting.push_back(lease.job_id());
  ++in_flight_;
  pb::AgentService::Stub* stub = a.stub.get();
  const int64_t job = lease.job_id();
  return [this, i, stub, call, job] {
    call->ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    call->start = Clock::now();
    stub->async()->ReportResults(
        &call->ctx, &call->req, &call->resp,
        [this, i, call, job](grpc::Status st) { OnReport(i, call->start, st, call->resp, job); });
  };
}

void SimFleet::OnHeartbeat(int i, Clock::time_point start, const grpc::Status& st,
                           const pb::HeartbeatResponse& resp) {
  absl::MutexLock lock(&mu_);
  --in_flight_;
  Agent& a = agents_[static_cast<size_t>(i)];
  if (!st.ok()) {
    Fail(absl::StrCat("Heartbeat of agent ", a.id, ": ", st.error_message()));
  } else {
    Record(start, &stats_.heartbeat);
    // A lease reported since the heartbeat left is revoked rightly; one
    // still held and not yet reported was lost.
    for (const pb::LeaseRef& r : resp.revoked()) {
      const bool reporting =
          std::find(a.reporting.begin(), a.reporting.end(), r.job_id()) != a.reporting.end();
      for (const pb::LeaseRef& h : a.held) {
        if (SameLease(r, h) && !reporting) {
          Fail(absl::StrCat("Heartbeat revoked held job ", r.job_id()));
        }
      }
    }
  }
  Push({Clock::now() + absl::ToChronoNanoseconds(heartbeat_interval_), i, Step::kHeartbeat, {}});
}

void SimFleet::OnLease(int i, Clock::time_point start, const grpc::Status& st,
                       const pb::LeaseJobsResponse& resp) {
  absl::MutexLock lock(&mu_);
  --in_flight_;
  Agent& a = agents_[static_cast<size_t>(i)];
  a.leasing = false;
  const Clock::time_point now = Clock::now();
  if (!st.ok()) {
    Fail(absl::StrCat("LeaseJobs of agent ", a.id, ": ", st.error_message()));
    Push({now + absl::ToChronoNanoseconds(options_.idle_poll), i, Step::kLease, {}});
    return;
  }
  Record(start, &stats_.lease);
  if (InWindow(start)) stats_.leased_jobs += resp.leases_size();
  for (const pb::JobLease& l : resp.leases()) {
    a.held.push_back(l.lease());
    --a.free_slots;
    ++held_;
    Push({now + JobTime(), i, Step::kReport, l.lease()});
  }
  if (resp.leases_size() == 0) {
    Push({now + absl::ToChronoNanoseconds(options_.idle_poll), i, Step::kLease, {}});
  } else if (a.free_slots > 0) {
    Push({now, i, Step::kLease, {}});
  }
}

void SimFleet::OnReport(int i, Clock::time_point start, const grpc::Status& st,
                        const pb::ReportResultsResponse& resp, int64_t job_id) {
  absl::MutexLock lock(&mu_);
  --in_flight_;
  Agent& a = agents_[static_cast<size_t>(i)];
  if (!st.ok()) {
    Fail(absl::StrCat("ReportResults of job ", job_id, ": ", st.error_message()));
  } else if (resp.results_size() != 1 || !resp.results(0).accepted() ||
             resp.results(0).duplicate()) {
    Fail(absl::StrCat("ReportResults of job ", job_id, " not accepted: ",
                      resp.results_size() == 1 ? resp.results(0).error_message() : "no item"));
  } else {
    Record(start, &stats_.report);
    if (InWindow(start)) ++stats_.reports;
  }
  // Settled either way: a refused result is not sent again here.
  auto it = std::find_if(a.held.begin(), a.held.end(),
                         [job_id](const pb::LeaseRef& l) { return l.job_id() == job_id; });
  if (it != a.held.end()) a.held.erase(it);
  a.reporting.erase(std::remove(a.reporting.begin(), a.reporting.end(), job_id), a.reporting.end());
  ++a.free_slots;
  --held_;
  Push({Clock::now(), i, Step::kLease, {}});
}

bool SimFleet::InWindow(Clock::time_point t) const { return t >= window_start_ && t < window_end_; }

void SimFleet::Record(Clock::time_point start, Latency* into) {
  if (!InWindow(start)) return;
  into->ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
}

void SimFleet::Fail(const std::string& what) {
  if (stats_.failures++ == 0) stats_.first_failure = what;
}

void SimFleet::Push(Event e) {
  events_.push(std::move(e));
  cv_.Signal();
}

SimFleet::Clock::duration SimFleet::JobTime() {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  return std::chrono::duration_cast<Clock::duration>(absl::ToChronoNanoseconds(options_.job) *
                                                     u(rng_));
}

}  // namespace farm::bench
