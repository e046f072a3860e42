// The Agent's session with the scheduler: registration and heartbeats (the
// lease loop is in agent.cc, the workers in agent_worker.cc).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/agent.h"
#include "agent/rpc_deadline.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// Register answers that no retry changes.
bool RegisterRefused(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::INVALID_ARGUMENT ||
         code == grpc::StatusCode::PERMISSION_DENIED;
}

}  // namespace

absl::Status Agent::EnsureRegistered() {
  client::Backoff backoff;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (registered_) return absl::OkStatus();
      if (shutting_down_) return absl::CancelledError("shutting down");
    }
    const pb::RegisterRequest request = RegisterRequestFor();
    pb::RegisterResponse response;
    auto ctx = Context(kRpcTimeout);
    grpc::Status status = stub_->Register(ctx.get(), request, &response);
    if (status.ok()) {
      Registered(response);
      return absl::OkStatus();
    }
    if (RegisterRefused(status.error_code())) return client::ToAbsl(status);
    CountRpcError();
    spdlog::warn("register: {} (retrying in {})", client::Describe(status),
                 absl::FormatDuration(backoff.Peek()));
    absl::MutexLock lock(&mu_);
    WaitUntilShutdownLocked(absl::Now() + backoff.Next());
  }
}

pb::RegisterRequest Agent::RegisterRequestFor() const {
  pb::RegisterRequest request;
  request.set_name(options_.name);
  request.set_slots(options_.slots);
  *request.mutable_host() = options_.host;
  {
    absl::MutexLock lock(&mu_);
    for (const pb::LeaseRef& l : resumes_) *request.add_resumes() = l;
    *request.mutable_health() = health_;
  }
  for (pb::Capability& c : Capabilities()) *request.add_capabilities() = std::move(c);
  return request;
}

std::vector<pb::Capability> Agent::Capabilities() const {
  std::vector<pb::Capability> out;
  for (const auto& [kind, executor] : executors_) {
    pb::Capability& cap = out.emplace_back();
    cap.set_name(executor->capability());
    cap.set_version(executor->version());
    for (const pb::KernelOffer& k : executor->kernels()) *cap.add_kernels() = k;
    for (const pb::BuildOffer& b : executor->builds()) *cap.add_builds() = b;
  }
  return out;
}

void Agent::Registered(const pb::RegisterResponse& response) {
  const int64_t n = registrations_.fetch_add(1) + 1;
  absl::Duration interval = FromProto(response.heartbeat_interval());
  if (interval <= absl::ZeroDuration()) {
    const absl::Duration ttl = FromProto(response.lease_ttl());
    interval = ttl > absl::ZeroDuration() ? ttl / 3 : absl::Seconds(2);
  }
  {
    absl::MutexLock lock(&mu_);
    registered_ = true;
    sent_capabilities_.clear();  // the first lease of a session says them again
    agent_id_ = response.agent_id();
    session_ = response.session();
    heartbeat_interval_ = interval;
    resumes_.clear();
    resumed_.assign(response.resumed().begin(), response.resumed().end());
    cv_.SignalAll();
  }
  spdlog::info("registered agent {} id {} (heartbeat every {})", options_.name, response.agent_id(),
               absl::FormatDuration(interval));
  if (options_.on_registered) options_.on_registered(options_.name, response.agent_id(), n == 1);
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

pb::HeartbeatRequest Agent::SessionHeartbeat() const {
  pb::HeartbeatRequest request;
  absl::MutexLock lock(&mu_);
  request.set_agent_id(agent_id_);
  request.set_session(session_);
  return request;
}

Agent::HeartbeatTurn Agent::NextHeartbeat(absl::Duration wait) {
  HeartbeatTurn turn;
  absl::MutexLock lock(&mu_);
  // cv_ is signalled for every job change; only a stop ends the wait early,
  // so heartbeats keep their interval.
  const absl::Time until = absl::Now() + wait;
  while (!stop_heartbeat_ && absl::Now() < until) cv_.WaitWithDeadline(&mu_, until);
  turn.stop = stop_heartbeat_;
  turn.registered = registered_;
  turn.interval = heartbeat_interval_;
  if (turn.stop || !turn.registered) return turn;
  turn.request.set_agent_id(agent_id_);
  turn.request.set_session(session_);
  for (const auto& [id, entry] : leases_) {
    *turn.request.add_leases() = entry.lease.lease();
    if (entry.progress.has_value()) *turn.request.add_progress() = *entry.progress;
  }
  return turn;
}

void Agent::HeartbeatLoop() {
  client::Backoff retry;
  absl::Duration wait = absl::ZeroDuration();
  // The last heartbeat found no scheduler: the next waits for the channel to
  // connect (within its deadline) instead of failing at once. A call that
  // waits is what polls the new connection; while calls fail fast, its TLS
  // handshake advances only on gRPC's 5 s backup poller, and an mTLS agent
  // took 16-21 s to reach a restarted scheduler, past the reaper's grace.
  bool reconnecting = false;
  for (;;) {
    const HeartbeatTurn turn = NextHeartbeat(wait);
    if (turn.stop) return;
    const absl::Duration interval = turn.interval;
    if (!turn.registered) {
      wait = std::min(interval, absl::Milliseconds(200));
      continue;
    }
    pb::HeartbeatResponse response;
    auto ctx = Context(std::max(interval, absl::Seconds(1)));
    ctx->set_wait_for_ready(reconnecting);
    grpc::Status status = stub_->Heartbeat(ctx.get(), turn.request, &response);
    reconnecting = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    absl::MutexLock lock(&mu_);
    if (status.ok()) {
      retry.Reset();
      wait = interval;
      DropRevokedLocked(response);
      continue;
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && turn.request.session() == session_) {
      spdlog::warn("heartbeat: {}; dropping {} leases and re-registering", client::Describe(status),
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
    spdlog::warn("heartbeat: {} (retrying in {})", client::Describe(status),
                 absl::FormatDuration(retry.Peek()));
    wait = std::min(retry.Next(), interval);
  }
}

void Agent::DropRevokedLocked(const pb::HeartbeatResponse& response) {
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
      pending_.erase(std::remove(pending_.begin(), pending_.end(), ref.job_id()), pending_.end());
      leases_.erase(it);
    }
  }
  cv_.SignalAll();
}

}  // namespace farm::agent
