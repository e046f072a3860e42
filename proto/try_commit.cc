#include "proto/try_commit.h"

#include "lib/base/sha256.h"

namespace farm::proto {

namespace {
constexpr size_t kPatchIdDigits = 12;
}  // namespace

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
