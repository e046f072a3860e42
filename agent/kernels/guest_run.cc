#include "agent/kernels/guest_run.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/kernels/guest_archive.h"
#include "agent/kernels/guest_channel.h"
#include "proto/names.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;

namespace {

// The tool's output and exit, and the guest's monitors, of a guest that
// finished its job.
void TakeToolOutput(const GuestOutput& out, KernelRun* run) {
  if (auto it = out.sections.find("tool"); it != out.sections.end()) {
    run->tool_stdout = it->second.body;
    run->tool_exit = it->second.exit;
  }
  if (auto it = out.sections.find("tool-stderr"); it != out.sections.end()) {
    run->tool_stderr = it->second.body;
  }
  // Monitors never fail a run: one that cannot be read says why.
  if (absl::StatusOr<pb::Monitors> m = MonitorsFromGuest(out); m.ok()) {
    run->monitors = *std::move(m);
  } else if (run->tool_exit >= 0) {
    run->monitors.emplace();
    run->monitors->set_where("guest");
    run->monitors->set_iommu_note(absl::StrCat("no monitors: ", m.status().message()));
  }
}

// What the guest says (its release, its command line) as a failure reason
// quotes it: cut, so a garbled channel makes a short reason.
std::string CutGuestText(absl::string_view s) {
  constexpr size_t kMaxQuoted = 512;
  if (s.size() <= kMaxQuoted) return std::string(s);
  return absl::StrCat(s.substr(0, kMaxQuoted), "... (", s.size(), " bytes)");
}

}  // namespace

absl::StatusOr<KernelRun> InterpretGuestRun(const KernelRequest& request, absl::string_view channel,
                                            absl::string_view console, const QemuExit& exit) {
  auto aborted = [&](absl::string_view why) {
    std::string msg = absl::StrCat("guest kernel ", request.kernel_release, " ", why, " (qemu ",
                                   exit.description, ")");
    std::string err = std::string(absl::StripAsciiWhitespace(exit.qemu_stderr));
    if (!err.empty()) absl::StrAppend(&msg, "; qemu said: ", ConsoleTail(err, 5, 1024));
    absl::StrAppend(&msg, "; console tail:\n", ConsoleTail(console));
    return absl::AbortedError(msg);
  };
  // An image that cannot boot fails the same way every time: permanent.
  auto unbootable = [&](absl::string_view why) {
    absl::Status s = aborted(why);
    return absl::FailedPreconditionError(
        absl::StrCat("corrupt or unbootable kernel image: ", s.message()));
  };
  absl::StatusOr<GuestOutput> out = ParseGuestChannel(channel);
  if (!out.ok())
    return aborted(absl::StrCat("wrote a broken farm channel: ", out.status().message()));
  if (!out->done) {
    if (exit.halted) return unbootable("halted in its boot stub");
    if (exit.image_refused) return unbootable("was refused by QEMU's loader");
    if (exit.timed_out) return aborted("did not finish in time");
    return aborted("stopped before the job finished");
  }
  // Without its modules the guest has no NVMe, and its group says nothing
  // about the mode.
  if (auto it = out->sections.find("modules"); it != out->sections.end() && it->second.exit != 0) {
    return aborted(absl::StrCat("could not load its kernel modules (exit ", it->second.exit,
                                "): ", ConsoleTail(it->second.body, 5, 512)));
  }
  absl::StatusOr<KernelFacts> facts = KernelFactsFromGuest(*out);
  if (!facts.ok()) return aborted(facts.status().message());

  KernelRun run;
  run.provider = "vm";
  run.requested = request.mode;
  run.facts = *std::move(facts);
  if (run.facts.release != request.kernel_release) {
    return absl::FailedPreconditionError(absl::StrCat("requested kernel ", request.kernel_release,
                                                      " but the guest booted ",
                                                      CutGuestText(run.facts.release)));
  }
  absl::StatusOr<pb::IommuMode> effective = EffectiveMode(run.facts, &run.effective_detail);
  if (!effective.ok()) return aborted(CutGuestText(effective.status().message()));
  run.effective = *effective;
  run.domain_type = NvmeDomainType(run.facts);
  // A kernel asked for its mode that chose another reports what it ran.
  if (absl::Status s = CheckRanMode(run.facts, request.mode, run.effective, &run.effective_detail);
      !s.ok()) {
    return absl::FailedPreconditionError(CutGuestText(s.message()));
  }
  if (auto it = out->sections.find("scratch-fs");
      it != out->sections.end() && it->second.exit != 0) {
    return aborted(absl::StrCat("could not make the scratch file system (exit ", it->second.exit,
                                "): ", ConsoleTail(it->second.body, 5, 512)));
  }
  // Whether the kernel has the benchmark's driver is its config's: permanent.
  if (auto it = out->sections.find("bench-device");
      it != out->sections.end() && it->second.exit != 0) {
    return absl::FailedPreconditionError(absl::StrCat("guest kernel ", request.kernel_release,
                                                      " cannot run ", kBenchTool, ": ",
                                                      ConsoleTail(it->second.body, 5, 512)));
  }
  TakeToolOutput(*out, &run);
  return run;
}

QemuExit QemuExitOf(const process::ProcessResult& r, bool halted, absl::Duration limit) {
  QemuExit exit;
  exit.exited_cleanly = r.ok();
  exit.timed_out = r.timed_out;
  exit.halted = halted;
  exit.description = halted ? std::string("stopped: the console showed a halt") : r.Describe();
  if (exit.timed_out) absl::StrAppend(&exit.description, " after ", absl::FormatDuration(limit));
  exit.qemu_stderr = r.stderr_data;
  // QEMU's x86 loader refuses an image whose boot header it cannot read
  // ("linux kernel too old to load a ram disk", "Error loading uncompressed
  // kernel without PVH ELF Note") before any guest code runs.
  exit.image_refused = !r.ok() && !r.timed_out && !halted &&
                       (absl::StrContains(r.stderr_data, "linux kernel") ||
                        absl::StrContains(r.stderr_data, "loading uncompressed kernel") ||
                        absl::StrContains(r.stderr_data, "could not load kernel"));
  return exit;
}

}  // namespace farm::kernels
