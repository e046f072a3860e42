// build_cache: the kernel builder's cache directory. One build directory per
// (tree, arch, config) under <root>/builds, reused from commit to commit so
// that `make O=` rebuilds only what changed; a lock file beside each
// (<root>/builds/<id>.lock, flock) so one build at a time uses it; and a
// bound on the bytes the build directories take, kept by removing the least
// recently used ones (their `last-use` stamp), never a locked one.
//
// Thread-safety: free functions over the file system and a move-only lock;
// safe across threads and processes (the flock is the only shared state).
#ifndef LIB_KBUILD_BUILD_CACHE_H_
#define LIB_KBUILD_BUILD_CACHE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace farm::kbuild {

// /var/cache/iommu-farm/kbuild when it is (or can be made) writable, else
// $HOME/.cache/iommu-farm/kbuild.
std::string DefaultCacheRoot();

// An exclusive flock on a lock file, held until destroyed.
class DirLock {
 public:
  // Waits up to `wait` for the lock on `lock_path` (made when missing);
  // absl::ZeroDuration() tries once. Unavailable when another holder keeps
  // it; Internal when the file cannot be opened.
  static absl::StatusOr<DirLock> Acquire(const std::string& lock_path, absl::Duration wait);

  DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

// Marks `build_dir` used now (its `last-use` stamp).
void TouchLastUse(const std::string& build_dir);

// Bytes of the regular files under `dir` (symbolic links not followed).
std::uint64_t DirectoryBytes(const std::string& dir);

struct Eviction {
  std::vector<std::string> removed;  // build directories, oldest first
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
};

// Removes build directories of `builds_root`, least recently used first,
// until they take at most `max_bytes`; `keep` (the one in use) and any whose
// lock another holder keeps are left. A directory is removed under its lock.
Eviction EvictLeastRecentlyUsed(const std::string& builds_root, std::uint64_t max_bytes,
                                const std::string& keep);

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_BUILD_CACHE_H_
