#include "agent/kernels/host_provider.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/process/process.h"
#include "proto/names.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

HostKernelProvider::HostKernelProvider(pb::HostFacts host, absl::Duration margin)
    : host_(std::move(host)), margin_(margin) {}

absl::Status HostKernelProvider::CanRun(const KernelRequest& request) const {
  if (request.mode == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError("the request names no IOMMU mode");
  }
  if (!request.kernel_params.empty()) {
    return absl::FailedPreconditionError(
        "the host's kernel command line cannot take a job's kernel parameters");
  }
  if (request.kernel_release != host_.kernel_release() || request.mode != host_.iommu_mode()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host kernel ", host_.kernel_release(), " runs mode ",
                     proto::ModeName(host_.iommu_mode()), "; the job wants kernel ",
                     request.kernel_release, " in mode ", proto::ModeName(request.mode)));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelRun> HostKernelProvider::Run(const KernelRequest& request) {
  if (absl::Status s = CanRun(request); !s.ok()) return s;
  KernelRun run;
  run.provider = "host";
  run.requested = request.mode;
  run.effective = host_.iommu_mode();
  run.effective_detail = host_.iommu_detail();
  run.facts.release = host_.kernel_release();
  run.facts.machine = host_.architecture();
  if (request.tool_argv.empty()) return run;

  process::ProcessOptions opts;
  opts.argv = request.tool_argv;
  opts.timeout = request.tool_runtime + margin_;
  opts.cancelled = request.cancelled;
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(opts);
  if (!r.ok()) return r.status();
  if (r->cancelled) return absl::CancelledError("cancelled while the tool ran");
  if (r->timed_out) {
    return absl::AbortedError(absl::StrCat(request.tool_argv[0], " ", r->Describe()));
  }
  run.tool_stdout = std::move(r->stdout_data);
  run.tool_stderr = std::move(r->stderr_data);
  run.tool_exit = r->signaled ? 128 + r->term_signal : r->exit_code;
  run.wall_time = r->wall_time;
  return run;
}

}  // namespace farm::kernels
