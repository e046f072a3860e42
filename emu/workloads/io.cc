#include "emu/workloads/io.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "emu/workloads/io_internal.h"

namespace farm::emu {

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t.empty()) return absl::InvalidArgumentError("empty size");
  uint64_t mult = 1;
  char last = t.back();
  if (last == 'b' && t.size() > 1 && std::isalpha(static_cast<unsigned char>(t[t.size() - 2]))) {
    t.pop_back();  // "256kb" -> "256k"
    last = t.back();
  }
  if (last == 'k') mult = 1ULL << 10;
  if (last == 'm') mult = 1ULL << 20;
  if (last == 'g') mult = 1ULL << 30;
  if (last == 't') mult = 1ULL << 40;
  if (mult != 1) t.pop_back();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(t, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a size (e.g. 4k, 256k, 1g)"));
  }
  return v * mult;
}

namespace internal {

absl::Status Params::Bad(const std::string& key, const std::string& why) const {
  return absl::InvalidArgumentError(
      absl::StrCat(workload_, ": --param ", key, "=", values_.at(key), ": ", why));
}

absl::StatusOr<int64_t> Params::Int(const std::string& key, int64_t def, int64_t min, int64_t max) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v)) return Bad(key, "not an integer");
  if (v < min || v > max) return Bad(key, absl::StrCat("out of range [", min, ", ", max, "]"));
  return v;
}

absl::StatusOr<double> Params::Double(const std::string& key, double def, double min, double max) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v) || !std::isfinite(v)) return Bad(key, "not a number");
  if (v < min || v > max) return Bad(key, absl::StrCat("out of range [", min, ", ", max, "]"));
  return v;
}

absl::StatusOr<uint64_t> Params::Size(const std::string& key, uint64_t def) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  absl::StatusOr<uint64_t> v = ParseSize(it->second);
  if (!v.ok()) return Bad(key, std::string(v.status().message()));
  if (*v == 0) return Bad(key, "must be > 0");
  return *v;
}

absl::StatusOr<std::string> Params::Choice(const std::string& key, const std::string& def,
                                           const std::vector<std::string>& choices) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  if (std::find(choices.begin(), choices.end(), it->second) == choices.end()) {
    return Bad(key, absl::StrCat("expected one of ", absl::StrJoin(choices, ", ")));
  }
  return it->second;
}

std::string Params::Str(const std::string& key, const std::string& def) {
  used_.insert(key);
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

absl::Status Params::CheckAllUsed() const {
  std::vector<std::string> unknown;
  for (const auto& [k, v] : values_) {
    if (!used_.count(k)) unknown.push_back(k);
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(workload_, ": unknown --param ",
                                                 absl::StrJoin(unknown, ", "),
                                                 " (see farm-emu list workloads)"));
}

absl::Status ParamsOk(const Params& p, std::initializer_list<absl::Status> parsed) {
  for (const absl::Status& s : parsed) {
    if (!s.ok()) return s;
  }
  return p.CheckAllUsed();
}

absl::Status CheckCpuCount(const std::string& workload, const std::string& param, int64_t n,
                           const IoPlatform& platform) {
  if (n <= platform.topology.num_cpus) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(workload, ": --param ", param, "=", n, ": ",
                                                 platform.name, " has ", platform.topology.num_cpus,
                                                 " CPUs"));
}

std::vector<int> CpusDeviceNodeFirst(const IoPlatform& platform) {
  std::vector<int> order = platform.topology.CpusOfNode(platform.device_node);
  for (int c = 0; c < platform.topology.num_cpus; ++c) {
    if (platform.topology.cpu_node[c] != platform.device_node) order.push_back(c);
  }
  return order;
}

absl::StatusOr<Window> ReadWindow(Params& p, double default_runtime_ms, double default_ramp_ms) {
  absl::StatusOr<double> runtime_ms = p.Double("runtime_ms", default_runtime_ms, 0.01, 100000);
  if (!runtime_ms.ok()) return runtime_ms.status();
  absl::StatusOr<double> ramp_ms = p.Double("ramp_ms", default_ramp_ms, 0, 100000);
  if (!ramp_ms.ok()) return ramp_ms.status();
  Window w;
  w.start = static_cast<Time>(*ramp_ms * 1e6);
  w.end = w.start + static_cast<Time>(*runtime_ms * 1e6);
  return w;
}

Time BusyTime(const Cpu& cpu) {
  Time t = 0;
  for (Time v : cpu.profile()) t += v;
  return t;
}

}  // namespace internal

const std::vector<IoWorkloadSpec>& IoWorkloads() {
  static const std::vector<IoWorkloadSpec>* k = new std::vector<IoWorkloadSpec>{
      {"fio-nvme",
       "fio against local NVMe: io_uring/libaio/psync submission, per-device latency and IOPS "
       "ceiling, map on the submitting CPU, unmap on the CPU taking the queue's IRQ",
       {{"rw", "randread | randread, randwrite, read, write"},
        {"bs", "4k | block size"},
        {"iodepth", "64 | I/Os in flight per job"},
        {"numjobs", "1 | jobs (one virtual CPU each)"},
        {"cpus_allowed",
         " | CPU list jobs are pinned to, round robin (empty: first CPU of the device's node)"},
        {"devices", "1 | NVMe devices; job i uses device i % devices"},
        {"ioengine", "io_uring | io_uring, libaio, psync (psync forces iodepth 1)"},
        {"runtime_ms", "10 | virtual run time measured (after ramp_ms)"},
        {"ramp_ms", "5 | warm-up before the measured window (fio's ramp_time): run, not counted"},
        {"dev_latency_us", "80 | device service latency of one I/O"},
        {"dev_iops", "1000000 | device IOPS ceiling"},
        {"irq_affinity", " | queue masks '0-5@4;6-11@6;...' (empty: the platform's map)"},
        {"submit_ns", "1200 | CPU per I/O submission (io_uring_enter, blk-mq, nvme_queue_rq)"},
        {"reap_ns", "300 | CPU per completion reaped by the job"},
        {"irq_ns", "800 | CPU per completion in nvme_irq (excluding dma_unmap)"}},
       {"nvme"}},
      {"iozone-nfsrdma",
       "iozone -t N over an NFSv3/RDMA mount: each RPC registers its data as FRWR memory "
       "regions of up to chunk_pages pages (dma_map_sg), the server moves data with RDMA "
       "Read/Write over the link, the client invalidates and unmaps on the reply",
       {{"threads", "12 | iozone processes (-t), one CPU each"},
        {"record", "256k | record size (-r)"},
        {"size", "1g | file size per process (-s)"},
        {"tests", "write,rewrite,read,reread | any of write, rewrite, read, reread"},
        {"link_gbps", "56 | InfiniBand signalling rate"},
        {"link_efficiency", "0.95 | payload share of the wire (64b/66b, headers)"},
        {"chunk_pages", "30 | pages per memory region (xprtrdma FRWR depth)"},
        {"rtt_us", "4 | RDMA round trip"},
        {"server_write_us",
         "500 | NFS server turnaround of one WRITE (round figure, disk-backed server)"},
        {"server_read_us", "400 | NFS server turnaround of one READ (round figure)"},
        {"rpc_ns", "8000 | client CPU per RPC (syscall, NFS, RPC/RDMA marshalling, posts)"},
        {"reply_ns", "4000 | client CPU per reply (completion, wakeup, return)"},
        {"sim_records",
         "48 | records simulated per process per test; the rest of the file is "
         "steady state and extrapolated"}},
       {"nic"}},
      {"tcp-stream",
       "iperf-like bulk TCP: per packet CPU work and DMA mapping of its pages, NIC at link rate",
       {{"direction", "tx | tx or rx"},
        {"sessions", "4 | streams, one CPU each"},
        {"link_gbps", "100 | NIC line rate"},
        {"packet_bytes", "65536 | bytes per (TSO/GRO) packet"},
        {"pages_per_packet", "16 | pages DMA-mapped per packet"},
        {"cpu_per_packet_ns", "5000 | CPU per packet (TCP/IP, copy, driver)"},
        {"runtime_ms", "5 | virtual run time measured (after ramp_ms)"},
        {"ramp_ms", "5 | warm-up before the measured window (iperf3 --omit): run, not counted"}},
       {"nic"}},
      {"nvmf-target",
       "NVMe over Fabrics target (nvmet-rdma): per I/O the data buffer is mapped for the RDMA "
       "NIC and for the SSD; SSDs and the link are queues in virtual time",
       {{"ssds", "4 | NVMe SSDs behind the target"},
        {"jobs", "4 | target CPUs (one queue pair each)"},
        {"bs", "128k | block size"},
        {"rw", "read | read or write (host's view)"},
        {"iodepth", "32 | I/Os in flight per queue pair"},
        {"link_gbps", "100 | fabric line rate"},
        {"dev_latency_us", "90 | SSD service latency"},
        {"dev_iops", "700000 | SSD IOPS ceiling"},
        {"dev_gbps",
         "28 | SSD media bandwidth (Gb/s; 3.5 GB/s, a PCIe 3.0 x4 drive's sequential rate)"},
        {"cpu_per_io_ns", "3000 | target CPU per I/O (capsule, nvmet, nvme submit, completion)"},
        {"runtime_ms", "10 | virtual run time measured (after ramp_ms)"},
        {"ramp_ms",
         "5 | warm-up before the measured window (the host fio's ramp_time): run, not counted"}},
       {"nic", "nvme"}},
  };
  return *k;
}

bool IsIoWorkload(const std::string& name) {
  for (const IoWorkloadSpec& s : IoWorkloads()) {
    if (s.name == name) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<IoRun>> MakeIoRun(const std::string& name,
                                                 const std::map<std::string, std::string>& params,
                                                 const IoPlatform& platform) {
  internal::Params p(name, params);
  if (name == "iozone-nfsrdma") return internal::MakeIozoneNfsRdma(p, platform);
  if (name == "fio-nvme") return internal::MakeFioNvme(p, platform);
  if (name == "nvmf-target") return internal::MakeNvmfTarget(p, platform);
  if (name == "tcp-stream") return internal::MakeTcpStream(p, platform);
  return absl::NotFoundError(absl::StrCat("unknown workload '", name, "'"));
}

absl::StatusOr<IoRunReport> RunIoWorkload(const std::string& name,
                                          const std::map<std::string, std::string>& params,
                                          const IoPlatform& platform, const DmaPathFactory& dma,
                                          uint64_t seed) {
  absl::StatusOr<std::unique_ptr<IoRun>> run = MakeIoRun(name, params, platform);
  if (!run.ok()) return run.status();
  Engine engine(platform.topology, platform.line_costs, seed);
  std::unique_ptr<DmaPath> path = dma(engine);
  if (!path) return absl::InternalError(absl::StrCat(name, ": no DMA path for this run"));
  if (absl::Status s = (*run)->Setup(engine, *path); !s.ok()) return s;
  if (absl::Status s = engine.Run(); !s.ok()) return s;
  return (*run)->Finish();
}

}  // namespace farm::emu
