// build_progress: what a kernel build is doing, read from make's quiet
// output as it comes, and paced reports of it for the build job's status.
//
// kbuild prints one line a step ("  CC      kernel/fork.o", "  AS
// arch/x86/entry/entry_64.o", "  CC [M]  drivers/x.o", "  LD      vmlinux.o").
// MakeOutputReader counts the objects compiled (CC and AS lines whose target
// is a .o file, modules' included) and follows the phase: compile until the
// first line whose target is vmlinux (vmlinux.a, vmlinux.o, .tmp_vmlinux*),
// link from then on, modules once a module's own line ([M], modules.order,
// MODPOST of the modules) comes after that. The builder adds the phases of
// its own steps: config before make, tool (the benchmark tool) and store
// after it.
//
// The estimate: the number of objects the last cold build of the same build
// directory compiled (a build that started with an empty obj/ compiles them
// all), so a cold build reads "n of ~N objects"; an incremental build has no
// estimate (it compiles what the commit changed). Remaining time is the
// compile phase's elapsed time scaled by the objects left over the objects
// done.
//
// Thread-safety: none; one build owns its reader and reporter. Pure but for
// the clock the reporter is given.
#ifndef LIB_KBUILD_BUILD_PROGRESS_H_
#define LIB_KBUILD_BUILD_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace farm::kbuild {

// The phases in the order a build passes them.
enum class BuildPhase { kConfig, kCompile, kLink, kModules, kTool, kStore };

// "config", "compile", "link", "modules", "tool", "store".
const char* BuildPhaseName(BuildPhase phase);

// One report of a running build.
struct BuildProgress {
  BuildPhase phase = BuildPhase::kConfig;
  int64_t objects = 0;           // objects compiled so far
  int64_t expected_objects = 0;  // the last cold build's count; 0: no estimate
  absl::Duration elapsed;        // since the build started
  // The estimate of the time left; negative when there is none.
  absl::Duration remaining = absl::Seconds(-1);
};

// Reads make's standard output chunk by chunk (a line may span chunks).
class MakeOutputReader {
 public:
  // Reads the complete lines of `chunk` (the rest waits for the next one).
  void Feed(absl::string_view chunk);
  int64_t objects() const { return objects_; }
  // kCompile until a link line, then kLink, then kModules.
  BuildPhase phase() const { return phase_; }

 private:
  void ReadLine(absl::string_view line);

  std::string partial_;
  int64_t objects_ = 0;
  BuildPhase phase_ = BuildPhase::kCompile;
};

// Paces a build's reports: one on every phase change and otherwise at most
// one an `interval`, to `sink`.
class ProgressReporter {
 public:
  using Sink = std::function<void(const BuildProgress&)>;
  ProgressReporter(Sink sink, absl::Time start, int64_t expected_objects,
                   absl::Duration interval = absl::Seconds(15))
      : sink_(std::move(sink)), start_(start), expected_(expected_objects), interval_(interval) {}

  // The first report: the build is in its config phase.
  void Begin(absl::Time now) { Report(now); }
  // A step of the build began: config, compile (make), tool, store.
  void Phase(BuildPhase phase, absl::Time now);
  // make's output came: read it and report if due.
  void MakeOutput(absl::string_view chunk, absl::Time now);
  // Objects the build compiled (what the next cold build expects).
  int64_t objects() const { return reader_.objects(); }

 private:
  void Report(absl::Time now);

  Sink sink_;
  absl::Time start_;
  int64_t expected_;
  absl::Duration interval_;
  MakeOutputReader reader_;
  BuildPhase phase_ = BuildPhase::kConfig;
  bool in_make_ = false;
  absl::Time compile_start_ = absl::InfinitePast();
  absl::Time last_report_ = absl::InfinitePast();
};

// The estimate of the time left when `objects` of ~`expected` are done after
// `compile_elapsed` of compiling; negative when there is none (no estimate,
// nothing done yet, or more done than expected).
absl::Duration RemainingCompile(int64_t objects, int64_t expected, absl::Duration compile_elapsed);

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_BUILD_PROGRESS_H_
