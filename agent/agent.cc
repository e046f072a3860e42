#include "agent/agent.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;
using google::protobuf::util::TimeUtil;

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
constexpr absl::Duration kRpcTimeout = absl::Seconds(10);
constexpr char kHoldKey[] = "agent.hold_ms";

absl::Duration NextBackoff(absl::Duration d) { return std::min(d * 2, kMaxBackoff); }

// INTERNAL and UNKNOWN also mean "try again", but a bounded number of times
// (kMaxInternalRetries): a request the server cannot store fails the same
// way every time, and retrying it forever while heartbeating is a livelock.
constexpr int kMaxInternalRetries = 5;

bool Transient(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED ||
         code == grpc::StatusCode::RESOURCE_EXHAUSTED || code == grpc::StatusCode::ABORTED ||
         code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN;
}

bool ServerFault(grpc::StatusCode code) {
  return code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN;
}

std::string Describe(const grpc::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())), ": ",
                      s.error_message());
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace

pb::Executor ExecutorKindFromCapability(const std::string& name) {
  return proto::ExecutorFromName(name);
}

Agent::Agent(AgentOptions options, std::vector<std::unique_ptr<Executor>> executors,
             metrics::AgentMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {
  for (auto& e : executors) {
    const pb::Executor kind = ExecutorKindFromCapability(e->capability());
    executors_[kind] = std::move(e);
  }
  channel_ = client::MakeChannel(options_.client);
  stub_ = pb::AgentService::NewStub(channel_);
}

Agent::~Agent() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = stop_workers_ = stop_heartbeat_ = true;
    for (auto& [id, entry] : leases_) entry.cancel->Cancel();
    cv_.SignalAll();
  }
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
}

std::unique_ptr<grpc::ClientContext> Agent::Context(absl::Duration timeout) const {
  return client::NewContext(options_.client, timeout);
}

void Agent::Count(std::atomic<int64_t>& stat, prometheus::Counter* counter) {
  stat.fetch_add(1);
  if (counter != nullptr) counter->Increment();
}

Agent::Stats Agent::stats() const {
  Stats s;
  s.succeeded = succeeded_.load();
  s.failed = failed_.load();
  s.revoked = revoked_.load();
  s.stale = stale_.load();
  s.released = released_.load();
  s.abandoned = abandoned_.load();
  s.registrations = registrations_.load();
  s.report_calls = report_calls_.load();
  s.reboots = reboots_.load();
  s.resumed = resumed_jobs_.load();
  return s;
}

void Agent::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

absl::Status Agent::EnsureRegistered() {
  absl::Duration backoff = kInitialBackoff;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (registered_) return absl::OkStatus();
      if (shutting_down_) return absl::CancelledError("shutting down");
    }
    pb::RegisterRequest request;
    request.set_name(options_.name);
    request.set_slots(options_.slots);
    *request.mutable_host() = options_.host;
    {
      absl::MutexLock lock(&mu_);
      for (const pb::LeaseRef& l : resumes_) *request.add_resumes() = l;
    }
    for (const auto& [kind, executor] : executors_) {
      pb::Capability* cap = request.add_capabilities();
      cap->set_name(executor->capability());
      cap->set_version(executor->version());
      for (const pb::KernelOffer& k : executor->kernels()) *cap->add_kernels() = k;
    }
    pb::RegisterResponse response;
    auto ctx = Context(kRpcTimeout);
    grpc::Status status = stub_->Register(ctx.get(), request, &response);
    if (status.ok()) {
      const int64_t n = registrations_.fetch_add(1) + 1;
      absl::Duration interval = FromProto(response.heartbeat_interval());
      if (interval <= absl::ZeroDuration()) {
        const absl::Duration ttl = FromProto(response.lease_ttl());
        interval = ttl > absl::ZeroDuration() ? ttl / 3 : absl::Seconds(2);
      }
      {
        absl::MutexLock lock(&mu_);
        registered_ = true;
        agent_id_ = response.agent_id();
        session_ = response.session();
        heartbeat_interval_ = interval;
        resumes_.clear();
        resumed_.assign(response.resumed().begin(), response.resumed().end());
        cv_.SignalAll();
      }
      spdlog::info("registered agent {} id {} (heartbeat every {})", options_.name,
                   response.agent_id(), absl::FormatDuration(interval));
      if (options_.on_registered) {
        options_.on_registered(options_.name, response.agent_id(), n == 1);
      }
      return absl::OkStatus();
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      return client::ToAbsl(status);
    }
    CountRpcError();
    spdlog::warn("register: {} (retrying in {})", Describe(status), absl::FormatDuration(backoff));
    absl::MutexLock lock(&mu_);
    WaitUntilShutdownLocked(absl::Now() + backoff);
    backoff = NextBackoff(backoff);
  }
}

void Agent::DropAllLeasesLocked() {
  for (auto& [id, entry] : leases_) {
    entry.cancel->Cancel();
    if (!entry.running) Count(revoked_, metrics_ ? &metrics_->jobs_revoked : nullptr);
  }
  // Running entries are erased by their workers when they return.
  for (auto it = leases_.begin(); it != leases_.end();) {
    it = it->second.running ? std::next(it) : leases_.erase(it);
  }
  pending_.clear();
  registered_ = false;
  cv_.SignalAll();
}

void Agent::HeartbeatLoop() {
  absl::Duration retry = kInitialBackoff;
  absl::Duration wait = absl::ZeroDuration();
  for (;;) {
    pb::HeartbeatRequest request;
    absl::Duration interval;
    {
      absl::MutexLock lock(&mu_);
      // cv_ is signalled for every job change; only a stop ends the wait
      // early, so heartbeats keep their interval.
      const absl::Time until = absl::Now() + wait;
      while (!stop_heartbeat_ && absl::Now() < until) {
        cv_.WaitWithDeadline(&mu_, until);
      }
      if (stop_heartbeat_) return;
      interval = heartbeat_interval_;
      if (!registered_) {
        wait = std::min(interval, absl::Milliseconds(200));
        continue;
      }
      request.set_agent_id(agent_id_);
      request.set_session(session_);
      for (const auto& [id, entry] : leases_) {
        *request.add_leases() = entry.lease.lease();
      }
    }
    pb::HeartbeatResponse response;
    auto ctx = Context(std::max(interval, absl::Seconds(1)));
    grpc::Status status = stub_->Heartbeat(ctx.get(), request, &response);
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      retry = kInitialBackoff;
      wait = interval;
      for (const pb::LeaseRef& ref : response.revoked()) {
        auto it = leases_.find(ref.job_id());
        if (it == leases_.end() || it->second.lease.lease().lease_token() != ref.lease_token()) {
          continue;
        }
        spdlog::info("job {} attempt {}: lease revoked, dropping it", ref.job_id(), ref.attempt());
        it->second.cancel->Cancel();
        // Running jobs are counted by their worker, which knows whether its
        // report got in first (then the revocation only says "finished").
        if (!it->second.running) {
          Count(revoked_, metrics_ ? &metrics_->jobs_revoked : nullptr);
          pending_.erase(std::remove(pending_.begin(), pending_.end(), ref.job_id()),
                         pending_.end());
          leases_.erase(it);
        }
      }
      cv_.SignalAll();
      continue;
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && request.session() == session_) {
      spdlog::warn("heartbeat: {}; dropping {} leases and re-registering", Describe(status),
                   leases_.size());
      DropAllLeasesLocked();
      wait = absl::ZeroDuration();
      continue;
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      fatal_ = client::ToAbsl(status);
      shutting_down_ = true;
      cv_.SignalAll();
      return;
    }
    CountRpcError();
    spdlog::warn("heartbeat: {} (retrying in {})", Describe(status), absl::FormatDuration(retry));
    wait = std::min(retry, interval);
    retry = NextBackoff(retry);
  }
}

absl::Status Agent::Run() {
  std::optional<kernels::KexecKernelProvider::Resumed> boot;
  if (options_.kexec) {
    if (options_.slots != 1) {
      return absl::InvalidArgumentError("a kexec host runs one slot");
    }
    // Check, not Resume: a failed boot is reported before the host reboots.
    absl::StatusOr<kernels::KexecKernelProvider::Resumed> resumed = options_.kexec->Check();
    if (!resumed.ok()) return resumed.status();
    if (resumed->kind != kernels::KexecKernelProvider::Resumed::kNothing) {
      boot = *std::move(resumed);
      pb::LeaseRef ref;
      ref.set_job_id(boot->boot.lease.job_id);
      ref.set_attempt(boot->boot.lease.attempt);
      ref.set_lease_token(boot->boot.lease.lease_token);
      absl::MutexLock lock(&mu_);
      resumes_.push_back(ref);
    }
  }
  for (int i = 0; i < options_.slots; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });

  absl::Duration backoff = kInitialBackoff;
  for (;;) {
    absl::Status reg = EnsureRegistered();
    if (!reg.ok()) {
      if (reg.code() != absl::StatusCode::kCancelled) {
        absl::MutexLock lock(&mu_);
        fatal_ = reg;
        shutting_down_ = true;
      }
      break;
    }
    if (boot.has_value()) {
      ResumeBoot(*boot);
      boot.reset();
    }
    pb::LeaseJobsRequest request;
    {
      absl::MutexLock lock(&mu_);
      // Wait for a free slot, a lost session or shutdown.
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutting_down_ || !registered_ ||
               static_cast<int>(pending_.size()) + running_ < options_.slots;
      };
      while (!ready()) cv_.Wait(&mu_);
      if (shutting_down_) break;
      if (!registered_) continue;
      request.set_agent_id(agent_id_);
      request.set_session(session_);
      request.set_max_jobs(options_.slots - static_cast<int>(pending_.size()) - running_);
    }
    pb::LeaseJobsResponse response;
    auto ctx = Context(kRpcTimeout);
    grpc::Status status = stub_->LeaseJobs(ctx.get(), request, &response);
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      backoff = kInitialBackoff;
      if (request.session() != session_) continue;  // re-registered meanwhile
      for (const pb::JobLease& lease : response.leases()) {
        LeaseEntry entry;
        entry.lease = lease;
        leases_[lease.job().id()] = std::move(entry);
        pending_.push_back(lease.job().id());
        spdlog::debug("leased job {} attempt {}", lease.job().id(), lease.lease().attempt());
      }
      cv_.SignalAll();
      if (response.leases_size() == 0) {
        cv_.WaitWithTimeout(&mu_, options_.idle_poll);
      }
      continue;
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      if (request.session() == session_ && registered_) {
        spdlog::warn("lease: {}; re-registering", Describe(status));
        DropAllLeasesLocked();
      }
      continue;
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      fatal_ = client::ToAbsl(status);
      shutting_down_ = true;
      break;
    }
    CountRpcError();
    spdlog::warn("lease: {} (retrying in {})", Describe(status), absl::FormatDuration(backoff));
    WaitUntilShutdownLocked(absl::Now() + backoff);
    backoff = NextBackoff(backoff);
  }

  Drain();
  absl::MutexLock lock(&mu_);
  return fatal_;
}

void Agent::Drain() {
  pb::ReleaseLeasesRequest release;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    release.set_agent_id(agent_id_);
    release.set_session(session_);
    for (int64_t id : pending_) {
      auto it = leases_.find(id);
      if (it == leases_.end()) continue;
      *release.add_leases() = it->second.lease.lease();
      leases_.erase(it);
    }
    pending_.clear();
    cv_.SignalAll();
  }
  if (release.leases_size() > 0) {
    absl::Duration backoff = kInitialBackoff;
    for (int attempt = 0; attempt < 4; ++attempt) {
      pb::ReleaseLeasesResponse response;
      auto ctx = Context(absl::Seconds(5));
      grpc::Status status = stub_->ReleaseLeases(ctx.get(), release, &response);
      if (status.ok()) {
        spdlog::info("released {} of {} unstarted leases", response.released(),
                     release.leases_size());
        for (int i = 0; i < response.released(); ++i) {
          Count(released_, metrics_ ? &metrics_->jobs_released : nullptr);
        }
        break;
      }
      CountRpcError();
      spdlog::warn("release leases: {}", Describe(status));
      if (!Transient(status.error_code())) break;
      absl::SleepFor(backoff);
      backoff = NextBackoff(backoff);
    }
  }

  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  {
    absl::MutexLock lock(&mu_);
    while (running_ > 0 && absl::Now() < deadline) {
      cv_.WaitWithDeadline(&mu_, deadline);
    }
    if (running_ > 0) {
      spdlog::warn("drain timeout: abandoning {} running jobs", running_);
      for (auto& [id, entry] : leases_) {
        if (!entry.running) continue;
        entry.cancel->Cancel();
        Count(abandoned_, metrics_ ? &metrics_->jobs_abandoned : nullptr);
      }
    }
    stop_workers_ = true;
    stop_heartbeat_ = true;
    cv_.SignalAll();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  // Workers inside a cancellable executor return promptly; any other worker
  // is joined by the destructor.
  bool idle;
  {
    absl::MutexLock lock(&mu_);
    idle = running_ == 0;
  }
  if (idle) {
    for (auto& t : workers_) {
      if (t.joinable()) t.join();
    }
  }
}

void Agent::WorkerLoop() {
  for (;;) {
    pb::JobLease lease;
    std::shared_ptr<CancelToken> cancel;
    bool resumed = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_workers_ || (!pending_.empty() && !shutting_down_);
      };
      while (!ready()) cv_.Wait(&mu_);
      if (stop_workers_ || shutting_down_) return;
      const int64_t id = pending_.front();
      pending_.pop_front();
      auto it = leases_.find(id);
      if (it == leases_.end()) continue;
      it->second.running = true;
      lease = it->second.lease;
      cancel = it->second.cancel;
      resumed = it->second.resumed;
      ++running_;
      if (metrics_ != nullptr) metrics_->jobs_running.Set(running_);
    }
    RunOne(lease, *cancel, resumed);
    if (resumed) FinishBoot();
    {
      absl::MutexLock lock(&mu_);
      auto it = leases_.find(lease.job().id());
      if (it != leases_.end() && it->second.cancel == cancel) leases_.erase(it);
      --running_;
      if (metrics_ != nullptr) metrics_->jobs_running.Set(running_);
      cv_.SignalAll();
    }
  }
}

void Agent::RunOne(const pb::JobLease& lease, CancelToken& cancel, bool resumed) {
  const pb::Job& job = lease.job();
  const absl::Time start = absl::Now();
  absl::StatusOr<ExecutionResult> result =
      absl::UnknownError("job not run");  // replaced below on every path
  auto executor = executors_.find(job.executor());
  pb::Job clean = job;
  auto* set = clean.mutable_model_set();
  int64_t hold_ms = 0;
  absl::Status hold_status;
  if (auto it = set->find(kHoldKey); it != set->end()) {
    if (!absl::SimpleAtoi(it->second, &hold_ms) || hold_ms < 0) {
      hold_status = absl::InvalidArgumentError(absl::StrCat(
          "model_set ", kHoldKey, "='", it->second, "' is not a non-negative integer"));
    }
  }
  for (auto it = set->begin(); it != set->end();) {
    it = absl::StartsWith(it->first, "agent.") ? set->erase(it) : std::next(it);
  }
  if (!hold_status.ok()) {
    result = hold_status;
  } else if (hold_ms > 0 && cancel.SleepFor(absl::Milliseconds(hold_ms))) {
    result = absl::CancelledError("cancelled while holding");
  } else if (executor == executors_.end()) {
    result = absl::UnimplementedError(absl::StrCat("agent ", options_.name, " has no executor for ",
                                                   pb::Executor_Name(job.executor())));
  } else {
    LeaseContext context;
    context.lease = lease.lease();
    context.resumed = resumed;
    if (options_.kexec) {
      context.hold = [this, &lease](absl::Duration d) { return HoldLease(lease.lease(), d); };
    }
    result = executor->second->RunLeased(clean, cancel, context);
  }
  if (result.ok() && result->rebooting) {
    // Not reported: the scheduler holds the lease until the agent on the
    // job's kernel resumes it (or the hold passes).
    spdlog::info("job {} attempt {}: the host reboots into the job's kernel; lease held, stopping",
                 job.id(), lease.lease().attempt());
    reboots_.fetch_add(1);
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    cv_.SignalAll();
    return;
  }
  if (cancel.cancelled()) {
    spdlog::info("job {} attempt {}: cancelled, not reported", job.id(), lease.lease().attempt());
    CountCancelled();
    return;
  }
  if (result.ok() && metrics_ != nullptr && result->events_per_second > 0) {
    metrics_->emulator_events_per_second.Set(result->events_per_second);
    metrics_->emulator_events.Increment(result->events);
  }
  Report(lease, cancel, result, absl::Now() - start);
}

void Agent::Report(const pb::JobLease& lease, CancelToken& cancel,
                   const absl::StatusOr<ExecutionResult>& result, absl::Duration wall_time) {
  int64_t agent_id;
  {
    absl::MutexLock lock(&mu_);
    agent_id = agent_id_;
  }
  pb::ReportResultRequest result_request;
  pb::ReportFailureRequest failure_request;
  if (result.ok()) {
    result_request.set_agent_id(agent_id);
    *result_request.mutable_lease() = lease.lease();
    for (const auto& s : result->samples) *result_request.add_samples() = s;
    result_request.set_raw_output(result->raw_output);
    result_request.set_raw_format(result->raw_format);
    *result_request.mutable_host() = options_.host;
    if (result->ran_on) {
      *result_request.mutable_host() = *result->ran_on;
      result_request.mutable_host()->set_hostname(options_.host.hostname());
    }
    result_request.set_tool_version(result->tool_version);
    *result_request.mutable_wall_time() =
        TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(wall_time));
  } else {
    failure_request.set_agent_id(agent_id);
    *failure_request.mutable_lease() = lease.lease();
    failure_request.set_reason(std::string(result.status().message()));
    failure_request.set_retryable(!IsPermanentFailure(result.status().code()));
    spdlog::warn("job {} attempt {} failed ({}): {}", lease.job().id(), lease.lease().attempt(),
                 failure_request.retryable() ? "retryable" : "permanent",
                 result.status().ToString());
  }
  absl::Duration backoff = kInitialBackoff;
  bool send_result = result.ok();
  int server_faults = 0;
  // Retried until accepted, stale, or the lease is revoked / abandoned (the
  // token fires): a result is idempotent per (job, attempt), so resending a
  // whole batch after a failed call stores each result once. A result
  // the scheduler refuses for good (INVALID_ARGUMENT: e.g. text PostgreSQL
  // cannot store) or keeps failing on (INTERNAL, kMaxInternalRetries times)
  // becomes a failure report with the reason, so the job fails once and the
  // agent moves on.
  while (!cancel.cancelled()) {
    grpc::Status status;
    if (send_result) {
      auto answer = SendResult(result_request, cancel);
      if (!answer) break;  // revoked or abandoned before it went out
      status = answer->first;
      if (status.ok()) {
        Count(succeeded_, metrics_ ? &metrics_->jobs_succeeded : nullptr);
        if (metrics_ != nullptr) {
          metrics_->job_duration.Observe(absl::ToDoubleSeconds(wall_time));
        }
        if (answer->second.duplicate()) {
          spdlog::info("job {} attempt {}: duplicate result ignored by server", lease.job().id(),
                       lease.lease().attempt());
        }
        return;
      }
    } else {
      pb::ReportFailureResponse response;
      auto ctx = Context(kRpcTimeout);
      status = stub_->ReportFailure(ctx.get(), failure_request, &response);
      if (status.ok()) {
        Count(failed_, metrics_ ? &metrics_->jobs_failed : nullptr);
        return;
      }
    }
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      spdlog::warn("job {} attempt {}: stale lease, report dropped: {}", lease.job().id(),
                   lease.lease().attempt(), status.error_message());
      Count(stale_, metrics_ ? &metrics_->jobs_stale : nullptr);
      return;
    }
    if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      // The lease is not this agent's to settle: a failure report for it
      // would be refused the same way.
      spdlog::error("job {} attempt {}: report refused, dropped: {}", lease.job().id(),
                    lease.lease().attempt(), Describe(status));
      return;
    }
    const bool gave_up = ServerFault(status.error_code()) && ++server_faults > kMaxInternalRetries;
    if (send_result && (gave_up || !Transient(status.error_code()))) {
      // Permanent unless the server only failed: then another attempt may
      // fare better.
      failure_request.set_agent_id(agent_id);
      *failure_request.mutable_lease() = lease.lease();
      failure_request.set_reason(
          absl::StrCat("result refused by the scheduler: ", Describe(status)));
      failure_request.set_retryable(gave_up);
      spdlog::error("job {} attempt {}: result refused ({}); reporting the job failed",
                    lease.job().id(), lease.lease().attempt(), Describe(status));
      send_result = false;
      server_faults = 0;
      backoff = kInitialBackoff;
      continue;
    }
    if (gave_up || !Transient(status.error_code())) {
      spdlog::error("job {} attempt {}: report refused: {}", lease.job().id(),
                    lease.lease().attempt(), Describe(status));
      return;
    }
    CountRpcError();
    spdlog::warn("job {}: report: {} (retrying in {})", lease.job().id(), Describe(status),
                 absl::FormatDuration(backoff));
    cancel.SleepFor(backoff);
    backoff = NextBackoff(backoff);
  }
  CountCancelled();
}

std::optional<std::pair<grpc::Status, pb::ReportResultResponse>> Agent::SendResult(
    pb::ReportResultRequest& request, CancelToken& cancel) {
  Outgoing me;
  me.request = &request;
  me.bytes = request.ByteSizeLong();
  report_mu_.Lock();
  outbox_.push_back(&me);
  while (!me.done) {
    if (!sending_) {
      // Everything ready now goes in this call, oldest first, up to the
      // bounds (one oversized result still goes, alone).
      std::vector<Outgoing*> batch;
      size_t bytes = 0;
      while (!outbox_.empty() && static_cast<int>(batch.size()) < kMaxReportBatch &&
             (batch.empty() || bytes + outbox_.front()->bytes <= kMaxReportBytes)) {
        bytes += outbox_.front()->bytes;
        outbox_.front()->taken = true;
        batch.push_back(outbox_.front());
        outbox_.pop_front();
      }
      sending_ = true;
      report_mu_.Unlock();
      SendBatch(batch);
      report_mu_.Lock();
      for (Outgoing* o : batch) o->done = true;
      sending_ = false;
      report_cv_.SignalAll();
      continue;
    }
    if (!me.taken && cancel.cancelled()) {
      outbox_.erase(std::find(outbox_.begin(), outbox_.end(), &me));
      report_mu_.Unlock();
      return std::nullopt;
    }
    // The timeout only bounds how late a cancellation is noticed.
    report_cv_.WaitWithTimeout(&report_mu_, absl::Milliseconds(50));
  }
  report_mu_.Unlock();
  return std::make_pair(std::move(me.status), std::move(me.response));
}

void Agent::SendBatch(const std::vector<Outgoing*>& batch) {
  if (!single_reports_.load()) {
    pb::ReportResultsRequest request;
    // Swapped in and back out: a result's raw output is not copied.
    for (Outgoing* o : batch) request.add_results()->Swap(o->request);
    pb::ReportResultsResponse response;
    auto ctx = Context(kRpcTimeout);
    report_calls_.fetch_add(1);
    grpc::Status status = stub_->ReportResults(ctx.get(), request, &response);
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->request->Swap(request.mutable_results(static_cast<int>(i)));
    }
    if (status.ok() && response.results_size() != static_cast<int>(batch.size())) {
      status = grpc::Status(grpc::StatusCode::INTERNAL,
                            absl::StrCat("ReportResults answered ", response.results_size(),
                                         " items for ", batch.size(), " results"));
    }
    if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
      for (size_t i = 0; i < batch.size(); ++i) {
        Outgoing& o = *batch[i];
        if (!status.ok()) {
          o.status = status;
          continue;
        }
        pb::ReportResultResponse& item = *response.mutable_results(static_cast<int>(i));
        o.status = item.error_code() == 0
                       ? grpc::Status::OK
                       : grpc::Status(static_cast<grpc::StatusCode>(item.error_code()),
                                      item.error_message());
        o.response = std::move(item);
      }
      return;
    }
    spdlog::warn("scheduler has no ReportResults ({}); reporting results one by one",
                 Describe(status));
    single_reports_.store(true);
  }
  for (Outgoing* o : batch) {
    auto ctx = Context(kRpcTimeout);
    report_calls_.fetch_add(1);
    o->status = stub_->ReportResult(ctx.get(), *o->request, &o->response);
  }
}

void Agent::ResumeBoot(const kernels::KexecKernelProvider::Resumed& boot) {
  const kernels::LeaseHold& held = boot.boot.lease;
  pb::JobLease lease;
  lease.mutable_lease()->set_job_id(held.job_id);
  lease.mutable_lease()->set_attempt(held.attempt);
  lease.mutable_lease()->set_lease_token(held.lease_token);
  bool kept = false;
  {
    absl::MutexLock lock(&mu_);
    for (const pb::LeaseRef& l : resumed_) {
      kept = kept || (l.job_id() == held.job_id && l.attempt() == held.attempt &&
                      l.lease_token() == held.lease_token);
    }
  }
  if (!kept) {
    // The hold passed (or the job was cancelled): the scheduler has expired
    // the lease and retries the job by its attempt rules.
    spdlog::warn("job {} attempt {}: the scheduler did not keep the lease held through the reboot",
                 held.job_id, held.attempt);
    if (boot.kind == kernels::KexecKernelProvider::Resumed::kFailed) {
      AbandonBoot(boot);
    } else {
      FinishBoot();
    }
    return;
  }
  resumed_jobs_.fetch_add(1);
  absl::Status job_status;
  if (held.job.empty() ||
      !google::protobuf::util::JsonStringToMessage(held.job, lease.mutable_job()).ok()) {
    job_status = absl::FailedPreconditionError(
        absl::StrCat("the kexec state of job ", held.job_id, " holds no readable job"));
  }
  lease.mutable_job()->set_id(held.job_id);
  if (boot.kind == kernels::KexecKernelProvider::Resumed::kFailed || !job_status.ok()) {
    if (job_status.ok()) job_status = absl::FailedPreconditionError(boot.reason);
    CancelToken cancel;
    Report(lease, cancel, job_status, absl::ZeroDuration());
    if (boot.kind == kernels::KexecKernelProvider::Resumed::kFailed) {
      AbandonBoot(boot);
    } else {
      FinishBoot();
    }
    return;
  }
  spdlog::info("job {} attempt {}: kernel {} came back in mode {}; running the job", held.job_id,
               held.attempt, boot.boot.release, proto::ModeName(boot.boot.mode));
  absl::MutexLock lock(&mu_);
  LeaseEntry entry;
  entry.lease = lease;
  entry.resumed = true;
  leases_[held.job_id] = std::move(entry);
  pending_.push_back(held.job_id);
  cv_.SignalAll();
}

absl::Status Agent::HoldLease(const pb::LeaseRef& lease, absl::Duration d) {
  pb::HeartbeatRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_agent_id(agent_id_);
    request.set_session(session_);
  }
  *request.add_leases() = lease;
  *request.mutable_hold_for() = TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
  absl::Duration backoff = kInitialBackoff;
  for (int attempt = 0;; ++attempt) {
    pb::HeartbeatResponse response;
    auto ctx = Context(kRpcTimeout);
    grpc::Status status = stub_->Heartbeat(ctx.get(), request, &response);
    if (status.ok()) {
      if (response.extended_size() != 1) {
        return absl::FailedPreconditionError("the lease is no longer current");
      }
      if (!response.has_held_until()) {
        return absl::FailedPreconditionError(
            "the scheduler holds no lease through a reboot (farm-scheduler --max-boot-timeout 0)");
      }
      const absl::Time until = absl::FromUnixSeconds(response.held_until().seconds());
      spdlog::info("job {} attempt {}: lease held until {}", lease.job_id(), lease.attempt(),
                   absl::FormatTime(until, absl::UTCTimeZone()));
      return absl::OkStatus();
    }
    if (!Transient(status.error_code()) || attempt >= 3) return client::ToAbsl(status);
    CountRpcError();
    absl::SleepFor(backoff);
    backoff = NextBackoff(backoff);
  }
}

void Agent::AbandonBoot(const kernels::KexecKernelProvider::Resumed& boot) {
  spdlog::warn("kexec: {}; back to the default kernel {}", boot.reason, boot.boot.default_release);
  if (absl::Status s = options_.kexec->Abandon(boot); !s.ok()) {
    spdlog::error("kexec: {}", s.ToString());
  }
}

void Agent::FinishBoot() {
  if (absl::Status s = options_.kexec->Finish(); !s.ok()) {
    spdlog::error("kexec: {}", s.ToString());
  }
}

void Agent::WaitUntilShutdownLocked(absl::Time until) {
  while (!shutting_down_ && absl::Now() < until) cv_.WaitWithDeadline(&mu_, until);
}

void Agent::CountRpcError() {
  if (metrics_ != nullptr) metrics_->rpc_errors.Increment();
}

void Agent::CountCancelled() {
  // Abandoned jobs (drain timeout) were counted by Drain().
  bool draining;
  {
    absl::MutexLock lock(&mu_);
    draining = stop_workers_;
  }
  if (!draining) Count(revoked_, metrics_ ? &metrics_->jobs_revoked : nullptr);
}

}  // namespace farm::agent
