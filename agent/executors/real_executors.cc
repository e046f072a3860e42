#include "agent/executors/real_executors.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/runners/runners.h"

namespace farm::runners {
namespace {

namespace pb = ::iommufarm::v1;

Params ParamsOf(const pb::Job& job) {
  return Params(job.workload().params().begin(), job.workload().params().end());
}

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
  for (const Sample& s : run->samples) {
    pb::Sample* p = &out.samples.emplace_back();
    p->set_metric(s.metric);
    p->set_value(s.value);
    p->set_unit(s.unit);
    p->set_phase(s.phase);
  }
  out.raw_output = std::move(run->raw_output);
  out.raw_format = std::move(run->raw_format);
  out.tool_version = std::move(run->tool_version);
  return out;
}

RunOptions MakeRunOptions(absl::Duration timeout, farm::agent::CancelToken& cancel) {
  RunOptions opts;
  opts.timeout = timeout;
  opts.cancelled = [&cancel] { return cancel.cancelled(); };
  return opts;
}

class FioExecutor final : public farm::agent::Executor {
 public:
  FioExecutor(ToolInfo tool, AllowedTargets allowed, RealExecutorOptions opts)
      : version_(tool.version),
        runner_(std::move(tool)),
        allowed_(std::move(allowed)),
        opts_(std::move(opts)) {}

  std::string capability() const override { return "fio"; }
  std::string version() const override { return version_; }

  absl::StatusOr<farm::agent::ExecutionResult> Run(const pb::Job& job,
                                                   farm::agent::CancelToken& cancel) override {
    absl::StatusOr<FioSpec> spec = FioSpecFromParams(ParamsOf(job));
    if (!spec.ok()) return spec.status();
    const absl::Duration timeout =
        spec->runtime_s > 0 ? absl::Seconds(spec->runtime_s + spec->ramp_time_s) + opts_.slack
                            : opts_.default_timeout;
    return ToExecution(runner_.Run(*spec, allowed_, MakeRunOptions(timeout, cancel)));
  }

 private:
  const std::string version_;
  const FioRunner runner_;
  const AllowedTargets allowed_;
  const RealExecutorOptions opts_;
};

class IozoneExecutor final : public farm::agent::Executor {
 public:
  IozoneExecutor(ToolInfo tool, AllowedTargets allowed, RealExecutorOptions opts)
      : version_(tool.version),
        runner_(std::move(tool)),
        allowed_(std::move(allowed)),
        opts_(std::move(opts)) {}

  std::string capability() const override { return "iozone"; }
  std::string version() const override { return version_; }

  absl::StatusOr<farm::agent::ExecutionResult> Run(const pb::Job& job,
                                                   farm::agent::CancelToken& cancel) override {
    absl::StatusOr<IozoneSpec> spec = IozoneSpecFromParams(ParamsOf(job));
    if (!spec.ok()) return spec.status();
    return ToExecution(runner_.Run(*spec, allowed_, MakeRunOptions(opts_.default_timeout, cancel)));
  }

 private:
  const std::string version_;
  const IozoneRunner runner_;
  const AllowedTargets allowed_;
  const RealExecutorOptions opts_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<farm::agent::Executor>> MakeRealExecutor(
    const std::string& capability, const RealExecutorOptions& options) {
  if (capability != "fio" && capability != "iozone") {
    return absl::InvalidArgumentError(
        absl::StrCat("real executor '", capability, "' unknown (known: fio, iozone)"));
  }
  absl::StatusOr<AllowedTargets> allowed =
      AllowedTargets::Parse(options.allow_dirs, options.allow_devices);
  if (!allowed.ok()) return allowed.status();
  if (allowed->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(capability, ": real runs need at least one --allow-dir or --allow-device"));
  }
  const std::string tool = options.tool.empty() ? capability : options.tool;
  absl::StatusOr<ToolInfo> info = capability == "fio" ? DetectFio(tool) : DetectIozone(tool);
  if (!info.ok()) {
    return absl::Status(info.status().code(),
                        absl::StrCat(capability, ": ", info.status().message()));
  }
  if (capability == "fio") {
    return std::make_unique<FioExecutor>(*std::move(info), *std::move(allowed), options);
  }
  return std::make_unique<IozoneExecutor>(*std::move(info), *std::move(allowed), options);
}

}  // namespace farm::runners
