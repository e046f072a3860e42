#include "lib/spec/table_checks.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"
#include "emu/workloads/workload.h"
#include "lib/toolspec/dma_map_bench_spec.h"
#include "lib/toolspec/fio_spec.h"
#include "lib/toolspec/iozone_spec.h"
#include "proto/kernel_offers.h"
#include "proto/kernel_params.h"
#include "proto/names.h"

namespace farm::spec {
namespace {

bool IsReal(pb::Executor executor) { return ::farm::proto::IsRealExecutor(executor); }

// A real job's vm platform picks the emulated IOMMU its kernel boots under:
// a misspelt one would never be leased.
// dma-map-bench binds the vm provider's spare PCI device: it runs in guests
// only.
void CheckVmPlatforms(const MatrixSpec& spec, FieldErrors& e) {
  for (size_t i = 0; i < spec.platforms.size(); ++i) {
    const std::string& name = spec.platforms[i];
    if (::farm::proto::FindVmPlatform(name)) continue;
    if (spec.executor == pb::EXECUTOR_DMA_MAP_BENCH) {
      e.AddIfNew(absl::StrCat("platform[", i, "]"),
                 absl::StrCat("dma-map-bench runs in vm guests only; ", Quoted(name),
                              " is not a vm platform"));
      continue;
    }
    if (!::farm::proto::LooksLikeVmPlatform(name)) continue;
    std::vector<std::string> known;
    for (const ::farm::proto::VmPlatform& v : ::farm::proto::VmPlatforms()) {
      known.emplace_back(v.name);
    }
    e.AddIfNew(absl::StrCat("platform[", i, "]"),
               absl::StrCat("unknown IOMMU model ", Quoted(name),
                            " (vm platforms: ", absl::StrJoin(known, ", "), ")"));
  }
}

// fio / iozone / dma-map-bench params as the agent will check them. The guest's command
// line (kernel_params) is the allow-list's, checked with the fields; the
// agent takes it out before the tool's own checks too. Without a target the
// agent chooses one: its allowed directory on the host (which needs a size;
// the agent checks that) or the guest's NVMe in a VM. Which one is known
// only at lease time, so the target's own rules are the agent's; here a
// device stands in for it.
void CheckRealParams(pb::Executor executor, const std::map<std::string, std::string>& given,
                     const std::string& path, FieldErrors& e) {
  toolspec::Params params(given.begin(), given.end());
  params.erase(::farm::proto::kKernelParamsKey);
  if (executor == pb::EXECUTOR_FIO && params.count("filename") == 0 &&
      params.count("directory") == 0) {
    params.emplace("filename", "/dev/nvme0n1");
  }
  absl::Status s = executor == pb::EXECUTOR_FIO ? toolspec::FioSpecFromParams(params).status()
                   : executor == pb::EXECUTOR_IOZONE
                       ? toolspec::IozoneSpecFromParams(params).status()
                       : toolspec::DmaMapBenchSpecFromParams(params).status();
  if (!s.ok()) e.AddIfNew(path, std::string(s.message()));
}

// An emulator workload's name and each of its params on its own.
void CheckEmulatorWorkload(const WorkloadSpec& w, const std::string& path, FieldErrors& e) {
  absl::StatusOr<const emu::WorkloadInfo*> info = emu::FindWorkload(w.name);
  if (!info.ok()) {
    e.AddIfNew(path + ".name", std::string(info.status().message()));
    return;
  }
  std::vector<std::string> known;
  for (const emu::WorkloadParam& t : (*info)->params) known.emplace_back(t.name);
  for (const auto& [key, value] : w.params) {
    const std::string field = absl::StrCat(path, ".params.", key);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      e.AddIfNew(field, absl::StrCat("unknown parameter of ", w.name,
                                     " (known: ", absl::StrJoin(known, ", "), ")"));
      continue;
    }
    absl::Status s = emu::ValidateWorkloadParams(w.name, {{key, value}});
    if (!s.ok()) e.AddIfNew(field, std::string(s.message()));
  }
}

}  // namespace

absl::Status CheckEmulatorWorkloadParams(const std::string& workload,
                                         const std::map<std::string, std::string>& params) {
  return emu::ValidateWorkloadParams(workload, params);
}

namespace {

void CheckModelSet(const MatrixSpec& spec, FieldErrors& e) {
  for (const auto& [key, value] : spec.model_set) {
    if (absl::Status st = CheckSetKey(key, value); !st.ok()) {
      e.AddIfNew("set." + key, std::string(st.message()));
    }
  }
}

}  // namespace

// "agent." keys are directives the agent takes out before any executor
// sees the set (agent/agent.h): only the ones it knows, in range, so a job
// cannot park an agent's slot for good; every other key is a model key.
absl::Status CheckSetKey(absl::string_view key, absl::string_view value) {
  if (!absl::StartsWith(key, "agent.")) return emu::CheckModelKey(key, value);
  if (key != kAgentHoldMsKey) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown agent directive (known: ", kAgentHoldMsKey, ")"));
  }
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms < 0 || ms > kMaxAgentHoldMs) {
    return absl::InvalidArgumentError(absl::StrCat("must be an integer between 0 and ",
                                                   kMaxAgentHoldMs, " (milliseconds), got ",
                                                   Quoted(std::string(value))));
  }
  return absl::OkStatus();
}

bool ParamTakesAList(pb::Executor executor, const std::string& workload, const std::string& key) {
  if (IsReal(executor)) return key == "tests";
  absl::StatusOr<const emu::WorkloadInfo*> info = emu::FindWorkload(workload);
  if (!info.ok()) return true;
  for (const emu::WorkloadParam& t : (*info)->params) {
    if (t.name == key) return t.type == emu::ParamType::kString;
  }
  return true;
}

void CheckAgainstTables(const MatrixSpec& spec, FieldErrors& e) {
  if (IsReal(spec.executor)) CheckVmPlatforms(spec, e);
  if (spec.confirm.enabled && IsReal(spec.confirm.executor) &&
      !e.Covers("analysis.confirm.executor")) {
    CheckRealParams(spec.confirm.executor, spec.confirm.workload.params,
                    "analysis.confirm.workload.params", e);
  }
  // Which table a workload meets is the executor's: none when it was refused.
  if (!e.Covers("executor")) {
    for (size_t i = 0; i < spec.workloads.size(); ++i) {
      const std::string p = spec.workloads[i].path.empty() ? absl::StrCat("workloads[", i, "]")
                                                           : spec.workloads[i].path;
      if (IsReal(spec.executor)) {
        CheckRealParams(spec.executor, spec.workloads[i].params, p + ".params", e);
      } else {
        CheckEmulatorWorkload(spec.workloads[i], p, e);
      }
    }
  }
  CheckModelSet(spec, e);
}

std::vector<std::string> PlatformWarnings(const MatrixSpec& spec) {
  std::vector<std::string> warnings;
  if (spec.executor != pb::EXECUTOR_EMULATOR) return warnings;
  for (const std::string& p : spec.platforms) {
    const auto& all = emu::AllPlatforms();
    if (std::none_of(all.begin(), all.end(),
                     [&](const emu::Platform& known) { return known.name == p; })) {
      warnings.push_back(absl::StrCat("platform ", Quoted(p),
                                      " is not one of the documented platforms; the emulator "
                                      "will fail its jobs if it does not know it"));
    }
  }
  return warnings;
}

}  // namespace farm::spec
