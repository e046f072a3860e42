// The part-2 workloads as farm::emu::Workload entries of the core's registry, so
// `farm-emu run --workload fio-nvme ...` goes through the core's run driver
// (model resolution, engine, DMA API, JSON/text output) like dma-map-bench.
#include <memory>

#include "absl/strings/str_cat.h"
#include "emu/workloads/io.h"
#include "emu/workloads/io_adapter.h"
#include "emu/workloads/io_core.h"
#include "emu/workloads/workload.h"

namespace farm::emu {
namespace {

class IoWorkloadAdapter final : public Workload {
 public:
  explicit IoWorkloadAdapter(std::string name) : name_(std::move(name)) {}

  absl::Status Configure(const std::map<std::string, std::string>& params,
                         const Platform& platform) override {
    platform_ = &platform;
    // The driver fills every parameter with its listed default; an empty
    // default means "the workload chooses", so it is dropped here.
    std::map<std::string, std::string> given;
    for (const auto& [k, v] : params) {
      if (!v.empty()) given[k] = v;
    }
    absl::StatusOr<std::unique_ptr<IoRun>> run =
        MakeIoRun(name_, given, IoPlatformFor(platform, LineCosts{}, name_));
    if (!run.ok()) return run.status();
    run_ = std::move(*run);
    return absl::OkStatus();
  }

  absl::Status Setup(WorkloadContext& ctx) override {
    path_ = std::make_unique<DmaApiPath>(ctx.dma, WorkloadDevices(*platform_, name_), ctx.sim);
    return run_->Setup(*ctx.engine, *path_);
  }

  void Report(RunResult& result) const override {
    IoRunReport r = run_->Finish();
    result.throughput = r.throughput;
    result.throughput_unit = r.unit;
    result.operations = r.map_lat.count();
    result.map_latency = Summary(r.map_lat, r.map_hist);
    result.unmap_latency = Summary(r.unmap_lat, r.unmap_hist);
    for (const auto& [k, v] : r.metrics) result.extra[k] = v;
    result.kernel_output = !r.fio_json.empty() ? r.fio_json : r.iozone;
  }

  absl::StatusOr<std::string> FormatKernel(const RunResult& result) const override {
    if (result.kernel_output.empty()) {
      return absl::UnimplementedError(absl::StrCat(name_, " has no tool output format"));
    }
    return result.kernel_output;
  }

 private:
  static LatencySummary Summary(const RunningStats& s, const LogHistogram& h) {
    LatencySummary l;
    l.count = s.count();
    l.mean = s.mean();
    l.stddev = s.stddev();
    l.p50 = h.Quantile(0.5);
    l.p99 = h.Quantile(0.99);
    l.max = s.max();
    return l;
  }

  std::string name_;
  const Platform* platform_ = nullptr;
  std::unique_ptr<IoRun> run_;
  std::unique_ptr<DmaApiPath> path_;
};

}  // namespace

std::vector<WorkloadInfo> IoWorkloadInfos() {
  std::vector<WorkloadInfo> out;
  for (const IoWorkloadSpec& spec : IoWorkloads()) {
    WorkloadInfo info;
    info.name = spec.name;
    info.description = spec.description;
    for (const auto& [param, text] : spec.params) {
      size_t bar = text.find(" | ");
      std::string def = bar == std::string::npos ? "" : text.substr(0, bar);
      while (!def.empty() && def.back() == ' ') def.pop_back();
      while (!def.empty() && def.front() == ' ') def.erase(def.begin());
      std::string desc = bar == std::string::npos ? text : text.substr(bar + 3);
      info.params.push_back(WorkloadParamSpec{param, def, desc});
    }
    std::string name = spec.name;
    info.make = [name]() -> std::unique_ptr<Workload> {
      return std::make_unique<IoWorkloadAdapter>(name);
    };
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace farm::emu
