// kernel_counters: the kernel's own IOMMU event counters around a real run's
// tool, beyond the snapshots of monitors.h, switched on just for the tool:
//   - the iommu:map and iommu:unmap tracepoints (include/trace/events/iommu.h,
//     fired by iommu_map/iommu_unmap for every mapping the DMA API makes in a
//     translated domain), each counted in a private tracefs instance of its
//     own ("instances/farm-iommu-map-<tag>", only that event enabled, the
//     ring buffer in its default overwrite mode), and its mapped bytes from a
//     hist trigger keyed by the size where the kernel has hist triggers;
//   - VT-d's debugfs iommu/intel/dmar_perf_latency, whose sampling is
//     switched on for the tool (drivers/iommu/intel/debugfs.c
//     dmar_perf_latency_write: writing 1, 2, 3 or 4 enables the inv_iotlb,
//     inv_devtlb, inv_iec or svm_prq latency type on every active IOMMU
//     (perf.c dmar_latency_enable), writing 0 disables all four and
//     dmar_latency_disable clears their buckets);
//   - SMMUv3 PMCG events (drivers/perf/arm_smmuv3_pmu.c: tlb_miss,
//     transaction, ...) through `perf stat -a` for the tool's length, where
//     smmuv3_pmcg_* PMUs exist and perf may count system-wide.
// The counts travel as snapshot parts of monitors.h's layout (trace,
// trace-hist, perf-stat, event-note), so the guest's init, which does the
// same in shell, is read by the same parser.
//
// Nothing here fails a run: what cannot be switched on or read becomes an
// event-note ("trace: not root ..."), and whatever was switched on is
// switched off again (instances removed) by Stop() or the destructor.
//
// Thread-safety: a KernelCounters is used by one thread; separate ones are
// independent when their tags differ (each has its own instances and files).
// The dmar_perf_latency switch is system-wide: two runs side by side share
// it, and the first to finish switches it off (documented in docs/usage.md).
#ifndef AGENT_MONITORS_KERNEL_COUNTERS_H_
#define AGENT_MONITORS_KERNEL_COUNTERS_H_

#include <string>
#include <thread>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::monitors {

struct KernelCounterOptions {
  std::string root = "/";            // "/" on a real host, a fixture tree in tests
  bool trace = true;                 // the iommu tracepoints
  bool latency = true;               // VT-d dmar_perf_latency sampling
  bool pmcg = true;                  // SMMUv3 PMCG through perf stat
  std::string perf_tool = "perf";    // executable (tests)
  std::string scratch_dir = "/tmp";  // perf stat's output and flag files
  std::string tag = "0";             // unique among the agent's live monitors
};

// The tracefs directory under `root` (sys/kernel/tracing, else
// sys/kernel/debug/tracing; tracefs is mounted at the first when it is an
// empty directory and the mount is allowed); "" and the reason in *why when
// there is none.
std::string FindTracefs(const std::string& root, std::string* why);

// The smmuv3_pmcg_* PMUs of sys/bus/event_source/devices under `root`, each
// with the events of interest it lists ("smmuv3_pmcg_100020/tlb_miss/").
std::vector<std::string> PmcgEvents(const std::string& root);

// `perf stat` counting `events` system-wide into `out_file`, CSV, for as
// long as `flag_file` exists (its workload is a shell loop that polls it).
std::vector<std::string> PerfStatArgv(const std::string& perf_tool,
                                      const std::vector<std::string>& events,
                                      const std::string& out_file, const std::string& flag_file);

// Which of these counters this host has, and why not where it has none: one
// entry each for trace/iommu:map, trace/iommu:unmap, dmar_perf_latency,
// invalidation_queue and pmcg. For the inventory, said once at agent start.
std::vector<iommufarm::v1::MonitorCounter> CounterInventory(const KernelCounterOptions& options);

class KernelCounters {
 public:
  explicit KernelCounters(KernelCounterOptions options);
  ~KernelCounters();
  KernelCounters(const KernelCounters&) = delete;
  KernelCounters& operator=(const KernelCounters&) = delete;

  // Before the tool's "before" snapshot: latency sampling on, tracepoint
  // instances made and enabled, perf stat started.
  void Start();
  // Right after the tool: events off, their snapshot parts (to append to
  // the "after" snapshot), instances removed, perf stat ended. Once.
  std::string Stop();
  // After the "after" snapshot read dmar_perf_latency: sampling off.
  void DisableLatency();

 private:
  struct Instance {
    std::string event;     // "map"
    std::string dir;       // its instance directory
    std::string hist_key;  // "" when no hist trigger was set
  };
  void StartTrace();
  std::string StopTrace();
  void StartPmcg();
  std::string StopPmcg();

  const KernelCounterOptions options_;
  std::vector<std::string> notes_;
  std::vector<Instance> instances_;
  bool latency_on_ = false;
  std::string perf_out_;    // perf stat's CSV file; "" when not counting
  std::string perf_flag_;   // exists while perf stat counts
  std::thread perf_;        // runs perf stat until perf_flag_ is removed
  std::string perf_error_;  // written by perf_, read after join
  bool stopped_ = false;
};

}  // namespace farm::monitors

#endif  // AGENT_MONITORS_KERNEL_COUNTERS_H_
