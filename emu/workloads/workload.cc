#include "emu/workloads/workload.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "emu/workloads/io_adapter.h"

namespace farm::emu {

absl::StatusOr<std::string> Workload::FormatKernel(const RunResult& result) const {
  return absl::UnimplementedError(
      absl::StrCat("--format kernel is only defined for "
                   "dma-map-bench, not ",
                   result.workload));
}

const std::vector<WorkloadInfo>& AllWorkloads() {
  static const std::vector<WorkloadInfo>* w = new std::vector<WorkloadInfo>{
      {"dma-map-bench",
       "kernel/dma/map_benchmark.c: threads loop dma_map_single / ndelay(dma_trans_ns) / "
       "dma_unmap_single on one device and report map/unmap latency",
       DmaMapBenchParams(), MakeDmaMapBench},
      {"memcached",
       "memcached server under memslap: one instance per CPU, each request = NIC RX unmap + "
       "refill map, application work, TX map(s) and TX-completion unmap(s)",
       MemcachedParams(), MakeMemcached},
  };
  // Part 2 (issue 5): fio-nvme, iozone-nfsrdma, tcp-stream, nvmf-target.
  static const bool registered = [] {
    auto* all = const_cast<std::vector<WorkloadInfo>*>(w);
    for (WorkloadInfo& info : farm::emu::IoWorkloadInfos()) all->push_back(std::move(info));
    return true;
  }();
  (void)registered;
  return *w;
}

absl::StatusOr<const WorkloadInfo*> FindWorkload(const std::string& name) {
  std::vector<std::string> names;
  for (const WorkloadInfo& w : AllWorkloads()) {
    if (w.name == name) return &w;
    names.push_back(w.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown workload '", name, "'; valid workloads: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<std::map<std::string, std::string>> ResolveWorkloadParams(
    const WorkloadInfo& info, const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> out;
  for (const WorkloadParamSpec& p : info.params) out[p.name] = p.default_value;
  for (const auto& [k, v] : given) {
    if (!out.count(k)) {
      std::vector<std::string> names;
      for (const WorkloadParamSpec& p : info.params) names.push_back(p.name);
      return absl::InvalidArgumentError(absl::StrCat("workload ", info.name,
                                                     ": unknown parameter '", k,
                                                     "'; valid: ", absl::StrJoin(names, ", ")));
    }
    out[k] = v;
  }
  return out;
}

absl::StatusOr<int64_t> ParamReader::Int(const std::string& name, int64_t min, int64_t max) const {
  auto it = p_.find(name);
  int64_t v = 0;
  if (it == p_.end() || !absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name, ": '", it == p_.end() ? "" : it->second, "' is not an integer"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", name, ": ", v, " out of range [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<double> ParamReader::Double(const std::string& name, double min, double max) const {
  auto it = p_.find(name);
  double v = 0;
  if (it == p_.end() || !absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", name, ": '", it == p_.end() ? "" : it->second, "' is not a number"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", name, ": ", v, " out of range [", min, ", ", max, "]"));
  }
  return v;
}

std::string ParamReader::String(const std::string& name) const {
  auto it = p_.find(name);
  return it == p_.end() ? "" : it->second;
}

}  // namespace farm::emu
