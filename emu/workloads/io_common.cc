#include "emu/workloads/io_common.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace farm::emu {

int DeviceIndex(const Platform& platform, absl::string_view kind) {
  for (size_t i = 0; i < platform.devices.size(); ++i) {
    if (absl::StartsWith(platform.devices[i].name, kind)) return static_cast<int>(i);
  }
  return 0;
}

absl::Status CheckCpuCount(absl::string_view workload, absl::string_view param, int64_t n,
                           const Platform& platform) {
  if (n <= platform.topology.num_cpus) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(workload, ": --param ", param, "=", n, ": ",
                                                 platform.name, " has ", platform.topology.num_cpus,
                                                 " CPUs"));
}

absl::StatusOr<double> LinkGbps(absl::string_view workload, const WorkloadParams& p,
                                const Platform& platform, int dev) {
  const std::string& text = p.Str("link_gbps");
  if (text.empty()) {
    double rate = platform.devices.empty() ? 0 : platform.devices[dev].link_gbps;
    // The NIC's PCIe link caps it too (DeviceDmaBytesPerSec; on every
    // platform the link is the wider of the two).
    if (rate > 0) rate = DeviceDmaBytesPerSec(platform.devices[dev], true) * 8.0 / 1e9;
    if (rate <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(workload, ": platform ", platform.name,
                                                     " has no NIC link rate; set --param "
                                                     "link_gbps"));
    }
    return rate;
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !(v >= 0.1 && v <= 10000)) {
    return absl::InvalidArgumentError(
        absl::StrCat(workload, ": --param link_gbps=", text, ": not a number in [0.1, 10000]"));
  }
  return v;
}

std::vector<int> CpusDeviceNodeFirst(const Platform& platform, int device_node) {
  std::vector<int> order = platform.topology.CpusOfNode(device_node);
  for (int c = 0; c < platform.topology.num_cpus; ++c) {
    if (platform.topology.cpu_node[c] != device_node) order.push_back(c);
  }
  return order;
}

Time BusyTime(const Cpu& cpu) {
  Time t = 0;
  for (Time v : cpu.profile()) t += v;
  return t;
}

// ---- DmaMappings

Task<uint64_t> DmaMappings::MapSg(Cpu& cpu, int dev, int nents, DmaDir dir) {
  uint64_t id = NewMapping(dev, dir);
  Mapping& m = maps_[id];
  m.segs.resize(nents);
  // Every other page: segments never merge, as with page-cache pages.
  for (int i = 0; i < nents; ++i) m.segs[i] = SgSegment{NextPhys(2), 4096};
  uint64_t dma = co_await dma_->MapSg(cpu, m.dev, m.segs.data(), nents, m.dir);
  maps_[id].dma = dma;  // maps_ may have grown while suspended
  co_return id;
}

Task<void> DmaMappings::UnmapSg(Cpu& cpu, uint64_t handle) {
  Mapping m = std::move(maps_[handle]);
  if (m.dma != kDmaMappingError) {
    co_await dma_->UnmapSg(cpu, m.dev, m.dma, m.segs.data(), static_cast<int>(m.segs.size()),
                           m.dir);
  }
  maps_[handle].segs = std::move(m.segs);  // keep the capacity for reuse
  free_.push_back(handle);
}

Task<uint64_t> DmaMappings::MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir) {
  uint64_t id = NewMapping(dev, dir);
  maps_[id].size = bytes;
  uint64_t pages = (bytes + 4095) / 4096;
  uint64_t dma = co_await dma_->MapPage(cpu, dev, NextPhys(pages + 1), bytes, dir);
  maps_[id].dma = dma;
  co_return id;
}

Task<void> DmaMappings::UnmapPage(Cpu& cpu, uint64_t handle) {
  Mapping m = maps_[handle];
  if (m.dma != kDmaMappingError) co_await dma_->UnmapPage(cpu, m.dev, m.dma, m.size, m.dir);
  free_.push_back(handle);
}

uint64_t DmaMappings::NewMapping(int dev, DmaDir dir) {
  uint64_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = maps_.size();
    maps_.emplace_back();
  }
  Mapping& m = maps_[id];
  m.dev = dev;
  m.dir = dir;
  m.dma = 0;
  m.size = 0;
  return id;
}

uint64_t DmaMappings::NextPhys(uint64_t pages) {
  // Physical pages cycle through 64 GiB so page-table memory stays bounded.
  uint64_t p = next_pfn_;
  next_pfn_ = (next_pfn_ + pages) % (1ULL << 24);
  return (p + 0x100000) << 12;
}

// ---- Windows and reports

Window ReadWindow(const WorkloadParams& p) {
  Window w;
  w.start = static_cast<Time>(p.Double("ramp_ms") * 1e6);
  w.end = w.start + static_cast<Time>(p.Double("runtime_ms") * 1e6);
  return w;
}

void DmaLatencies::Report(WorkloadReport& r) const {
  auto summary = [](const RunningStats& s, const LogHistogram& h) {
    LatencySummary l;
    l.count = s.count();
    l.mean = s.mean();
    l.stddev = s.stddev();
    l.p50 = h.Quantile(0.5);
    l.p99 = h.Quantile(0.99);
    l.max = s.max();
    return l;
  };
  r.operations = map.count();
  r.map_latency = summary(map, map_hist);
  r.unmap_latency = summary(unmap, unmap_hist);
}

FioLatencyOut FioLatency(const RunningStats& s, const LogHistogram& h) {
  FioLatencyOut l;
  l.n = s.count();
  l.min_ns = s.min();
  l.max_ns = s.max();
  l.mean_ns = s.mean();
  l.stddev_ns = s.stddev();
  for (double p : FioDefaultPercentiles()) l.percentiles.emplace_back(p, h.Quantile(p / 100.0));
  return l;
}

void FillFioDirection(FioJobOut& fj, bool write, uint64_t ios, uint64_t bs, Time runtime,
                      const RunningStats& clat, const LogHistogram& hist) {
  FioDirectionOut d;
  d.total_ios = ios;
  d.io_bytes = ios * bs;
  d.runtime_ms = static_cast<uint64_t>(runtime / 1000000);
  d.clat = FioLatency(clat, hist);
  (write ? fj.write : fj.read) = d;
  fj.job_runtime_ms = d.runtime_ms;
}

}  // namespace farm::emu
