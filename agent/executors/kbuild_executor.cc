#include "agent/executors/kbuild_executor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kstore/kernel_store.h"
#include "lib/process/process.h"
#include "proto/kernel_config.h"
#include "proto/names.h"
#include "proto/try_commit.h"

namespace farm::agent {

namespace pb = ::iommufarm::v1;

std::vector<std::string> BuildableArchs() {
  std::vector<std::string> out{kstore::kArchX86};
  if (process::ResolveExecutable("aarch64-linux-gnu-gcc").ok()) out.push_back(kstore::kArchArm64);
  return out;
}

KbuildExecutor::KbuildExecutor(KbuildConfig config)
    : config_(std::move(config)),
      archs_(config_.archs.empty() ? BuildableArchs() : config_.archs) {}

std::string KbuildExecutor::capability() const { return proto::ExecutorName(pb::EXECUTOR_KBUILD); }

std::vector<pb::BuildOffer> KbuildExecutor::builds() const {
  std::vector<pb::BuildOffer> out;
  for (const auto& [catalog, tree] : config_.trees) {
    pb::BuildOffer& o = out.emplace_back();
    o.set_catalog(catalog);
    o.set_tree(tree);
    for (const std::string& a : archs_) o.add_architectures(a);
  }
  return out;
}

namespace {

// The job's kernel config (proto/kernel_config.h) onto `req`: its id names
// the store entry; its base replaces the agent's; its fragments go after the
// shipped ones; a dma-map-bench build adds the dma-map-bench fragment.
absl::Status ApplyKernelConfig(const pb::Job& job, kbuild::BuildRequest* req) {
  const auto& params = job.workload().params();
  req->config_id = proto::JobConfigId(job);
  req->dma_map_bench = proto::IsDmaMapBenchBuild(req->config_id);
  // A host platform's kernel: the host fragment instead of the guests', and
  // the base's modules built in, as a kexec'd host has no initramfs.
  const bool host = proto::IsHostBuild(req->config_id);
  if (host) {
    req->machine = kbuild::kHostMachine;
    req->modules_built_in = true;
  }
  auto text = params.find(proto::kKernelConfigTextParam);
  if (text == params.end()) {
    if (host) {
      return absl::InvalidArgumentError(absl::StrCat(
          "build config ", req->config_id, " is a host's: the build job carries no config"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<pb::KernelConfig> config = proto::DecodeKernelConfig(text->second);
  if (!config.ok()) return config.status();
  // The id is of the config it carries, so the store entry is its kernel.
  std::string config_id = proto::KernelConfigId(*config);
  if (host) config_id = proto::HostBuildConfigId(config_id);
  if (const std::string id = proto::BuildConfigId(config_id, req->dma_map_bench);
      id != req->config_id) {
    return absl::InvalidArgumentError(absl::StrCat("the build job's kernel config is ", id,
                                                   ", its kernel_config param ", req->config_id));
  }
  if (!config->base().empty()) req->base = config->base();
  req->base_text = config->base_text();
  for (const pb::ConfigFragment& f : config->fragments()) {
    req->inline_fragments.push_back({f.name(), f.text()});
  }
  return absl::OkStatus();
}

}  // namespace

pb::JobProgress JobProgressOf(const kbuild::BuildProgress& progress) {
  pb::JobProgress out;
  out.set_phase(kbuild::BuildPhaseName(progress.phase));
  out.set_objects(progress.objects);
  out.set_expected_objects(progress.expected_objects);
  out.mutable_elapsed()->set_seconds(absl::ToInt64Seconds(progress.elapsed));
  if (progress.remaining >= absl::ZeroDuration()) {
    out.mutable_remaining()->set_seconds(absl::ToInt64Seconds(progress.remaining));
  }
  return out;
}

absl::StatusOr<ExecutionResult> KbuildExecutor::Run(const pb::Job& job, CancelToken& cancel) {
  return RunLeased(job, cancel, LeaseContext{});
}

absl::StatusOr<ExecutionResult> KbuildExecutor::RunLeased(const pb::Job& job, CancelToken& cancel,
                                                          const LeaseContext& lease) {
  auto tree = config_.trees.find(job.catalog());
  if (tree == config_.trees.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this agent has no tree for catalog ", job.catalog()));
  }
  kbuild::BuildRequest req;
  req.tree = tree->second;
  // A try commit is its base with the job's patch applied, stored under the
  // try id the jobs waiting for it carry.
  req.rev = std::string(proto::TryBase(job.commit_id()));
  if (proto::IsTryCommit(job.commit_id())) {
    auto patch = job.workload().params().find(proto::kPatchParam);
    if (patch == job.workload().params().end() || patch->second.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("try commit ", job.commit_id(), ": the build job carries no patch"));
    }
    if (proto::TryCommitId(req.rev, patch->second) != job.commit_id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("try commit ", job.commit_id(), ": the job's patch is another"));
    }
    req.patch = patch->second;
    req.store_commit = job.commit_id();
  }
  req.arch = job.platform();
  req.machine = kbuild::kAllMachines;
  req.base = config_.base;
  if (absl::Status s = ApplyKernelConfig(job, &req); !s.ok()) return s;
  req.store_dir = config_.store_dir;
  req.cache_root = config_.cache_root;
  req.cache_max_bytes = config_.cache_max_bytes;
  req.jobs = config_.jobs;
  req.make = config_.make;
  req.git = config_.git;
  req.cancelled = [&cancel] { return cancel.cancelled(); };
  if (lease.progress) {
    req.progress = [&lease](const kbuild::BuildProgress& p) { lease.progress(JobProgressOf(p)); };
  }
  std::string log;
  absl::StatusOr<kbuild::BuildResult> built = kbuild::BuildKernel(req, &log);
  if (!built.ok()) {
    if (cancel.cancelled()) return absl::CancelledError("build stopped: lease revoked");
    return built.status();
  }
  ExecutionResult out;
  const double seconds = absl::ToDoubleSeconds(built->wall_time);
  pb::Sample& wall = out.samples.emplace_back();
  wall.set_metric("build_seconds");
  wall.set_value(seconds);
  wall.set_unit("s");
  out.raw_output =
      absl::StrCat(log, "\nbuilt ", built->commit, " ", built->release, " into ", built->build.dir,
                   built->reused_build_dir ? " (incremental)" : "", "\n");
  out.raw_format = "kbuild-log";
  out.tool_version = built->build.compiler;
  return out;
}

}  // namespace farm::agent
