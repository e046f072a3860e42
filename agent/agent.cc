// The Agent's lease loop and drain; the session is in agent_session.cc, the
// workers in agent_worker.cc.
#include "agent/agent.h"

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/health_check.h"
#include "agent/rpc_deadline.h"
#include "lib/base/file.h"
#include "proto/labels.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

constexpr int kReleaseAttempts = 4;

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
  batcher_ = std::make_unique<ReportBatcher>(stub_.get(), options_.client, kRpcTimeout);
  if (options_.kexec) kexec_ = std::make_unique<KexecResume>(options_.kexec);
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
  s.report_calls = batcher_->calls();
  s.reboots = reboots_.load();
  s.resumed = resumed_jobs_.load();
  return s;
}

void Agent::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

absl::Status Agent::Run() {
  if (absl::Status st = CheckPendingBoot(); !st.ok()) return st;
  CheckHealth();
  for (int i = 0; i < options_.slots; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  LeaseLoop();
  Drain();
  absl::MutexLock lock(&mu_);
  return fatal_;
}

absl::Status Agent::CheckPendingBoot() {
  if (!kexec_) return absl::OkStatus();
  if (options_.slots != 1) return absl::InvalidArgumentError("a kexec host runs one slot");
  // Check, not Resume: a failed boot is reported before the host reboots.
  if (absl::Status st = kexec_->Check(); !st.ok()) return st;
  if (std::optional<pb::LeaseRef> ref = kexec_->pending_lease()) {
    absl::MutexLock lock(&mu_);
    resumes_.push_back(*ref);
  }
  return absl::OkStatus();
}

void Agent::CheckHealth() {
  if (!options_.health_jobs) return;
  std::vector<Executor*> executors;
  for (const auto& [kind, executor] : executors_) executors.push_back(executor.get());
  std::vector<HealthFigure> figures;
  pb::AgentHealth health = RunHealthJobs(executors, options_.host, absl::Minutes(2), &figures);
  JudgeBaseline(figures, &health);
  AddIommuGroupCheck(options_.host, base::ReadFileOrEmpty("/proc/cmdline"), &health);
  if (options_.kexec) {
    const std::string& dir = options_.kexec->config().state_dir;
    AddWritableDirProbe(dir, ProbeWritableDir(dir), &health);
  }
  if (health.checked() && health.ok()) spdlog::info("health job passed: {}", health.detail());
  if (health.checked() && !health.ok()) {
    spdlog::error("health job failed, taking no work: {}", health.detail());
  }
  absl::MutexLock lock(&mu_);
  health_ = std::move(health);
}

void Agent::JudgeBaseline(const std::vector<HealthFigure>& figures, pb::AgentHealth* health) {
  if (options_.health_baseline.empty() || figures.empty()) return;
  absl::MutexLock lock(&baseline_mu_);
  if (!baseline_.has_value()) {
    absl::StatusOr<HealthBaseline> loaded = HealthBaseline::Load(options_.health_baseline);
    if (!loaded.ok()) {
      spdlog::warn("health baseline: {}; starting a new one", loaded.status().ToString());
      loaded = HealthBaseline::Empty(options_.health_baseline);
    }
    baseline_ = *std::move(loaded);
  }
  AddBaselineCheck(options_.host, figures, options_.health_band, &*baseline_, health);
  if (absl::Status st = baseline_->Save(); !st.ok()) {
    spdlog::warn("health baseline not saved: {}", st.ToString());
  }
}

absl::Status Agent::HealthLocked() const {
  return proto::AgentHealthy(health_) ? absl::OkStatus() : absl::UnavailableError(health_.detail());
}

absl::StatusOr<ExecutionResult> Agent::CheckHostAfterRun(absl::StatusOr<ExecutionResult> result) {
  CheckHealth();
  absl::Status health;
  {
    absl::MutexLock lock(&mu_);
    health = HealthLocked();
  }
  if (health.ok()) return result;
  return absl::UnavailableError(
      absl::StrCat(result.ok() ? "the job ran, but its result is not kept"
                               : absl::StripTrailingAsciiWhitespace(result.status().message()),
                   "; ", kexec_->MarkHostUnhealthy(health)));
}

Agent::Next Agent::AwaitHealthy() {
  {
    absl::MutexLock lock(&mu_);
    if (proto::AgentHealthy(health_)) return Next::kLease;
    WaitUntilShutdownLocked(absl::Now() + options_.health_retry);
    if (shutting_down_) return Next::kStop;
  }
  CheckHealth();
  absl::MutexLock lock(&mu_);
  // The scheduler learns the outcome from a new registration; no lease is
  // held (none is granted to a failed agent).
  registered_ = false;
  return Next::kRegister;
}

void Agent::LeaseLoop() {
  client::Backoff backoff;
  bool resume_pending = kexec_ != nullptr;
  for (;;) {
    absl::Status reg = EnsureRegistered();
    if (!reg.ok()) {
      if (reg.code() != absl::StatusCode::kCancelled) {
        absl::MutexLock lock(&mu_);
        fatal_ = reg;
        shutting_down_ = true;
      }
      return;
    }
    if (resume_pending) {
      ResumeBoot();
      resume_pending = false;
    }
    if (const Next next = AwaitHealthy(); next != Next::kLease) {
      if (next == Next::kStop) return;
      continue;
    }
    if (LeaseOnce(backoff) == Next::kStop) return;
  }
}

Agent::Next Agent::LeaseOnce(client::Backoff& backoff) {
  pb::LeaseJobsRequest request;
  pb::RegisterRequest offered;  // only to compare the capabilities as bytes
  for (pb::Capability& c : Capabilities()) *offered.add_capabilities() = std::move(c);
  const std::string offered_bytes = offered.SerializeAsString();
  {
    absl::MutexLock lock(&mu_);
    // Wait for a free slot, a lost session or shutdown.
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutting_down_ || !registered_ ||
             static_cast<int>(pending_.size()) + running_ < options_.slots;
    };
    while (!ready()) cv_.Wait(&mu_);
    if (shutting_down_) return Next::kStop;
    if (!registered_) return Next::kLease;
    // A health job failed since the last lease (after a job on a kexec'd
    // kernel): no more work; AwaitHealthy takes over.
    if (!proto::AgentHealthy(health_)) return Next::kLease;
    request.set_agent_id(agent_id_);
    request.set_session(session_);
    request.set_max_jobs(options_.slots - static_cast<int>(pending_.size()) - running_);
    if (offered_bytes != sent_capabilities_) {
      *request.mutable_capabilities() = std::move(*offered.mutable_capabilities());
    }
  }
  pb::LeaseJobsResponse response;
  auto ctx = Context(kRpcTimeout);
  grpc::Status status = stub_->LeaseJobs(ctx.get(), request, &response);
  absl::MutexLock lock(&mu_);
  if (status.ok()) {
    backoff.Reset();
    if (request.session() != session_) return Next::kLease;  // re-registered meanwhile
    if (request.capabilities_size() > 0) sent_capabilities_ = offered_bytes;
    for (const pb::JobLease& lease : response.leases()) {
      LeaseEntry entry;
      entry.lease = lease;
      leases_[lease.job().id()] = std::move(entry);
      pending_.push_back(lease.job().id());
      spdlog::debug("leased job {} attempt {}", lease.job().id(), lease.lease().attempt());
    }
    cv_.SignalAll();
    if (response.leases_size() == 0) cv_.WaitWithTimeout(&mu_, options_.idle_poll);
    return Next::kLease;
  }
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    if (request.session() == session_ && registered_) {
      spdlog::warn("lease: {}; re-registering", client::Describe(status));
      DropAllLeasesLocked();
    }
    return Next::kLease;
  }
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    fatal_ = client::ToAbsl(status);
    shutting_down_ = true;
    return Next::kStop;
  }
  CountRpcError();
  spdlog::warn("lease: {} (retrying in {})", client::Describe(status),
               absl::FormatDuration(backoff.Peek()));
  WaitUntilShutdownLocked(absl::Now() + backoff.Next());
  return Next::kLease;
}

void Agent::ResumeBoot() {
  std::vector<pb::LeaseRef> kept;
  absl::Status health;
  {
    absl::MutexLock lock(&mu_);
    kept = resumed_;
    // CheckHealth ran on the job's kernel before the agent registered.
    health = HealthLocked();
  }
  KexecResume::Decision decision = kexec_->Decide(kept, health);
  if (decision.kind == KexecResume::Decision::kNothing ||
      decision.kind == KexecResume::Decision::kDropped) {
    return;
  }
  resumed_jobs_.fetch_add(1);
  if (decision.kind == KexecResume::Decision::kReportFailure) {
    CancelToken cancel;
    Report(decision.lease, cancel, decision.failure, absl::ZeroDuration());
    kexec_->End();
    return;
  }
  absl::MutexLock lock(&mu_);
  const int64_t id = decision.lease.job().id();
  LeaseEntry entry;
  entry.lease = std::move(decision.lease);
  entry.resumed = true;
  leases_[id] = std::move(entry);
  pending_.push_back(id);
  cv_.SignalAll();
}

void Agent::Drain() {
  ReleaseUnstarted();
  AwaitRunning();
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

void Agent::ReleaseUnstarted() {
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
  if (release.leases_size() == 0) return;
  client::Backoff backoff;
  for (int attempt = 0; attempt < kReleaseAttempts; ++attempt) {
    pb::ReleaseLeasesResponse response;
    auto ctx = Context(absl::Seconds(5));
    grpc::Status status = stub_->ReleaseLeases(ctx.get(), release, &response);
    if (status.ok()) {
      spdlog::info("released {} of {} unstarted leases", response.released(),
                   release.leases_size());
      for (int i = 0; i < response.released(); ++i) {
        Count(released_, metrics_ ? &metrics_->jobs_released : nullptr);
      }
      return;
    }
    CountRpcError();
    spdlog::warn("release leases: {}", client::Describe(status));
    if (!client::IsRetryable(status.error_code())) return;
    absl::SleepFor(backoff.Next());
  }
}

void Agent::AwaitRunning() {
  const absl::Time deadline = absl::Now() + options_.drain_timeout;
  absl::MutexLock lock(&mu_);
  while (running_ > 0 && absl::Now() < deadline) cv_.WaitWithDeadline(&mu_, deadline);
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

void Agent::WaitUntilShutdownLocked(absl::Time until) {
  while (!shutting_down_ && absl::Now() < until) cv_.WaitWithDeadline(&mu_, until);
}

void Agent::CountRpcError() {
  if (metrics_ != nullptr) metrics_->rpc_errors.Increment();
}

void Agent::CountCancelled() {
  // Abandoned jobs (drain timeout) were counted by AwaitRunning().
  bool draining;
  {
    absl::MutexLock lock(&mu_);
    draining = stop_workers_;
  }
  if (!draining) Count(revoked_, metrics_ ? &metrics_->jobs_revoked : nullptr);
}

}  // namespace farm::agent
