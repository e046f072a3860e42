#include "emu/workloads/tool_formats.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

namespace farm::emu {
namespace {

using nlohmann::ordered_json;

std::string PercentileKey(double p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%f", p);
  return buf;
}

ordered_json LatencyJson(const FioLatencyOut& l, bool with_percentiles) {
  ordered_json j;
  j["min"] = static_cast<uint64_t>(l.min_ns);
  j["max"] = static_cast<uint64_t>(l.max_ns);
  j["mean"] = l.mean_ns;
  j["stddev"] = l.stddev_ns;
  j["N"] = l.n;
  if (with_percentiles && l.n > 0) {
    ordered_json p = ordered_json::object();
    for (const auto& [pct, ns] : l.percentiles) p[PercentileKey(pct)] = static_cast<uint64_t>(ns);
    j["percentile"] = p;
  }
  return j;
}

ordered_json DirectionJson(const FioDirectionOut& d) {
  ordered_json j;
  double secs = static_cast<double>(d.runtime_ms) / 1000.0;
  double bw_bytes = secs > 0 ? static_cast<double>(d.io_bytes) / secs : 0;
  double iops = secs > 0 ? static_cast<double>(d.total_ios) / secs : 0;
  j["io_bytes"] = d.io_bytes;
  j["io_kbytes"] = d.io_bytes / 1024;
  j["bw_bytes"] = static_cast<uint64_t>(bw_bytes);
  j["bw"] = static_cast<uint64_t>(bw_bytes / 1024);
  j["iops"] = iops;
  j["runtime"] = d.runtime_ms;
  j["total_ios"] = d.total_ios;
  j["short_ios"] = 0;
  j["drop_ios"] = 0;
  // Submission latency is not modelled separately: it is part of clat.
  FioLatencyOut zero;
  j["slat_ns"] = LatencyJson(zero, false);
  j["clat_ns"] = LatencyJson(d.clat, true);
  j["lat_ns"] = LatencyJson(d.clat, false);
  j["bw_min"] = static_cast<uint64_t>(bw_bytes / 1024);
  j["bw_max"] = static_cast<uint64_t>(bw_bytes / 1024);
  j["bw_agg"] = d.total_ios > 0 ? 100.0 : 0.0;
  j["bw_mean"] = bw_bytes / 1024;
  j["bw_dev"] = 0.0;
  j["bw_samples"] = d.total_ios > 0 ? 1 : 0;
  j["iops_min"] = static_cast<uint64_t>(iops);
  j["iops_max"] = static_cast<uint64_t>(iops);
  j["iops_mean"] = iops;
  j["iops_stddev"] = 0.0;
  j["iops_samples"] = d.total_ios > 0 ? 1 : 0;
  return j;
}

}  // namespace

const std::vector<double>& FioDefaultPercentiles() {
  static const std::vector<double> k = {1,  5,  10, 20, 30,   40,   50,    60,   70,
                                        80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99};
  return k;
}

std::string FormatFioJson(const FioRunOut& run) {
  ordered_json root;
  root["fio version"] = run.version;
  root["emulator"] = "farm-emu";
  root["timestamp"] = run.timestamp;
  root["timestamp_ms"] = run.timestamp * 1000;
  root["time"] = "Thu Jan  1 00:00:00 1970";
  root["global options"] = ordered_json::object();
  ordered_json jobs = ordered_json::array();
  for (const FioJobOut& job : run.jobs) {
    ordered_json j;
    j["jobname"] = job.name;
    j["groupid"] = 0;
    j["error"] = 0;
    j["eta"] = 0;
    j["elapsed"] = (job.job_runtime_ms + 999) / 1000;
    ordered_json opts = ordered_json::object();
    for (const auto& [k, v] : job.options) opts[k] = v;
    j["job options"] = opts;
    j["read"] = DirectionJson(job.read);
    j["write"] = DirectionJson(job.write);
    j["trim"] = DirectionJson(FioDirectionOut{});
    j["sync"] = {{"total_ios", 0}, {"lat_ns", LatencyJson(FioLatencyOut{}, false)}};
    j["job_runtime"] = job.job_runtime_ms;
    j["usr_cpu"] = job.usr_cpu;
    j["sys_cpu"] = job.sys_cpu;
    j["ctx"] = 0;
    j["majf"] = 0;
    j["minf"] = 0;
    jobs.push_back(std::move(j));
  }
  root["jobs"] = std::move(jobs);
  return root.dump(2) + "\n";
}

std::string IozoneLabel(const std::string& test) {
  if (test == "write") return "initial writers";
  if (test == "rewrite") return "rewriters";
  if (test == "read") return "readers";
  if (test == "reread") return "re-readers";
  return "";
}

std::string FormatIozone(const IozoneRunOut& run) {
  std::string out;
  char buf[256];
  out += "\tIozone: Performance Test of File I/O (emulated by farm-emu)\n\n";
  if (!run.command_line.empty()) out += "\tCommand line used: " + run.command_line + "\n";
  std::snprintf(buf, sizeof(buf), "\tThroughput test with %d processes\n", run.processes);
  out += buf;
  std::snprintf(
      buf, sizeof(buf), "\tEach process writes a %llu kByte file in %llu kByte records\n\n",
      static_cast<unsigned long long>(run.file_kb), static_cast<unsigned long long>(run.record_kb));
  out += buf;
  for (const IozoneTestOut& t : run.tests) {
    const std::vector<double>& p = t.per_process_kb_s;
    double sum = std::accumulate(p.begin(), p.end(), 0.0);
    double mn = p.empty() ? 0 : *std::min_element(p.begin(), p.end());
    double mx = p.empty() ? 0 : *std::max_element(p.begin(), p.end());
    double avg = p.empty() ? 0 : sum / static_cast<double>(p.size());
    std::snprintf(buf, sizeof(buf), "\tChildren see throughput for %2zu %-16s= %12.2f kB/sec\n",
                  p.size(), t.label.c_str(), sum);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\tParent sees throughput for %2zu %-16s= %12.2f kB/sec\n",
                  p.size(), t.label.c_str(), t.parent_kb_s);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\tMin throughput per process \t\t\t= %12.2f kB/sec \n", mn);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\tMax throughput per process \t\t\t= %12.2f kB/sec\n", mx);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\tAvg throughput per process \t\t\t= %12.2f kB/sec\n", avg);
    out += buf;
    std::snprintf(buf, sizeof(buf), "\tMin xfer \t\t\t\t\t= %12.2f kB\n", t.min_xfer_kb);
    out += buf;
    double util = t.wall_s > 0 ? 100.0 * t.cpu_s / t.wall_s : 0;
    std::snprintf(
        buf, sizeof(buf),
        "\tCPU Utilization: Wall time %8.3f    CPU time %8.3f    CPU utilization %6.2f %%\n\n",
        t.wall_s, t.cpu_s, util);
    out += buf;
  }
  out += "\n\niozone test complete.\n";
  return out;
}

}  // namespace farm::emu
