#include "agent/executors/real_executors.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/runners/runners.h"
#include "proto/names.h"

namespace farm::runners {
namespace {

namespace pb = ::iommufarm::v1;

// What differs between the real tools, one row each: the executor kind
// (whose name is also the tool's default executable), how the tool is
// detected, how a job's params become a spec and how long a run may take.
// Everything else, the Executor below does the same way for every tool.
struct FioTool {
  using Spec = FioSpec;
  using Runner = FioRunner;
  static constexpr pb::Executor kKind = pb::EXECUTOR_FIO;
  static absl::StatusOr<ToolInfo> Detect(const std::string& tool) { return DetectFio(tool); }
  static absl::StatusOr<Spec> SpecOf(const Params& params) { return FioSpecFromParams(params); }
  // fio runs for runtime + ramp_time when the spec sets a runtime.
  static absl::Duration Timeout(const Spec& spec, const RealExecutorOptions& opts) {
    return spec.runtime_s > 0 ? absl::Seconds(spec.runtime_s + spec.ramp_time_s) + opts.slack
                              : opts.default_timeout;
  }
};

struct IozoneTool {
  using Spec = IozoneSpec;
  using Runner = IozoneRunner;
  static constexpr pb::Executor kKind = pb::EXECUTOR_IOZONE;
  static absl::StatusOr<ToolInfo> Detect(const std::string& tool) { return DetectIozone(tool); }
  static absl::StatusOr<Spec> SpecOf(const Params& params) { return IozoneSpecFromParams(params); }
  // iozone has no runtime: it runs until its files are written and read.
  static absl::Duration Timeout(const Spec&, const RealExecutorOptions& opts) {
    return opts.default_timeout;
  }
};

// Refusals are about the job, not this moment: make them permanent.
absl::Status Permanent(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kPermissionDenied) {
    return absl::InvalidArgumentError(s.message());
  }
  return s;
}

absl::StatusOr<farm::agent::ExecutionResult> ToExecution(absl::StatusOr<RunResult> run) {
  if (!run.ok()) return Permanent(run.status());
  farm::agent::ExecutionResult out;
  AppendSamples(run->samples, out.samples);
  out.raw_output = std::move(run->raw_output);
  out.raw_format = std::move(run->raw_format);
  out.tool_version = std::move(run->tool_version);
  return out;
}

template <typename Tool>
class RealExecutor final : public farm::agent::Executor {
 public:
  RealExecutor(ToolInfo tool, AllowedTargets allowed, RealExecutorOptions opts)
      : version_(tool.version),
        runner_(std::move(tool)),
        allowed_(std::move(allowed)),
        opts_(std::move(opts)) {}

  std::string capability() const override { return proto::ExecutorName(Tool::kKind); }
  std::string version() const override { return version_; }

  absl::StatusOr<farm::agent::ExecutionResult> Run(const pb::Job& job,
                                                   farm::agent::CancelToken& cancel) override {
    absl::StatusOr<typename Tool::Spec> spec =
        Tool::SpecOf(Params(job.workload().params().begin(), job.workload().params().end()));
    if (!spec.ok()) return spec.status();
    RunOptions run;
    run.timeout = Tool::Timeout(*spec, opts_);
    run.cancelled = [&cancel] { return cancel.cancelled(); };
    if (!opts_.record_monitors) return ToExecution(runner_.Run(*spec, allowed_, run));
    monitors::HostMonitor monitor(opts_.monitors);
    monitor.Start();
    absl::StatusOr<farm::agent::ExecutionResult> out =
        ToExecution(runner_.Run(*spec, allowed_, run));
    pb::Monitors recorded = monitor.Finish();
    if (out.ok()) out->monitors = std::move(recorded);
    return out;
  }

 private:
  const std::string version_;
  const typename Tool::Runner runner_;
  const AllowedTargets allowed_;
  const RealExecutorOptions opts_;
};

template <typename Tool>
absl::StatusOr<std::unique_ptr<farm::agent::Executor>> MakeExecutor(
    const RealExecutorOptions& options) {
  const std::string name = proto::ExecutorName(Tool::kKind);
  absl::StatusOr<AllowedTargets> allowed =
      AllowedTargets::Parse(options.allow_dirs, options.allow_devices);
  if (!allowed.ok()) return allowed.status();
  if (allowed->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": real runs need at least one --allow-dir or --allow-device"));
  }
  absl::StatusOr<ToolInfo> info = Tool::Detect(options.tool.empty() ? name : options.tool);
  if (!info.ok()) {
    return absl::Status(info.status().code(), absl::StrCat(name, ": ", info.status().message()));
  }
  return std::make_unique<RealExecutor<Tool>>(*std::move(info), *std::move(allowed), options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<farm::agent::Executor>> MakeRealExecutor(
    const std::string& capability, const RealExecutorOptions& options) {
  switch (proto::ExecutorFromName(capability)) {
    case pb::EXECUTOR_FIO:
      return MakeExecutor<FioTool>(options);
    case pb::EXECUTOR_IOZONE:
      return MakeExecutor<IozoneTool>(options);
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "real executor '", capability, "' unknown (known: ", proto::ExecutorName(FioTool::kKind),
          ", ", proto::ExecutorName(IozoneTool::kKind), ")"));
  }
}

void AppendSamples(const std::vector<Sample>& samples, std::vector<pb::Sample>& out) {
  out.reserve(out.size() + samples.size());
  for (const Sample& s : samples) {
    pb::Sample* p = &out.emplace_back();
    p->set_metric(s.metric);
    p->set_value(s.value);
    p->set_unit(s.unit);
    p->set_phase(s.phase);
  }
}

}  // namespace farm::runners
