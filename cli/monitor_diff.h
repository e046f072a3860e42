// farm::cli monitor diff: the monitors (iommufarm.v1.Monitors, recorded
// around every real run) of two sides of `farmctl compare`, and of one
// matrix for `farmctl report`, as counters with a mean per run.
//
// Counters, one name each: "interrupts/<source>" (an action's interrupts
// summed over CPUs: "interrupts/nvme0q1"), "interrupts-cpu/<CPU>" (every
// source on that CPU), "vmstat/<name>", "iommu/<name>" (a debugfs counter's
// delta, a gauge's level after the run), "perf/<symbol>" (its share of
// the profile, in percent) and the kernel events by their own names
// ("trace/iommu:map", "trace/iommu:map/bytes", "pmcg/<pmu>/tlb_miss"). A run with monitors that
// lacks a counter counts it as 0; runs without monitors (emulator runs) are not counted.
//
// Pure functions over results already fetched; thread-safe.
#ifndef CLI_MONITOR_DIFF_H_
#define CLI_MONITOR_DIFF_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli/report.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

// One side's counters: their mean per run over `runs` runs with monitors.
struct MonitorMeans {
  int64_t runs = 0;
  std::map<std::string, double> mean;
};
MonitorMeans MeanMonitors(const std::vector<iommufarm::v1::Result>& results);

struct MonitorRow {
  std::string counter;
  int64_t runs_a = 0, runs_b = 0;
  double mean_a = 0, mean_b = 0;
  double change = 0;  // (mean_b - mean_a) / |mean_a| (stats::kFromZero from 0)
};

// The counters that changed notably from A to B: by at least 10% and by at
// least 1 a run (0.5 points of the profile for perf), largest relative
// change first (then largest absolute), at most `max_rows`. Empty when a
// side has no run with monitors.
std::vector<MonitorRow> CompareMonitors(const std::vector<iommufarm::v1::Result>& a,
                                        const std::vector<iommufarm::v1::Result>& b,
                                        size_t max_rows = 40);

// The diff as a report table (compare's --html page) and its text forms.
ReportTable MonitorDiffTable(const std::vector<MonitorRow>& rows);
std::string FormatMonitorDiffTable(const std::vector<MonitorRow>& rows);
std::string FormatMonitorDiffCsv(const std::vector<MonitorRow>& rows);

// `farmctl report`'s table of a matrix's monitors: per counter its mean per
// run in each IOMMU mode the matrix ran, the `max_rows_per_kind` largest of
// each kind (interrupts, interrupts-cpu, iommu, perf, vmstat).
ReportTable MatrixMonitorsTable(const std::vector<iommufarm::v1::Result>& results,
                                size_t max_rows_per_kind = 10);

}  // namespace farm::cli

#endif  // CLI_MONITOR_DIFF_H_
