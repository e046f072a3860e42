#include "lib/toolspec/fio_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace farm::toolspec {
namespace {

constexpr std::uint64_t kMaxBytes = 1ull << 40;  // 1 TiB

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

}  // namespace

std::uint64_t FioSpec::FilesystemFootprint() const {
  switch (target_kind) {
    case FioTargetKind::kDevice:
      return 0;
    case FioTargetKind::kFile:
      return size_bytes;
    case FioTargetKind::kDirectory:
    case FioTargetKind::kDefaultDirectory:
      break;
  }
  return size_bytes * static_cast<std::uint64_t>(numjobs);
}

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
      return RefuseParam("fio", raw_key, why);
    }
    if (std::find(allowed.begin(), allowed.end(), raw_key) == allowed.end()) {
      return RefuseParam("fio", raw_key,
                         absl::StrCat("unknown option; allowed: ", absl::StrJoin(allowed, ", ")));
    }
  }
  if (params.count("filename") > 0 && params.count("directory") > 0) {
    return RefuseParam("fio", "filename", "give either filename or directory, not both");
  }
  for (const auto& [key, value] : params) {
    if (key == "rw") {
      const std::string rw = absl::AsciiStrToLower(value);
      if (absl::StrContains(rw, "trim")) {
        return RefuseParam("fio", key,
                           absl::StrCat("trim modes (", value, ") discard data on the target"));
      }
      if (RwModes().count(rw) == 0) {
        return RefuseParam(
            "fio", key,
            absl::StrCat("rw=", value, " is not one of ", absl::StrJoin(RwModes(), ", ")));
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
        return RefuseParam("fio", key,
                           absl::StrCat("ioengine=", value,
                                        " loads or executes arbitrary code "
                                        "on the agent's host"));
      }
      if (Engines().count(engine) == 0) {
        return RefuseParam("fio", key,
                           absl::StrCat("ioengine=", value, " is not in the allowlist ",
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
  if (absl::Status st = CheckJobFootprint(
          "fio", spec.target_kind == FioTargetKind::kFile ? "size" : "size x numjobs",
          spec.FilesystemFootprint());
      !st.ok())
    return st;
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

}  // namespace farm::toolspec
