#include "agent/kernels/qemu_args.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/kernels/kernel_provider.h"
#include "proto/kernel_params.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

absl::StatusOr<std::string> GuestCmdline(pb::IommuMode mode, const std::vector<std::string>& extra,
                                         const std::string& arch) {
  // An x86_64 guest boots under VT-d or AMD-Vi; off on AMD-Vi is a machine
  // without the IOMMU, where intel_iommu=off is as good as none.
  absl::StatusOr<std::vector<std::string>> params = ModeKernelParams(
      mode, {arch == kArchArm64 ? iommu_mode::Driver::kArmSmmuV3 : iommu_mode::Driver::kIntelVtd});
  if (!params.ok()) return params.status();
  std::string error;
  std::vector<std::string> words = proto::ParseKernelParams(absl::StrJoin(extra, " "), &error);
  if (!error.empty()) return absl::InvalidArgumentError(error);
  std::string cmdline;
  if (arch == kArchX86) {
    cmdline = "console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1";
  } else if (arch == kArchArm64) {
    cmdline = "console=ttyAMA0 panic=-1";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown guest architecture '", arch, "'"));
  }
  for (const std::string& w : words) absl::StrAppend(&cmdline, " ", w);
  for (const std::string& p : *params) absl::StrAppend(&cmdline, " ", p);
  return cmdline;
}

namespace {

absl::StatusOr<std::vector<std::string>> AccelArgs(const QemuInvocation& q) {
  if (q.accel == "tcg" || q.accel == "kvm") return std::vector<std::string>{"-accel", q.accel};
  if (q.accel != "tcg-icount") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown QEMU accelerator '", q.accel, "' (tcg, tcg-icount, kvm)"));
  }
  if (q.icount_shift < 0 || q.icount_shift > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("icount shift ", q.icount_shift, " is outside 0..10"));
  }
  // icount needs one TCG thread for every vCPU.
  return std::vector<std::string>{"-accel", "tcg,thread=single", "-icount",
                                  absl::StrCat("shift=", q.icount_shift, ",align=off,sleep=off")};
}

std::vector<std::string> VirtArgv(const QemuInvocation& q) {
  // clang-format off
  return std::vector<std::string>{
      q.qemu,
      "-M", q.iommu ? "virt,iommu=smmuv3" : "virt",
      "-cpu", q.cpu.empty() ? "max" : q.cpu,
      "-nodefaults", "-no-user-config", "-no-reboot",
      "-display", "none",
      "-m", absl::StrCat(q.memory_mib, "M"),
      "-smp", absl::StrCat(q.cpus),
      "-drive", absl::StrCat("file=", q.nvme_image, ",if=none,id=nvme0,format=raw"),
      "-device", "nvme,serial=farm-nvme0,drive=nvme0",
      "-serial", absl::StrCat("file:", q.console_log),
      "-kernel", q.kernel,
      "-initrd", q.initrd,
      "-append", q.cmdline,
  };
  // clang-format on
}

absl::StatusOr<std::vector<std::string>> Q35Argv(const QemuInvocation& q) {
  if (q.iommu_model != kModelIntel && q.iommu_model != kModelAmd) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown x86_64 IOMMU model '", q.iommu_model, "'"));
  }
  // One option and its value a line.
  // clang-format off
  std::vector<std::string> argv{
      q.qemu,
      "-M", "q35",
      "-nodefaults", "-no-user-config", "-no-reboot",
      "-display", "none",
      "-m", absl::StrCat(q.memory_mib, "M"),
      "-smp", absl::StrCat(q.cpus),
      "-device", "intel-iommu,intremap=on,caching-mode=on",
      "-drive", absl::StrCat("file=", q.nvme_image, ",if=none,id=nvme0,format=raw"),
      "-device", "nvme,serial=farm-nvme0,drive=nvme0",
      "-serial", absl::StrCat("file:", q.console_log),
      "-serial", absl::StrCat("file:", q.channel_log),
      "-kernel", q.kernel,
      "-initrd", q.initrd,
      "-append", q.cmdline,
  };
  // clang-format on
  if (q.iommu_model == kModelAmd) {
    auto device = std::find(argv.begin(), argv.end(), "intel-iommu,intremap=on,caching-mode=on");
    if (q.iommu) {
      *device = "amd-iommu";
    } else {
      argv.erase(device - 1, device + 1);  // off: no IOMMU on the machine
    }
  }
  return argv;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> BuildQemuArgv(const QemuInvocation& q) {
  const bool arm64 = q.arch == kArchArm64;
  if (!arm64 && q.arch != kArchX86) {
    return absl::InvalidArgumentError(absl::StrCat("unknown guest architecture '", q.arch, "'"));
  }
  for (const std::string* p : {&q.kernel, &q.initrd, &q.nvme_image, &q.console_log,
                               arm64 ? &q.console_log : &q.channel_log}) {
    if (p->empty() || absl::StrContains(*p, ',')) {
      return absl::InvalidArgumentError(
          absl::StrCat("QEMU cannot take the path '", *p, "' (empty or containing ',')"));
    }
  }
  if (q.memory_mib <= 0 || q.cpus <= 0) {
    return absl::InvalidArgumentError("QEMU needs positive memory and CPU counts");
  }
  absl::StatusOr<std::vector<std::string>> accel = AccelArgs(q);
  if (!accel.ok()) return accel.status();
  std::vector<std::string> argv = arm64 ? VirtArgv(q) : std::vector<std::string>{};
  if (!arm64) {
    absl::StatusOr<std::vector<std::string>> q35 = Q35Argv(q);
    if (!q35.ok()) return q35.status();
    argv = *std::move(q35);
  }
  // The accelerator after the machine and CPU; the spare device before
  // the last three options (-kernel, -initrd, -append).
  argv.insert(argv.begin() + (arm64 ? 5 : 3), accel->begin(), accel->end());
  if (q.bench_device) argv.insert(argv.end() - 6, {"-device", "edu"});
  return argv;
}

}  // namespace farm::kernels
