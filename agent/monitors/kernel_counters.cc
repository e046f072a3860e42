#include "agent/monitors/kernel_counters.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/monitors/host_monitor.h"
#include "lib/base/file.h"
#include "lib/process/process.h"

namespace farm::monitors {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

// The tracepoints counted, each with the field its hist trigger sums: the
// size iommu_map was asked for, the size iommu_unmap did unmap.
struct TraceEvent {
  const char* name;
  const char* size_field;
};
constexpr TraceEvent kTraceEvents[] = {{"map", "size"}, {"unmap", "unmapped_size"}};

// The PMCG events of drivers/perf/arm_smmuv3_pmu.c worth a run's diff.
constexpr const char* kPmcgEvents[] = {"transaction", "tlb_miss", "config_cache_miss",
                                       "trans_table_walk_access"};

constexpr char kLatencyFile[] = "sys/kernel/debug/iommu/intel/dmar_perf_latency";
constexpr char kQueueFile[] = "sys/kernel/debug/iommu/intel/invalidation_queue";

std::string Errno() { return std::system_category().message(errno); }

// One write(2) of `value`, as `echo value > path` does: tracefs and debugfs
// files act on each write. "" on success, else why.
std::string WriteKernelFile(const std::string& path, absl::string_view value) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return absl::StrCat(path, ": ", Errno());
  const ssize_t n = ::write(fd, value.data(), value.size());
  std::string why =
      n == static_cast<ssize_t>(value.size()) ? "" : absl::StrCat(path, ": ", Errno());
  ::close(fd);
  return why;
}

bool IsTracefs(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "instances", ec);
}

std::string TraceNote(const std::string& why) { return absl::StrCat("trace: ", why); }

// The stats of every CPU of an instance, concatenated (ParseTraceStats).
std::string PerCpuStats(const std::string& dir, int* cpus) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "per_cpu", ec)) {
    if (fs::exists(e.path() / "stats", ec)) files.push_back(e.path() / "stats");
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const fs::path& f : files) absl::StrAppend(&out, base::ReadFileOrEmpty(f.string()));
  *cpus = static_cast<int>(files.size());
  return out;
}

}  // namespace

std::string FindTracefs(const std::string& root, std::string* why) {
  const fs::path own = fs::path(root) / "sys/kernel/tracing";
  const fs::path old = fs::path(root) / "sys/kernel/debug/tracing";
  if (IsTracefs(own)) return own.string();
  if (IsTracefs(old)) return old.string();
  if (base::IsEmptyDirectory(own.string()) &&
      ::mount("nodev", own.c_str(), "tracefs", 0, nullptr) == 0 && IsTracefs(own)) {
    return own.string();
  }
  std::error_code ec;
  *why =
      fs::is_directory(own, ec)
          ? absl::StrCat(
                "no tracefs (sys/kernel/tracing not mounted and mounting it failed: ", Errno(), ")")
          : "no tracefs (a kernel without CONFIG_TRACING)";
  return "";
}

std::vector<std::string> PmcgEvents(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = fs::path(root) / "sys/bus/event_source/devices";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string pmu = e.path().filename().string();
    if (pmu.rfind("smmuv3_pmcg_", 0) != 0) continue;
    for (const char* ev : kPmcgEvents) {
      if (fs::exists(e.path() / "events" / ev, ec)) out.push_back(absl::StrCat(pmu, "/", ev, "/"));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> PerfStatArgv(const std::string& perf_tool,
                                      const std::vector<std::string>& events,
                                      const std::string& out_file, const std::string& flag_file) {
  // A workload that ends when the flag goes: perf stat then prints its counts
  // (ending perf stat itself by a signal would need SIGINT, not the process
  // library's SIGTERM, which kills perf before it prints).
  return {perf_tool,
          "stat",
          "-a",
          "-x",
          ",",
          "-o",
          out_file,
          "-e",
          absl::StrJoin(events, ","),
          "--",
          "sh",
          "-c",
          absl::StrCat("while [ -e '", flag_file, "' ]; do sleep 0.1; done")};
}

std::vector<pb::MonitorCounter> CounterInventory(const KernelCounterOptions& options) {
  std::vector<pb::MonitorCounter> out;
  auto add = [&out](std::string name, bool present, std::string note) {
    pb::MonitorCounter c;
    c.set_name(std::move(name));
    c.set_present(present);
    c.set_note(std::move(note));
    out.push_back(std::move(c));
  };
  std::string why;
  const std::string tracefs = FindTracefs(options.root, &why);
  for (const TraceEvent& e : kTraceEvents) {
    const std::string name = absl::StrCat("trace/iommu:", e.name);
    const fs::path event = fs::path(tracefs) / "events/iommu" / e.name;
    std::error_code ec;
    if (tracefs.empty()) {
      add(name, false, why);
    } else if (!fs::is_directory(event, ec)) {
      add(name, false, "no such tracepoint in this kernel (tracefs has no events/iommu/)");
    } else if (::access((fs::path(tracefs) / "instances").c_str(), W_OK) != 0) {
      add(name, false, "not root: cannot make a tracefs instance");
    } else {
      add(name, true, event.string());
    }
  }
  const fs::path root(options.root);
  std::error_code ec;
  for (const auto& [name, file] :
       {std::pair<const char*, const char*>{"dmar_perf_latency", kLatencyFile},
        {"invalidation_queue", kQueueFile}}) {
    const bool debugfs_readable = ::access((root / "sys/kernel/debug").c_str(), R_OK | X_OK) == 0;
    if (fs::exists(root / file, ec)) {
      add(name, true, (root / file).string());
    } else if (!debugfs_readable) {
      add(name, false, "debugfs not readable here (not root)");
    } else {
      add(name, false,
          absl::StrCat("no debugfs iommu/intel/", name,
                       " (not VT-d, or a kernel without CONFIG_INTEL_IOMMU_DEBUGFS)"));
    }
  }
  const std::vector<std::string> pmcg = PmcgEvents(options.root);
  HostMonitorOptions perf;
  perf.root = options.root;
  perf.perf_tool = options.perf_tool;
  const std::string refusal = pmcg.empty() ? "" : PerfRefusal(perf);
  if (pmcg.empty()) {
    add("pmcg", false,
        "no smmuv3_pmcg_* PMU (not SMMUv3, no PMCG, or a kernel without "
        "CONFIG_ARM_SMMU_V3_PMU)");
  } else {
    add("pmcg", refusal.empty(), refusal.empty() ? absl::StrJoin(pmcg, " ") : refusal);
  }
  return out;
}

KernelCounters::KernelCounters(KernelCounterOptions options) : options_(std::move(options)) {}

KernelCounters::~KernelCounters() {
  if (!stopped_) Stop();
  DisableLatency();
}

void KernelCounters::Start() {
  const std::string latency = (fs::path(options_.root) / kLatencyFile).string();
  std::error_code ec;
  if (options_.latency && fs::exists(latency, ec)) {
    // One write per type: the file takes one number at a time.
    for (const char* type : {"1", "2", "3", "4"}) {
      std::string why = WriteKernelFile(latency, type);
      if (why.empty()) {
        latency_on_ = true;
      } else {
        notes_.push_back(absl::StrCat("dmar_perf_latency: type ", type, " not enabled: ", why));
      }
    }
  }
  if (options_.trace) StartTrace();
  if (options_.pmcg) StartPmcg();
}

void KernelCounters::StartTrace() {
  std::string why;
  const std::string tracefs = FindTracefs(options_.root, &why);
  if (tracefs.empty()) {
    notes_.push_back(TraceNote(why));
    return;
  }
  for (const TraceEvent& e : kTraceEvents) {
    std::error_code ec;
    if (!fs::is_directory(fs::path(tracefs) / "events/iommu" / e.name, ec)) {
      notes_.push_back(TraceNote(absl::StrCat("no iommu:", e.name, " event in this kernel")));
      continue;
    }
    Instance in{e.name, absl::StrCat(tracefs, "/instances/farm-iommu-", e.name, "-", options_.tag),
                ""};
    // EEXIST: one of ours a crashed agent left (the tag is ours); reused.
    if (::mkdir(in.dir.c_str(), 0755) != 0 && errno != EEXIST) {
      notes_.push_back(TraceNote(absl::StrCat(errno == EACCES || errno == EPERM ? "not root: " : "",
                                              "cannot make ", in.dir, ": ", Errno())));
      continue;
    }
    // Opening `trace` with O_TRUNC empties every CPU's buffer and zeroes its
    // counters (trace.c tracing_open -> tracing_reset_online_cpus).
    WriteKernelFile(in.dir + "/trace", "");
    const std::string event_dir = absl::StrCat(in.dir, "/events/iommu/", e.name);
    if (!fs::exists(event_dir + "/hist", ec)) {
      notes_.push_back(TraceNote(
          absl::StrCat("iommu:", e.name, ": no bytes (a kernel without CONFIG_HIST_TRIGGERS)")));
    } else if (WriteKernelFile(event_dir + "/trigger", absl::StrCat("hist:keys=", e.size_field))
                   .empty()) {
      in.hist_key = e.size_field;
    }
    why = WriteKernelFile(event_dir + "/enable", "1");
    if (!why.empty()) notes_.push_back(TraceNote(absl::StrCat("iommu:", e.name, ": ", why)));
    instances_.push_back(std::move(in));
  }
}

std::string KernelCounters::StopTrace() {
  std::string out;
  for (const Instance& in : instances_) {
    const std::string event_dir = absl::StrCat(in.dir, "/events/iommu/", in.event);
    WriteKernelFile(event_dir + "/enable", "0");
    int cpus = 0;
    const std::string stats = PerCpuStats(in.dir, &cpus);
    if (cpus == 0) {
      notes_.push_back(TraceNote(absl::StrCat("iommu:", in.event, ": no per_cpu stats")));
    } else {
      absl::StrAppend(&out, "%% trace iommu:", in.event, "\n", stats);
    }
    if (!in.hist_key.empty()) {
      absl::StrAppend(&out, "%% trace-hist iommu:", in.event, "\n",
                      base::ReadFileOrEmpty(event_dir + "/hist"));
      // A hist trigger keeps the event soft-enabled: removed before rmdir.
      WriteKernelFile(event_dir + "/trigger", absl::StrCat("!hist:keys=", in.hist_key));
    }
    // rmdir, never a recursive removal: tracefs frees the instance itself.
    ::rmdir(in.dir.c_str());
  }
  instances_.clear();
  return out;
}

void KernelCounters::StartPmcg() {
  const std::vector<std::string> events = PmcgEvents(options_.root);
  if (events.empty()) return;  // the inventory says why, once
  HostMonitorOptions perf;
  perf.root = options_.root;
  perf.perf_tool = options_.perf_tool;
  if (std::string refusal = PerfRefusal(perf); !refusal.empty()) {
    notes_.push_back(absl::StrCat("pmcg: ", refusal));
    return;
  }
  const std::string base =
      absl::StrCat(options_.scratch_dir, "/farm-pmcg-", ::getpid(), "-", options_.tag);
  perf_out_ = base + ".csv";
  perf_flag_ = base + ".running";
  if (!base::WriteFile(perf_flag_, "").ok()) {
    notes_.push_back(absl::StrCat("pmcg: cannot write ", perf_flag_));
    perf_out_.clear();
    return;
  }
  process::ProcessOptions p;
  p.argv = PerfStatArgv(options_.perf_tool, events, perf_out_, perf_flag_);
  p.timeout = absl::Hours(24);
  perf_ = std::thread([this, p] {
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    if (!r.ok())
      perf_error_ = std::string(r.status().message());
    else if (!r->ok())
      perf_error_ = absl::StrCat(r->Describe(), " ", r->stderr_data);
  });
}

std::string KernelCounters::StopPmcg() {
  if (perf_out_.empty()) return "";
  std::remove(perf_flag_.c_str());
  if (perf_.joinable()) perf_.join();
  std::string out;
  const std::string csv = base::ReadFileOrEmpty(perf_out_);
  if (!perf_error_.empty()) {
    notes_.push_back(absl::StrCat("pmcg: perf stat failed: ", perf_error_.substr(0, 300)));
  } else {
    absl::StrAppend(&out, "%% perf-stat\n", csv);
  }
  std::remove(perf_out_.c_str());
  perf_out_.clear();
  return out;
}

std::string KernelCounters::Stop() {
  stopped_ = true;
  std::string out = StopTrace();
  absl::StrAppend(&out, StopPmcg());
  for (const std::string& n : notes_) absl::StrAppend(&out, "%% event-note ", n, "\n");
  notes_.clear();
  return out;
}

void KernelCounters::DisableLatency() {
  if (!latency_on_) return;
  latency_on_ = false;
  WriteKernelFile((fs::path(options_.root) / kLatencyFile).string(), "0");
}

}  // namespace farm::monitors
