#include "agent/executors/emu_samples.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

void Add(std::vector<pb::Sample>& out, const std::string& metric, double value,
         const std::string& unit, const std::string& phase = "") {
  pb::Sample& s = out.emplace_back();
  s.set_metric(metric);
  s.set_value(value);
  s.set_unit(unit);
  s.set_phase(phase);
}

void AddLatency(std::vector<pb::Sample>& out, const std::string& prefix,
                const farm::emu::LatencySummary& lat) {
  if (lat.count == 0) return;  // e.g. mode off has no unmap work to time
  Add(out, absl::StrCat(prefix, "_mean"), lat.mean, "ns");
  Add(out, absl::StrCat(prefix, "_p50"), lat.p50, "ns");
  Add(out, absl::StrCat(prefix, "_p99"), lat.p99, "ns");
  Add(out, absl::StrCat(prefix, "_max"), lat.max, "ns");
}

// The unit of a workload's extra figure, from the naming the workloads
// follow (emu/workloads): "<x>_kb_s", "<x>_ns", "<x>_100ns" (and the
// *_stddev of dma_map_benchmark's 100 ns averages), "iops*", "<x>_pages",
// "ios_*", "*_per_s"; "" for a plain count.
std::string UnitOfExtra(absl::string_view name) {
  if (absl::EndsWith(name, "_kb_s")) return "kB/s";
  if (absl::EndsWith(name, "_100ns") || name == "map_stddev" || name == "unmap_stddev") {
    return "100ns";
  }
  if (absl::EndsWith(name, "_ns")) return "ns";
  if (absl::StartsWith(name, "iops")) return "IOPS";
  if (absl::EndsWith(name, "_pages")) return "pages";
  if (absl::StartsWith(name, "ios_")) return "I/Os";
  if (absl::EndsWith(name, "_per_s")) return "/s";
  return "";
}

}  // namespace

std::vector<pb::Sample> SamplesFromEmuResult(const farm::emu::RunResult& r) {
  std::vector<pb::Sample> out;
  Add(out, "throughput", r.throughput, r.throughput_unit);
  if (!r.interval_throughput.empty()) {
    pb::Sample& t = out.back();
    for (double v : r.interval_throughput) t.add_intervals(v);
    t.set_interval_seconds(static_cast<double>(r.interval_ns) / 1e9);
  }
  Add(out, "throughput_per_cpu", r.throughput_per_cpu, absl::StrCat(r.throughput_unit, "/cpu"));
  Add(out, "operations", static_cast<double>(r.operations), "");
  Add(out, "errors", static_cast<double>(r.errors), "");
  AddLatency(out, "map_latency", r.map_latency);
  AddLatency(out, "unmap_latency", r.unmap_latency);
  Add(out, "cpu_busy", r.cpu_busy_percent, "%");
  Add(out, "rcache_hit_rate", r.rcache_hit_rate, "ratio");
  Add(out, "lock_wait", static_cast<double>(r.lock_wait_ns), "ns");
  const uint64_t lookups = r.iotlb_hits + r.iotlb_misses;
  if (lookups > 0) {
    Add(out, "iotlb_miss_rate", static_cast<double>(r.iotlb_misses) / static_cast<double>(lookups),
        "ratio");
  }
  Add(out, "virtual_time", static_cast<double>(r.virtual_ns), "ns");
  Add(out, "events", static_cast<double>(r.events), "");
  for (const auto& [name, value] : r.extra) {
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos && dot > 0 && dot + 1 < name.size()) {
      const std::string metric = name.substr(0, dot);
      Add(out, metric, value, UnitOfExtra(metric), name.substr(dot + 1));
    } else {
      Add(out, name, value, UnitOfExtra(name));
    }
  }
  return out;
}

}  // namespace farm::agent
