#include "scheduler/kernel_builds.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/kernel_config.h"
#include "proto/kernel_params.h"
#include "proto/labels.h"
#include "proto/names.h"
#include "proto/try_commit.h"
#include "scheduler/spec.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;

std::vector<pb::Capability> CapsOf(const pb::Agent& a) {
  return {a.capabilities().begin(), a.capabilities().end()};
}

bool AnyAgentOffers(const pb::Job& job, const std::vector<pb::Agent>& agents) {
  for (const pb::Agent& a : agents) {
    if (proto::FindOffer(proto::OffersFor(CapsOf(a), job.executor(), a.host()), job) != nullptr) {
      return true;
    }
  }
  return false;
}

bool AnyAgentBuilds(const pb::Job& build, const std::vector<pb::Agent>& agents) {
  for (const pb::Agent& a : agents) {
    if (proto::BuildOfferRuns(CapsOf(a), build)) return true;
  }
  return false;
}

// What one (commit, platform, mode, executor) cell needs.
struct Need {
  bool offered = false;
  std::optional<proto::BuildKey> build;
  std::string unrunnable;  // set when neither
};

// The platform a run on `a`'s own host answers to (proto/labels.h).
std::string PlatformOf(const pb::Agent& a) {
  auto it = a.host().labels().find(proto::kPlatformLabel);
  return it == a.host().labels().end() || it->second.empty() ? a.name() : it->second;
}

// Where a host platform's kernel is built: the architecture its registered
// agents run (uname -m), or why there is none.
absl::StatusOr<std::string> HostArchitecture(const std::string& platform,
                                             const std::vector<pb::Agent>& agents) {
  std::set<std::string> archs;
  for (const pb::Agent& a : agents) {
    if (PlatformOf(a) == platform && !a.host().architecture().empty()) {
      archs.insert(a.host().architecture());
    }
  }
  if (archs.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no agent of platform ", platform, " is registered to say its architecture"));
  }
  if (archs.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("the agents of platform ", platform, " run ", absl::StrJoin(archs, " and "),
                     ": a platform's kernel is built for one architecture"));
  }
  return *archs.begin();
}

// The build key of `job`'s kernel and its architecture, or why it is not
// built: on a vm platform, the platform's architecture; on a host platform,
// only with a kernel config (the default there is the host's own kernel),
// for the architecture of the platform's agents.
absl::StatusOr<proto::BuildKey> BuildKeyFor(const pb::Job& job,
                                            const std::vector<pb::Agent>& agents) {
  std::string arch;
  if (const proto::VmPlatform* vm = proto::FindVmPlatform(job.platform()); vm != nullptr) {
    arch = std::string(vm->architecture);
  } else if (proto::JobConfigId(job).empty()) {
    return absl::FailedPreconditionError(
        "a host platform's kernel is built only with a kernel config: the spec's "
        "kernel_config, or the host's kernel_config in farm-scheduler --lab-hosts");
  } else {
    absl::StatusOr<std::string> host = HostArchitecture(job.platform(), agents);
    if (!host.ok()) return host.status();
    arch = *host;
  }
  return proto::BuildKey{job.catalog(), job.commit_id(), arch, proto::JobBuildConfigId(job)};
}

Need Decide(const pb::Job& job, const std::vector<pb::Agent>& agents) {
  Need need;
  if (AnyAgentOffers(job, agents)) {
    need.offered = true;
    return need;
  }
  const std::string cell =
      absl::StrCat(job.commit_id(), " on ", job.platform(), " in mode ",
                   proto::ModeName(job.mode()), " under ", proto::ExecutorName(job.executor()));
  absl::StatusOr<proto::BuildKey> key = BuildKeyFor(job, agents);
  if (!key.ok()) {
    need.unrunnable =
        absl::StrCat(cell, ": no agent offers this kernel, and ", key.status().message());
    return need;
  }
  if (AnyAgentBuilds(MakeBuildJob(*key, job.commit_index(), 1), agents)) {
    need.build = *std::move(key);
    return need;
  }
  need.unrunnable = absl::StrCat(cell, ": no agent offers this kernel, and none builds catalog ",
                                 job.catalog(), " for ", key->arch);
  return need;
}

bool IsReal(pb::Executor e) { return proto::IsRealExecutor(e); }

}  // namespace

KernelPlan PlanKernels(const std::vector<pb::Job>& jobs, const std::vector<pb::Agent>& agents) {
  using Cell = std::tuple<std::string, std::string, int, int, bool>;
  std::map<Cell, Need> needs;
  std::vector<const Need*> per_job(jobs.size(), nullptr);
  std::set<proto::BuildKey> keys;
  KernelPlan plan;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const pb::Job& j = jobs[i];
    if (!IsReal(j.executor())) continue;
    const Cell cell{j.commit_id(), j.platform(), j.mode(), j.executor(),
                    j.workload().params().count(proto::kKernelParamsKey) > 0};
    auto it = needs.find(cell);
    if (it == needs.end()) {
      it = needs.emplace(cell, Decide(j, agents)).first;
      if (it->second.build.has_value()) keys.insert(*it->second.build);
      if (!it->second.unrunnable.empty()) plan.unrunnable.push_back(it->second.unrunnable);
    }
    per_job[i] = &it->second;
  }
  plan.builds.assign(keys.begin(), keys.end());
  plan.waits.assign(jobs.size(), -1);
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (per_job[i] == nullptr || !per_job[i]->build.has_value()) continue;
    plan.waits[i] = static_cast<int>(
        std::lower_bound(plan.builds.begin(), plan.builds.end(), *per_job[i]->build) -
        plan.builds.begin());
  }
  return plan;
}

pb::Job MakeBuildJob(const proto::BuildKey& key, int commit_index, int max_attempts,
                     const std::string& patch, const pb::KernelConfig& config) {
  pb::Job j;
  auto& params = *j.mutable_workload()->mutable_params();
  if (proto::IsTryCommit(key.commit) && !patch.empty()) params[proto::kPatchParam] = patch;
  if (!key.config.empty()) params[proto::kKernelConfigParam] = key.config;
  if (!proto::IsDefaultKernelConfig(config)) {
    params[proto::kKernelConfigTextParam] = proto::EncodeKernelConfig(config);
  }
  j.set_catalog(key.catalog);
  j.set_commit_id(key.commit);
  j.set_commit_index(commit_index);
  j.set_platform(key.arch);
  j.mutable_workload()->set_name(std::string(proto::kKbuildWorkload));
  j.set_executor(pb::EXECUTOR_KBUILD);
  j.set_kind(pb::JOB_KIND_BUILD);
  j.set_priority(JobPriority(pb::JOB_KIND_BUILD, 0));
  j.set_max_attempts(max_attempts);
  return j;
}

absl::StatusOr<std::optional<LabConfig>> LabKernelConfig(
    const std::vector<std::string>& platforms, const std::vector<pb::Agent>& agents,
    const std::map<std::string, pb::KernelConfig>& lab_configs) {
  std::map<std::string, std::string> platform_of;  // agent name -> its platform
  for (const pb::Agent& a : agents) platform_of[a.name()] = PlatformOf(a);
  std::optional<LabConfig> out;
  std::string vm_platform;
  for (const std::string& platform : platforms) {
    if (proto::FindVmPlatform(platform) != nullptr) {
      vm_platform = platform;
      continue;
    }
    for (const auto& [agent, config] : lab_configs) {
      // An agent not registered yet answers to its name.
      auto p = platform_of.find(agent);
      if ((p == platform_of.end() ? agent : p->second) != platform) continue;
      LabConfig found{config, proto::KernelConfigId(config), agent, platform};
      if (out.has_value() && out->id != found.id) {
        return absl::InvalidArgumentError(absl::StrCat(
            "platform: the lab hosts file (farm-scheduler --lab-hosts) names two kernel configs "
            "for this matrix's hosts: ",
            out->id, " (agent ", out->agent, ", platform ", out->platform, ") and ", found.id,
            " (agent ", agent, ", platform ", platform,
            "); submit each platform in a matrix of its own, or name one in the spec's "
            "kernel_config"));
      }
      if (!out.has_value()) out = std::move(found);
    }
  }
  if (out.has_value() && !vm_platform.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("platform: ", out->platform, "'s kernel config (agent ", out->agent,
                     " in farm-scheduler --lab-hosts) would be built for vm platform ", vm_platform,
                     " too; submit the vm platforms in a matrix of their own"));
  }
  return out;
}

std::vector<std::string> UnrunnableWarnings(const KernelPlan& plan, absl::Duration wait,
                                            int max_lines) {
  std::vector<std::string> out;
  const std::string when = absl::StrCat("; its jobs fail after ", absl::FormatDuration(wait),
                                        " unless an agent that can run them registers");
  for (const std::string& line : plan.unrunnable) {
    if (static_cast<int>(out.size()) == max_lines) {
      out.push_back(absl::StrCat("... and ", plan.unrunnable.size() - max_lines,
                                 " more cells no agent can run"));
      break;
    }
    out.push_back(line + when);
  }
  return out;
}

}  // namespace farm::scheduler
