#include "agent/kexec_resume.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/rpc_deadline.h"
#include "lib/base/check.h"
#include "lib/client/retry.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;
using Resumed = kernels::KexecKernelProvider::Resumed;

constexpr int kHoldRetries = 3;

pb::LeaseRef RefOf(const kernels::LeaseHold& held) {
  pb::LeaseRef ref;
  ref.set_job_id(held.job_id);
  ref.set_attempt(held.attempt);
  ref.set_lease_token(held.lease_token);
  return ref;
}

bool SameLease(const pb::LeaseRef& a, const pb::LeaseRef& b) {
  return a.job_id() == b.job_id() && a.attempt() == b.attempt() &&
         a.lease_token() == b.lease_token();
}

}  // namespace

absl::Status KexecResume::Check() {
  absl::StatusOr<Resumed> resumed = provider_->Check();
  if (!resumed.ok()) return resumed.status();
  if (resumed->kind != Resumed::kNothing) boot_ = *std::move(resumed);
  return absl::OkStatus();
}

std::optional<pb::LeaseRef> KexecResume::pending_lease() const {
  if (!boot_.has_value() || decided_) return std::nullopt;
  return RefOf(boot_->boot.lease);
}

KexecResume::Decision KexecResume::Decide(const std::vector<pb::LeaseRef>& kept,
                                          const absl::Status& health) {
  Decision d;
  if (!boot_.has_value() || decided_) return d;
  decided_ = true;
  const kernels::LeaseHold& held = boot_->boot.lease;
  const pb::LeaseRef ref = RefOf(held);
  if (std::none_of(kept.begin(), kept.end(),
                   [&](const pb::LeaseRef& l) { return SameLease(l, ref); })) {
    spdlog::warn("job {} attempt {}: the scheduler did not keep the lease held through the reboot",
                 held.job_id, held.attempt);
    End();
    d.kind = Decision::kDropped;
    return d;
  }
  *d.lease.mutable_lease() = ref;
  if (held.job.empty() ||
      !google::protobuf::util::JsonStringToMessage(held.job, d.lease.mutable_job()).ok()) {
    d.failure = absl::FailedPreconditionError(
        absl::StrCat("the kexec state of job ", held.job_id, " holds no readable job"));
  } else if (boot_->kind == Resumed::kFailed) {
    d.failure = absl::FailedPreconditionError(boot_->reason);
  }
  d.lease.mutable_job()->set_id(held.job_id);
  if (d.failure.ok() && !health.ok()) d.failure = absl::UnavailableError(MarkHostUnhealthy(health));
  if (!d.failure.ok()) {
    d.kind = Decision::kReportFailure;
    return d;
  }
  if (!boot_->note.empty()) spdlog::warn("job {}: {}", held.job_id, boot_->note);
  spdlog::info("job {} attempt {}: kernel {} came back in mode {}; running the job", held.job_id,
               held.attempt, boot_->boot.release, proto::ModeName(boot_->boot.mode));
  d.kind = Decision::kRun;
  return d;
}

std::string KexecResume::MarkHostUnhealthy(const absl::Status& health) {
  FARM_DCHECK(boot_.has_value(), "MarkHostUnhealthy() without a pending boot");
  // Abandoned, not finished: the firmware reboot resets the device that a
  // kexec carried over.
  boot_->kind = Resumed::kFailed;
  boot_->running = boot_->boot.release;
  boot_->reset_devices = true;
  boot_->reason = absl::StrCat("kernel ", boot_->boot.release, " (commit ", boot_->boot.commit,
                               ") came back in mode ", proto::ModeName(boot_->boot.mode),
                               ", but the host's health job failed on it (", health.message(),
                               "); the host reboots into its default kernel and the job runs "
                               "again");
  return boot_->reason;
}

void KexecResume::End() {
  FARM_DCHECK(boot_.has_value() && decided_, "End() without a decided boot");
  if (boot_->kind == Resumed::kFailed) {
    spdlog::warn("kexec: {}; back to the default kernel {}", boot_->reason,
                 boot_->boot.default_release);
    if (absl::Status s = provider_->Abandon(*boot_); !s.ok()) {
      spdlog::error("kexec: {}", s.ToString());
    }
    return;
  }
  if (absl::Status s = provider_->Finish(); !s.ok()) spdlog::error("kexec: {}", s.ToString());
}

absl::Status HoldLeaseThroughReboot(pb::AgentService::StubInterface& stub,
                                    const client::ClientOptions& options,
                                    pb::HeartbeatRequest request, const pb::LeaseRef& lease,
                                    absl::Duration d, const std::function<void()>& on_rpc_error) {
  request.clear_leases();
  *request.add_leases() = lease;
  *request.mutable_hold_for() =
      google::protobuf::util::TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(d));
  client::Backoff backoff;
  for (int attempt = 0;; ++attempt) {
    pb::HeartbeatResponse response;
    auto ctx = client::NewContext(options, kRpcTimeout);
    grpc::Status status = stub.Heartbeat(ctx.get(), request, &response);
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
    if (!client::IsRetryable(status.error_code()) || attempt >= kHoldRetries) {
      return client::ToAbsl(status);
    }
    if (on_rpc_error) on_rpc_error();
    absl::SleepFor(backoff.Next());
  }
}

}  // namespace farm::agent
