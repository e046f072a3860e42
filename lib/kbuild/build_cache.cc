#include "lib/kbuild/build_cache.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace farm::kbuild {

namespace fs = std::filesystem;

namespace {

constexpr char kLastUse[] = "last-use";

bool WritableDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return !ec && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

fs::file_time_type LastUse(const fs::path& dir) {
  std::error_code ec;
  fs::file_time_type t = fs::last_write_time(dir / kLastUse, ec);
  if (ec) t = fs::last_write_time(dir, ec);
  return ec ? fs::file_time_type::min() : t;
}

}  // namespace

std::string DefaultCacheRoot() {
  const fs::path system = "/var/cache/iommu-farm/kbuild";
  if (WritableDir(system)) return system.string();
  const char* home = ::getenv("HOME");
  return (fs::path(home != nullptr && *home != '\0' ? home : "/tmp") / ".cache/iommu-farm/kbuild")
      .string();
}

absl::StatusOr<DirLock> DirLock::Acquire(const std::string& lock_path, absl::Duration wait) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("open ", lock_path, ": ", std::strerror(errno)));
  }
  const absl::Time deadline = absl::Now() + wait;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const int e = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("flock ", lock_path, ": ", std::strerror(e)));
    }
    if (absl::Now() >= deadline) {
      ::close(fd);
      return absl::UnavailableError(absl::StrCat(lock_path, " is held by another build (waited ",
                                                 absl::FormatDuration(wait), ")"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return DirLock(fd);
}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the flock
}

void TouchLastUse(const std::string& build_dir) {
  const fs::path stamp = fs::path(build_dir) / kLastUse;
  std::ofstream(stamp, std::ios::trunc) << absl::FormatTime(absl::Now()) << "\n";
  std::error_code ec;  // the stamp's mtime is what counts; the text is for people
  fs::last_write_time(stamp, fs::file_time_type::clock::now(), ec);
}

std::uint64_t DirectoryBytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e;
    if (it->is_regular_file(e) && !it->is_symlink(e)) total += it->file_size(e);
  }
  return total;
}

Eviction EvictLeastRecentlyUsed(const std::string& builds_root, std::uint64_t max_bytes,
                                const std::string& keep) {
  struct Entry {
    fs::path dir;
    fs::file_time_type last_use;
    std::uint64_t bytes;
  };
  std::vector<Entry> entries;
  Eviction out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(builds_root, ec)) {
    std::error_code e2;
    if (!e.is_directory(e2) || e.is_symlink(e2)) continue;
    entries.push_back({e.path(), LastUse(e.path()), DirectoryBytes(e.path().string())});
    out.bytes_before += entries.back().bytes;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
  out.bytes_after = out.bytes_before;
  const fs::path kept = fs::path(keep).lexically_normal();
  for (const Entry& e : entries) {
    if (out.bytes_after <= max_bytes) break;
    if (e.dir.lexically_normal() == kept) continue;
    absl::StatusOr<DirLock> lock = DirLock::Acquire(e.dir.string() + ".lock", absl::ZeroDuration());
    if (!lock.ok()) continue;  // in use by another build
    std::error_code rm;
    fs::remove_all(e.dir, rm);
    if (rm) continue;
    out.bytes_after -= e.bytes;
    out.removed.push_back(e.dir.string());
  }
  return out;
}

}  // namespace farm::kbuild
