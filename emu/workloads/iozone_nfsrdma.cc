// iozone-nfsrdma: iozone's throughput mode over an NFSv3/RDMA mount (seed 000).
//
// Per record each iozone process issues one synchronous RPC (O_DIRECT, -I).
// The client side of xprtrdma (net/sunrpc/xprtrdma) registers the record's
// pages as FRWR memory regions of at most chunk_pages pages each:
// frwr_map -> ib_dma_map_sg (the DMA API's map_sg: where the v5.11 VT-d
// regression lives), posts the call, and waits. The server moves the payload
// with RDMA Read (WRITE) or RDMA Write (READ) over the link, a FIFO server of
// the link's payload rate, shared by all processes. On the reply the client
// invalidates each region and unmaps it (frwr_unmap_sync -> ib_dma_unmap_sg).
//
// Every process runs on its own CPU, spread round-robin over the nodes as the
// scheduler would spread 12 busy tasks. Each iozone test (write, rewrite,
// read, reread) is a fresh engine run, as iozone runs the tests one after
// another with a barrier between them.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "emu/workloads/io_internal.h"
#include "emu/workloads/tool_formats.h"

namespace farm::emu::internal {
namespace {

struct NfsConfig {
  int threads;
  uint64_t record, size;
  double link_bytes_per_ns;
  int chunk_pages;
  Time rtt, server_write, server_read, rpc_cpu, reply_cpu;
  int sim_records;
};

struct ProcState {
  Time start = 0, end = 0;
  uint64_t bytes = 0;
};

// iozone's children wait for each other between tests.
struct Barrier {
  int n = 0;
  int arrived = 0;
  std::vector<Cpu*> waiting;
};

struct Shared {
  Engine* engine = nullptr;
  DmaPath* dma = nullptr;
  IoRunReport* report = nullptr;
  DeviceQueue to_server, to_client;  // the link, one queue per direction
  RunningStats map30;                // map_sg latency of full chunks
  Barrier barrier;
};

Task<void> WaitAll(Cpu& cpu, Shared& sh) {
  co_await cpu.Sync();
  Barrier& b = sh.barrier;
  if (++b.arrived == b.n) {
    b.arrived = 0;
    for (Cpu* c : b.waiting) sh.engine->Wake(*c, cpu.now());
    b.waiting.clear();
    co_return;
  }
  b.waiting.push_back(&cpu);
  co_await cpu.Block(Sym::kApp, /*idle=*/true);
}

Task<void> IozoneTest(Cpu& cpu, const NfsConfig& c, bool is_write, Shared& sh, ProcState& st) {
  DmaPath& dma = *sh.dma;
  const uint64_t page = 4096;
  const uint64_t record_pages = (c.record + page - 1) / page;
  std::vector<uint64_t> handles;
  std::vector<int> chunk_nents;
  for (uint64_t left = record_pages; left > 0;) {
    int n = static_cast<int>(std::min<uint64_t>(left, c.chunk_pages));
    chunk_nents.push_back(n);
    left -= n;
  }
  const DmaDir dir = is_write ? DmaDir::kToDevice : DmaDir::kFromDevice;
  const Time wire = static_cast<Time>(static_cast<double>(c.record) / c.link_bytes_per_ns);
  st.start = cpu.now();
  for (int r = 0; r < c.sim_records; ++r) {
    // Syscall, NFS and RPC/RDMA marshalling of the call.
    cpu.Charge(Sym::kApp, c.rpc_cpu);
    handles.clear();
    for (int n : chunk_nents) {
      Time t0 = cpu.now();
      uint64_t h = co_await dma.MapSg(cpu, 0, n, dir);  // frwr_map: ib_dma_map_sg
      Time lat = cpu.now() - t0;
      RecordMap(*sh.report, lat);
      if (n == c.chunk_pages) sh.map30.Add(static_cast<double>(lat));
      handles.push_back(h);
    }
    co_await cpu.Sync();
    Time reply;
    if (is_write) {
      // The server pulls the payload with RDMA Read, then commits.
      Time done = sh.to_server.Submit(cpu.now() + c.rtt / 2, wire);
      reply = done + c.server_write + c.rtt / 2;
    } else {
      // The server reads, then pushes the payload with RDMA Write.
      Time done = sh.to_client.Submit(cpu.now() + c.rtt / 2 + c.server_read, wire);
      reply = done + c.rtt / 2;
    }
    if (reply > cpu.now()) cpu.Idle(reply - cpu.now());
    cpu.Charge(Sym::kApp, c.reply_cpu);
    for (uint64_t h : handles) {
      Time t0 = cpu.now();
      co_await dma.UnmapSg(cpu, h);  // frwr_unmap_sync: LOCAL_INV + ib_dma_unmap_sg
      RecordUnmap(*sh.report, cpu.now() - t0);
    }
    st.bytes += c.record;
  }
  st.end = cpu.now();
}

Task<void> IozoneChild(Cpu& cpu, const NfsConfig& c, const std::vector<std::string>& tests,
                       Shared& sh, std::vector<std::vector<ProcState>>& st, int index) {
  for (size_t t = 0; t < tests.size(); ++t) {
    bool is_write = tests[t] == "write" || tests[t] == "rewrite";
    co_await IozoneTest(cpu, c, is_write, sh, st[t][index]);
    co_await WaitAll(cpu, sh);
  }
}

// CPUs for the processes: round-robin over nodes, first free CPU of each.
std::vector<int> PickCpus(const Topology& topo, int n) {
  std::vector<std::vector<int>> per_node;
  for (int node = 0; node < std::max(1, topo.num_nodes()); ++node) {
    per_node.push_back(topo.CpusOfNode(topo.num_nodes() <= 1 ? -1 : node));
  }
  std::vector<int> out;
  for (size_t round = 0; static_cast<int>(out.size()) < n; ++round) {
    bool any = false;
    for (const auto& cpus : per_node) {
      if (round < cpus.size() && static_cast<int>(out.size()) < n) {
        out.push_back(cpus[round]);
        any = true;
      }
    }
    if (!any) break;
  }
  return out;
}

class IozoneRun final : public IoRun {
 public:
  IozoneRun(NfsConfig c, std::vector<std::string> tests, IoPlatform platform,
            uint64_t records_in_file)
      : c_(c),
        tests_(std::move(tests)),
        platform_(std::move(platform)),
        records_in_file_(records_in_file) {}

  absl::Status Setup(Engine& engine, DmaPath& dma) override {
    sh_.engine = &engine;
    sh_.dma = &dma;
    sh_.report = &report_;
    std::vector<int> cpus = PickCpus(platform_.topology, c_.threads);
    sh_.barrier.n = static_cast<int>(cpus.size());
    st_.assign(tests_.size(), std::vector<ProcState>(cpus.size()));
    for (int cpu : cpus) vcpus_.push_back(&engine.AddCpu(cpu));
    for (size_t i = 0; i < vcpus_.size(); ++i) {
      engine.Start(*vcpus_[i], IozoneChild(*vcpus_[i], c_, tests_, sh_, st_, static_cast<int>(i)));
    }
    return absl::OkStatus();
  }

  IoRunReport Finish() override {
    IoRunReport& report = report_;
    report.unit = "MB/s";
    IozoneRunOut out;
    out.processes = c_.threads;
    out.file_kb = c_.size / 1024;
    out.record_kb = c_.record / 1024;
    out.command_line = absl::StrCat("iozone -i0 -i1 -s", out.file_kb, "k -r", out.record_kb, "k -t",
                                    c_.threads, " -I (emulated on ", platform_.name, ")");
    double total_children = 0;
    Time virtual_total = 0;
    const double scale = static_cast<double>(records_in_file_) / c_.sim_records;
    for (size_t ti = 0; ti < tests_.size(); ++ti) {
      const std::vector<ProcState>& st = st_[ti];
      IozoneTestOut t;
      t.label = IozoneLabel(tests_[ti]);
      Time first = st.empty() ? 0 : st.front().start, last = 0;
      for (const ProcState& ps : st) {
        Time dur = std::max<Time>(1, ps.end - ps.start);
        t.per_process_kb_s.push_back(static_cast<double>(ps.bytes) / 1024.0 * 1e9 /
                                     static_cast<double>(dur));
        first = std::min(first, ps.start);
        last = std::max(last, ps.end);
      }
      double children = 0;
      for (double v : t.per_process_kb_s) children += v;
      double sim_bytes = static_cast<double>(c_.sim_records) * static_cast<double>(c_.record);
      t.parent_kb_s = sim_bytes * static_cast<double>(st.size()) / 1024.0 * 1e9 /
                      static_cast<double>(std::max<Time>(1, last - first));
      // The simulated window stands for the whole file: throughput is steady state.
      t.wall_s = static_cast<double>(last - first) * scale / 1e9;
      t.min_xfer_kb = static_cast<double>(records_in_file_ * c_.record) / 1024.0;
      report.metrics[absl::StrCat(tests_[ti], "_kb_s")] = children;
      // "<metric>.<phase>": the names the agent's real iozone runs use.
      report.metrics[absl::StrCat("throughput_kb_s.", tests_[ti])] = children;
      total_children += children;
      virtual_total += last - first;
      out.tests.push_back(std::move(t));
    }
    // CPU time: busy time of the children's CPUs, split evenly over the tests.
    Time busy = 0;
    for (Cpu* cpu : vcpus_) busy += BusyTime(*cpu);
    for (IozoneTestOut& t : out.tests) {
      t.cpu_s = static_cast<double>(busy) * scale / 1e9 / static_cast<double>(vcpus_.size()) /
                static_cast<double>(tests_.size());
    }
    report.throughput = total_children / static_cast<double>(tests_.size()) * 1024.0 / 1e6;
    report.virtual_ns = virtual_total;
    if (sh_.map30.count() > 0) {
      report.metrics["map_sg_full_chunk_mean_ns"] = sh_.map30.mean();
      report.metrics["map_sg_full_chunk_pages"] = c_.chunk_pages;
    }
    report.iozone = FormatIozone(out);
    for (const auto& t : out.tests) {
      double sum = 0;
      for (double v : t.per_process_kb_s) sum += v;
      absl::StrAppend(&report.text, "  ", t.label, ": ", static_cast<int64_t>(sum), " kB/sec\n");
    }
    return report;
  }

 private:
  NfsConfig c_;
  std::vector<std::string> tests_;
  IoPlatform platform_;
  uint64_t records_in_file_;
  Shared sh_;
  IoRunReport report_;
  std::vector<Cpu*> vcpus_;
  std::vector<std::vector<ProcState>> st_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoRun>> MakeIozoneNfsRdma(Params& p, const IoPlatform& platform) {
  NfsConfig c;
  absl::StatusOr<int64_t> threads = p.Int("threads", 12, 1, 1024);
  absl::StatusOr<uint64_t> record = p.Size("record", 256 << 10);
  absl::StatusOr<uint64_t> size = p.Size("size", 1ULL << 30);
  absl::StatusOr<double> gbps = p.Double("link_gbps", 56, 0.1, 10000);
  absl::StatusOr<double> eff = p.Double("link_efficiency", 0.95, 0.01, 1);
  absl::StatusOr<int64_t> chunk = p.Int("chunk_pages", 30, 1, 4096);
  absl::StatusOr<double> rtt = p.Double("rtt_us", 4, 0, 1e6);
  absl::StatusOr<double> sw = p.Double("server_write_us", 500, 0, 1e7);
  absl::StatusOr<double> sr = p.Double("server_read_us", 400, 0, 1e7);
  absl::StatusOr<int64_t> rpc = p.Int("rpc_ns", 8000, 0, 1000000000);
  absl::StatusOr<int64_t> reply = p.Int("reply_ns", 4000, 0, 1000000000);
  absl::StatusOr<int64_t> sim = p.Int("sim_records", 48, 1, 1000000);
  std::string tests_text = p.Str("tests", "write,rewrite,read,reread");
  if (absl::Status s = ParamsOk(p, {threads.status(), record.status(), size.status(), gbps.status(),
                                    eff.status(), chunk.status(), rtt.status(), sw.status(),
                                    sr.status(), rpc.status(), reply.status(), sim.status()});
      !s.ok()) {
    return s;
  }
  std::vector<std::string> tests;
  for (absl::string_view t :
       absl::StrSplit(tests_text, absl::ByAnyChar(", []"), absl::SkipEmpty())) {
    std::string name(t);
    if (IozoneLabel(name).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("iozone-nfsrdma: --param tests: unknown test '", name,
                       "' (expected write, rewrite, read, reread)"));
    }
    tests.push_back(name);
  }
  if (tests.empty()) return absl::InvalidArgumentError("iozone-nfsrdma: --param tests is empty");
  if (*threads > platform.topology.num_cpus) {
    return absl::InvalidArgumentError(absl::StrCat("iozone-nfsrdma: --param threads=", *threads,
                                                   ": platform ", platform.name, " has only ",
                                                   platform.topology.num_cpus, " CPUs"));
  }
  c.threads = static_cast<int>(*threads);
  c.record = *record;
  c.size = std::max(*size, *record);
  c.link_bytes_per_ns = *gbps * *eff / 8.0;  // Gb/s = bits per ns
  c.chunk_pages = static_cast<int>(*chunk);
  c.rtt = static_cast<Time>(*rtt * 1000);
  c.server_write = static_cast<Time>(*sw * 1000);
  c.server_read = static_cast<Time>(*sr * 1000);
  c.rpc_cpu = *rpc;
  c.reply_cpu = *reply;
  uint64_t records_in_file = c.size / c.record;
  c.sim_records =
      static_cast<int>(std::min<uint64_t>(*sim, std::max<uint64_t>(records_in_file, 1)));

  return std::make_unique<IozoneRun>(c, std::move(tests), platform, records_in_file);
}

}  // namespace farm::emu::internal
