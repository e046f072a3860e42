#include "agent/executors/emulator_executor.h"

#include <string>
#include <vector>

#include "proto/names.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/executors/emu_samples.h"
#include "emu/model/catalog.h"
#include "emu/model/kernel.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

absl::StatusOr<std::string> ModeArg(pb::IommuMode mode) {
  if (mode == pb::IOMMU_MODE_UNSPECIFIED || !pb::IommuMode_IsValid(mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job mode ", pb::IommuMode_Name(mode), " is not a mode the emulator runs"));
  }
  return ::farm::proto::ModeName(mode);
}

// The name of the catalog at `path` (the default one when empty); "" when
// none can be read, so every job's commit then runs its model_set.
std::string CatalogName(const std::string& path) {
  absl::StatusOr<std::string> file = path.empty() ? farm::emu::DefaultCatalogPath() : path;
  if (!file.ok()) return "";
  absl::StatusOr<farm::emu::Catalog> catalog = farm::emu::Catalog::LoadFile(*file);
  return catalog.ok() ? catalog->name() : "";
}

// The scheduler's resolved keys as the kernel, over the registry defaults.
void KernelFromModelSet(farm::emu::RunSpec& spec) {
  std::vector<std::string> kv;
  for (const auto& [k, v] : spec.sets) kv.push_back(absl::StrCat(k, "=", v));
  spec.kernel = absl::StrJoin(kv, ",");
  spec.sets.clear();
}

}  // namespace

EmulatorExecutor::EmulatorExecutor(std::string catalog, absl::Duration time_limit)
    : catalog_(std::move(catalog)), catalog_name_(CatalogName(catalog_)), time_limit_(time_limit) {}

std::string EmulatorExecutor::capability() const {
  return proto::ExecutorName(pb::EXECUTOR_EMULATOR);
}

std::string EmulatorExecutor::version() const { return "farm-emu 0.1"; }

absl::StatusOr<farm::emu::RunSpec> EmulatorExecutor::SpecForJob(const pb::Job& job) const {
  farm::emu::RunSpec spec;
  spec.platform = job.platform();
  spec.workload = job.workload().name();
  spec.params.insert(job.workload().params().begin(), job.workload().params().end());
  spec.sets.insert(job.model_set().begin(), job.model_set().end());
  spec.seed = job.seed();
  spec.catalog = catalog_;
  absl::StatusOr<std::string> mode = ModeArg(job.mode());
  if (!mode.ok()) return mode.status();
  spec.mode = *mode;
  if (job.commit_id().empty()) {
    return absl::InvalidArgumentError("job has no commit_id");
  }
  spec.kernel = job.commit_id();
  // Another catalog's commit runs exactly what the scheduler resolved for it
  // (model_set carries its whole accumulated state): resolving its id in our
  // catalog would run our state under every key it leaves alone, wherever
  // the two catalogs share an id (a tag such as v5.11).
  if (!job.catalog().empty() && job.catalog() != catalog_name_) {
    KernelFromModelSet(spec);
    return spec;
  }
  auto known = farm::emu::ResolveKernel(job.commit_id(), catalog_);
  if (!known.ok() && known.status().code() == absl::StatusCode::kNotFound && !spec.sets.empty()) {
    // Not in our catalog: the scheduler resolved the commit into model_set.
    KernelFromModelSet(spec);
  }
  return spec;
}

absl::StatusOr<ExecutionResult> EmulatorExecutor::Run(const pb::Job& job, CancelToken& cancel) {
  absl::StatusOr<farm::emu::RunSpec> spec = SpecForJob(job);
  if (!spec.ok()) return spec.status();
  if (cancel.cancelled()) return absl::CancelledError("cancelled before the run");
  const absl::Time deadline =
      time_limit_ > absl::ZeroDuration() ? absl::Now() + time_limit_ : absl::InfiniteFuture();
  spec->stop = [&cancel, deadline] { return cancel.cancelled() || absl::Now() >= deadline; };
  absl::StatusOr<farm::emu::RunResult> result = farm::emu::RunEmulation(*spec);
  if (!result.ok() && result.status().code() == absl::StatusCode::kAborted) {
    if (cancel.cancelled()) return absl::CancelledError("cancelled during the run");
    return absl::FailedPreconditionError(absl::StrCat(
        "emulator: run stopped at the agent's time limit of ", absl::FormatDuration(time_limit_),
        " (--emulator-time-limit): ", result.status().message()));
  }
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat("emulator: ", result.status().message()));
  }
  if (cancel.cancelled()) return absl::CancelledError("cancelled during the run");
  ExecutionResult out;
  out.samples = SamplesFromEmuResult(*result);
  out.raw_output = farm::emu::FormatJson(*result);
  out.raw_format = "emu-json";
  out.tool_version = version();
  ExecutionResult::EmulatedKernel kernel;
  kernel.requested = job.mode();
  kernel.effective = ::farm::proto::ModeFromName(result->effective_mode);
  kernel.detail = result->effective_detail;
  if (const std::optional<iommu_mode::Mode> m = ::farm::proto::ModeOf(kernel.effective)) {
    kernel.domain_type = iommu_mode::DomainType(*m);
  }
  out.emulated = std::move(kernel);
  out.events = static_cast<double>(result->events);
  if (result->wall_seconds > 0) {
    out.events_per_second = static_cast<double>(result->events) / result->wall_seconds;
  }
  return out;
}

}  // namespace farm::agent
