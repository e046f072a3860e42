#include "proto/try_commit.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/base/sha256.h"

namespace farm::proto {

namespace {
constexpr size_t kPatchIdDigits = 12;

// "X" of a "diff --git a/X b/X" line; the line itself when it is not one.
std::string_view DiffFile(std::string_view diff_line) {
  const size_t b = diff_line.rfind(" b/");
  return diff_line.starts_with("diff --git a/") && b != std::string_view::npos
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
  for (size_t at = 0; at < patch.size();) {
    const size_t eol = std::min(patch.find('\n', at), patch.size());
    const std::string_view line = patch.substr(at, eol - at);
    at = eol + 1;
    if (line.starts_with("diff --git ")) file = DiffFile(line);
    const bool binary = line.starts_with("GIT binary patch") ||
                        (line.starts_with("Binary files ") && line.ends_with(" differ"));
    if (binary) {
      return absl::StrCat("a binary diff of ", std::string(file),
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
