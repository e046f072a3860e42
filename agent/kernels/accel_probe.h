// accel_probe: which QEMU accelerator a vm provider (vm_provider.h) can use
// on this host -- kvm, or TCG (tcg, tcg-icount) where KVM cannot run the
// guest -- and the host's QEMU version. The agent asks once at start.
//
// Thread-safety: no shared state. ProbeKvm and QemuVersion run QEMU
// (blocking, bounded by their timeouts); the others are pure or read uname.
#ifndef AGENT_KERNELS_ACCEL_PROBE_H_
#define AGENT_KERNELS_ACCEL_PROBE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/kernels/vm_provider.h"

namespace farm::kernels {

// The first line of `qemu --version` ("QEMU emulator version 7.2.x ...").
// FailedPrecondition when QEMU is missing or does not run.
absl::StatusOr<std::string> QemuVersion(const std::string& qemu);

// The accelerator for --vm-accel `flag`: "tcg", "tcg-icount" and "kvm" as
// given; "auto": "kvm" when kvm_probe() is OK, else "tcg-icount" (figures
// that repeat) with the probe's message in `why`.
std::string ResolveAccel(const std::string& flag, const std::function<absl::Status()>& kvm_probe,
                         std::string* why);

// Why KVM cannot run a `guest_arch` guest on a `host_arch` host (uname's
// machine: KVM runs guests of the host's own architecture only, so such a
// guest is emulated by TCG); "" when the architectures match.
std::string KvmArchMismatch(const std::string& guest_arch, const std::string& host_arch);
// --vm-accel `flag` for `guest_arch` guests on a `host_arch` host:
// FailedPrecondition for "kvm" when KvmArchMismatch says why it can never
// work (every boot would fail), else OK ("auto" finds TCG by itself).
absl::Status CheckAccel(const std::string& flag, const std::string& guest_arch,
                        const std::string& host_arch);
// The running host's architecture as uname reports it ("x86_64", "aarch64").
std::string HostArch();

// Whether KVM can run this machine's guests: the guest is of the host's
// architecture (KvmArchMismatch, checked first), /dev/kvm opens read-write and
// one facts-only boot of the store's `commit` / `kernel_release` under
// -accel kvm reaches its result within 20 s (these machines have a /dev/kvm
// on which stock guests stop with internal errors). FailedPrecondition
// saying why not.
absl::Status ProbeKvm(const VmConfig& config, const std::string& kernel_release,
                      const std::string& commit);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_ACCEL_PROBE_H_
