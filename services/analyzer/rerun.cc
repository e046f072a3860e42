#include "services/analyzer/rerun.h"

#include <cmath>
#include <map>
#include <utility>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

// A JSON object of settings (jobs.params, a spec's `set:`) as the string map
// the proto carries: strings as they are, other values as their JSON text,
// as the scheduler reads a YAML scalar. Anything but an object adds nothing.
void AddStringMap(const std::string& object_json,
                  google::protobuf::Map<std::string, std::string>* out) {
  const json j = json::parse(object_json, nullptr, false);
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) (*out)[k] = v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

std::string ExecutorName(pb::Executor executor) {
  return proto::ExecutorName(executor == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR
                                                                  : executor);
}

std::vector<double> SeriesValuesAt(const std::vector<SampleRow>& samples, const SeriesSpec& spec,
                                   const std::string& commit_id) {
  std::vector<double> out;
  std::map<std::pair<int64_t, int>, std::pair<std::vector<double>, std::vector<double>>> pairs;
  for (const SampleRow& s : samples) {
    if (s.commit_id != commit_id || s.platform != spec.platform || s.workload != spec.workload ||
        s.metric != spec.metric || s.phase != spec.phase)
      continue;
    if (!spec.overhead) {
      if (s.mode == spec.mode) out.push_back(s.value);
      continue;
    }
    auto& p = pairs[{s.matrix_id, s.repeat}];
    if (s.mode == spec.mode) p.first.push_back(s.value);
    if (s.mode == proto::ModeName(pb::IOMMU_MODE_OFF)) p.second.push_back(s.value);
  }
  for (const auto& [key, p] : pairs) {
    if (p.first.empty() || p.second.empty()) continue;
    const double off = Mean(p.second);
    if (off != 0) out.push_back(Mean(p.first) / off);
  }
  return out;
}

std::optional<RealConfirm> RealConfirmFromSpecYaml(const std::string& spec_yaml) {
  try {
    const YAML::Node root = YAML::Load(spec_yaml);
    if (!root.IsMap() || !root["analysis"] || !root["analysis"].IsMap()) return std::nullopt;
    const YAML::Node c = root["analysis"]["confirm"];
    if (!c || !c.IsMap()) return std::nullopt;
    RealConfirm out;
    const pb::Executor executor = c["executor"]
                                      ? proto::ExecutorFromName(c["executor"].as<std::string>())
                                      : pb::EXECUTOR_UNSPECIFIED;
    if (!proto::IsRealExecutor(executor)) return std::nullopt;
    out.executor = executor;
    json params = json::object();
    const YAML::Node w = c["workload"];
    if (w && w.IsScalar()) out.workload = w.as<std::string>();
    if (w && w.IsMap()) {
      if (w["name"]) out.workload = w["name"].as<std::string>();
      if (w["params"] && w["params"].IsMap()) {
        for (const auto& kv : w["params"]) {
          // Lists are comma-joined, as the scheduler stores workload params.
          std::string v;
          if (kv.second.IsSequence()) {
            for (const auto& item : kv.second) v += (v.empty() ? "" : ",") + item.as<std::string>();
          } else {
            v = kv.second.as<std::string>();
          }
          params[kv.first.as<std::string>()] = v;
        }
      }
    }
    if (out.workload.empty()) return std::nullopt;
    out.params_json = params.dump();
    if (c["catalog"]) out.catalog = c["catalog"].as<std::string>();
    if (c["platform"]) out.platform = c["platform"].as<std::string>();
    if (c["repeats"]) out.repeats = c["repeats"].as<int>();
    out.max_repeats = c["max_repeats"] ? c["max_repeats"].as<int>() : out.repeats;
    std::string metric = c["metric"] ? c["metric"].as<std::string>() : "";
    if (metric.empty()) {
      metric = proto::DefaultConfirmMetric(
          executor, params.contains("rw") ? params["rw"].get<std::string>() : "");
    }
    if (metric.empty() && executor != pb::EXECUTOR_DMA_MAP_BENCH) return std::nullopt;
    const size_t slash = metric.find('/');
    out.metric = metric.substr(0, slash);
    out.phase = slash == std::string::npos ? "" : metric.substr(slash + 1);
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string DmaMapBenchConfirmMetric(const std::string& finding_metric,
                                     const std::map<std::string, double>& latency_change,
                                     double min_change) {
  static constexpr char kMap[] = "map_latency_mean";
  static constexpr char kUnmap[] = "unmap_latency_mean";
  const std::string name = finding_metric.substr(0, finding_metric.find('/'));
  if (name.find("unmap") != std::string::npos) return kUnmap;
  if (name.find("map") != std::string::npos) return kMap;
  auto rise = [&](const char* m) {
    auto it = latency_change.find(m);
    return it == latency_change.end() ? 0.0 : it->second;
  };
  const double map = rise(kMap), unmap = rise(kUnmap);
  if (map < min_change && unmap < min_change) return "";
  return unmap >= map ? kUnmap : kMap;
}

double RealExpectedChange(const std::string& real_metric, bool regression, double emulated_change) {
  const Polarity polarity = MetricPolarity(real_metric);
  if (polarity == Polarity::kUnknown) return emulated_change;
  const bool up_is_bad = polarity == Polarity::kLowerIsBetter;
  const double size = std::fabs(emulated_change);
  return regression == up_is_bad ? size : -size;
}

std::string NotBuildable(const std::vector<std::vector<pb::Capability>>& agent_capabilities,
                         const SeriesSpec& real) {
  const proto::VmPlatform* vm = proto::FindVmPlatform(real.platform);
  if (vm == nullptr) {
    return absl::StrCat(real.platform, " is not a vm platform (a host's kernel is not built)");
  }
  pb::Job build;
  build.set_catalog(real.catalog);
  build.set_platform(std::string(vm->architecture));
  build.set_executor(pb::EXECUTOR_KBUILD);
  for (const std::vector<pb::Capability>& caps : agent_capabilities) {
    if (proto::BuildOfferRuns(caps, build)) return "";
  }
  return absl::StrCat("no registered agent builds catalog ", real.catalog, " for ",
                      std::string(vm->architecture));
}

SeriesSpec RealConfirmSpec(const SeriesSpec& emulated, const RealConfirm& c) {
  SeriesSpec s;
  s.catalog = c.catalog.empty() ? emulated.catalog : c.catalog;
  s.platform = c.platform.empty() ? emulated.platform : c.platform;
  s.workload = c.workload;
  s.params_json = c.params_json;
  s.model_set_json = "{}";
  s.executor = c.executor;
  s.metric = c.metric;
  s.phase = c.phase;
  s.mode = emulated.mode;
  s.overhead = emulated.overhead;
  return s;
}

std::string MissingKernels(const std::vector<pb::KernelOffer>& offers, const SeriesSpec& real,
                           const std::vector<std::string>& commits) {
  std::vector<std::string> modes = {real.mode};
  if (real.overhead) modes.push_back(proto::ModeName(pb::IOMMU_MODE_OFF));
  std::vector<std::string> missing;
  for (const std::string& commit : commits) {
    for (const std::string& mode : modes) {
      pb::Job job;
      job.set_commit_id(commit);
      job.set_mode(proto::ModeFromName(mode));
      job.set_executor(real.executor);
      AddStringMap(real.params_json, job.mutable_workload()->mutable_params());
      if (proto::FindOffer(offers, job) == nullptr) missing.push_back(commit + " in " + mode);
    }
  }
  if (missing.empty()) return "";
  return absl::StrCat("no live agent offers a ", ExecutorName(real.executor), " kernel for ",
                      absl::StrJoin(missing, ", "));
}
pb::MatrixSpec RerunSpec(const SeriesSpec& spec, const std::string& name,
                         const std::vector<std::string>& commits, int repeats, pb::JobKind kind,
                         uint64_t seed, int priority) {
  pb::MatrixSpec m;
  m.set_name(name);
  m.set_catalog(spec.catalog);
  m.add_platform(spec.platform);
  for (const std::string& id : commits) m.mutable_commit_list()->add_ids(id);
  m.add_modes(proto::ModeFromName(spec.mode));
  if (spec.overhead) m.add_modes(pb::IOMMU_MODE_OFF);
  pb::Workload* w = m.add_workloads();
  w->set_name(spec.workload);
  AddStringMap(spec.params_json, w->mutable_params());
  // The config's id is a param of the series' jobs, which the spec's
  // kernel_config puts there again (a config that does not decode keeps
  // the param, which the scheduler then refuses).
  absl::StatusOr<pb::KernelConfig> config = spec.kernel_config.empty()
                                                ? pb::KernelConfig()
                                                : proto::DecodeKernelConfig(spec.kernel_config);
  if (config.ok()) {
    w->mutable_params()->erase(proto::kKernelConfigParam);
    *m.mutable_kernel_config() = *std::move(config);
  }
  // So is the accelerator, through the spec's accel.
  if (auto accel = w->params().find(proto::kAccelParam); accel != w->params().end()) {
    m.set_accel(accel->second);
    w->mutable_params()->erase(std::string(proto::kAccelParam));
  }
  m.set_repeats(repeats);
  m.set_executor(spec.executor == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR : spec.executor);
  m.set_kind(kind);
  m.set_priority(priority);
  m.set_seed(seed);
  AddStringMap(spec.model_set_json, m.mutable_set());
  // Only real runs choose agents; a bisect of a real series on the emulator
  // runs anywhere.
  if (proto::IsRealExecutor(m.executor())) AddStringMap(spec.labels_json, m.mutable_labels());
  return m;
}

}  // namespace farm::analyzer
