#include "emu/workloads/io_core.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace farm::emu {
namespace {

// Seed 002: John Garry's Kunpeng 920 NVMe queue affinities (23 I/O queues;
// the admin vector, listed first there, carries no I/O).
constexpr char kKunpeng920NvmeIrqs[] =
    "32-38@35;39-45@39;46-51@46;52-57@52;58-63@60;64-69@68;70-75@70;76-80@76;81-85@84;"
    "86-90@86;91-95@92;96-101@100;102-107@102;108-112@108;113-117@116;118-122@118;"
    "123-127@124;0-5@4;6-11@6;12-16@12;17-21@20;22-26@22;27-31@28";

int DeviceIndex(const Platform& platform, const std::string& kind) {
  for (size_t i = 0; i < platform.devices.size(); ++i) {
    if (platform.devices[i].name.rfind(kind, 0) == 0) return static_cast<int>(i);
  }
  return 0;  // a platform without that kind: its first device stands in
}

}  // namespace

DmaApiPath::DmaApiPath(DmaApi* api, std::vector<int> devs, Sim* sim)
    : api_(api), devs_(std::move(devs)), sim_(sim) {}

void DmaApiPath::StartMeasurement(Cpu& cpu) {
  if (sim_ == nullptr || sim_->measuring) return;
  for (const auto& c : cpu.engine().cpus()) {
    if (c->daemon()) c->ResetAccounting();
  }
  sim_->StartMeasurement();
}

Task<uint64_t> DmaApiPath::MapSg(Cpu& cpu, int dev, int nents, DmaDir dir) {
  uint64_t id = NewMapping(dev, dir);
  Mapping& m = maps_[id];
  m.segs.resize(nents);
  // Every other page: segments never merge, as with page-cache pages.
  for (int i = 0; i < nents; ++i) m.segs[i] = SgSegment{NextPhys(2), 4096};
  uint64_t dma = co_await api_->MapSg(cpu, m.dev, m.segs.data(), nents, m.dir);
  maps_[id].dma = dma;  // maps_ may have grown while suspended
  co_return id;
}

Task<void> DmaApiPath::UnmapSg(Cpu& cpu, uint64_t handle) {
  Mapping m = std::move(maps_[handle]);
  if (m.dma != kDmaMappingError) {
    co_await api_->UnmapSg(cpu, m.dev, m.dma, m.segs.data(), static_cast<int>(m.segs.size()),
                           m.dir);
  }
  maps_[handle].segs = std::move(m.segs);  // keep the capacity for reuse
  free_.push_back(handle);
}

Task<uint64_t> DmaApiPath::MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir) {
  uint64_t id = NewMapping(dev, dir);
  maps_[id].size = bytes;
  uint64_t pages = (bytes + 4095) / 4096;
  int d = maps_[id].dev;
  DmaDir cd = maps_[id].dir;
  uint64_t dma = co_await api_->MapPage(cpu, d, NextPhys(pages + 1), bytes, cd);
  maps_[id].dma = dma;
  co_return id;
}

Task<void> DmaApiPath::UnmapPage(Cpu& cpu, uint64_t handle) {
  Mapping m = maps_[handle];
  if (m.dma != kDmaMappingError) co_await api_->UnmapPage(cpu, m.dev, m.dma, m.size, m.dir);
  free_.push_back(handle);
}

uint64_t DmaApiPath::NewMapping(int dev, DmaDir dir) {
  uint64_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = maps_.size();
    maps_.emplace_back();
  }
  Mapping& m = maps_[id];
  m.dev = devs_.empty() ? 0 : devs_[static_cast<size_t>(dev) < devs_.size() ? dev : 0];
  m.dir = dir;
  m.dma = 0;
  m.size = 0;
  return id;
}

uint64_t DmaApiPath::NextPhys(uint64_t pages) {
  // Physical pages cycle through 64 GiB so page-table memory stays bounded.
  uint64_t p = next_pfn_;
  next_pfn_ = (next_pfn_ + pages) % (1ULL << 24);
  return (p + 0x100000) << 12;
}

std::vector<int> WorkloadDevices(const Platform& platform, const std::string& workload) {
  std::vector<int> devs;
  for (const IoWorkloadSpec& s : IoWorkloads()) {
    if (s.name != workload) continue;
    for (const std::string& kind : s.devices) devs.push_back(DeviceIndex(platform, kind));
  }
  return devs;
}

namespace {

// Owns a run's Sim and DmaApi (RunIoOnCore has no core driver around it).
class OwningDmaPath final : public DmaPath {
 public:
  OwningDmaPath(Engine& engine, const Model& model, Mode mode, const Platform& platform,
                std::vector<int> devs, CoreRunExtras* extras)
      : sim_{&engine, &model, {}, {}},
        api_(&sim_, mode, platform.devices, platform.topology.num_cpus),
        path_(&api_, std::move(devs), &sim_),
        extras_(extras) {
    api_.StartDaemons(engine);
  }
  ~OwningDmaPath() override {
    if (extras_ == nullptr) return;
    // Counters is a struct of uint64_t fields only: add them field by field.
    static_assert(sizeof(Counters) % sizeof(uint64_t) == 0);
    auto* dst = reinterpret_cast<uint64_t*>(&extras_->counters);
    const auto* src = reinterpret_cast<const uint64_t*>(&sim_.counters);
    for (size_t i = 0; i < sizeof(Counters) / sizeof(uint64_t); ++i) dst[i] += src[i];
  }
  Task<uint64_t> MapSg(Cpu& cpu, int dev, int nents, DmaDir dir) override {
    return path_.MapSg(cpu, dev, nents, dir);
  }
  Task<void> UnmapSg(Cpu& cpu, uint64_t h) override { return path_.UnmapSg(cpu, h); }
  Task<uint64_t> MapPage(Cpu& cpu, int dev, uint64_t bytes, DmaDir dir) override {
    return path_.MapPage(cpu, dev, bytes, dir);
  }
  Task<void> UnmapPage(Cpu& cpu, uint64_t h) override { return path_.UnmapPage(cpu, h); }
  void StartMeasurement(Cpu& cpu) override { path_.StartMeasurement(cpu); }

 private:
  Sim sim_;
  DmaApi api_;
  DmaApiPath path_;
  CoreRunExtras* extras_;
};

}  // namespace

IoPlatform IoPlatformFor(const Platform& platform, const LineCosts& line,
                         const std::string& workload) {
  IoPlatform p;
  p.name = platform.name;
  p.topology = platform.topology;
  p.line_costs = line;
  std::string first = "nic";
  for (const IoWorkloadSpec& s : IoWorkloads()) {
    if (s.name == workload && !s.devices.empty()) first = s.devices.front();
  }
  p.device_node =
      platform.devices.empty() ? 0 : platform.devices[DeviceIndex(platform, first)].node;
  if (platform.name == "kunpeng920-smmuv3") p.irq_affinity = kKunpeng920NvmeIrqs;
  return p;
}

absl::StatusOr<IoRunReport> RunIoOnCore(const std::string& workload,
                                        const std::map<std::string, std::string>& params,
                                        const Platform& platform, const Model& model, Mode mode,
                                        uint64_t seed, CoreRunExtras* extras) {
  std::vector<int> devs = WorkloadDevices(platform, workload);
  if (devs.empty()) return absl::NotFoundError(absl::StrCat("unknown workload '", workload, "'"));
  DmaPathFactory factory = [&](Engine& engine) -> std::unique_ptr<DmaPath> {
    return std::make_unique<OwningDmaPath>(engine, model, mode, platform, devs, extras);
  };
  return RunIoWorkload(workload, params, IoPlatformFor(platform, model.line, workload), factory,
                       seed);
}

}  // namespace farm::emu
