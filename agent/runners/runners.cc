#include "agent/runners/runners.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/runners/free_space.h"
#include "lib/process/process.h"

namespace farm::runners {
namespace {

// Distinct per run inside this process, and per agent process on a host.
std::string UniqueName(absl::string_view tool) {
  static std::atomic<std::uint64_t> counter{0};
  return absl::StrCat("farm-", tool, "-", ::getpid(), "-", counter++);
}

std::string Tail(const std::string& s, size_t n = 2000) {
  return s.size() <= n ? s : s.substr(s.size() - n);
}

// Maps a finished process to a Status when it did not succeed.
absl::Status ProcessStatus(const process::ProcessResult& p, absl::Duration timeout,
                           absl::string_view tool) {
  if (p.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(tool, " timed out after ",
                                                    absl::FormatDuration(timeout),
                                                    "; its process group was killed"));
  }
  if (p.cancelled) {
    return absl::CancelledError(absl::StrCat(tool, " run cancelled"));
  }
  if (!p.ok()) {
    return absl::InternalError(
        absl::StrCat(tool, " failed (", p.Describe(), "): ", Tail(p.stderr_data)));
  }
  return absl::OkStatus();
}

void AddDirection(const FioDirection& d, const char* phase, std::vector<Sample>* out) {
  if (!d.active()) return;
  out->push_back({"iops", d.iops, "iops", phase});
  out->push_back({"bw_kib_s", d.bw_kib_s, "KiB/s", phase});
  out->push_back({"clat_mean_ns", d.clat.mean_ns, "ns", phase});
  out->push_back({"clat_p50_ns", d.clat.p50_ns, "ns", phase});
  out->push_back({"clat_p99_ns", d.clat.p99_ns, "ns", phase});
  out->push_back({"clat_p999_ns", d.clat.p999_ns, "ns", phase});
}

// Whether fio's files fit on the target's file system; a file that is
// already there counts as laid out.
absl::Status CheckFioSpace(const FioSpec& spec, const AllowedTargets& allowed) {
  std::string directory;
  std::uint64_t needed = spec.FilesystemFootprint();
  switch (spec.target_kind) {
    case FioTargetKind::kDevice:
      return absl::OkStatus();
    case FioTargetKind::kDefaultDirectory:
    case FioTargetKind::kDirectory: {
      absl::StatusOr<std::string> dir = spec.target_kind == FioTargetKind::kDirectory
                                            ? allowed.ResolveDirectory(spec.target)
                                            : allowed.DefaultDirectory();
      if (!dir.ok()) return dir.status();
      directory = *dir;
      break;
    }
    case FioTargetKind::kFile: {
      absl::StatusOr<std::string> file = allowed.ResolveFile(spec.target);
      if (!file.ok()) return file.status();
      std::error_code ec;
      const std::uint64_t have = std::filesystem::file_size(*file, ec);
      needed -= ec ? 0 : std::min(have, needed);
      directory = std::filesystem::path(*file).parent_path().string();
      break;
    }
  }
  return CheckFreeSpace(directory, needed);
}

}  // namespace

std::vector<Sample> FioSamples(const FioReport& report) {
  std::vector<Sample> out;
  // group_reporting gives one job; several jobs (no group_reporting) are
  // summed for iops/bw, and their latencies reported per job would need a
  // merged histogram, so only the first job's latency is used then.
  if (report.jobs.empty()) return out;
  FioJob total = report.jobs.front();
  for (size_t i = 1; i < report.jobs.size(); ++i) {
    const FioJob& j = report.jobs[i];
    for (auto [acc, add] : {std::pair{&total.read, &j.read}, std::pair{&total.write, &j.write}}) {
      acc->iops += add->iops;
      acc->bw_kib_s += add->bw_kib_s;
      acc->io_bytes += add->io_bytes;
      acc->total_ios += add->total_ios;
    }
  }
  AddDirection(total.read, "read", &out);
  AddDirection(total.write, "write", &out);
  return out;
}

std::vector<Sample> IozoneSamples(const IozoneReport& report) {
  std::vector<Sample> out;
  for (const IozoneTest& t : report.tests) {
    const std::string unit = t.unit == "ops/sec" ? "ops/s" : "kB/s";
    const std::string suffix = t.unit == "ops/sec" ? "_ops_s" : "_kb_s";
    out.push_back({"throughput" + suffix, t.children, unit, t.name});
    out.push_back({"parent_throughput" + suffix, t.parent, unit, t.name});
    out.push_back({"min_throughput" + suffix, t.min_per_process, unit, t.name});
    out.push_back({"max_throughput" + suffix, t.max_per_process, unit, t.name});
    out.push_back({"avg_throughput" + suffix, t.avg_per_process, unit, t.name});
    out.push_back({"min_xfer_kb", t.min_xfer_kb, "kB", t.name});
  }
  return out;
}

absl::StatusOr<RunResult> FioRunner::Run(const FioSpec& spec, const AllowedTargets& allowed,
                                         const RunOptions& options) const {
  absl::StatusOr<std::vector<std::string>> argv =
      BuildFioArgv(spec, allowed, fio_.path, UniqueName("fio"));
  if (!argv.ok()) return argv.status();
  if (absl::Status space = CheckFioSpace(spec, allowed); !space.ok()) return space;
  process::ProcessOptions popts;
  popts.argv = *argv;
  popts.timeout = options.timeout;
  popts.cancelled = options.cancelled;
  absl::StatusOr<process::ProcessResult> proc = process::RunProcess(popts);
  if (!proc.ok()) return proc.status();
  if (absl::Status s = ProcessStatus(*proc, options.timeout, "fio"); !s.ok()) {
    return s;
  }
  absl::StatusOr<FioReport> report = ParseFioJson(proc->stdout_data);
  if (!report.ok()) {
    return absl::InternalError(
        absl::StrCat(report.status().message(), "; stderr: ", Tail(proc->stderr_data)));
  }
  for (const FioJob& j : report->jobs) {
    if (j.error != 0) {
      return absl::InternalError(absl::StrCat("fio job ", j.name, " failed with error ", j.error,
                                              ": ", Tail(proc->stderr_data)));
    }
  }
  RunResult result;
  result.samples = FioSamples(*report);
  if (result.samples.empty()) {
    return absl::InternalError("fio did no I/O (no read or write numbers)");
  }
  result.raw_output = std::move(proc->stdout_data);
  result.raw_format = "fio-json";
  result.tool_version = report->fio_version.empty() ? fio_.version : report->fio_version;
  result.argv = std::move(*argv);
  result.stderr_output = std::move(proc->stderr_data);
  result.wall_time = proc->wall_time;
  return result;
}

absl::StatusOr<RunResult> FioRunner::RunParams(const Params& params, const AllowedTargets& allowed,
                                               const RunOptions& options) const {
  absl::StatusOr<FioSpec> spec = FioSpecFromParams(params);
  if (!spec.ok()) return spec.status();
  return Run(*spec, allowed, options);
}

absl::StatusOr<RunResult> IozoneRunner::Run(const IozoneSpec& spec, const AllowedTargets& allowed,
                                            const RunOptions& options) const {
  absl::StatusOr<IozoneCommand> cmd =
      BuildIozoneCommand(spec, allowed, iozone_.path, UniqueName("iozone"));
  if (!cmd.ok()) return cmd.status();
  if (absl::Status space = CheckFreeSpace(cmd->directory, spec.FilesystemFootprint()); !space.ok())
    return space;
  process::ProcessOptions popts;
  popts.argv = cmd->argv;
  popts.cwd = cmd->directory;
  popts.timeout = options.timeout;
  popts.cancelled = options.cancelled;
  absl::StatusOr<process::ProcessResult> proc = process::RunProcess(popts);
  // iozone leaves its -F files behind; they are ours (names checked above).
  for (const std::string& f : cmd->files) std::remove(f.c_str());
  if (!proc.ok()) return proc.status();
  if (absl::Status s = ProcessStatus(*proc, options.timeout, "iozone"); !s.ok()) {
    return s;
  }
  absl::StatusOr<IozoneReport> report = ParseIozoneReport(proc->stdout_data);
  if (!report.ok()) {
    return absl::InternalError(
        absl::StrCat(report.status().message(), "; stderr: ", Tail(proc->stderr_data)));
  }
  RunResult result;
  result.samples = IozoneSamples(*report);
  result.raw_output = std::move(proc->stdout_data);
  result.raw_format = "iozone";
  result.tool_version = report->version.empty() ? iozone_.version : report->version;
  result.argv = std::move(cmd->argv);
  result.stderr_output = std::move(proc->stderr_data);
  result.wall_time = proc->wall_time;
  return result;
}

absl::StatusOr<RunResult> IozoneRunner::RunParams(const Params& params,
                                                  const AllowedTargets& allowed,
                                                  const RunOptions& options) const {
  absl::StatusOr<IozoneSpec> spec = IozoneSpecFromParams(params);
  if (!spec.ok()) return spec.status();
  return Run(*spec, allowed, options);
}

}  // namespace farm::runners
