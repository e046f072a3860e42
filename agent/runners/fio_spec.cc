#include "agent/runners/fio_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace farm::runners {
namespace {

constexpr std::uint64_t kMaxBytes = 1ull << 40;  // 1 TiB

absl::Status Refuse(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("fio param '", key, "' refused: ", why));
}

// Options a job must never pass through, with the reason the user sees.
// Keys are compared after lower-casing and '-' -> '_'.
std::string DangerReason(const std::string& key) {
  if (key == "exec_prerun" || key == "exec_postrun") {
    return "it runs a shell command on the agent's host";
  }
  if (absl::StartsWith(key, "trigger")) {
    return "fio triggers run a command on the agent's host";
  }
  if (key == "allow_mounted_write") {
    return "it lets fio write to a mounted device and destroy its filesystem";
  }
  if ((absl::StartsWith(key, "write_") && absl::EndsWith(key, "_log")) || key == "write_iolog" ||
      absl::StartsWith(key, "log") || key == "per_job_logs") {
    return "fio log files would be written to paths the job chooses, outside "
           "the agent's control";
  }
  if (key == "read_iolog" || key == "replay_redirect" || key == "iolog" ||
      key == "merge_blktrace_file") {
    return "it makes fio read or replay files at paths the job chooses";
  }
  if (key == "output" || key == "output_format" || key == "append_terse" ||
      key == "terse_version" || key == "status_interval") {
    return "fio's output file and format are set by the agent";
  }
  if (key == "ioscheduler" || key == "cgroup" || key == "cgroup_weight" || key == "uid" ||
      key == "gid" || key == "prioclass" || key == "prio" || key == "nice") {
    return "it changes host settings or process credentials";
  }
  if (key == "filename_format" || key == "opendir" || key == "chdir" || key == "unlink" ||
      key == "nrfiles") {
    return "file names and locations are chosen by the agent (use filename "
           "or directory inside an allowed directory)";
  }
  return "";
}

const std::set<std::string>& RwModes() {
  static const auto* modes = new std::set<std::string>{"read", "write",     "randread", "randwrite",
                                                       "rw",   "readwrite", "randrw"};
  return *modes;
}

const std::set<std::string>& Engines() {
  static const auto* engines = new std::set<std::string>{"psync", "libaio", "io_uring"};
  return *engines;
}

std::vector<std::string> FioArgvWithTarget(const FioSpec& spec, const std::string& target_flag,
                                           const std::string& fio, const std::string& job_name) {
  std::vector<std::string> argv = {
      fio,
      absl::StrCat("--name=", job_name),
      absl::StrCat("--rw=", spec.rw),
      absl::StrCat("--bs=", spec.bs_bytes),
      absl::StrCat("--iodepth=", spec.iodepth),
      absl::StrCat("--numjobs=", spec.numjobs),
      absl::StrCat("--ioengine=", spec.ioengine),
      absl::StrCat("--direct=", spec.direct ? 1 : 0),
  };
  if (spec.size_bytes > 0) {
    argv.push_back(absl::StrCat("--size=", spec.size_bytes));
  }
  if (spec.runtime_s > 0) {
    argv.push_back(absl::StrCat("--runtime=", spec.runtime_s));
  }
  if (spec.ramp_time_s > 0) {
    argv.push_back(absl::StrCat("--ramp_time=", spec.ramp_time_s));
  }
  if (spec.time_based) argv.push_back("--time_based");
  if (spec.rwmixread >= 0) {
    argv.push_back(absl::StrCat("--rwmixread=", spec.rwmixread));
  }
  if (!spec.cpus_allowed.empty()) {
    argv.push_back(absl::StrCat("--cpus_allowed=", spec.cpus_allowed));
  }
  argv.push_back(target_flag);
  if (spec.target_kind == FioTargetKind::kDefaultDirectory ||
      spec.target_kind == FioTargetKind::kDirectory) {
    // fio's own per-job files would otherwise pile up in the allowed dir.
    argv.push_back("--unlink=1");
  }
  // One aggregate result however many numjobs.
  argv.push_back("--group_reporting");
  argv.push_back("--output-format=json");
  return argv;
}

}  // namespace

bool FioSpec::writes() const { return rw != "read" && rw != "randread"; }

const std::vector<std::string>& FioAllowedParams() {
  static const auto* keys = new std::vector<std::string>{
      "rw",         "bs",        "iodepth",  "numjobs", "size",         "runtime",  "ramp_time",
      "time_based", "rwmixread", "ioengine", "direct",  "cpus_allowed", "filename", "directory"};
  return *keys;
}

absl::StatusOr<FioSpec> FioSpecFromParams(const Params& params) {
  FioSpec spec;
  bool have_size = false;
  const auto& allowed = FioAllowedParams();
  // Refuse dangerous and unknown keys first, all before looking at values,
  // so the message is about the most serious problem.
  for (const auto& [raw_key, value] : params) {
    const std::string key = absl::StrReplaceAll(absl::AsciiStrToLower(raw_key), {{"-", "_"}});
    if (std::string why = DangerReason(key); !why.empty()) {
      return Refuse(raw_key, why);
    }
    if (std::find(allowed.begin(), allowed.end(), raw_key) == allowed.end()) {
      return Refuse(raw_key,
                    absl::StrCat("unknown option; allowed: ", absl::StrJoin(allowed, ", ")));
    }
  }
  if (params.count("filename") > 0 && params.count("directory") > 0) {
    return Refuse("filename", "give either filename or directory, not both");
  }
  for (const auto& [key, value] : params) {
    if (key == "rw") {
      const std::string rw = absl::AsciiStrToLower(value);
      if (absl::StrContains(rw, "trim")) {
        return Refuse(key, absl::StrCat("trim modes (", value, ") discard data on the target"));
      }
      if (RwModes().count(rw) == 0) {
        return Refuse(
            key, absl::StrCat("rw=", value, " is not one of ", absl::StrJoin(RwModes(), ", ")));
      }
      spec.rw = rw;
    } else if (key == "bs") {
      auto v = ParseBytes(key, value, 512, 64ull << 20);
      if (!v.ok()) return v.status();
      spec.bs_bytes = *v;
    } else if (key == "iodepth") {
      auto v = ParseInt(key, value, 1, 4096);
      if (!v.ok()) return v.status();
      spec.iodepth = static_cast<int>(*v);
    } else if (key == "numjobs") {
      auto v = ParseInt(key, value, 1, 64);
      if (!v.ok()) return v.status();
      spec.numjobs = static_cast<int>(*v);
    } else if (key == "size") {
      auto v = ParseBytes(key, value, 4096, kMaxBytes);
      if (!v.ok()) return v.status();
      spec.size_bytes = *v;
      have_size = true;
    } else if (key == "runtime") {
      auto v = ParseSeconds(key, value, 1, 86400);
      if (!v.ok()) return v.status();
      spec.runtime_s = static_cast<int>(*v);
    } else if (key == "ramp_time") {
      auto v = ParseSeconds(key, value, 0, 3600);
      if (!v.ok()) return v.status();
      spec.ramp_time_s = static_cast<int>(*v);
    } else if (key == "time_based") {
      auto v = ParseBool(key, value);
      if (!v.ok()) return v.status();
      spec.time_based = *v;
    } else if (key == "rwmixread") {
      auto v = ParseInt(key, value, 0, 100);
      if (!v.ok()) return v.status();
      spec.rwmixread = static_cast<int>(*v);
    } else if (key == "ioengine") {
      const std::string engine = absl::AsciiStrToLower(value);
      if (absl::StartsWith(engine, "external") || engine == "exec") {
        return Refuse(key, absl::StrCat("ioengine=", value,
                                        " loads or executes arbitrary code "
                                        "on the agent's host"));
      }
      if (Engines().count(engine) == 0) {
        return Refuse(key, absl::StrCat("ioengine=", value, " is not in the allowlist ",
                                        absl::StrJoin(Engines(), ", ")));
      }
      spec.ioengine = engine;
    } else if (key == "direct") {
      auto v = ParseBool(key, value);
      if (!v.ok()) return v.status();
      spec.direct = *v;
    } else if (key == "cpus_allowed") {
      if (absl::Status s = CheckCpuList(key, value); !s.ok()) return s;
      spec.cpus_allowed = value;
    } else if (key == "filename") {
      spec.target = value;
      spec.target_kind =
          absl::StartsWith(value, "/dev/") ? FioTargetKind::kDevice : FioTargetKind::kFile;
    } else if (key == "directory") {
      spec.target = value;
      spec.target_kind = FioTargetKind::kDirectory;
    }
  }
  if (spec.target_kind != FioTargetKind::kDevice && !have_size) {
    return absl::InvalidArgumentError(
        "fio param 'size' is required for file and directory targets "
        "(e.g. size=64m)");
  }
  if (have_size && spec.size_bytes < spec.bs_bytes) {
    return absl::InvalidArgumentError("fio param 'size' must be at least bs");
  }
  if (spec.direct && spec.bs_bytes % 512 != 0) {
    return absl::InvalidArgumentError("fio param 'bs' must be a multiple of 512 with direct=1");
  }
  if (spec.rwmixread >= 0 && spec.rw != "rw" && spec.rw != "readwrite" && spec.rw != "randrw") {
    return absl::InvalidArgumentError(
        "fio param 'rwmixread' only applies to rw, readwrite or randrw");
  }
  if (spec.time_based && spec.runtime_s == 0) {
    return absl::InvalidArgumentError(
        "fio param 'time_based' needs 'runtime' (it would run forever)");
  }
  return spec;
}

absl::StatusOr<std::vector<std::string>> BuildFioArgv(const FioSpec& spec,
                                                      const AllowedTargets& allowed,
                                                      const std::string& fio,
                                                      const std::string& job_name) {
  if (job_name.empty() || job_name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
                                                     "TUVWXYZ0123456789_.-") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("fio job name \"", job_name, "\" is not [A-Za-z0-9_.-]+"));
  }
  std::string target_flag;
  switch (spec.target_kind) {
    case FioTargetKind::kDefaultDirectory: {
      auto dir = allowed.DefaultDirectory();
      if (!dir.ok()) return dir.status();
      target_flag = absl::StrCat("--directory=", *dir);
      break;
    }
    case FioTargetKind::kDirectory: {
      auto dir = allowed.ResolveDirectory(spec.target);
      if (!dir.ok()) return dir.status();
      target_flag = absl::StrCat("--directory=", *dir);
      break;
    }
    case FioTargetKind::kFile: {
      auto file = allowed.ResolveFile(spec.target);
      if (!file.ok()) return file.status();
      target_flag = absl::StrCat("--filename=", *file);
      break;
    }
    case FioTargetKind::kDevice: {
      auto dev = allowed.ResolveDevice(spec.target, spec.writes());
      if (!dev.ok()) return dev.status();
      target_flag = absl::StrCat("--filename=", *dev);
      break;
    }
  }
  return FioArgvWithTarget(spec, target_flag, fio, job_name);
}

absl::StatusOr<std::vector<std::string>> BuildFioGuestArgv(const FioSpec& spec,
                                                           const std::string& device,
                                                           const std::string& fio) {
  if (spec.target_kind != FioTargetKind::kDefaultDirectory &&
      !(spec.target_kind == FioTargetKind::kDevice && spec.target == device)) {
    return absl::InvalidArgumentError(absl::StrCat("a guest run's only target is its NVMe ", device,
                                                   "; the spec names '", spec.target, "'"));
  }
  FioSpec on_device = spec;
  on_device.target_kind = FioTargetKind::kDevice;
  return FioArgvWithTarget(on_device, absl::StrCat("--filename=", device), fio, "farm");
}

}  // namespace farm::runners
