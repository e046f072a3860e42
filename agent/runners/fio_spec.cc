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
