// host_monitor: the monitors of a run on the agent's own kernel. Start()
// takes the snapshot before the tool (monitors.h's layout, read from the
// machine's /proc and debugfs) and starts a system-wide `perf record` when
// this host allows it; Finish() stops the profile, takes the snapshot after
// and returns the delta with the profile's top symbols, or the reason there
// is no profile (no perf, perf_event_paranoid, perf failed) in perf_note.
//
// Around the tool it also counts the kernel's IOMMU events
// (kernel_counters.h: the iommu tracepoints, VT-d latency sampling, SMMUv3
// PMCG), which the delta carries in `events`.
//
// Monitors never fail a run: a file that cannot be read is left out and an
// unreadable snapshot gives empty monitors with the reason in iommu_note.
//
// Thread-safety: a HostMonitor is used by one thread (the run's); separate
// HostMonitors are independent (each profile has its own file). Start() and
// Finish() are called once each, in that order; REQUIRES: Finish() before
// destruction when Start() was called (the destructor stops a profile still
// running, and drops it).
#ifndef AGENT_MONITORS_HOST_MONITOR_H_
#define AGENT_MONITORS_HOST_MONITOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "agent/monitors/kernel_counters.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::monitors {

struct HostMonitorOptions {
  // Where /proc and /sys are: "/" on a real host, a fixture tree in tests.
  std::string root = "/";
  bool perf = true;                  // profile with `perf record -a` when allowed
  std::string perf_tool = "perf";    // executable (tests)
  std::string scratch_dir = "/tmp";  // the profile's data file goes here
  int perf_frequency = 999;          // samples per second per CPU
  // kernel_counters.h's events around the tool: they add work to the
  // measured path (a tracepoint per map and unmap), so only when asked
  // (farm-agent --kernel-counters).
  bool kernel_counters = false;
};

// The snapshot layout of monitors.h from the files under `root`: its
// /proc/interrupts, /proc/vmstat and debugfs iommu/ (mounted first when
// sys/kernel/debug is empty and the mount is allowed).
std::string CaptureSnapshot(const std::string& root);

// Why a system-wide profile cannot be taken here, "" when it can: no such
// executable, or perf_event_paranoid above 0 for a user without
// CAP_PERFMON / root.
std::string PerfRefusal(const HostMonitorOptions& options);

class HostMonitor {
 public:
  explicit HostMonitor(HostMonitorOptions options);
  ~HostMonitor();
  HostMonitor(const HostMonitor&) = delete;
  HostMonitor& operator=(const HostMonitor&) = delete;

  void Start();
  iommufarm::v1::Monitors Finish();

 private:
  void StopPerf();

  const HostMonitorOptions options_;
  KernelCounters counters_;
  std::string before_;
  std::string perf_data_;  // the profile's file; "" when none is taken
  std::string perf_note_;  // why there is none, or how it failed
  std::atomic<bool> stop_perf_{false};
  std::thread perf_;         // runs `perf record` until stop_perf_
  std::string perf_stderr_;  // written by perf_, read after join
  bool perf_ok_ = false;     // written by perf_, read after join
};

}  // namespace farm::monitors

#endif  // AGENT_MONITORS_HOST_MONITOR_H_
