#include "agent/kernels/accel_probe.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "lib/process/process.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

absl::StatusOr<std::string> QemuVersion(const std::string& qemu) {
  process::ProcessOptions opts;
  opts.argv = {qemu, "--version"};
  opts.timeout = absl::Seconds(20);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(opts);
  if (!r.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(qemu, ": ", r.status().message()));
  }
  if (!r->ok())
    return absl::FailedPreconditionError(absl::StrCat(qemu, " --version: ", r->Describe()));
  std::string first = r->stdout_data.substr(0, r->stdout_data.find('\n'));
  return std::string(absl::StripAsciiWhitespace(first));
}

std::string ResolveAccel(const std::string& flag, const std::function<absl::Status()>& kvm_probe,
                         std::string* why) {
  if (flag != "auto") return flag;
  absl::Status s = kvm_probe();
  if (s.ok()) return "kvm";
  if (why != nullptr) *why = std::string(s.message());
  return "tcg-icount";
}

std::string KvmArchMismatch(const std::string& guest_arch, const std::string& host_arch) {
  if (guest_arch == host_arch) return "";
  return absl::StrCat("an ", guest_arch, " guest runs under TCG on this ", host_arch,
                      " host: KVM runs only ", host_arch, " guests here");
}

absl::Status CheckAccel(const std::string& flag, const std::string& guest_arch,
                        const std::string& host_arch) {
  if (flag != "kvm") return absl::OkStatus();
  const std::string why = KvmArchMismatch(guest_arch, host_arch);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("--vm-accel kvm: ", why, " (--vm-accel auto, tcg-icount or tcg)"));
}

std::string HostArch() {
  struct utsname u;
  return ::uname(&u) == 0 ? std::string(u.machine) : std::string("unknown");
}

absl::Status ProbeKvm(const VmConfig& config, const std::string& kernel_release,
                      const std::string& commit) {
  if (std::string why = KvmArchMismatch(config.arch, HostArch()); !why.empty()) {
    return absl::FailedPreconditionError(why);
  }
  if (::access("/dev/kvm", R_OK | W_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("/dev/kvm is not usable: ", std::strerror(errno)));
  }
  VmConfig probe = config;
  probe.accel = "kvm";
  probe.boot_timeout = absl::Seconds(15);
  probe.margin = absl::Seconds(5);
  KernelRequest r;
  r.kernel_release = kernel_release;
  r.commit = commit;
  r.mode = pb::IOMMU_MODE_PASSTHROUGH;  // facts only: no tool
  absl::StatusOr<KernelRun> run = VmKernelProvider(probe).Run(r);
  if (!run.ok()) {
    std::string msg(run.status().message());
    return absl::FailedPreconditionError(absl::StrCat(
        "a KVM guest did not boot: ", msg.substr(0, std::min<size_t>(msg.size(), 300))));
  }
  return absl::OkStatus();
}

}  // namespace farm::kernels
