#include "lib/storage/run_eligibility.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/names.h"

namespace farm::storage {
namespace {

namespace pb = ::iommufarm::v1;

bool IsHex(absl::string_view s) {
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

// KernelMatches and the mode test, clause by clause: the id with a leading
// "v<digit>" dropped equals the release or prefixes it before '.', '-' or
// '+'; or a 7+ digit hex id appears as "g<first 12 digits>" not followed by
// another hex digit.
const char* const kRunnableSql =
    "(j.executor NOT IN (2, 3) OR ("
    " (ah->>'iommu_mode')::int <> 0 AND (ah->>'iommu_mode')::int = j.mode"
    " AND j.commit_id <> '' AND coalesce(ah->>'kernel_release', '') <> ''"
    " AND (ah->>'kernel_release' = j.commit_id"
    "  OR ah->>'kernel_release' = regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1')"
    "  OR (left(ah->>'kernel_release', length(regexp_replace(j.commit_id, '^[vV]([0-9])', "
    "'\\1'))) = regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1')"
    "   AND substr(ah->>'kernel_release', length(regexp_replace(j.commit_id, '^[vV]([0-9])', "
    "'\\1')) + 1, 1) IN ('.', '-', '+'))"
    // CASE, not AND: the pattern is built from the id, so it must only be
    // compiled once the id is known to be hex.
    "  OR CASE WHEN j.commit_id ~ '^[0-9a-fA-F]{7,}$' THEN lower(ah->>'kernel_release') ~ "
    "('g' || left(lower(j.commit_id), 12) || '([^0-9a-f]|$)') ELSE false END)))";

bool KernelMatches(absl::string_view commit_id, absl::string_view kernel_release) {
  if (commit_id.empty() || kernel_release.empty()) return false;
  absl::string_view id = commit_id;
  if (id.size() > 1 && (id[0] == 'v' || id[0] == 'V') &&
      std::isdigit(static_cast<unsigned char>(id[1]))) {
    id.remove_prefix(1);
  }
  if (kernel_release == id || kernel_release == commit_id) return true;
  if (absl::StartsWith(kernel_release, id) && kernel_release.size() > id.size()) {
    const char next = kernel_release[id.size()];
    if (next == '.' || next == '-' || next == '+') return true;
  }
  if (commit_id.size() >= 7 && IsHex(commit_id)) {
    const std::string lower_release = absl::AsciiStrToLower(kernel_release);
    const std::string lower_id = absl::AsciiStrToLower(commit_id);
    // git describe prints 12 digits; a catalog may hold more or fewer.
    const size_t n = std::min<size_t>(lower_id.size(), 12);
    const std::string needle = absl::StrCat("g", lower_id.substr(0, n));
    size_t pos = lower_release.find(needle);
    while (pos != std::string::npos) {
      const size_t end = pos + needle.size();
      if (end == lower_release.size() ||
          !std::isxdigit(static_cast<unsigned char>(lower_release[end]))) {
        return true;
      }
      pos = lower_release.find(needle, pos + 1);
    }
  }
  return false;
}

absl::Status CheckRealRunHost(const pb::Job& job, const pb::HostFacts& host) {
  if (job.executor() != pb::EXECUTOR_FIO && job.executor() != pb::EXECUTOR_IOZONE) {
    return absl::OkStatus();
  }
  if (host.iommu_mode() == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::FailedPreconditionError(
        "host's IOMMU mode is unknown; real runs need a detected mode");
  }
  if (job.mode() != host.iommu_mode()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host runs IOMMU mode ", ::farm::proto::ModeName(host.iommu_mode()),
                     ", the cell wants ", ::farm::proto::ModeName(job.mode())));
  }
  if (!KernelMatches(job.commit_id(), host.kernel_release())) {
    return absl::FailedPreconditionError(absl::StrCat("host runs kernel ", host.kernel_release(),
                                                      ", the cell wants ", job.commit_id()));
  }
  return absl::OkStatus();
}

}  // namespace farm::storage
