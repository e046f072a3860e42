// The Agent's workers: running leased jobs and reporting them (the lease
// loop is in agent.cc, the session in agent_session.cc).
#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "agent/rpc_deadline.h"
#include "agent/storable_report.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

constexpr char kHoldKey[] = "agent.hold_ms";

// The report as the scheduler can take it (agent/storable_report.h), saying
// in the log what was changed.
void MakeStorable(const pb::JobLease& lease, google::protobuf::Message* report,
                  std::string* raw_output) {
  if (raw_output != nullptr && CapRawOutput(raw_output)) {
    spdlog::warn("job {} attempt {}: raw output cut to {} bytes", lease.job().id(),
                 lease.lease().attempt(), raw_output->size());
  }
  if (const size_t replaced = MakeStringsValidUtf8(report); replaced > 0) {
    spdlog::warn("job {} attempt {}: {} byte(s) of invalid UTF-8 in the report shown as U+FFFD",
                 lease.job().id(), lease.lease().attempt(), replaced);
  }
}

pb::ReportFailureRequest FailureRequestFor(int64_t agent_id, const pb::JobLease& lease,
                                           std::string reason, bool retryable) {
  pb::ReportFailureRequest request;
  request.set_agent_id(agent_id);
  *request.mutable_lease() = lease.lease();
  request.set_reason(std::move(reason));
  request.set_retryable(retryable);
  MakeStorable(lease, &request, nullptr);
  return request;
}

// The job as its executor sees it: without the agent's own model_set keys.
// `hold` is the agent.hold_ms pause (InvalidArgument when it is not a
// non-negative integer).
pb::Job WithoutAgentKeys(const pb::Job& job, absl::StatusOr<absl::Duration>* hold) {
  pb::Job clean = job;
  auto* set = clean.mutable_model_set();
  int64_t hold_ms = 0;
  *hold = absl::ZeroDuration();
  if (auto it = set->find(kHoldKey); it != set->end()) {
    if (!absl::SimpleAtoi(it->second, &hold_ms) || hold_ms < 0) {
      *hold = absl::InvalidArgumentError(absl::StrCat("model_set ", kHoldKey, "='", it->second,
                                                      "' is not a non-negative integer"));
    } else {
      *hold = absl::Milliseconds(hold_ms);
    }
  }
  for (auto it = set->begin(); it != set->end();) {
    it = absl::StartsWith(it->first, "agent.") ? set->erase(it) : std::next(it);
  }
  return clean;
}

}  // namespace

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
    if (resumed) kexec_->End();
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
  const absl::Time start = absl::Now();
  absl::StatusOr<ExecutionResult> result = Execute(lease, cancel, resumed);
  if (result.ok() && result->rebooting) {
    StopForReboot(lease);
    return;
  }
  if (cancel.cancelled()) {
    spdlog::info("job {} attempt {}: cancelled, not reported", lease.job().id(),
                 lease.lease().attempt());
    CountCancelled();
    return;
  }
  // After every job on a kernel a kexec booted: a device that did not survive
  // the kexec can fail under the job, or under its figures.
  if (resumed) result = CheckHostAfterRun(std::move(result));
  if (result.ok() && metrics_ != nullptr && result->events_per_second > 0) {
    metrics_->emulator_events_per_second.Set(result->events_per_second);
    metrics_->emulator_events.Increment(result->events);
  }
  Report(lease, cancel, result, absl::Now() - start);
}

absl::StatusOr<ExecutionResult> Agent::Execute(const pb::JobLease& lease, CancelToken& cancel,
                                               bool resumed) {
  const pb::Job& job = lease.job();
  absl::StatusOr<absl::Duration> hold;
  const pb::Job clean = WithoutAgentKeys(job, &hold);
  if (!hold.ok()) return hold.status();
  if (*hold > absl::ZeroDuration() && cancel.SleepFor(*hold)) {
    return absl::CancelledError("cancelled while holding");
  }
  auto executor = executors_.find(job.executor());
  if (executor == executors_.end()) {
    return absl::UnimplementedError(absl::StrCat("agent ", options_.name, " has no executor for ",
                                                 pb::Executor_Name(job.executor())));
  }
  LeaseContext context;
  context.lease = lease.lease();
  context.resumed = resumed;
  context.progress = [this, ref = lease.lease()](const pb::JobProgress& p) {
    absl::MutexLock lock(&mu_);
    auto it = leases_.find(ref.job_id());
    if (it == leases_.end() || it->second.lease.lease().attempt() != ref.attempt()) return;
    pb::JobProgress& kept = it->second.progress.emplace(p);
    kept.set_job_id(ref.job_id());
    kept.set_attempt(ref.attempt());
  };
  if (kexec_) {
    context.hold = [this, &lease](absl::Duration d) {
      return HoldLeaseThroughReboot(*stub_, options_.client, SessionHeartbeat(), lease.lease(), d,
                                    [this] { CountRpcError(); });
    };
  }
  return executor->second->RunLeased(clean, cancel, context);
}

void Agent::StopForReboot(const pb::JobLease& lease) {
  // Not reported: the scheduler holds the lease until the agent on the
  // job's kernel resumes it (or the hold passes).
  spdlog::info("job {} attempt {}: the host reboots into the job's kernel; lease held, stopping",
               lease.job().id(), lease.lease().attempt());
  reboots_.fetch_add(1);
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

pb::ReportResultRequest Agent::ResultRequestFor(int64_t agent_id, const pb::JobLease& lease,
                                                const ExecutionResult& result,
                                                absl::Duration wall_time) const {
  pb::ReportResultRequest request;
  request.set_agent_id(agent_id);
  *request.mutable_lease() = lease.lease();
  for (const auto& s : result.samples) *request.add_samples() = s;
  request.set_raw_output(result.raw_output);
  request.set_raw_format(result.raw_format);
  *request.mutable_host() = options_.host;
  if (!result.ran_on && options_.read_hygiene) {
    *request.mutable_host()->mutable_hygiene() = options_.read_hygiene();
    request.mutable_host()->mutable_hygiene()->set_governor_set(
        options_.host.hygiene().governor_set());
  }
  if (!result.ran_on && options_.read_iommu_environment) {
    *request.mutable_host()->mutable_iommu_environment() = options_.read_iommu_environment();
  }
  if (result.ran_on) {
    // The guest's kernel facts, on the agent's host: its name and labels.
    *request.mutable_host() = *result.ran_on;
    request.mutable_host()->set_hostname(options_.host.hostname());
    *request.mutable_host()->mutable_labels() = options_.host.labels();
  }
  // The agent counted kernel events around the tool, host or guest alike.
  if (const std::string& on = options_.host.hygiene().kernel_counters();
      !on.empty() && !result.samples.empty()) {
    request.mutable_host()->mutable_hygiene()->set_kernel_counters(on);
  }
  if (result.emulated) {
    pb::HostFacts* host = request.mutable_host();
    host->set_iommu_mode(result.emulated->effective);
    host->set_iommu_detail(result.emulated->detail);
    pb::GuestFacts* g = host->mutable_guest();
    g->set_provider("emulator");
    g->set_requested_mode(result.emulated->requested);
    g->set_domain_type(result.emulated->domain_type);
  }
  request.set_tool_version(result.tool_version);
  if (result.monitors) *request.mutable_monitors() = *result.monitors;
  *request.mutable_wall_time() =
      google::protobuf::util::TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(wall_time));
  MakeStorable(lease, &request, request.mutable_raw_output());
  return request;
}

bool Agent::DroppedByScheduler(const pb::JobLease& lease, const grpc::Status& status) {
  if (client::IsStaleLease(status.error_code())) {
    spdlog::warn("job {} attempt {}: stale lease, report dropped: {}", lease.job().id(),
                 lease.lease().attempt(), status.error_message());
    Count(stale_, metrics_ ? &metrics_->jobs_stale : nullptr);
    return true;
  }
  if (status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    // The lease is not this agent's to settle: a failure report for it
    // would be refused the same way.
    spdlog::error("job {} attempt {}: report refused, dropped: {}", lease.job().id(),
                  lease.lease().attempt(), client::Describe(status));
    return true;
  }
  return false;
}

// Retried until accepted, stale, or the lease is revoked / abandoned (the
// token fires): a result is idempotent per (job, attempt), so resending a
// whole batch after a failed call stores each result once. A result the
// scheduler refuses for good (INVALID_ARGUMENT: e.g. text PostgreSQL cannot
// store) or keeps failing on (a server fault, kMaxServerFaultRetries times)
// becomes a failure report with the reason, so the job fails once and the
// agent moves on.
void Agent::Report(const pb::JobLease& lease, CancelToken& cancel,
                   const absl::StatusOr<ExecutionResult>& result, absl::Duration wall_time) {
  const int64_t agent_id = SessionHeartbeat().agent_id();
  pb::ReportResultRequest result_request;
  pb::ReportFailureRequest failure_request;
  if (result.ok()) {
    result_request = ResultRequestFor(agent_id, lease, *result, wall_time);
  } else {
    failure_request = FailureRequestFor(agent_id, lease, std::string(result.status().message()),
                                        !IsPermanentFailure(result.status().code()));
    spdlog::warn("job {} attempt {} failed ({}): {}", lease.job().id(), lease.lease().attempt(),
                 failure_request.retryable() ? "retryable" : "permanent",
                 result.status().ToString());
  }
  client::Backoff backoff;
  bool send_result = result.ok();
  int server_faults = 0;
  while (!cancel.cancelled()) {
    grpc::Status status;
    if (send_result) {
      std::optional<ReportBatcher::Answer> answer = batcher_->Send(result_request, cancel);
      if (!answer) break;  // revoked or abandoned before it went out
      status = answer->first;
      if (status.ok()) {
        Count(succeeded_, metrics_ ? &metrics_->jobs_succeeded : nullptr);
        if (metrics_ != nullptr) metrics_->job_duration.Observe(absl::ToDoubleSeconds(wall_time));
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
    if (DroppedByScheduler(lease, status)) return;
    const bool gave_up = client::IsServerFault(status.error_code()) &&
                         ++server_faults > client::kMaxServerFaultRetries;
    const bool retry = !gave_up && client::IsRetryable(status.error_code());
    if (send_result && !retry) {
      // Permanent unless the server only failed: then another attempt may
      // fare better.
      failure_request = FailureRequestFor(
          agent_id, lease,
          absl::StrCat("result refused by the scheduler: ", client::Describe(status)), gave_up);
      spdlog::error("job {} attempt {}: result refused ({}); reporting the job failed",
                    lease.job().id(), lease.lease().attempt(), client::Describe(status));
      send_result = false;
      server_faults = 0;
      backoff.Reset();
      continue;
    }
    if (!retry) {
      spdlog::error("job {} attempt {}: report refused: {}", lease.job().id(),
                    lease.lease().attempt(), client::Describe(status));
      return;
    }
    CountRpcError();
    spdlog::warn("job {}: report: {} (retrying in {})", lease.job().id(), client::Describe(status),
                 absl::FormatDuration(backoff.Peek()));
    cancel.SleepFor(backoff.Next());
  }
  CountCancelled();
}

}  // namespace farm::agent
