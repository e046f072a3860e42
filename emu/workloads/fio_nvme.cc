// fio-nvme and nvmf-target: block I/O against NVMe devices.
//
// fio-nvme (seed 002): each fio job is pinned to a CPU and keeps iodepth I/Os
// in flight. Submitting an I/O costs the job's CPU the io_uring/blk-mq/
// nvme_queue_rq path and a dma_map of the data buffer (nvme_map_data). The
// device serves I/Os in order at its IOPS ceiling after its service latency.
// The completion interrupt of the submitting CPU's hardware queue fires on
// that queue's effective IRQ CPU (IrqAffinity), which runs nvme_irq, the
// dma_unmap (strict: invalidate and wait) and blk_mq_complete_request, then
// posts the CQE the job reaps. A CPU that is both a job's CPU and its queue's
// IRQ CPU does all of it (seed 002's CPU 4). What crosses NUMA nodes is
// charged at the platform's line cost for the distance to the device's node:
// the SQE store into the SQ and the CQE read from the CQ (the driver
// allocates both on the device's node) and the completion MSI's trip to the
// IRQ CPU. Throughput is the NVMe's service time inside the measured window
// (after ramp_ms), see Window in workloads_io_internal.h.
//
// nvmf-target: each target CPU serves one queue pair whose host keeps iodepth
// commands outstanding. Per command nvmet maps the data buffer twice, for the
// SSD (nvme_map_data) and for the RDMA NIC (rdma_rw_ctx_init ->
// ib_dma_map_sg), and unmaps each when that device is done. Throughput is the
// payload's time on the fabric link inside the measured window.
#include <algorithm>
#include <memory>
#include <queue>
#include <vector>

#include "absl/strings/str_cat.h"
#include "emu/model/irq_affinity.h"
#include "emu/workloads/io_internal.h"
#include "emu/workloads/tool_formats.h"

namespace farm::emu::internal {
namespace {

// Longest a CPU with nothing to do sleeps before looking again; bounds how
// late an interrupt posted to an idle CPU is noticed.
constexpr Time kIdleQuantum = 500;

struct Event {
  Time t;
  uint64_t handle;
  int job;
  Time submit_t;
  bool operator>(const Event& o) const { return t > o.t || (t == o.t && job > o.job); }
};
using EventHeap = std::priority_queue<Event, std::vector<Event>, std::greater<Event>>;

struct FioConfig {
  uint64_t bs;
  int iodepth;
  DmaDir dir;
  bool write;
  Window win;  // ramp_ms, then runtime_ms measured
  Time dev_latency, dev_per_io, submit_ns, reap_ns, irq_ns;
  int dev_node;  // the NVMe's NUMA node: its SQ/CQ memory and MSI source
};

struct Job {
  int slot = 0;
  int dev = 0;
  int irq_slot = 0;
  int cpu = 0;
  int inflight = 0;
  uint64_t ios = 0;  // reaped inside the window
  Time work_ns = 0;  // device service inside the window (dev_per_io per I/O)
  RunningStats clat;
  LogHistogram clat_hist;
  Time last_reap = 0;
};

struct Slot {
  Cpu* cpu = nullptr;
  std::vector<int> jobs;  // jobs pinned to this CPU
  EventHeap irq;          // device completions this CPU services (hardirq)
  EventHeap cqe;          // completions posted to this CPU's jobs
  size_t rr = 0;
};

struct FioWorld {
  FioConfig c;
  std::vector<Slot> slots;
  std::vector<Job> jobs;
  std::vector<DeviceQueue> devs;
  DmaPath* dma = nullptr;
  IoRunReport* report = nullptr;
};

Task<void> FioSlot(FioWorld& w, int si) {
  Slot& s = w.slots[si];
  Cpu& cpu = *s.cpu;
  const FioConfig& c = w.c;
  const bool has_jobs = !s.jobs.empty();
  bool measuring = false;
  for (;;) {
    co_await cpu.Sync();
    EnterWindow(c.win, cpu, *w.dma, measuring);
    if (has_jobs && cpu.now() >= c.win.end) co_return;
    // Hard interrupt work first: nvme_irq -> unmap -> complete.
    if (!s.irq.empty() && s.irq.top().t <= cpu.now()) {
      Event e = s.irq.top();
      s.irq.pop();
      // nvme_process_cq() reads the CQE the device wrote into CQ memory on
      // its own node: one line pulled across the node distance.
      cpu.Charge(Sym::kApp, c.irq_ns + cpu.engine().Transfer(cpu.node(), c.dev_node));
      Time t0 = cpu.now();
      co_await w.dma->UnmapPage(cpu, e.handle);
      if (c.win.Contains(t0)) RecordUnmap(*w.report, cpu.now() - t0);
      co_await cpu.Sync();
      Event done = e;
      done.t = cpu.now();
      w.slots[w.jobs[e.job].slot].cqe.push(done);
      continue;
    }
    // Reap completions (io_uring CQEs / io_getevents).
    if (!s.cqe.empty() && s.cqe.top().t <= cpu.now()) {
      Event e = s.cqe.top();
      s.cqe.pop();
      cpu.Charge(Sym::kApp, c.reap_ns);
      Job& j = w.jobs[e.job];
      --j.inflight;
      if (c.win.Contains(cpu.now())) {  // fio's ramp_time: no statistics before
        ++j.ios;
        Time lat = cpu.now() - e.submit_t;
        j.clat.Add(static_cast<double>(lat));
        j.clat_hist.Add(static_cast<uint64_t>(lat));
      }
      continue;
    }
    // Submit: round robin over this CPU's jobs with room in their queue.
    int pick = -1;
    for (size_t k = 0; k < s.jobs.size(); ++k) {
      int ji = s.jobs[(s.rr + k) % s.jobs.size()];
      if (w.jobs[ji].inflight < c.iodepth) {
        pick = ji;
        s.rr = (s.rr + k + 1) % s.jobs.size();
        break;
      }
    }
    if (pick >= 0) {
      Job& j = w.jobs[pick];
      Time submit_t = cpu.now();
      // nvme_submit_cmd() writes the 64-byte SQE into the SQ the driver
      // allocated on the device's node (a line owned by the device's reads):
      // the store misses across the node distance before the doorbell.
      cpu.Charge(Sym::kApp, c.submit_ns + cpu.engine().Transfer(cpu.node(), c.dev_node));
      Time t0 = cpu.now();
      uint64_t h = co_await w.dma->MapPage(cpu, 0, c.bs, c.dir);  // nvme_map_data
      if (c.win.Contains(t0)) RecordMap(*w.report, cpu.now() - t0);
      co_await cpu.Sync();
      Time start = w.devs[j.dev].Start(cpu.now(), c.dev_per_io);
      j.work_ns += c.win.Overlap(start, start + c.dev_per_io);
      // The completion MSI travels from the device's node to the IRQ CPU's.
      Time msi = cpu.engine().Transfer(c.dev_node, w.slots[j.irq_slot].cpu->node());
      w.slots[j.irq_slot].irq.push(Event{start + c.dev_latency + msi, h, pick, submit_t});
      ++j.inflight;
      continue;
    }
    Time next = cpu.now() + kIdleQuantum;
    if (!s.irq.empty()) next = std::min(next, s.irq.top().t);
    if (!s.cqe.empty()) next = std::min(next, s.cqe.top().t);
    if (has_jobs) next = std::min(next, std::max(cpu.now() + 1, c.win.end));
    cpu.Idle(std::max<Time>(1, next - cpu.now()));
  }
}

FioLatencyOut LatencyOut(const RunningStats& s, const LogHistogram& h) {
  FioLatencyOut l;
  l.n = s.count();
  l.min_ns = s.min();
  l.max_ns = s.max();
  l.mean_ns = s.mean();
  l.stddev_ns = s.stddev();
  for (double p : FioDefaultPercentiles()) l.percentiles.emplace_back(p, h.Quantile(p / 100.0));
  return l;
}

// One job's read or write section of fio's JSON, and its job_runtime.
void FillDirection(FioJobOut& fj, bool write, uint64_t ios, uint64_t bs, Time runtime,
                   const RunningStats& clat, const LogHistogram& hist) {
  FioDirectionOut d;
  d.total_ios = ios;
  d.io_bytes = ios * bs;
  d.runtime_ms = static_cast<uint64_t>(runtime / 1000000);
  d.clat = LatencyOut(clat, hist);
  (write ? fj.write : fj.read) = d;
  fj.job_runtime_ms = d.runtime_ms;
}

}  // namespace

namespace {

class FioRun final : public IoRun {
 public:
  FioRun(FioWorld world, IoPlatform platform, std::vector<int> cpus, IrqAffinity irq, int numjobs,
         int devices, std::string rw, std::string engine_name)
      : w(std::move(world)),
        platform_(std::move(platform)),
        cpus_(std::move(cpus)),
        irq_(std::move(irq)),
        numjobs_(numjobs),
        devices_(devices),
        rw_(std::move(rw)),
        engine_name_(std::move(engine_name)) {}

  absl::Status Setup(Engine& engine, DmaPath& dma) override {
    std::vector<int> slot_of_cpu(platform_.topology.num_cpus, -1);
    auto slot_for = [&](int cpu, bool daemon) {
      if (slot_of_cpu[cpu] < 0) {
        slot_of_cpu[cpu] = static_cast<int>(w.slots.size());
        Slot s;
        s.cpu = &engine.AddCpu(cpu, daemon);
        w.slots.push_back(std::move(s));
      }
      return slot_of_cpu[cpu];
    };
    // Job CPUs first (not daemons), then the IRQ CPUs they need.
    for (int j = 0; j < numjobs_; ++j) {
      Job job;
      job.cpu = cpus_[j % cpus_.size()];
      job.slot = slot_for(job.cpu, false);
      job.dev = static_cast<int>(j % devices_);
      w.jobs.push_back(job);
      w.slots[job.slot].jobs.push_back(j);
    }
    for (Job& job : w.jobs) {
      int irq_cpu = irq_.IrqCpuFor(job.cpu);
      if (irq_cpu >= platform_.topology.num_cpus) {
        return absl::InvalidArgumentError(
            absl::StrCat("fio-nvme: irq_affinity sends CPU ", job.cpu, "'s interrupts to CPU ",
                         irq_cpu, ", which does not exist on ", platform_.name));
      }
      job.irq_slot = slot_for(irq_cpu, true);
    }
    w.devs.resize(devices_);
    w.dma = &dma;
    w.report = &report_;
    for (size_t i = 0; i < w.slots.size(); ++i) {
      engine.Start(*w.slots[i].cpu, FioSlot(w, static_cast<int>(i)));
    }
    return absl::OkStatus();
  }

  IoRunReport Finish() override {
    IoRunReport& report = report_;
    FioRunOut out;
    uint64_t total = 0;
    const double secs = w.c.win.seconds();
    Time work_ns = 0;
    for (size_t j = 0; j < w.jobs.size(); ++j) {
      const Job& job = w.jobs[j];
      FioJobOut fj;
      fj.name = absl::StrCat("job", j);
      fj.options = {{"rw", rw_},
                    {"bs", absl::StrCat(w.c.bs)},
                    {"iodepth", absl::StrCat(w.c.iodepth)},
                    {"ioengine", engine_name_},
                    {"cpus_allowed", absl::StrCat(job.cpu)},
                    {"filename", absl::StrCat("/dev/nvme", job.dev, "n1")}};
      FillDirection(fj, w.c.write, job.ios, w.c.bs, w.c.win.end - w.c.win.start, job.clat,
                    job.clat_hist);
      fj.sys_cpu = 100.0 * static_cast<double>(BusyTime(*w.slots[job.slot].cpu)) /
                   static_cast<double>(w.c.win.end - w.c.win.start);
      out.jobs.push_back(std::move(fj));
      total += job.ios;
      work_ns += job.work_ns;
      double iops = static_cast<double>(job.work_ns) / static_cast<double>(w.c.dev_per_io) / secs;
      report.metrics[absl::StrCat("iops_cpu", job.cpu)] = iops;
      absl::StrAppend(&report.text, "  job", j, " cpu ", job.cpu, " (node ",
                      platform_.topology.cpu_node[job.cpu], ", irq on cpu ",
                      irq_.IrqCpuFor(job.cpu), "): ", static_cast<int64_t>(iops), " IOPS\n");
    }
    report.throughput = static_cast<double>(work_ns) / static_cast<double>(w.c.dev_per_io) / secs;
    report.unit = "IOPS";
    report.virtual_ns = w.c.win.end;
    report.metrics["ios_reaped_in_window"] = static_cast<double>(total);
    report.fio_json = FormatFioJson(out);
    return report;
  }

 private:
  FioWorld w;
  IoPlatform platform_;
  std::vector<int> cpus_;
  IrqAffinity irq_;
  int numjobs_, devices_;
  std::string rw_, engine_name_;
  IoRunReport report_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoRun>> MakeFioNvme(Params& p, const IoPlatform& platform) {
  absl::StatusOr<std::string> rw =
      p.Choice("rw", "randread", {"randread", "randwrite", "read", "write"});
  absl::StatusOr<uint64_t> bs = p.Size("bs", 4096);
  absl::StatusOr<int64_t> iodepth = p.Int("iodepth", 64, 1, 65536);
  absl::StatusOr<int64_t> numjobs = p.Int("numjobs", 1, 1, 4096);
  absl::StatusOr<int64_t> devices = p.Int("devices", 1, 1, 256);
  absl::StatusOr<std::string> engine_name =
      p.Choice("ioengine", "io_uring", {"io_uring", "libaio", "psync"});
  absl::StatusOr<Window> win = ReadWindow(p, 10, 5);
  absl::StatusOr<double> lat_us = p.Double("dev_latency_us", 80, 0, 1e6);
  absl::StatusOr<double> dev_iops = p.Double("dev_iops", 1e6, 1, 1e9);
  absl::StatusOr<int64_t> submit_ns = p.Int("submit_ns", 1200, 0, 1000000000);
  absl::StatusOr<int64_t> reap_ns = p.Int("reap_ns", 300, 0, 1000000000);
  absl::StatusOr<int64_t> irq_ns = p.Int("irq_ns", 800, 0, 1000000000);
  std::string cpus_text = p.Str("cpus_allowed", "");
  std::string irq_text = p.Str("irq_affinity", "");
  if (irq_text.empty()) irq_text = platform.irq_affinity;
  if (absl::Status s =
          ParamsOk(p, {rw.status(), bs.status(), iodepth.status(), numjobs.status(),
                       devices.status(), engine_name.status(), win.status(), lat_us.status(),
                       dev_iops.status(), submit_ns.status(), reap_ns.status(), irq_ns.status()});
      !s.ok()) {
    return s;
  }
  const int num_cpus = platform.topology.num_cpus;
  std::vector<int> cpus;
  if (cpus_text.empty()) {
    std::vector<int> node_cpus = platform.topology.CpusOfNode(platform.device_node);
    cpus.push_back(node_cpus.empty() ? 0 : node_cpus.front());
  } else {
    absl::StatusOr<std::vector<int>> parsed = ParseCpuList(cpus_text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fio-nvme: --param cpus_allowed: ", parsed.status().message()));
    }
    cpus = *parsed;
  }
  for (int cpu : cpus) {
    if (cpu >= num_cpus) {
      return absl::InvalidArgumentError(absl::StrCat("fio-nvme: --param cpus_allowed: CPU ", cpu,
                                                     " does not exist on ", platform.name, " (",
                                                     num_cpus, " CPUs)"));
    }
  }
  IrqAffinity irq;
  if (irq_text.empty()) {
    irq = IrqAffinity::Spread(platform.topology, num_cpus);
  } else {
    absl::StatusOr<IrqAffinity> parsed = IrqAffinity::Parse(irq_text);
    if (!parsed.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("fio-nvme: --param ", parsed.status().message()));
    irq = *parsed;
  }

  FioWorld w;
  w.c.bs = *bs;
  w.c.write = *rw == "randwrite" || *rw == "write";
  w.c.dir = w.c.write ? DmaDir::kToDevice : DmaDir::kFromDevice;
  w.c.iodepth = *engine_name == "psync" ? 1 : static_cast<int>(*iodepth);
  w.c.win = *win;
  w.c.dev_latency = static_cast<Time>(*lat_us * 1000);
  w.c.dev_per_io = std::max<Time>(1, static_cast<Time>(1e9 / *dev_iops));
  w.c.submit_ns = *submit_ns;
  w.c.reap_ns = *reap_ns;
  w.c.irq_ns = *irq_ns;
  w.c.dev_node = platform.device_node;
  return std::make_unique<FioRun>(std::move(w), platform, cpus, irq, static_cast<int>(*numjobs),
                                  static_cast<int>(*devices), *rw, *engine_name);
}

// ---------------------------------------------------------------- nvmf-target

namespace {

struct NvmfConfig {
  uint64_t bs;
  int pages;
  bool read;  // host reads: SSD -> target memory -> RDMA Write to host
  int iodepth;
  Window win;
  Time ssd_latency, ssd_per_io, link_per_io, cpu_half;
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
  DmaPath* dma = nullptr;
  IoRunReport* report = nullptr;
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
      EnterWindow(c.win, cpu, *w.dma, measuring);
    }
    auto map = [&](int dev, DmaDir dir) -> Task<uint64_t> {
      Time t0 = cpu.now();
      uint64_t h = co_await w.dma->MapSg(cpu, dev, c.pages, dir);
      if (c.win.Contains(t0)) RecordMap(*w.report, cpu.now() - t0);
      co_return h;
    };
    auto unmap = [&](uint64_t h) -> Task<void> {
      Time t0 = cpu.now();
      co_await w.dma->UnmapSg(cpu, h);
      if (c.win.Contains(t0)) RecordUnmap(*w.report, cpu.now() - t0);
    };
    if (io.stage == 0) {
      // Command capsule received; nvmet builds the request.
      io.start = cpu.now();
      cpu.Charge(Sym::kApp, c.cpu_half);
      io.ssd = w.next_ssd;
      w.next_ssd = (w.next_ssd + 1) % static_cast<int>(w.ssds.size());
      if (c.read) {
        io.h_ssd = co_await map(1, DmaDir::kFromDevice);  // nvme_map_data
        co_await cpu.Sync();
        io.t = w.ssds[io.ssd].Start(cpu.now(), c.ssd_per_io) + c.ssd_latency;
      } else {
        io.h_nic = co_await map(0, DmaDir::kFromDevice);  // RDMA Read from the host
        co_await cpu.Sync();
        io.t = w.link.Submit(cpu.now(), c.link_per_io);
        w.link_ns[qp] += c.win.Overlap(io.t - c.link_per_io, io.t);
      }
      io.stage = 1;
      ev.push(io);
    } else if (io.stage == 1) {
      if (c.read) {
        co_await unmap(io.h_ssd);
        io.h_nic = co_await map(0, DmaDir::kToDevice);  // rdma_rw_ctx_init
        co_await cpu.Sync();
        io.t = w.link.Submit(cpu.now(), c.link_per_io);
        w.link_ns[qp] += c.win.Overlap(io.t - c.link_per_io, io.t);
      } else {
        co_await unmap(io.h_nic);
        io.h_ssd = co_await map(1, DmaDir::kToDevice);
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

}  // namespace

namespace {

class NvmfRun final : public IoRun {
 public:
  NvmfRun(NvmfWorld world, IoPlatform platform, int jobs, int ssds, std::string rw)
      : w(std::move(world)),
        platform_(std::move(platform)),
        jobs_(jobs),
        ssds_(ssds),
        rw_(std::move(rw)) {}

  absl::Status Setup(Engine& engine, DmaPath& dma) override {
    // Queue pairs on the device node's CPUs first, as nvmet binds them there.
    order_ = CpusDeviceNodeFirst(platform_);
    std::vector<Cpu*>& cpus = cpus_;
    for (int j = 0; j < jobs_; ++j) cpus.push_back(&engine.AddCpu(order_[j]));
    w.dma = &dma;
    w.report = &report_;
    for (int j = 0; j < jobs_; ++j) engine.Start(*cpus[j], NvmfQueuePair(w, *cpus[j], j));
    return absl::OkStatus();
  }

  IoRunReport Finish() override {
    IoRunReport& report = report_;

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
      FillDirection(fj, !w.c.read, w.ios[j], w.c.bs, w.c.win.end - w.c.win.start, w.lat[j],
                    w.hist[j]);
      out.jobs.push_back(std::move(fj));
      total += w.ios[j];
      link_ns += w.link_ns[j];
    }
    double secs = w.c.win.seconds();
    double work = static_cast<double>(link_ns) / static_cast<double>(w.c.link_per_io);
    report.throughput = work * static_cast<double>(w.c.bs) / secs / 1e6;
    report.unit = "MB/s";
    report.metrics["iops"] = work / secs;
    report.metrics["ios_completed_in_window"] = static_cast<double>(total);
    report.virtual_ns = w.c.win.end;
    report.fio_json = FormatFioJson(out);
    absl::StrAppend(&report.text, "  ", jobs_, " queue pairs, ", ssds_,
                    " SSDs: ", static_cast<int64_t>(report.throughput), " MB/s\n");
    return report;
  }

 private:
  NvmfWorld w;
  IoPlatform platform_;
  int jobs_, ssds_;
  std::string rw_;
  std::vector<int> order_;
  std::vector<Cpu*> cpus_;
  IoRunReport report_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<IoRun>> MakeNvmfTarget(Params& p, const IoPlatform& platform) {
  absl::StatusOr<int64_t> ssds = p.Int("ssds", 4, 1, 256);
  absl::StatusOr<int64_t> jobs = p.Int("jobs", 4, 1, 4096);
  absl::StatusOr<uint64_t> bs = p.Size("bs", 128 << 10);
  absl::StatusOr<std::string> rw = p.Choice("rw", "read", {"read", "write"});
  absl::StatusOr<int64_t> iodepth = p.Int("iodepth", 32, 1, 65536);
  absl::StatusOr<double> gbps = p.Double("link_gbps", 100, 0.1, 10000);
  absl::StatusOr<double> lat_us = p.Double("dev_latency_us", 90, 0, 1e6);
  absl::StatusOr<double> dev_iops = p.Double("dev_iops", 700000, 1, 1e9);
  absl::StatusOr<double> dev_gbps = p.Double("dev_gbps", 28, 0.01, 10000);
  absl::StatusOr<int64_t> cpu_ns = p.Int("cpu_per_io_ns", 3000, 0, 1000000000);
  absl::StatusOr<Window> win = ReadWindow(p, 10, 5);
  if (absl::Status s =
          ParamsOk(p, {ssds.status(), jobs.status(), bs.status(), rw.status(), iodepth.status(),
                       gbps.status(), lat_us.status(), dev_iops.status(), dev_gbps.status(),
                       cpu_ns.status(), win.status()});
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCpuCount("nvmf-target", "jobs", *jobs, platform); !s.ok()) return s;
  NvmfWorld w;
  w.c.bs = *bs;
  w.c.pages = static_cast<int>((*bs + 4095) / 4096);
  w.c.read = *rw == "read";
  w.c.iodepth = static_cast<int>(*iodepth);
  w.c.win = *win;
  w.c.ssd_latency = static_cast<Time>(*lat_us * 1000);
  double media_ns = static_cast<double>(*bs) * 8.0 / *dev_gbps;
  w.c.ssd_per_io = std::max<Time>(1, static_cast<Time>(std::max(1e9 / *dev_iops, media_ns)));
  w.c.link_per_io = std::max<Time>(1, static_cast<Time>(static_cast<double>(*bs) * 8.0 / *gbps));
  w.c.cpu_half = *cpu_ns / 2;
  w.ssds.resize(*ssds);
  w.ios.assign(*jobs, 0);
  w.link_ns.assign(*jobs, 0);
  w.lat.resize(*jobs);
  w.hist.resize(*jobs);
  return std::make_unique<NvmfRun>(std::move(w), platform, static_cast<int>(*jobs),
                                   static_cast<int>(*ssds), *rw);
}

}  // namespace farm::emu::internal
