// targets: where a real fio / iozone run may read and write, as allowed by
// the agent's operator (--allow-dir DIR, --allow-device DEV[:ro|:rw]).
//
// Contract:
// - AllowedTargets is an immutable value after Parse; const methods are
//   thread-safe. Allowed directories and devices are canonicalised once
//   (realpath), so a symlinked allow entry names its real target.
// - Resolve* canonicalise a requested path and check it against the list:
//   directories with realpath (no ".." or symlink escapes; ".." components
//   are refused outright), files by realpath of their parent plus a plain
//   leaf name that, if it exists, must be a regular, non-symlink file with a
//   single link; devices by realpath and an exact match with an allowed
//   device, writable only when allowed ":rw". Relative requests resolve
//   under the first allowed directory. ':' is refused in paths because fio
//   reads it as a list separator.
// - Errors are PermissionDenied (outside what is allowed) or InvalidArgument
//   (malformed path), and say why.
// Limit: a file checked here could be swapped for a symlink before the tool
// opens it by someone who can write into the allowed directory; the operator
// should allow only directories that jobs alone write to.
#ifndef AGENT_RUNNERS_TARGETS_H_
#define AGENT_RUNNERS_TARGETS_H_

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace farm::runners {

struct AllowedDevice {
  std::string path;  // canonical, e.g. /dev/nvme0n1
  bool writable = false;
};

class AllowedTargets {
 public:
  AllowedTargets() = default;

  // `dirs`: --allow-dir values (must exist and be directories).
  // `devices`: --allow-device values, "/dev/X" (read-only), "/dev/X:ro" or
  // "/dev/X:rw" (must exist and be block or character devices).
  static absl::StatusOr<AllowedTargets> Parse(const std::vector<std::string>& dirs,
                                              const std::vector<std::string>& devices);

  const std::vector<std::string>& dirs() const { return dirs_; }
  const std::vector<AllowedDevice>& devices() const { return devices_; }
  bool empty() const { return dirs_.empty() && devices_.empty(); }

  // A directory at or under an allowed directory; it must exist.
  absl::StatusOr<std::string> ResolveDirectory(absl::string_view path) const;
  // A file path inside an allowed directory (the file may not exist yet).
  absl::StatusOr<std::string> ResolveFile(absl::string_view path) const;
  // An allowed device; `write` requires it to be allowed ":rw".
  absl::StatusOr<std::string> ResolveDevice(absl::string_view path, bool write) const;
  // The default target directory: the first allowed one.
  absl::StatusOr<std::string> DefaultDirectory() const;

 private:
  // `path` checked as text, a relative one under DefaultDirectory().
  absl::StatusOr<std::string> AbsoluteTarget(absl::string_view path) const;
  absl::Status CheckInsideAllowedDir(const std::string& canonical,
                                     absl::string_view requested) const;

  std::vector<std::string> dirs_;
  std::vector<AllowedDevice> devices_;
};

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_TARGETS_H_
