// try_commit: the commit a try job's patch makes of its base.
//
// A try job's patch (a spec's `patch:`, farmctl try --patch FILE) is applied
// by the kernel builder on the base commit; the result is not a commit of
// the catalog, so the farm names it "<base>+<patch id>": the base's full id,
// '+', and the first 12 hex digits of the SHA-256 of the patch text. Its jobs
// carry that id and the base's catalog index; its build job carries the
// patch in the workload param `patch`; the build is stored under that id, so
// a vm agent's offer of it matches those jobs. The analyzer leaves try
// commits out of its series (they are no place in the catalog's order).
//
// Pure functions; thread-safe.
#ifndef PROTO_TRY_COMMIT_H_
#define PROTO_TRY_COMMIT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace farm::proto {

// The build job's workload param holding the patch text.
inline constexpr char kPatchParam[] = "patch";

// The largest patch text the farm takes: it travels whole in the spec and
// in its build job's param (a spec is bounded by farm-scheduler
// --max-spec-bytes, 1 MiB by default), and a review of the DMA path is a
// few kilobytes.
inline constexpr size_t kMaxPatchBytes = size_t{512} << 10;

// Why the kernel builder could not apply `patch` as text, "" when it can:
// over kMaxPatchBytes, or a binary diff (git diff --binary's "GIT binary
// patch", or plain git diff's "Binary files a/X and b/X differ", which
// `git apply` refuses), named by its file.
std::string PatchTextProblem(std::string_view patch);

std::string TryCommitId(std::string_view base, std::string_view patch);
// True for an id TryCommitId made.
bool IsTryCommit(std::string_view id);
// The base of a try commit id; `id` itself for any other.
std::string_view TryBase(std::string_view id);

}  // namespace farm::proto

#endif  // PROTO_TRY_COMMIT_H_
