// emu/workloads/tool_formats.h: the emulator's results printed in the real tools' own
// formats, so that one parser (agent/runners: ParseFioJson,
// ParseIozoneReport) serves emulated and real runs alike.
//
//  - FormatFioJson: fio's --output-format=json layout ("fio version", jobs[]
//    with read/write/trim blocks: io_bytes, io_kbytes, bw (KiB/s), bw_bytes,
//    iops, runtime (ms), total_ios, clat_ns {min,max,mean,stddev,N,
//    percentile{"50.000000": ns, ...}}, lat_ns, slat_ns).
//  - FormatIozone: iozone's throughput-mode (-t) report blocks ("Children see
//    throughput for 12 initial writers = ... kB/sec", Parent/Min/Max/Avg, Min
//    xfer, CPU utilization), as seed 000 quotes them.
//
// Pure functions of their inputs; thread-safe. No dependence on the engine:
// workloads fill these plain structs from their statistics.
#ifndef EMU_WORKLOADS_TOOL_FORMATS_H_
#define EMU_WORKLOADS_TOOL_FORMATS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace farm::emu {

// fio's default completion-latency percentile list (--percentile_list).
const std::vector<double>& FioDefaultPercentiles();

struct FioLatencyOut {
  uint64_t n = 0;
  double min_ns = 0, max_ns = 0, mean_ns = 0, stddev_ns = 0;
  // (percentile in [0,100], value in ns), ascending; usually one entry per
  // FioDefaultPercentiles() value.
  std::vector<std::pair<double, double>> percentiles;
};

struct FioDirectionOut {
  uint64_t io_bytes = 0;
  uint64_t total_ios = 0;
  uint64_t runtime_ms = 0;  // virtual milliseconds the direction ran
  FioLatencyOut clat;
};

struct FioJobOut {
  std::string name;
  // Job options as fio echoes them ("rw": "randread", "bs": "4k", ...).
  std::vector<std::pair<std::string, std::string>> options;
  FioDirectionOut read, write;
  uint64_t job_runtime_ms = 0;
  double usr_cpu = 0, sys_cpu = 0;  // percent
};

struct FioRunOut {
  std::string version = "fio-3.33";  // layout followed; "farm-emu" is in "emulator"
  uint64_t timestamp = 0;            // virtual: fixed for determinism
  std::vector<FioJobOut> jobs;
};

std::string FormatFioJson(const FioRunOut& run);

struct IozoneTestOut {
  std::string label;                     // "initial writers", "rewriters", "readers", "re-readers"
  std::vector<double> per_process_kb_s;  // one per process (child)
  double parent_kb_s = 0;                // iozone's "Parent sees" (<= children)
  double min_xfer_kb = 0;
  double wall_s = 0, cpu_s = 0;  // for the CPU utilization line
};

struct IozoneRunOut {
  std::string command_line;  // echoed as iozone's "Command line used:"
  int processes = 0;
  uint64_t file_kb = 0, record_kb = 0;
  std::vector<IozoneTestOut> tests;
};

std::string FormatIozone(const IozoneRunOut& run);

// iozone's label for a test short name (write -> "initial writers", rewrite ->
// "rewriters", read -> "readers", reread -> "re-readers"); empty if unknown.
std::string IozoneLabel(const std::string& test);

}  // namespace farm::emu

#endif  // EMU_WORKLOADS_TOOL_FORMATS_H_
