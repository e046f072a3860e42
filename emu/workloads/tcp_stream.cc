// tcp-stream: bulk TCP streams (iperf/netperf TCP_STREAM) through one NIC.
//
// Each session runs on its own CPU. Per (TSO/GRO) packet the CPU does the
// protocol and copy work (cpu_per_packet_ns) and the driver maps the
// packet's pages for the NIC: on TX at xmit (dma_map_page per fragment), on
// RX when the ring is refilled. The NIC moves packets at line rate, a FIFO
// server shared by all sessions. TX completions are reaped by the same CPU
// (NAPI on the queue's CPU) and unmapped there; RX packets are unmapped when
// they are received. So per packet the CPU pays pages x (map + unmap) on top
// of its protocol work, and the NIC's rate caps the total. Throughput is the
// NIC's wire time inside the measured window (after ramp_ms).
#include <algorithm>
#include <deque>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "emu/workloads/io_common.h"

namespace farm::emu {
namespace {

constexpr int kTxRing = 64;  // packets in flight per session before xmit waits

struct TcpConfig {
  bool tx;
  int pages;
  Time cpu_per_packet, wire_per_packet;
  Window win;  // ramp_ms (iperf3 --omit), then runtime_ms measured
  uint64_t packet_bytes;
  int nic;  // platform device index
};

struct TcpShared {
  DeviceQueue nic;
  DmaMappings* dma = nullptr;
  DmaLatencies* lat = nullptr;
};

// `wire_ns`: the NIC's time on this session's packets inside the window.
Task<void> Session(Cpu& cpu, const TcpConfig& c, TcpShared& sh, Time& wire_ns) {
  struct InFlight {
    Time done;
    std::vector<uint64_t> handles;
  };
  std::deque<InFlight> ring;
  auto unmap_all = [&](std::vector<uint64_t>& hs) -> Task<void> {
    for (uint64_t h : hs) {
      Time t0 = cpu.now();
      co_await sh.dma->UnmapPage(cpu, h);
      if (c.win.Contains(t0)) sh.lat->RecordUnmap(cpu.now() - t0);
    }
  };
  bool measuring = false;
  while (cpu.now() < c.win.end) {
    if (!measuring && cpu.now() >= c.win.start) {
      co_await cpu.Sync();
      EnterWindow(c.win, cpu, sh.dma->dma(), measuring);
    }
    if (c.tx) {
      // Reap finished transmissions (NAPI TX completion on this CPU).
      while (!ring.empty() &&
             (ring.front().done <= cpu.now() || static_cast<int>(ring.size()) >= kTxRing)) {
        if (ring.front().done > cpu.now()) cpu.Idle(ring.front().done - cpu.now());
        co_await unmap_all(ring.front().handles);
        ring.pop_front();
      }
      cpu.Charge(Sym::kApp, c.cpu_per_packet);
      InFlight f;
      for (int i = 0; i < c.pages; ++i) {
        Time t0 = cpu.now();
        f.handles.push_back(co_await sh.dma->MapPage(cpu, c.nic, 4096, DmaDir::kToDevice));
        if (c.win.Contains(t0)) sh.lat->RecordMap(cpu.now() - t0);
      }
      co_await cpu.Sync();
      f.done = sh.nic.Submit(cpu.now(), c.wire_per_packet);
      wire_ns += c.win.Overlap(f.done - c.wire_per_packet, f.done);
      ring.push_back(std::move(f));
    } else {
      // Refill the RX ring slot, wait for the NIC to fill it, unmap, process.
      std::vector<uint64_t> hs;
      for (int i = 0; i < c.pages; ++i) {
        Time t0 = cpu.now();
        hs.push_back(co_await sh.dma->MapPage(cpu, c.nic, 4096, DmaDir::kFromDevice));
        if (c.win.Contains(t0)) sh.lat->RecordMap(cpu.now() - t0);
      }
      co_await cpu.Sync();
      Time arrived = sh.nic.Submit(cpu.now(), c.wire_per_packet);
      wire_ns += c.win.Overlap(arrived - c.wire_per_packet, arrived);
      if (arrived > cpu.now()) cpu.Idle(arrived - cpu.now());
      co_await unmap_all(hs);
      cpu.Charge(Sym::kApp, c.cpu_per_packet);
    }
  }
}

constexpr absl::string_view kTcpDirections[] = {"tx", "rx"};

constexpr WorkloadParam kTcpStreamParams[] = {
    {.name = "direction",
     .type = ParamType::kChoice,
     .default_value = "tx",
     .choices = kTcpDirections,
     .meaning = "tx or rx"},
    {.name = "sessions",
     .type = ParamType::kInt,
     .default_value = "4",
     .min = 1,
     .max = 4096,
     .meaning = "streams, one CPU each"},
    {.name = "link_gbps",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = kLinkGbpsMeaning},
    {.name = "packet_bytes",
     .type = ParamType::kSize,
     .default_value = "65536",
     .meaning = "bytes per (TSO/GRO) packet"},
    {.name = "pages_per_packet",
     .type = ParamType::kInt,
     .default_value = "16",
     .min = 1,
     .max = 4096,
     .meaning = "pages DMA-mapped per packet"},
    {.name = "cpu_per_packet_ns",
     .type = ParamType::kInt,
     .default_value = "5000",
     .min = 0,
     .max = 1000000000,
     .meaning = "CPU per packet (TCP/IP, copy, driver)"},
    {.name = "runtime_ms",
     .type = ParamType::kDouble,
     .default_value = "5",
     .min = 0.01,
     .max = 100000,
     .meaning = "virtual run time measured (after ramp_ms)"},
    {.name = "ramp_ms",
     .type = ParamType::kDouble,
     .default_value = "5",
     .min = 0,
     .max = 100000,
     .meaning = "warm-up before the measured window (iperf3 --omit): run, not counted"},
};

class TcpStream final : public Workload {
 private:
  absl::Status DoConfigure(const WorkloadParams& p, const Platform& platform) override {
    platform_ = &platform;
    dir_ = p.Str("direction");
    sessions_ = static_cast<int>(p.Int("sessions"));
    if (absl::Status s = CheckCpuCount("tcp-stream", "sessions", sessions_, platform); !s.ok()) {
      return s;
    }
    const uint64_t packet = p.Size("packet_bytes");
    c_.tx = dir_ == "tx";
    c_.pages = static_cast<int>(p.Int("pages_per_packet"));
    c_.packet_bytes = packet;
    c_.cpu_per_packet = p.Int("cpu_per_packet_ns");
    c_.nic = DeviceIndex(platform, "nic");
    absl::StatusOr<double> gbps = LinkGbps("tcp-stream", p, platform, c_.nic);
    if (!gbps.ok()) return gbps.status();
    c_.wire_per_packet =
        std::max<Time>(1, static_cast<Time>(static_cast<double>(packet) * 8.0 / *gbps));
    c_.win = ReadWindow(p);
    nic_node_ = platform.devices.empty() ? 0 : platform.devices[c_.nic].node;
    return absl::OkStatus();
  }

  absl::Status DoSetup(WorkloadContext& ctx) override {
    Engine& engine = *ctx.engine;
    // This repeat's noise: the stack's CPU per packet and the NIC's time per
    // packet on the wire.
    c_.cpu_per_packet = RunNoise::Scale(c_.cpu_per_packet, ctx.noise.cpu);
    c_.wire_per_packet = RunNoise::Scale(c_.wire_per_packet, ctx.noise.device);
    std::vector<int> order = CpusDeviceNodeFirst(*platform_, nic_node_);
    std::vector<Cpu*> cpus;
    for (int s = 0; s < sessions_; ++s) cpus.push_back(&engine.AddCpu(order[s]));
    dma_ = std::make_unique<DmaMappings>(ctx.dma);
    sh_.dma = dma_.get();
    sh_.lat = &lat_;
    wire_ns_.assign(sessions_, 0);
    for (int s = 0; s < sessions_; ++s)
      engine.Start(*cpus[s], Session(*cpus[s], c_, sh_, wire_ns_[s]));
    return absl::OkStatus();
  }

  WorkloadReport DoReport() override {
    WorkloadReport report;
    lat_.Report(report);
    Time wire_ns = 0;
    for (Time n : wire_ns_) wire_ns += n;
    double total = static_cast<double>(wire_ns) / static_cast<double>(c_.wire_per_packet);
    double secs = c_.win.seconds();
    report.throughput = total * static_cast<double>(c_.packet_bytes) * 8.0 / secs / 1e9;
    report.throughput_unit = "Gb/s";
    report.extra["packets_per_s"] = total / secs;
    return report;
  }

  TcpConfig c_;
  const Platform* platform_ = nullptr;
  int sessions_ = 4, nic_node_ = 0;
  std::string dir_;
  std::unique_ptr<DmaMappings> dma_;
  DmaLatencies lat_;
  TcpShared sh_;
  std::vector<Time> wire_ns_;
};

}  // namespace

WorkloadInfo TcpStreamWorkload() {
  return {"tcp-stream",
          "iperf-like bulk TCP: per packet CPU work and DMA mapping of its pages, NIC at link rate",
          kTcpStreamParams, ParamStyle::kDashParam, MakeWorkload<TcpStream>,
          // Run-to-run CV of netperf-2.5 TCP_STREAM (FreeBSD, loopback, 30
          // runs a set over 3 reboots; people.freebsd.org/~bz/bench/
          // 20120303-p4-at206131M-test_netperf_tcp.html and
          // 20120322-lo0-test_netperf_tcp.html): stddev/avg of its four sets
          // 82.6/4172.7 = 2.0%, 135.6/4679.0 = 2.9%, 284.0/8247.0 = 3.4%,
          // 379.7/6913.7 = 5.5%; 3% is their median.
          /*noise_cv=*/0.03};
}

}  // namespace farm::emu
