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
// io_common.h. The block layer splits an I/O larger than the queue's
// max_hw_sectors into that many NVMe commands, each nvme_map_data()'d (one
// IOVA of its length) and unmapped on its own completion: max_hw_sectors is
// the device's MDTS capped by NVME_MAX_KB_SZ and, from 3710e2b056cb
// (nvme.clamp_dma_opt), by dma_opt_mapping_size(), which is the IOVA rcache's
// largest size behind an IOMMU, so from then on no command's IOVA bypasses the
// rcache. The NVMe serves one command per IOPS-ceiling slot or one I/O's bs
// over its bandwidth (the smaller of its PCIe link and its datasheet rate for
// the direction), whichever is longer. Jobs the scheduler placed (policy shared)
// move off a CPU whose interrupts take its capacity (BalanceTick).
#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <vector>

#include "absl/strings/numbers.h"
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

// The scheduler tick (CONFIG_HZ=250, kernel/Kconfig.hz's default), at which a
// busy CPU may kick the idle load balancer (nohz_balancer_kick).
constexpr Time kTick = 4 * kNsPerMs;
// sd_init()'s imbalance_pct of the cluster/LLC domains: check_cpu_capacity()
// calls a CPU's capacity reduced when capacity * 117 < original * 100, i.e.
// when IRQs (or other classes) take more than 14.5% of it.
constexpr Time kImbalancePct = 117;

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
  double dev_bytes_per_s;    // 0: unlimited
  double dev_iops_ns;        // one command's slot at the IOPS ceiling
  uint64_t mdts_bytes;       // the NVMe's MDTS, capped by NVME_MAX_KB_SZ
  uint64_t cmd_bytes;        // max_hw_sectors in bytes: what one command moves
  int cmds;                  // NVMe commands per I/O: bs / cmd_bytes, rounded up
  bool dev_bandwidth_bound;  // bs / bandwidth, not the IOPS ceiling, sets dev_per_io
  Time dev_bytes_ns;         // bs / bandwidth, rounded up (0: unlimited)
  int dev;                   // the NVMe: platform device index
  int dev_node;              // its NUMA node: its SQ/CQ memory and MSI source
};

struct Job {
  int slot = 0;
  int dev = 0;
  int irq_slot = 0;
  int cpu = 0;
  // Where the idle balancer would pull the job (PlanMigrations), -1: nowhere.
  int dest_slot = -1, dest_irq_slot = -1;
  int inflight = 0;
  uint64_t ios = 0;  // reaped inside the window
  Time work_ns = 0;  // device service inside the window (dev_per_io per I/O)
  RunningStats clat;
  LogHistogram clat_hist;
  Time last_reap = 0;
};

struct Slot {
  Cpu* cpu = nullptr;
  bool job_slot = false;  // may run jobs (ends with the window); else IRQs only
  std::vector<int> jobs;  // jobs running on this CPU
  EventHeap irq;          // device completions this CPU services (hardirq)
  EventHeap cqe;          // completions posted to this CPU's jobs
  size_t rr = 0;
  // Hard-irq time, and its value and the clock at the last tick.
  Time irq_busy = 0, irq_at_tick = 0, tick_start = 0, next_tick = kTick;
};

// The DmaMappings handles of one I/O's commands, by the I/O's handle.
struct IoMaps {
  std::vector<std::vector<uint64_t>> handles;
  std::vector<uint64_t> free;
  uint64_t New() {
    if (free.empty()) {
      handles.emplace_back();
      return handles.size() - 1;
    }
    uint64_t h = free.back();
    free.pop_back();
    handles[h].clear();
    return h;
  }
};

struct FioWorld {
  FioConfig c;
  IoMaps io_maps;
  std::vector<Slot> slots;
  std::vector<Job> jobs;
  std::vector<DeviceQueue> devs;
  DmaMappings* dma = nullptr;
  DmaLatencies* lat = nullptr;
};

// The tick of slot `si`'s CPU: nohz_balancer_kick() kicks the idle load
// balancer when the CPU runs a CFS task and check_cpu_capacity() finds its
// capacity reduced, and need_active_balance() then has an idle CPU pull a
// lone task to itself ("sched: Move CFS tasks to CPUs with higher capacity",
// 1aaf90a4b88a). The IRQ share is the last tick's, not PELT's 32 ms average:
// the move comes at the first tick instead of some 16 ms later, both inside
// a real fio run's ramp. Completions already posted follow the task (they sit
// in its io_uring CQ); those still in flight complete on the old IRQ CPU.
void BalanceTick(FioWorld& w, int si) {
  Slot& s = w.slots[si];
  const Time now = s.cpu->now();
  const Time span = now - s.tick_start, irq = s.irq_busy - s.irq_at_tick;
  s.tick_start = now;
  s.irq_at_tick = s.irq_busy;
  while (s.next_tick <= now) s.next_tick += kTick;
  if (s.jobs.size() != 1 || span <= 0) return;
  const int ji = s.jobs[0];
  Job& j = w.jobs[ji];
  if (j.dest_slot < 0 || (span - irq) * kImbalancePct >= span * 100) return;
  Slot& d = w.slots[j.dest_slot];
  s.jobs.clear();
  d.jobs.push_back(ji);
  j.slot = j.dest_slot;
  j.cpu = d.cpu->cpu();
  j.irq_slot = j.dest_irq_slot;
  j.dest_slot = -1;
  EventHeap keep;
  for (; !s.cqe.empty(); s.cqe.pop()) (s.cqe.top().job == ji ? d.cqe : keep).push(s.cqe.top());
  s.cqe.swap(keep);
}

// nvme_map_data() of each command an I/O was split into; returns the I/O's
// handle in w.io_maps.
Task<uint64_t> MapCommands(FioWorld& w, Cpu& cpu) {
  const FioConfig& c = w.c;
  const uint64_t h = w.io_maps.New();
  for (uint64_t done = 0; done < c.bs; done += c.cmd_bytes) {
    Time t0 = cpu.now();
    uint64_t m = co_await w.dma->MapPage(cpu, c.dev, std::min(c.cmd_bytes, c.bs - done), c.dir);
    w.io_maps.handles[h].push_back(m);  // handles may have grown meanwhile
    if (c.win.Contains(t0)) w.lat->RecordMap(cpu.now() - t0);
  }
  co_return h;
}

// nvme_irq() for each command of I/O `h` after the first (whose nvme_irq
// the caller charged), and nvme_unmap_data() of every command.
Task<void> UnmapCommands(FioWorld& w, Cpu& cpu, uint64_t h) {
  const FioConfig& c = w.c;
  for (size_t i = 0; i < w.io_maps.handles[h].size(); ++i) {
    if (i > 0) cpu.Charge(Sym::kApp, c.irq_ns);
    Time t0 = cpu.now();
    co_await w.dma->UnmapPage(cpu, w.io_maps.handles[h][i]);
    if (c.win.Contains(t0)) w.lat->RecordUnmap(cpu.now() - t0);
  }
  w.io_maps.free.push_back(h);
}

Task<void> FioSlot(FioWorld& w, int si) {
  Slot& s = w.slots[si];
  Cpu& cpu = *s.cpu;
  const FioConfig& c = w.c;
  bool measuring = false;
  for (;;) {
    co_await cpu.Sync();
    EnterWindow(c.win, cpu, w.dma->dma(), measuring);
    if (s.job_slot && cpu.now() >= c.win.end) co_return;
    if (s.job_slot && cpu.now() >= s.next_tick) BalanceTick(w, si);
    // Hard interrupt work first: nvme_irq -> unmap -> complete.
    if (!s.irq.empty() && s.irq.top().t <= cpu.now()) {
      const Time irq_t0 = cpu.now();
      Event e = s.irq.top();
      s.irq.pop();
      // nvme_process_cq() reads the CQE the device wrote into CQ memory on
      // its own node: one line pulled across the node distance.
      cpu.Charge(Sym::kApp, c.irq_ns + cpu.engine().Transfer(cpu.node(), c.dev_node));
      co_await UnmapCommands(w, cpu, e.handle);
      co_await cpu.Sync();
      Event done = e;
      done.t = cpu.now();
      w.slots[w.jobs[e.job].slot].cqe.push(done);
      s.irq_busy += cpu.now() - irq_t0;
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
      const uint64_t h = co_await MapCommands(w, cpu);
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
    if (s.job_slot) next = std::min(next, std::max(cpu.now() + 1, c.win.end));
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
  const char* ceiling = w.c.dev_bandwidth_bound ? "its bandwidth" : "dev_iops";
  std::string dev_text = absl::StrFormat("nvme%d %.1f%% busy (of %s)", dev, dev_pct, ceiling);
  if (dev_pct >= kSaturated) {
    return absl::StrCat(w.c.dev_bandwidth_bound
                            ? absl::StrFormat("the NVMe's bandwidth (%.2f GB/s, the smaller of "
                                              "its PCIe link and its media): ",
                                              w.c.dev_bytes_per_s / 1e9)
                            : std::string("the NVMe's IOPS ceiling: "),
                        dev_text, "; busiest ", cpu_text);
  }
  if (cpu_pct >= kSaturated) return absl::StrCat("CPU: ", cpu_text, "; busiest ", dev_text);
  return absl::StrCat("no CPU or NVMe saturated: iodepth ", w.c.iodepth,
                      " per job over its round trip; busiest ", cpu_text, "; busiest ", dev_text);
}

// The dev_mb_per_s parameter as bytes/s (0: unlimited).
absl::StatusOr<double> DeviceBandwidth(const WorkloadParams& p, const Platform& platform, int nvme,
                                       bool write) {
  const std::string& text = p.Str("dev_mb_per_s");
  if (text.empty()) {
    return platform.devices.empty() ? 0.0 : DeviceDmaBytesPerSec(platform.devices[nvme], write);
  }
  double mb = 0;
  if (!absl::SimpleAtod(text, &mb) || !(mb >= 0 && mb <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fio-nvme: --param dev_mb_per_s=", text, ": not a number in [0, 1e9]"));
  }
  return mb * 1e6;
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
                "as above, and at a tick moves a lone job off a CPU whose interrupts take over "
                "14.5% of it to an idle CPU of the list); split = job i is pinned to CPU i of "
                "the list (mod its length)"},
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
    {.name = "dev_mb_per_s",
     .type = ParamType::kString,
     .default_value = "",
     .meaning = "device bandwidth, MB/s (1e6 bytes), each I/O's bytes occupying the NVMe for "
                "bs / bandwidth; empty = the platform NVMe's: the smaller of its PCIe link and its "
                "datasheet read or write rate (farm-emu list platforms); 0 = unlimited"},
    {.name = "mdts_kb",
     .type = ParamType::kInt,
     .default_value = "4096",
     .min = 4,
     .max = 1 << 20,
     .meaning = "the NVMe's MDTS in KiB (2^MDTS x 4 KiB: 5 = 128, 10 = 4096); the driver caps it "
                "at NVME_MAX_KB_SZ (4096), and behind an IOMMU from 3710e2b056cb at "
                "dma_opt_mapping_size() (128 KiB); a larger I/O is split into commands of that "
                "size, each its own IOVA"},
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
    policy_ = p.Str("cpus_allowed_policy");
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
    absl::StatusOr<double> bw = DeviceBandwidth(p, platform, nvme, c.write);
    if (!bw.ok()) return bw.status();
    c.dev_bytes_per_s = *bw;
    // The NVMe and its link serve one I/O at a time for whichever is longer:
    // the IOPS ceiling's slot or the bytes at the narrower of the two rates.
    const double iops_ns = 1e9 / p.Double("dev_iops");
    c.dev_iops_ns = iops_ns;
    // NVME_MAX_KB_SZ (4 MiB) caps the MDTS in nvme_pci_alloc_dev().
    c.mdts_bytes = std::min<uint64_t>(static_cast<uint64_t>(p.Int("mdts_kb")), 4096) << 10;
    // Rounded up: a whole-ns service time never moves more than the rate.
    const double bytes_ns = *bw > 0 ? std::ceil(static_cast<double>(c.bs) * 1e9 / *bw) : 0;
    c.dev_bandwidth_bound = bytes_ns > iops_ns;
    c.dev_bytes_ns = static_cast<Time>(bytes_ns);
    c.dev_per_io = std::max<Time>(1, static_cast<Time>(std::max(iops_ns, bytes_ns)));
    c.submit_ns = p.Int("submit_ns");
    c.reap_ns = p.Int("reap_ns");
    c.irq_ns = p.Int("irq_ns");
    c.dev = nvme;
    c.dev_node = dev_node;
    return absl::OkStatus();
  }

  absl::Status DoSetup(WorkloadContext& ctx) override {
    Engine& engine = *ctx.engine;
    FioConfig& c = w.c;
    // max_hw_sectors, and so the commands an I/O is split into.
    c.cmd_bytes = c.mdts_bytes;
    const uint64_t opt = ctx.dma->OptMappingSize(c.dev);
    if (ctx.model->nvme_clamp_dma_opt && opt > 0) c.cmd_bytes = std::min(c.cmd_bytes, opt);
    c.cmds = static_cast<int>((c.bs + c.cmd_bytes - 1) / c.cmd_bytes);
    if (c.cmds > 1) {
      const Time slots = static_cast<Time>(std::ceil(c.dev_iops_ns * c.cmds));
      c.dev_per_io = std::max(c.dev_per_io, slots);
      c.dev_bandwidth_bound = c.dev_bytes_ns > slots;
    }
    // This repeat's noise: the CPU paths, the NVMe's service time per I/O
    // (its IOPS ceiling) and its latency.
    c.submit_ns = RunNoise::Scale(c.submit_ns, ctx.noise.cpu);
    c.reap_ns = RunNoise::Scale(c.reap_ns, ctx.noise.cpu);
    c.irq_ns = RunNoise::Scale(c.irq_ns, ctx.noise.cpu);
    // Noise slows or speeds the device, never past its rated bandwidth.
    c.dev_per_io = std::max(RunNoise::Scale(c.dev_per_io, ctx.noise.device), c.dev_bytes_ns);
    c.dev_latency = RunNoise::Scale(c.dev_latency, ctx.noise.turnaround);
    std::vector<int> slot_of_cpu(platform_->topology.num_cpus, -1);
    auto slot_for = [&](int cpu, bool daemon) {
      if (slot_of_cpu[cpu] < 0) {
        slot_of_cpu[cpu] = static_cast<int>(w.slots.size());
        Slot s;
        s.cpu = &engine.AddCpu(cpu, daemon);
        s.job_slot = !daemon;
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
    if (policy_ == "shared") PlanMigrations(slot_for);
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
    // What each NVMe and its link moved, against what they can move.
    std::vector<Time> dev_work(devices_, 0);
    for (const Job& job : w.jobs) dev_work[job.dev] += job.work_ns;
    for (int d = 0; d < devices_; ++d) {
      report.extra[absl::StrCat("nvme", d, "_bytes_per_s")] = static_cast<double>(dev_work[d]) /
                                                              static_cast<double>(w.c.dev_per_io) *
                                                              static_cast<double>(w.c.bs) / secs;
    }
    report.extra["dev_bytes_per_s_limit"] = w.c.dev_bytes_per_s;
    report.throughput_unit = "IOPS";
    report.extra["ios_reaped_in_window"] = static_cast<double>(total);
    report.tool_output = FormatFioJson(out);
    report.limit = LimitText(w, devices_);
    return report;
  }

  // Where the idle balancer would pull each job whose CPU takes interrupts
  // (BalanceTick decides at run time whether they take enough): the first CPU
  // of the allowed list, the job's node first, that runs no job, takes no
  // job's interrupts, and would not send the job's own interrupts to itself
  // or to a CPU running a job (the kernel's pick among idle CPUs is whichever
  // balances first; this is the placement further balancing settles on).
  template <typename SlotFor>
  void PlanMigrations(SlotFor& slot_for) {
    const Topology& topo = platform_->topology;
    std::vector<char> runs_job(topo.num_cpus, 0), takes_irq(topo.num_cpus, 0);
    for (const Job& j : w.jobs) {
      runs_job[j.cpu] = 1;
      takes_irq[irq_[j.dev].IrqCpuFor(j.cpu)] = 1;
    }
    for (Job& j : w.jobs) {
      if (!takes_irq[j.cpu]) continue;
      std::vector<int> order;
      for (int pass = 0; pass < 2; ++pass) {
        for (int cpu : cpus_) {
          if ((topo.cpu_node[cpu] == topo.cpu_node[j.cpu]) == (pass == 0)) order.push_back(cpu);
        }
      }
      for (int cpu : order) {
        const int irq_cpu = irq_[j.dev].IrqCpuFor(cpu);
        if (runs_job[cpu] || takes_irq[cpu] || irq_cpu == cpu || irq_cpu >= topo.num_cpus ||
            runs_job[irq_cpu]) {
          continue;
        }
        runs_job[cpu] = 1;
        takes_irq[irq_cpu] = 1;
        j.dest_slot = slot_for(cpu, false);
        j.dest_irq_slot = slot_for(irq_cpu, true);
        break;
      }
    }
  }

  FioWorld w;
  const Platform* platform_ = nullptr;
  std::vector<int> cpus_;
  std::vector<IrqAffinity> irq_;  // per device
  int numjobs_ = 1, devices_ = 1;
  std::string rw_, engine_name_, policy_;
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
