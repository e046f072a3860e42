// nvmf-target: NVMe over Fabrics target (nvmet-rdma).
//
// Each target CPU serves one queue pair whose host keeps iodepth commands
// outstanding. Per command nvmet maps the data buffer twice, for the SSD
// (nvme_map_data) and for the RDMA NIC (rdma_rw_ctx_init -> ib_dma_map_sg),
// and unmaps each when that device is done. SSDs and the fabric link are
// queues in virtual time. Throughput is the payload's time on the fabric link
// inside the measured window (Window in io_common.h).
#include <algorithm>
#include <memory>
#include <queue>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "emu/workloads/io_common.h"
#include "emu/workloads/tool_formats.h"

namespace farm::emu {
namespace {

struct NvmfConfig {
  uint64_t bs;
  int pages;
  bool read;  // host reads: SSD -> target memory -> RDMA Write to host
  int iodepth;
  Window win;
  Time ssd_latency, ssd_per_io, link_per_io, cpu_half;
  int nic, ssd;  // platform device indexes of the RDMA NIC and the SSDs
};

struct NvmfIo {
  Time t;
  int stage;  // 0: new command, 1: first device done, 2: second device done
  uint64_t h_ssd = 0, h_nic = 0;
  Time start = 0;
  int ssd = 0;
  bool operator>(const NvmfIo& o) const { return t > o.t; }
};

struct NvmfWorld {
  NvmfConfig c;
  std::vector<DeviceQueue> ssds;
  DeviceQueue link;
  DmaMappings* dma = nullptr;
  DmaLatencies* dma_lat = nullptr;
  std::vector<uint64_t> ios;  // completed inside the window
  // The work: payload moved over the fabric inside the window (link_per_io
  // per I/O), RDMA Write to the host for reads, RDMA Read for writes.
  std::vector<Time> link_ns;
  std::vector<RunningStats> lat;
  std::vector<LogHistogram> hist;
  int next_ssd = 0;
};

Task<void> NvmfQueuePair(NvmfWorld& w, Cpu& cpu, int qp) {
  const NvmfConfig& c = w.c;
  std::priority_queue<NvmfIo, std::vector<NvmfIo>, std::greater<NvmfIo>> ev;
  for (int i = 0; i < c.iodepth; ++i) ev.push(NvmfIo{0, 0});
  bool measuring = false;
  while (!ev.empty()) {
    NvmfIo io = ev.top();
    if (io.t > cpu.now()) cpu.Idle(io.t - cpu.now());
    ev.pop();
    if (cpu.now() >= c.win.end) break;
    if (!measuring && cpu.now() >= c.win.start) {
      co_await cpu.Sync();
      EnterWindow(c.win, cpu, w.dma->dma(), measuring);
    }
    auto map = [&](int dev, DmaDir dir) -> Task<uint64_t> {
      Time t0 = cpu.now();
      uint64_t h = co_await w.dma->MapSg(cpu, dev, c.pages, dir);
      if (c.win.Contains(t0)) w.dma_lat->RecordMap(cpu.now() - t0);
      co_return h;
    };
    auto unmap = [&](uint64_t h) -> Task<void> {
      Time t0 = cpu.now();
      co_await w.dma->UnmapSg(cpu, h);
      if (c.win.Contains(t0)) w.dma_lat->RecordUnmap(cpu.now() - t0);
    };
    if (io.stage == 0) {
      // Command capsule received; nvmet builds the request.
      io.start = cpu.now();
      cpu.Charge(Sym::kApp, c.cpu_half);
      io.ssd = w.next_ssd;
      w.next_ssd = (w.next_ssd + 1) % static_cast<int>(w.ssds.size());
      if (c.read) {
        io.h_ssd = co_await map(c.ssd, DmaDir::kFromDevice);  // nvme_map_data
        co_await cpu.Sync();
        io.t = w.ssds[io.ssd].Start(cpu.now(), c.ssd_per_io) + c.ssd_latency;
      } else {
        io.h_nic = co_await map(c.nic, DmaDir::kFromDevice);  // RDMA Read from the host
        co_await cpu.Sync();
        io.t = w.link.Submit(cpu.now(), c.link_per_io);
        w.link_ns[qp] += c.win.Overlap(io.t - c.link_per_io, io.t);
      }
      io.stage = 1;
      ev.push(io);
    } else if (io.stage == 1) {
      if (c.read) {
        co_await unmap(io.h_ssd);
        io.h_nic = co_await map(c.nic, DmaDir::kToDevice);  // rdma_rw_ctx_init
        co_await cpu.Sync();
        io.t = w.link.Submit(cpu.now(), c.link_per_io);
        w.link_ns[qp] += c.win.Overlap(io.t - c.link_per_io, io.t);
      } else {
        co_await unmap(io.h_nic);
        io.h_ssd = co_await map(c.ssd, DmaDir::kToDevice);
        co_await cpu.Sync();
        io.t = w.ssds[io.ssd].Start(cpu.now(), c.ssd_per_io) + c.ssd_latency;
      }
      io.stage = 2;
      ev.push(io);
    } else {
      co_await unmap(c.read ? io.h_nic : io.h_ssd);
      cpu.Charge(Sym::kApp, c.cpu_half);  // response capsule
      if (c.win.Contains(cpu.now())) {
        ++w.ios[qp];
        Time lat = cpu.now() - io.start;
        w.lat[qp].Add(static_cast<double>(lat));
        w.hist[qp].Add(static_cast<uint64_t>(lat));
      }
      ev.push(NvmfIo{cpu.now(), 0});  // the host sends the next command
    }
  }
}

// The dev_gbps parameter: given, or the platform NVMe's rate for the
// direction (host reads are the SSD's reads), or a PCIe 3.0 x4 drive's.
absl::StatusOr<double> SsdGbps(const WorkloadParams& p, const Platform& platform, bool read) {
  const std::string& text = p.Str("dev_gbps");
  if (text.empty()) {
    for (const DeviceSpec& d : platform.devices) {
      double rate = absl::StartsWith(d.name, "nvme") ? DeviceDmaBytesPerSec(d, !read) : 0;
      if (rate > 0) return rate * 8.0 / 1e9;
    }
    return 28.0;
  }
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !(v >= 0.01 && v <= 10000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nvmf-target: --param dev_gbps=", text, ": not a number in [0.01, 10000]"));
  }
  return v;
}

constexpr absl::string_view kNvmfRw[] = {"read", "write"};

constexpr WorkloadParam kNvmfTargetParams[] = {
    {.name = "ssds",
     .type = ParamType::kInt,
     .default_value = "4",
     .min = 1,
     .max = 256,
     .meaning = "NVMe SSDs behind the target"},
    {.name = "jobs",
     .type = ParamType::kInt,
     .default_value = "4",
     .min = 1,
     .max = 4096,
     .meaning = "target CPUs (one queue pair each)"},
    {.name = "bs", .type = ParamType::kSize, .default_value = "128k", .meaning = "block size"},
    {.name = "rw",
     .type = ParamType::kChoice,
     .default_value = "read",
     .choices = kNvmfRw,
     .meaning = "read or write (host's view)"},
    {.name = "iodepth",
     .type = ParamType::kInt,
     .default_value = "32",
     .min = 1,
     .max = 65536,
     .meaning = "I/Os in flight per queue pair"},
    {.name = "link_gbps",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = kLinkGbpsMeaning},
    {.name = "dev_latency_us",
     .type = ParamType::kDouble,
     .default_value = "90",
     .min = 0,
     .max = 1e6,
     .meaning = "SSD service latency"},
    {.name = "dev_iops",
     .type = ParamType::kDouble,
     .default_value = "700000",
     .min = 1,
     .max = 1e9,
     .meaning = "SSD IOPS ceiling"},
    {.name = "dev_gbps",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = "SSD bandwidth, Gb/s; empty = the platform NVMe's for the direction (the smaller "
                "of its PCIe link and its datasheet rate, farm-emu list platforms), or 28 (3.5 "
                "GB/s, a PCIe 3.0 x4 drive's sequential read) on a platform without one"},
    {.name = "cpu_per_io_ns",
     .type = ParamType::kInt,
     .default_value = "3000",
     .min = 0,
     .max = 1000000000,
     .meaning = "target CPU per I/O (capsule, nvmet, nvme submit, completion)"},
    {.name = "runtime_ms",
     .type = ParamType::kDouble,
     .default_value = "10",
     .min = 0.01,
     .max = 100000,
     .meaning = "virtual run time measured (after ramp_ms)"},
    {.name = "ramp_ms",
     .type = ParamType::kDouble,
     .default_value = "5",
     .min = 0,
     .max = 100000,
     .meaning = "warm-up before the measured window (the host fio's ramp_time): run, not counted"},
};

class NvmfTarget final : public Workload {
 private:
  absl::Status DoConfigure(const WorkloadParams& p, const Platform& platform) override {
    platform_ = &platform;
    jobs_ = static_cast<int>(p.Int("jobs"));
    ssds_ = static_cast<int>(p.Int("ssds"));
    rw_ = p.Str("rw");
    if (absl::Status s = CheckCpuCount("nvmf-target", "jobs", jobs_, platform); !s.ok()) return s;
    const uint64_t bs = p.Size("bs");
    const double dev_iops = p.Double("dev_iops");
    NvmfConfig& c = w.c;
    c.bs = bs;
    c.pages = static_cast<int>((bs + 4095) / 4096);
    c.read = rw_ == "read";
    c.iodepth = static_cast<int>(p.Int("iodepth"));
    c.win = ReadWindow(p);
    c.ssd_latency = static_cast<Time>(p.Double("dev_latency_us") * 1000);
    absl::StatusOr<double> dev_gbps = SsdGbps(p, platform, c.read);
    if (!dev_gbps.ok()) return dev_gbps.status();
    double media_ns = static_cast<double>(bs) * 8.0 / *dev_gbps;
    c.ssd_per_io = std::max<Time>(1, static_cast<Time>(std::max(1e9 / dev_iops, media_ns)));
    c.nic = DeviceIndex(platform, "nic");
    absl::StatusOr<double> gbps = LinkGbps("nvmf-target", p, platform, c.nic);
    if (!gbps.ok()) return gbps.status();
    c.link_per_io = std::max<Time>(1, static_cast<Time>(static_cast<double>(bs) * 8.0 / *gbps));
    c.cpu_half = p.Int("cpu_per_io_ns") / 2;
    c.ssd = DeviceIndex(platform, "nvme");
    nic_node_ = platform.devices.empty() ? 0 : platform.devices[c.nic].node;
    w.ssds.resize(ssds_);
    w.ios.assign(jobs_, 0);
    w.link_ns.assign(jobs_, 0);
    w.lat.resize(jobs_);
    w.hist.resize(jobs_);
    return absl::OkStatus();
  }

  absl::Status DoSetup(WorkloadContext& ctx) override {
    Engine& engine = *ctx.engine;
    // This repeat's noise: the target's CPU per I/O, the SSDs' and the
    // link's service time per I/O, and the SSDs' latency.
    NvmfConfig& c = w.c;
    c.cpu_half = RunNoise::Scale(c.cpu_half, ctx.noise.cpu);
    c.ssd_per_io = RunNoise::Scale(c.ssd_per_io, ctx.noise.device);
    c.link_per_io = RunNoise::Scale(c.link_per_io, ctx.noise.device);
    c.ssd_latency = RunNoise::Scale(c.ssd_latency, ctx.noise.turnaround);
    // Queue pairs on the NIC node's CPUs first, as nvmet binds them there.
    order_ = CpusDeviceNodeFirst(*platform_, nic_node_);
    std::vector<Cpu*>& cpus = cpus_;
    for (int j = 0; j < jobs_; ++j) cpus.push_back(&engine.AddCpu(order_[j]));
    dma_ = std::make_unique<DmaMappings>(ctx.dma);
    w.dma = dma_.get();
    w.dma_lat = &lat_;
    for (int j = 0; j < jobs_; ++j) engine.Start(*cpus[j], NvmfQueuePair(w, *cpus[j], j));
    return absl::OkStatus();
  }

  WorkloadReport DoReport() override {
    WorkloadReport report;
    lat_.Report(report);
    FioRunOut out;
    uint64_t total = 0;
    Time link_ns = 0;
    for (int j = 0; j < jobs_; ++j) {
      FioJobOut fj;
      fj.name = absl::StrCat("qp", j);
      fj.options = {{"rw", rw_},
                    {"bs", absl::StrCat(w.c.bs)},
                    {"iodepth", absl::StrCat(w.c.iodepth)},
                    {"target_cpu", absl::StrCat(order_[j])}};
      FillFioDirection(fj, !w.c.read, w.ios[j], w.c.bs, w.c.win.end - w.c.win.start, w.lat[j],
                       w.hist[j]);
      out.jobs.push_back(std::move(fj));
      total += w.ios[j];
      link_ns += w.link_ns[j];
    }
    double secs = w.c.win.seconds();
    double work = static_cast<double>(link_ns) / static_cast<double>(w.c.link_per_io);
    report.throughput = work * static_cast<double>(w.c.bs) / secs / 1e6;
    report.throughput_unit = "MB/s";
    report.extra["iops"] = work / secs;
    report.extra["ios_completed_in_window"] = static_cast<double>(total);
    report.tool_output = FormatFioJson(out);
    return report;
  }

  NvmfWorld w;
  const Platform* platform_ = nullptr;
  int jobs_ = 4, ssds_ = 4, nic_node_ = 0;
  std::string rw_;
  std::vector<int> order_;
  std::vector<Cpu*> cpus_;
  std::unique_ptr<DmaMappings> dma_;
  DmaLatencies lat_;
};

}  // namespace

WorkloadInfo NvmfTargetWorkload() {
  return {"nvmf-target",
          "NVMe over Fabrics target (nvmet-rdma): per I/O the data buffer is mapped for the RDMA "
          "NIC and for the SSD; SSDs and the link are queues in virtual time",
          kNvmfTargetParams, ParamStyle::kDashParam, MakeWorkload<NvmfTarget>,
          // The host drives the target with fio; no published repeats of
          // an NVMe-oF target were found, so this is fio's device-IOPS CV
          // (fio_nvme.cc: fsperf in btrfs commit 5e121ae687b8, 1.65%).
          /*noise_cv=*/0.0165};
}

}  // namespace farm::emu
