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
#include "emu/workloads/io_internal.h"

namespace farm::emu::internal {
namespace {

constexpr int kTxRing = 64;  // packets in flight per session before xmit waits

struct TcpConfig {
  bool tx;
  int pages;
  Time cpu_per_packet, wire_per_packet;
  Window win;  // ramp_ms (iperf3 --omit), then runtime_ms measured
  uint64_t packet_bytes;
};

struct TcpShared {
  DeviceQueue nic;
  DmaPath* dma = nullptr;
  IoRunReport* report = nullptr;
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
      if (c.win.Contains(t0)) RecordUnmap(*sh.report, cpu.now() - t0);
    }
  };
  bool measuring = false;
  while (cpu.now() < c.win.end) {
    if (!measuring && cpu.now() >= c.win.start) {
      co_await cpu.Sync();
      EnterWindow(c.win, cpu, *sh.dma, measuring);
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
        f.handles.push_back(co_await sh.dma->MapPage(cpu, 0, 4096, DmaDir::kToDevice));
        if (c.win.Contains(t0)) RecordMap(*sh.report, cpu.now() - t0);
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
        hs.push_back(co_await sh.dma->MapPage(cpu, 0, 4096, DmaDir::kFromDevice));
        if (c.win.Contains(t0)) RecordMap(*sh.report, cpu.now() - t0);
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

}  // namespace

namespace {

class TcpRun final : public IoRun {
 public:
  TcpRun(TcpConfig c, IoPlatform platform, int sessions, std::string dir)
      : c_(c), platform_(std::move(platform)), sessions_(sessions), dir_(std::move(dir)) {}

  absl::Status Setup(Engine& engine, DmaPath& dma) override {
    std::vector<int> order = CpusDeviceNodeFirst(platform_);
    std::vector<Cpu*> cpus;
    for (int s = 0; s < sessions_; ++s) cpus.push_back(&engine.AddCpu(order[s]));
    sh_.dma = &dma;
    sh_.report = &report_;
    wire_ns_.assign(sessions_, 0);
    for (int s = 0; s < sessions_; ++s)
      engine.Start(*cpus[s], Session(*cpus[s], c_, sh_, wire_ns_[s]));
    return absl::OkStatus();
  }

  IoRunReport Finish() override {
    IoRunReport& report = report_;
    Time wire_ns = 0;
    for (Time n : wire_ns_) wire_ns += n;
    double total = static_cast<double>(wire_ns) / static_cast<double>(c_.wire_per_packet);
    double secs = c_.win.seconds();
    report.throughput = total * static_cast<double>(c_.packet_bytes) * 8.0 / secs / 1e9;
    report.unit = "Gb/s";
    report.virtual_ns = c_.win.end;
    report.metrics["packets_per_s"] = total / secs;
    absl::StrAppend(&report.text, "  ", sessions_, " ", dir_, " sessions: ", report.throughput,
                    " Gb/s\n");
    return report;
  }

 private:
  TcpConfig c_;
  IoPlatform platform_;
  int sessions_;
  std::string dir_;
  TcpShared sh_;
  std::vector<Time> wire_ns_;
  IoRunReport report_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoRun>> MakeTcpStream(Params& p, const IoPlatform& platform) {
  absl::StatusOr<std::string> dir = p.Choice("direction", "tx", {"tx", "rx"});
  absl::StatusOr<int64_t> sessions = p.Int("sessions", 4, 1, 4096);
  absl::StatusOr<double> gbps = p.Double("link_gbps", 100, 0.1, 10000);
  absl::StatusOr<uint64_t> packet = p.Size("packet_bytes", 65536);
  absl::StatusOr<int64_t> pages = p.Int("pages_per_packet", 16, 1, 4096);
  absl::StatusOr<int64_t> cpu_ns = p.Int("cpu_per_packet_ns", 5000, 0, 1000000000);
  absl::StatusOr<Window> win = ReadWindow(p, 5, 5);
  if (absl::Status s = ParamsOk(p, {dir.status(), sessions.status(), gbps.status(), packet.status(),
                                    pages.status(), cpu_ns.status(), win.status()});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCpuCount("tcp-stream", "sessions", *sessions, platform); !s.ok()) {
    return s;
  }
  TcpConfig c;
  c.tx = *dir == "tx";
  c.pages = static_cast<int>(*pages);
  c.packet_bytes = *packet;
  c.cpu_per_packet = *cpu_ns;
  c.wire_per_packet =
      std::max<Time>(1, static_cast<Time>(static_cast<double>(*packet) * 8.0 / *gbps));
  c.win = *win;
  return std::make_unique<TcpRun>(c, platform, static_cast<int>(*sessions), *dir);
}

}  // namespace farm::emu::internal
