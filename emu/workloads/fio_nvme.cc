// fio-nvme (seed 002): fio against local NVMe.
//
// Each fio job is pinned to a CPU and keeps iodepth I/Os in flight.
// Submitting an I/O costs the job's CPU the io_uring/blk-mq/nvme_queue_rq path
// and a dma_map of the data buffer (nvme_map_data). The device serves I/Os in
// order at its IOPS ceiling after its service latency. The completion
// interrupt of the submitting CPU's hardware queue fires on that queue's
// effective IRQ CPU (IrqAffinity; the platform's NVMe map unless
// --param irq_affinity; each further device has its own vectors on the
// same masks, placed by the platform's interrupt controller:
// PerDeviceAffinity), which runs nvme_irq, the dma_unmap (strict:
// invalidate and wait) and blk_mq_complete_request, then posts the CQE the job
// reaps. A CPU that is both a job's CPU and its queue's IRQ CPU does all of it
// (seed 002's CPU 4). What crosses NUMA nodes is charged at the platform's line
// cost for the distance to the device's node: the SQE store into the SQ and
// the CQE read from the CQ (the driver allocates both on the device's node)
// and the completion MSI's trip to the IRQ CPU. Throughput is the NVMe's
// service time inside the measured window (after ramp_ms), see Window in
// io_common.h.
#include <algorithm>
#include <memory>
#include <queue>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emu/model/irq_affinity.h"
#include "emu/workloads/io_common.h"
#include "emu/workloads/tool_formats.h"

namespace farm::emu {
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
  int dev;       // the NVMe: platform device index
  int dev_node;  // its NUMA node: its SQ/CQ memory and MSI source
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
  DmaMappings* dma = nullptr;
  DmaLatencies* lat = nullptr;
};

Task<void> FioSlot(FioWorld& w, int si) {
  Slot& s = w.slots[si];
  Cpu& cpu = *s.cpu;
  const FioConfig& c = w.c;
  const bool has_jobs = !s.jobs.empty();
  bool measuring = false;
  for (;;) {
    co_await cpu.Sync();
    EnterWindow(c.win, cpu, w.dma->dma(), measuring);
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
      if (c.win.Contains(t0)) w.lat->RecordUnmap(cpu.now() - t0);
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
      uint64_t h = co_await w.dma->MapPage(cpu, c.dev, c.bs, c.dir);  // nvme_map_data
      if (c.win.Contains(t0)) w.lat->RecordMap(cpu.now() - t0);
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

// What bounds the run, in words for --format text: the busiest CPU (a job's
// or one taking interrupts; hard-irq work goes first, so an IRQ CPU at 100%
// starves its own job) and the busiest NVMe against its IOPS ceiling. The
// one near saturation is named; when neither is, the jobs' I/Os in flight
// over their round trip bound them (Little's law).
std::string LimitText(const FioWorld& w, int devices) {
  constexpr double kSaturated = 95;  // percent busy
  const double window = static_cast<double>(w.c.win.end - w.c.win.start);
  size_t busiest = 0;
  double cpu_pct = -1;
  for (size_t i = 0; i < w.slots.size(); ++i) {
    double pct = std::min(100.0, 100.0 * static_cast<double>(BusyTime(*w.slots[i].cpu)) / window);
    if (pct > cpu_pct) {
      busiest = i;
      cpu_pct = pct;
    }
  }
  const Cpu& cpu = *w.slots[busiest].cpu;
  int irq_jobs = 0;
  for (const Job& j : w.jobs) irq_jobs += j.irq_slot == static_cast<int>(busiest) ? 1 : 0;
  // Everything the workload does not charge to itself is the DMA API and
  // the IOMMU driver under it (map, unmap, invalidation and sync waits);
  // its largest symbol says which mechanism.
  const Time busy = BusyTime(cpu);
  const auto& prof = cpu.profile();
  const int app = static_cast<int>(Sym::kApp);
  int top = -1;
  for (int s = 0; s < kNumSyms; ++s) {
    if (s != app && (top < 0 || prof[s] > prof[top])) top = s;
  }
  const double dma_pct =
      busy > 0 ? 100.0 * static_cast<double>(busy - prof[app]) / static_cast<double>(busy) : 0;
  std::string cpu_text = absl::StrFormat(
      "cpu %d %.1f%% busy (runs %d job(s), takes the IRQs of %d; %.0f%% of it in the DMA "
      "API/IOMMU, most in %s)",
      cpu.cpu(), cpu_pct, w.slots[busiest].jobs.size(), irq_jobs, dma_pct,
      SymName(static_cast<Sym>(top)));
  std::vector<Time> dev_work(devices, 0);
  for (const Job& j : w.jobs) dev_work[j.dev] += j.work_ns;
  const int dev =
      static_cast<int>(std::max_element(dev_work.begin(), dev_work.end()) - dev_work.begin());
  const double dev_pct = 100.0 * static_cast<double>(dev_work[dev]) / window;
  std::string dev_text = absl::StrFormat("nvme%d %.1f%% busy (of dev_iops)", dev, dev_pct);
  if (dev_pct >= kSaturated) {
    return absl::StrCat("the NVMe's IOPS ceiling: ", dev_text, "; busiest ", cpu_text);
  }
  if (cpu_pct >= kSaturated) return absl::StrCat("CPU: ", cpu_text, "; busiest ", dev_text);
  return absl::StrCat("no CPU or NVMe saturated: iodepth ", w.c.iodepth,
                      " per job over its round trip; busiest ", cpu_text, "; busiest ", dev_text);
}

constexpr absl::string_view kFioRw[] = {"randread", "randwrite", "read", "write"};
constexpr absl::string_view kIoEngines[] = {"io_uring", "libaio", "psync"};

constexpr absl::string_view kCpusAllowedPolicies[] = {"shared", "split"};

constexpr WorkloadParam kFioNvmeParams[] = {
    {.name = "rw",
     .type = ParamType::kChoice,
     .default_value = "randread",
     .choices = kFioRw,
     .meaning = "randread, randwrite, read, write"},
    {.name = "bs", .type = ParamType::kSize, .default_value = "4k", .meaning = "block size"},
    {.name = "iodepth",
     .type = ParamType::kInt,
     .default_value = "64",
     .min = 1,
     .max = 65536,
     .meaning = "I/Os in flight per job"},
    {.name = "numjobs",
     .type = ParamType::kInt,
     .default_value = "1",
     .min = 1,
     .max = 4096,
     .meaning = "jobs (one virtual CPU each)"},
    {.name = "cpus_allowed",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = "CPU list the jobs may run on (empty: every CPU, as fio leaves placement to the "
                "kernel scheduler); jobs are spread one per idle CPU of the list in its order "
                "(fork balancing fills the parent's node first; the parent is taken to run on "
                "the list's first CPU), then share CPUs round robin"},
    {.name = "cpus_allowed_policy",
     .type = ParamType::kChoice,
     .default_value = "shared",
     .choices = kCpusAllowedPolicies,
     .meaning = "fio's: shared = every job may use the whole list (the scheduler spreads them, "
                "as above); split = job i gets CPU i of the list (mod its length). Without "
                "migration in the model both give the same placement"},
    {.name = "devices",
     .type = ParamType::kInt,
     .default_value = "1",
     .min = 1,
     .max = 256,
     .meaning = "NVMe devices; job i uses device i % devices"},
    {.name = "ioengine",
     .type = ParamType::kChoice,
     .default_value = "io_uring",
     .choices = kIoEngines,
     .meaning = "io_uring, libaio, psync (psync forces iodepth 1)"},
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
     .meaning = "warm-up before the measured window (fio's ramp_time): run, not counted"},
    {.name = "dev_latency_us",
     .type = ParamType::kDouble,
     .default_value = "80",
     .min = 0,
     .max = 1e6,
     .meaning = "device service latency of one I/O"},
    {.name = "dev_iops",
     .type = ParamType::kDouble,
     .default_value = "1000000",
     .min = 1,
     .max = 1e9,
     .meaning = "device IOPS ceiling"},
    {.name = "irq_affinity",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = "queue masks '0-5@4;6-11@6;...' (empty: the platform's map)"},
    {.name = "submit_ns",
     .type = ParamType::kInt,
     .default_value = "1200",
     .min = 0,
     .max = 1000000000,
     .meaning = "CPU per I/O submission (io_uring_enter, blk-mq, nvme_queue_rq)"},
    {.name = "reap_ns",
     .type = ParamType::kInt,
     .default_value = "300",
     .min = 0,
     .max = 1000000000,
     .meaning = "CPU per completion reaped by the job"},
    {.name = "irq_ns",
     .type = ParamType::kInt,
     .default_value = "800",
     .min = 0,
     .max = 1000000000,
     .meaning = "CPU per completion in nvme_irq (excluding dma_unmap)"},
};

class FioNvme final : public Workload {
 private:
  absl::Status DoConfigure(const WorkloadParams& p, const Platform& platform) override {
    platform_ = &platform;
    rw_ = p.Str("rw");
    engine_name_ = p.Str("ioengine");
    numjobs_ = static_cast<int>(p.Int("numjobs"));
    devices_ = static_cast<int>(p.Int("devices"));
    const std::string& cpus_text = p.Str("cpus_allowed");
    std::string irq_text = p.Str("irq_affinity");
    const int nvme = DeviceIndex(platform, "nvme");
    const int dev_node = platform.devices.empty() ? 0 : platform.devices[nvme].node;
    if (irq_text.empty() && !platform.devices.empty()) {
      irq_text = platform.devices[nvme].irq_affinity;
    }
    const int num_cpus = platform.topology.num_cpus;
    if (cpus_text.empty()) {
      // No affinity: the scheduler may use every CPU.
      for (int cpu = 0; cpu < platform.topology.num_cpus; ++cpu) cpus_.push_back(cpu);
    } else {
      absl::StatusOr<std::vector<int>> parsed = ParseCpuList(cpus_text);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("fio-nvme: --param cpus_allowed: ", parsed.status().message()));
      }
      cpus_ = *parsed;
    }
    for (int cpu : cpus_) {
      if (cpu >= num_cpus) {
        return absl::InvalidArgumentError(absl::StrCat("fio-nvme: --param cpus_allowed: CPU ", cpu,
                                                       " does not exist on ", platform.name, " (",
                                                       num_cpus, " CPUs)"));
      }
    }
    IrqAffinity first;  // device 0's: measured, given, or Linux's spread
    if (irq_text.empty()) {
      first = IrqAffinity::Spread(platform.topology, num_cpus);
    } else {
      absl::StatusOr<IrqAffinity> parsed = IrqAffinity::Parse(irq_text);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("fio-nvme: --param ", parsed.status().message()));
      }
      first = *std::move(parsed);
    }
    irq_ = PerDeviceAffinity(first, devices_, platform.irq_chip);
    FioConfig& c = w.c;
    c.bs = p.Size("bs");
    c.write = rw_ == "randwrite" || rw_ == "write";
    c.dir = c.write ? DmaDir::kToDevice : DmaDir::kFromDevice;
    c.iodepth = engine_name_ == "psync" ? 1 : static_cast<int>(p.Int("iodepth"));
    c.win = ReadWindow(p);
    c.dev_latency = static_cast<Time>(p.Double("dev_latency_us") * 1000);
    c.dev_per_io = std::max<Time>(1, static_cast<Time>(1e9 / p.Double("dev_iops")));
    c.submit_ns = p.Int("submit_ns");
    c.reap_ns = p.Int("reap_ns");
    c.irq_ns = p.Int("irq_ns");
    c.dev = nvme;
    c.dev_node = dev_node;
    return absl::OkStatus();
  }

  absl::Status DoSetup(WorkloadContext& ctx) override {
    Engine& engine = *ctx.engine;
    // This repeat's noise: the CPU paths, the NVMe's service time per I/O
    // (its IOPS ceiling) and its latency.
    FioConfig& c = w.c;
    c.submit_ns = RunNoise::Scale(c.submit_ns, ctx.noise.cpu);
    c.reap_ns = RunNoise::Scale(c.reap_ns, ctx.noise.cpu);
    c.irq_ns = RunNoise::Scale(c.irq_ns, ctx.noise.cpu);
    c.dev_per_io = RunNoise::Scale(c.dev_per_io, ctx.noise.device);
    c.dev_latency = RunNoise::Scale(c.dev_latency, ctx.noise.turnaround);
    std::vector<int> slot_of_cpu(platform_->topology.num_cpus, -1);
    auto slot_for = [&](int cpu, bool daemon) {
      if (slot_of_cpu[cpu] < 0) {
        slot_of_cpu[cpu] = static_cast<int>(w.slots.size());
        Slot s;
        s.cpu = &engine.AddCpu(cpu, daemon);
        w.slots.push_back(std::move(s));
      }
      return slot_of_cpu[cpu];
    };
    // Job CPUs first (not daemons), then the IRQ CPUs they need. shared:
    // sched_balance_fork() puts each new job on an idle CPU of its allowed
    // set, the parent's node first, and shares CPUs evenly once none is idle;
    // split: fio pins job i to the i-th CPU of the list. Both are cpus_[j % n]
    // here (fio starts every job before any runs; no migration is modelled).
    for (int j = 0; j < numjobs_; ++j) {
      Job job;
      job.cpu = cpus_[j % cpus_.size()];
      job.slot = slot_for(job.cpu, false);
      job.dev = static_cast<int>(j % devices_);
      w.jobs.push_back(job);
      w.slots[job.slot].jobs.push_back(j);
    }
    for (Job& job : w.jobs) {
      int irq_cpu = irq_[job.dev].IrqCpuFor(job.cpu);
      if (irq_cpu >= platform_->topology.num_cpus) {
        return absl::InvalidArgumentError(
            absl::StrCat("fio-nvme: irq_affinity sends CPU ", job.cpu, "'s interrupts to CPU ",
                         irq_cpu, ", which does not exist on ", platform_->name));
      }
      job.irq_slot = slot_for(irq_cpu, true);
    }
    w.devs.resize(devices_);
    dma_ = std::make_unique<DmaMappings>(ctx.dma);
    w.dma = dma_.get();
    w.lat = &lat_;
    for (size_t i = 0; i < w.slots.size(); ++i) {
      engine.Start(*w.slots[i].cpu, FioSlot(w, static_cast<int>(i)));
    }
    return absl::OkStatus();
  }

  WorkloadReport DoReport() override {
    WorkloadReport report;
    lat_.Report(report);
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
      FillFioDirection(fj, w.c.write, job.ios, w.c.bs, w.c.win.end - w.c.win.start, job.clat,
                       job.clat_hist);
      fj.sys_cpu = 100.0 * static_cast<double>(BusyTime(*w.slots[job.slot].cpu)) /
                   static_cast<double>(w.c.win.end - w.c.win.start);
      out.jobs.push_back(std::move(fj));
      total += job.ios;
      work_ns += job.work_ns;
      double iops = static_cast<double>(job.work_ns) / static_cast<double>(w.c.dev_per_io) / secs;
      report.extra[absl::StrCat("iops_cpu", job.cpu)] = iops;
    }
    report.throughput = static_cast<double>(work_ns) / static_cast<double>(w.c.dev_per_io) / secs;
    report.throughput_unit = "IOPS";
    report.extra["ios_reaped_in_window"] = static_cast<double>(total);
    report.tool_output = FormatFioJson(out);
    report.limit = LimitText(w, devices_);
    return report;
  }

  FioWorld w;
  const Platform* platform_ = nullptr;
  std::vector<int> cpus_;
  std::vector<IrqAffinity> irq_;  // per device
  int numjobs_ = 1, devices_ = 1;
  std::string rw_, engine_name_;
  std::unique_ptr<DmaMappings> dma_;
  DmaLatencies lat_;
};

}  // namespace

WorkloadInfo FioNvmeWorkload() {
  return {"fio-nvme",
          "fio against local NVMe: io_uring/libaio/psync submission, per-device latency and IOPS "
          "ceiling, map on the submitting CPU, unmap on the CPU taking the queue's IRQ",
          kFioNvmeParams, ParamStyle::kDashParam, MakeWorkload<FioNvme>,
          // Run-to-run CV of fio's device IOPS: fsperf (fio jobs, 10 runs a
          // side) in Josef Bacik's btrfs commit 5e121ae687b8 ("btrfs: use
          // buffer xarray for extent buffer writeback operations"):
          // dev_write_iops 866,117.90 with stdev 14,292.20 = 1.65%. (Its
          // file-level write_iops, 10,482.37 +- 392.92 = 3.7%, adds btrfs and
          // a VM.)
          /*noise_cv=*/0.0165};
}

}  // namespace farm::emu
