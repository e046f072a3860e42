// Marks a job's failure reason carries when its commit cannot be measured
// at all on the host that tried: its kernel does not build, or it does not
// boot there. The bisect driver skips a step whose jobs all fail with one of
// them, as `git bisect skip` does; the producers (the kernel build executor,
// the kexec provider, the scheduler's reaper) write them.
//
// Thread-safety: constants and a pure function.
#ifndef PROTO_FAILURE_MARKS_H_
#define PROTO_FAILURE_MARKS_H_

#include <string_view>

namespace farm::proto {

// "build failed at <sha>: <first error line>".
inline constexpr std::string_view kBuildFailedMark = "build failed at ";
// "... did not come back ...: it does not boot on this host".
inline constexpr std::string_view kDoesNotBootMark = "does not boot on this host";

// The mark `reason` carries, or "" when it carries none.
inline std::string_view UnmeasurableMark(std::string_view reason) {
  for (std::string_view mark : {kBuildFailedMark, kDoesNotBootMark}) {
    if (reason.find(mark) != std::string_view::npos) return mark;
  }
  return {};
}

}  // namespace farm::proto

#endif  // PROTO_FAILURE_MARKS_H_
