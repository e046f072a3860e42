// patch_series: a try job's patch file as git takes one -- a plain unified
// diff (git diff), or mail (git format-patch: one message, or an mbox of a
// series, messages opened by "From <40 hex> <date>" lines) -- split into
// the patches to apply in order, each with its subject. A message without a
// diff (a series' cover letter, "[PATCH 0/N]") is not a patch and is
// skipped; `git apply` skips a message's mail headers and commit text.
//
// Pure functions; thread-safe.
#ifndef LIB_KBUILD_PATCH_SERIES_H_
#define LIB_KBUILD_PATCH_SERIES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::kbuild {

struct SeriesPatch {
  std::string subject;  // the mail's Subject, unfolded; "" for a plain diff
  std::string text;     // what `git apply` is given for it
};

// The patches of `text` in order. InvalidArgument when none holds a diff.
absl::StatusOr<std::vector<SeriesPatch>> SplitPatchSeries(absl::string_view text);

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_PATCH_SERIES_H_
