// guest_run: what a finished vm guest run (vm_provider.h) means -- how the
// QEMU process ended, and the KernelRun or the failure the error contract
// (kernel_provider.h) names, read from the guest's farm channel
// (guest_channel.h) and its console.
//
// Thread-safety: pure functions of their arguments; no state.
#ifndef AGENT_KERNELS_GUEST_RUN_H_
#define AGENT_KERNELS_GUEST_RUN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/kernels/kernel_provider.h"
#include "lib/process/process.h"

namespace farm::kernels {

// How the QEMU process ended, as the run saw it.
struct QemuExit {
  bool exited_cleanly = false;  // QEMU exited 0 (guest powered off)
  bool timed_out = false;
  bool halted = false;         // stopped because the console said the guest halted
  bool image_refused = false;  // QEMU's loader refused the kernel image
  std::string description;     // "exit 1", "signal 9 (timed out after 90s)", ...
  std::string qemu_stderr;
};

// Turns a finished QEMU run into the KernelRun or the failure the error
// contract names: FAILED_PRECONDITION (permanent) with the console tail for
// an image that cannot boot (its boot stub halted, or QEMU's loader refused
// it), ABORTED with the console tail when the guest did not get to
// `@@farm-done` otherwise (panic, hang, QEMU failure) or when the guest
// could not make iozone's scratch file system; FAILED_PRECONDITION
// when it booted another release, or ran another mode than requested under
// a command line that did not ask for it (CheckRanMode; the message names
// both). A kernel that chose another mode under a command line that asked
// for the requested one is a run whose `effective` says what it ran. Pure.
absl::StatusOr<KernelRun> InterpretGuestRun(const KernelRequest& request, absl::string_view channel,
                                            absl::string_view console, const QemuExit& exit);

// How QEMU's process `r`, run with the wall-clock `limit`, ended; `halted`
// when the run stopped it because its console showed a halted boot stub.
// A loader's refusal of the image is told from QEMU's stderr.
QemuExit QemuExitOf(const process::ProcessResult& r, bool halted, absl::Duration limit);

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_GUEST_RUN_H_
