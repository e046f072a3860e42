// monitors: what the kernel counted around a real run's tool, as LKP's and
// MMTests' monitors record it: /proc/interrupts per source and CPU,
// /proc/vmstat, and the IOMMU driver's debugfs counters, each a snapshot
// before the tool and one after, turned into a delta (iommufarm.v1.Monitors).
//
// A snapshot travels as one text layout, whoever took it: the host's
// CaptureSnapshot (host_monitor.h) writes it, and so does the guest's init
// (agent/kernels/guest/init, its monitor-before / monitor-after sections),
// so ParseSnapshot is the one reader of both. Layout: parts, each opened by
// a line "%% <part> [<argument>]":
//   %% interrupts            /proc/interrupts verbatim
//   %% vmstat                /proc/vmstat verbatim
//   %% iommu-files           the files under debugfs iommu/, one a line
//                            ("intel/dmar_perf_latency")
//   %% iommu <file>          that file's contents (intel/dmar_perf_latency,
//                            intel/invalidation_queue)
//   %% iommu-note <text>     why no debugfs files could be read
//   %% trace <event>         after the tool only: the per_cpu/cpuN/stats
//                            files of the event's private tracefs instance,
//                            concatenated ("iommu:map")
//   %% trace-hist <event>    that instance's hist file of the event (sizes)
//   %% perf-stat             `perf stat -x,` output of the PMCG events
//   %% event-note <text>     an event source that could not be counted, why
// Unknown parts are skipped, so an older reader takes a newer snapshot.
//
// Contract: pure functions of their input (no I/O), thread-safe. Parsers
// return InvalidArgument naming the line they cannot read; a line they do
// not know of (a new /proc/interrupts row shape) is kept as far as it goes
// rather than refused, since kernels add lines.
#ifndef AGENT_MONITORS_MONITORS_H_
#define AGENT_MONITORS_MONITORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::monitors {

// One /proc/interrupts line.
struct InterruptLine {
  std::string irq;              // "24", "LOC", "IPI0", "ERR"
  std::string description;      // "PCI-MSIX-0000:00:04.0 1-edge nvme0q1"; words joined by one space
  std::vector<int64_t> counts;  // one per CPU column; one count for ERR / MIS lines
  bool per_cpu = true;          // false: `counts` is the line's single count
};

struct InterruptTable {
  std::vector<std::string> cpus;  // "CPU0", "CPU3" (offline CPUs have no column)
  std::vector<InterruptLine> lines;
};

// One debugfs IOMMU figure (see iommufarm.v1.IommuCounter for names).
struct IommuValue {
  double value = 0;
  bool gauge = false;
};

struct Snapshot {
  InterruptTable interrupts;
  std::map<std::string, int64_t> vmstat;
  std::map<std::string, IommuValue> iommu;
  std::vector<std::string> iommu_files;
  std::string iommu_note;
  std::map<std::string, int64_t> events;  // "trace/iommu:map", "pmcg/<pmu>/tlb_miss"
  std::vector<std::string> event_notes;
};

// The text of /proc/interrupts: x86 (IO-APIC, PCI-MSIX, LOC, ERR, MIS) and
// arm64 (GICv3, ITS-MSI, IPI0..) shapes alike.
absl::StatusOr<InterruptTable> ParseInterrupts(absl::string_view text);

// The text of /proc/vmstat ("<name> <value>" lines).
absl::StatusOr<std::map<std::string, int64_t>> ParseVmstat(absl::string_view text);

// VT-d's dmar_perf_latency (CONFIG_DMAR_PERF; drivers/iommu/intel/perf.c):
// per IOMMU a header of latency buckets and one row per enabled latency
// type; buckets are counts, min/max/average gauges. Names
// "dmar_perf_latency/<iommu>/<type>/<column>".
std::map<std::string, IommuValue> ParseDmarPerfLatency(absl::string_view text);

// VT-d's invalidation_queue: each IOMMU's queue head and tail (gauges:
// ring positions), "invalidation_queue/<iommu>/head".
std::map<std::string, IommuValue> ParseInvalidationQueue(absl::string_view text);

// The events a tracefs instance recorded, from its per_cpu/cpuN/stats files
// (any number of them, concatenated). kernel/trace/trace.c's
// tracing_stats_read prints per CPU "entries" (ring_buffer_entries_cpu:
// rb_num_of_entries = entries written - (overrun + read), i.e. what is still
// in the buffer), "overrun" (events overwritten when the buffer wrapped in
// overwrite mode), "commit overrun" (events lost to a wrap inside a nested
// commit), "dropped events" (events refused when full with overwrite off)
// and "read events" (consumed by a reader). Every event that fired while
// the instance recorded is in exactly one of them, so their sum is the
// count, however small the buffer.
int64_t ParseTraceStats(absl::string_view text);

// The bytes of an event's hist trigger keyed by a size field
// ("hist:keys=size"): the sum of key * hitcount over its entries; -1 when
// the text has no such entries and no "Hits:" total (no hist output).
int64_t ParseHistBytes(absl::string_view text);

// `perf stat -x,` lines of PMU events ("1234,,smmuv3_pmcg_100020/tlb_miss/,
// ...") as "pmcg/<pmu>/<event>" counts; "<not counted>" and "<not
// supported>" lines are left out.
std::map<std::string, int64_t> ParsePerfStat(absl::string_view text);

// A snapshot in the layout above.
absl::StatusOr<Snapshot> ParseSnapshot(absl::string_view text);

// The action a numbered line belongs to (its description's last word), else
// the label: what runs are compared by, since IRQ numbers differ by boot.
std::string InterruptSource(const InterruptLine& line);

// The change from `before` to `after`: lines whose count moved (a line new
// in `after` counts from 0; a CPU new in `after` too; a count that went down
// was reset, so its delta is its count after), vmstat deltas other than
// zero, IOMMU counters present after, and every event of `after` (zero
// included: a map count of 0 is a finding) less its `before` count. `where`
// is "host" or "guest".
iommufarm::v1::Monitors Diff(const Snapshot& before, const Snapshot& after,
                             absl::string_view where);

// The IOTLB invalidations VT-d's dmar_perf_latency timed in `m`: the deltas
// of its inv_iotlb buckets, summed over every IOMMU; -1 when `m` holds no
// dmar_perf_latency counter (a kernel without CONFIG_DMAR_PERF).
int64_t SampledIotlbInvalidations(const iommufarm::v1::Monitors& m);

// `perf report --stdio --sort sym -q` lines ("  13.93%  [k] iommu_dma_map_page"),
// at most `max` of them, largest share first.
std::vector<iommufarm::v1::PerfSymbol> ParsePerfReport(absl::string_view text, int max = 20);

}  // namespace farm::monitors

#endif  // AGENT_MONITORS_MONITORS_H_
