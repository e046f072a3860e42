#include "proto/try_commit.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/base/sha256.h"

namespace farm::proto {

namespace {
constexpr size_t kPatchIdDigits = 12;

// "X" of a "diff --git a/X b/X" line; the line itself when it is not one.
std::string_view DiffFile(std::string_view diff_line) {
  const size_t b = diff_line.rfind(" b/");
  return absl::StartsWith(diff_line, "diff --git a/") && b != std::string_view::npos
             ? diff_line.substr(b + 3)
             : diff_line;
}

}  // namespace

std::string PatchTextProblem(std::string_view patch) {
  if (patch.size() > kMaxPatchBytes) {
    return absl::StrCat("the patch is ", patch.size(), " bytes, over the farm's bound of ",
                        kMaxPatchBytes, " bytes");
  }
  std::string_view file = "a file";
  for (std::string_view line : absl::StrSplit(patch, '\n')) {
    if (absl::StartsWith(line, "diff --git ")) file = DiffFile(line);
    const bool binary =
        absl::StartsWith(line, "GIT binary patch") ||
        (absl::StartsWith(line, "Binary files ") && absl::EndsWith(line, " differ"));
    if (binary) {
      return absl::StrCat("a binary diff of ", file,
                          ": the farm applies text diffs only (a kernel patch for review "
                          "changes source files)");
    }
  }
  return "";
}

std::string TryCommitId(std::string_view base, std::string_view patch) {
  std::string id(base);
  id += '+';
  id += base::Sha256Hex(patch).substr(0, kPatchIdDigits);
  return id;
}

bool IsTryCommit(std::string_view id) {
  const size_t plus = id.rfind('+');
  if (plus == std::string_view::npos || plus == 0 || id.size() - plus - 1 != kPatchIdDigits) {
    return false;
  }
  for (char c : id.substr(plus + 1)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string_view TryBase(std::string_view id) {
  return IsTryCommit(id) ? id.substr(0, id.rfind('+')) : id;
}

}  // namespace farm::proto
