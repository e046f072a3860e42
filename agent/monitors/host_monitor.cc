#include "agent/monitors/host_monitor.h"

#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/monitors/monitors.h"
#include "lib/base/file.h"
#include "lib/process/process.h"

namespace farm::monitors {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

// The debugfs files whose figures the parser reads (monitors.h); the others
// under iommu/ are tables (page tables, registers), named but not read.
constexpr const char* kIommuCounterFiles[] = {"intel/dmar_perf_latency",
                                              "intel/invalidation_queue"};

// debugfs is usually mounted; an agent as root mounts it where it is not.
std::string MountDebugfs(const fs::path& debug) {
  std::error_code ec;
  if (!fs::is_directory(debug, ec)) return "none exposed (no sys/kernel/debug)";
  if (!base::IsEmptyDirectory(debug.string())) return "";
  if (::mount("debugfs", debug.c_str(), "debugfs", 0, nullptr) != 0) {
    return absl::StrCat("none exposed (debugfs not mounted and mounting it failed: ",
                        std::system_category().message(errno), ")");
  }
  return "";
}

// The files under debugfs iommu/, relative to it, two levels deep (AMD has
// one folder per IOMMU: amd/iommu00/mmio).
std::vector<std::string> IommuFiles(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it.depth() > 2) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_directory(ec)) out.push_back(fs::relative(it->path(), dir, ec).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void AppendIommuParts(const fs::path& root, std::string& out) {
  const fs::path debug = root / "sys/kernel/debug";
  std::string note = MountDebugfs(debug);
  const fs::path iommu = debug / "iommu";
  std::error_code ec;
  if (note.empty() && !fs::is_directory(iommu, ec)) {
    note = "none exposed (debugfs has no iommu/: the IOMMU driver exposes none, or it is off)";
  }
  if (!note.empty()) {
    absl::StrAppend(&out, "%% iommu-note ", note, "\n");
    return;
  }
  absl::StrAppend(&out, "%% iommu-files\n");
  for (const std::string& f : IommuFiles(iommu)) absl::StrAppend(&out, f, "\n");
  for (const char* f : kIommuCounterFiles) {
    absl::StatusOr<std::string> text = base::ReadFile((iommu / f).string());
    if (text.ok()) absl::StrAppend(&out, "%% iommu ", f, "\n", *text, "\n");
  }
}

std::string ParanoidLevel(const std::string& root) {
  return std::string(absl::StripAsciiWhitespace(
      base::ReadFileOrEmpty((fs::path(root) / "proc/sys/kernel/perf_event_paranoid").string())));
}

std::atomic<int> perf_files{0};

}  // namespace

std::string CaptureSnapshot(const std::string& root) {
  const fs::path r(root);
  std::string out;
  absl::StrAppend(&out, "%% interrupts\n", base::ReadFileOrEmpty((r / "proc/interrupts").string()));
  absl::StrAppend(&out, "%% vmstat\n", base::ReadFileOrEmpty((r / "proc/vmstat").string()));
  AppendIommuParts(r, out);
  return out;
}

std::string PerfRefusal(const HostMonitorOptions& options) {
  if (!options.perf) return "perf not asked for";
  absl::StatusOr<std::string> exe = process::ResolveExecutable(options.perf_tool);
  if (!exe.ok()) return absl::StrCat("no perf on this host (", exe.status().message(), ")");
  int level = 0;
  const std::string paranoid = ParanoidLevel(options.root);
  // A system-wide profile needs perf_event_paranoid <= 0 or CAP_PERFMON.
  if (::geteuid() != 0 && absl::SimpleAtoi(paranoid, &level) && level > 0) {
    return absl::StrCat("perf_event_paranoid is ", level,
                        " and the agent is not root: no system-wide profile");
  }
  return "";
}

namespace {

// The kernel counters' options of a monitor: a tag unique in this process,
// so that monitors of runs side by side have their own instances.
KernelCounterOptions CounterOptions(const HostMonitorOptions& o) {
  static std::atomic<int> tags{0};
  KernelCounterOptions k;
  k.root = o.root;
  k.trace = k.latency = k.pmcg = o.kernel_counters;
  k.perf_tool = o.perf_tool;
  k.scratch_dir = o.scratch_dir;
  k.tag = absl::StrCat(::getpid(), "-", tags.fetch_add(1));
  return k;
}

}  // namespace

HostMonitor::HostMonitor(HostMonitorOptions options)
    : options_(std::move(options)), counters_(CounterOptions(options_)) {}

HostMonitor::~HostMonitor() {
  StopPerf();
  if (!perf_data_.empty()) std::remove(perf_data_.c_str());
}

void HostMonitor::Start() {
  perf_note_ = PerfRefusal(options_);
  if (perf_note_.empty()) {
    perf_data_ = absl::StrCat(options_.scratch_dir, "/farm-perf-", ::getpid(), "-",
                              perf_files.fetch_add(1), ".data");
    perf_ = std::thread([this] {
      process::ProcessOptions p;
      p.argv = {
          options_.perf_tool, "record", "-a", "-F", absl::StrCat(options_.perf_frequency), "-o",
          perf_data_};
      // SIGTERM ends the recording; perf then writes its file.
      p.cancelled = [this] { return stop_perf_.load(); };
      p.kill_grace = absl::Seconds(30);
      absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
      perf_ok_ = r.ok();
      perf_stderr_ = r.ok() ? r->stderr_data : std::string(r.status().message());
    });
    // perf opens its file once its events are set up: until then the tool
    // would run unprofiled. Bounded, so a perf that never starts costs 2 s.
    std::error_code ec;
    for (int i = 0; i < 100 && !fs::exists(perf_data_, ec); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  counters_.Start();
  before_ = CaptureSnapshot(options_.root);
}

void HostMonitor::StopPerf() {
  if (!perf_.joinable()) return;
  stop_perf_ = true;
  perf_.join();
}

pb::Monitors HostMonitor::Finish() {
  const std::string events = counters_.Stop();
  const std::string after = CaptureSnapshot(options_.root) + events;
  counters_.DisableLatency();
  StopPerf();
  absl::StatusOr<Snapshot> b = ParseSnapshot(before_);
  absl::StatusOr<Snapshot> a = ParseSnapshot(after);
  pb::Monitors out;
  if (b.ok() && a.ok()) {
    out = Diff(*b, *a, "host");
  } else {
    out.set_where("host");
    out.set_iommu_note(absl::StrCat("no snapshot: ", (b.ok() ? a : b).status().message()));
  }
  if (perf_data_.empty()) {
    out.set_perf_note(perf_note_);
    return out;
  }
  process::ProcessOptions report;
  report.argv = {options_.perf_tool,
                 "report",
                 "-i",
                 perf_data_,
                 "--stdio",
                 "--sort",
                 "sym",
                 "--no-children",
                 "-q",
                 "--percent-limit",
                 "0.5"};
  report.timeout = absl::Minutes(2);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(report);
  if (r.ok() && r->ok()) {
    for (pb::PerfSymbol& s : ParsePerfReport(r->stdout_data)) *out.add_perf() = std::move(s);
  }
  if (out.perf().empty()) {
    std::string why = !perf_ok_ ? perf_stderr_
                      : !r.ok() ? std::string(r.status().message())
                                : absl::StrCat(r->Describe(), " ", r->stderr_data, perf_stderr_);
    out.set_perf_note(absl::StrCat("perf gave no profile: ",
                                   std::string(absl::StripAsciiWhitespace(why)).substr(0, 300)));
  } else {
    out.set_perf_note(absl::StrCat("perf record -a -F ", options_.perf_frequency,
                                   " around the tool; perf report --sort sym"));
  }
  std::remove(perf_data_.c_str());
  perf_data_.clear();
  return out;
}

}  // namespace farm::monitors
