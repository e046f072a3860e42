#include "lib/kstore/store_watch.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace farm::kstore {

namespace fs = std::filesystem;

namespace {

// The stamp of the store at `dir` (see the header) and the newest
// modification time in it.
std::string Stamp(const std::string& dir, absl::Time* newest) {
  std::string out;
  *newest = absl::InfinitePast();
  auto add = [&](const std::string& path, absl::string_view name) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return false;
    const absl::Time mtime = absl::TimeFromTimespec(st.st_mtim);
    *newest = std::max(*newest, mtime);
    absl::StrAppend(&out, name, " ", st.st_ino, " ", st.st_size, " ", absl::ToUnixNanos(mtime),
                    "\n");
    return S_ISDIR(st.st_mode);
  };
  if (!add(dir, ".")) return out;
  std::error_code ec;
  std::vector<std::string> builds;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.front() != '.') builds.push_back(name);
  }
  std::sort(builds.begin(), builds.end());
  for (const std::string& b : builds) {
    const std::string path = (fs::path(dir) / b).string();
    if (!add(path, b)) continue;
    std::vector<std::string> files;
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file(ec)) files.push_back(e.path().filename().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) add((fs::path(path) / f).string(), absl::StrCat(b, "/", f));
  }
  return out;
}

}  // namespace

StoreWatch::StoreWatch(std::string dir, std::function<absl::Time()> now)
    : dir_(std::move(dir)), now_(std::move(now)) {}

StoreWatch::Snapshot StoreWatch::Current() {
  absl::MutexLock lock(&mu_);
  // The stamp before the read: a change during the read makes the next
  // stamp differ, so it is read again then.
  const absl::Time read_at = now_();
  absl::Time newest;
  std::string stamp = Stamp(dir_, &newest);
  if (current_.listing != nullptr && !racy_ && stamp == stamp_) return current_;
  current_.listing = std::make_shared<const absl::StatusOr<StoreListing>>(ReadStore(dir_));
  ++current_.generation;
  stamp_ = std::move(stamp);
  racy_ = newest > read_at - kRacyWindow;
  return current_;
}

std::uint64_t StoreWatch::reads() const {
  absl::MutexLock lock(&mu_);
  return current_.generation;
}

}  // namespace farm::kstore
