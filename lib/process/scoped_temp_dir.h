// scoped_temp_dir.h: a private directory (mkdtemp, mode 0700) removed with
// everything in it when the owner goes out of scope: the scratch space of a
// VM run, a kernel import or a benchmark.
//
// Move-only; one owner. Not thread-safe: a ScopedTempDir is used by the
// thread that made it (its contents may be written by children it starts).
#ifndef LIB_PROCESS_SCOPED_TEMP_DIR_H_
#define LIB_PROCESS_SCOPED_TEMP_DIR_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace farm::process {

class ScopedTempDir {
 public:
  // A new directory `parent`/`prefix`XXXXXX. Internal (with errno) when
  // mkdtemp fails, e.g. `parent` missing or not writable.
  static absl::StatusOr<ScopedTempDir> Create(const std::filesystem::path& parent,
                                              const std::string& prefix) {
    std::string tmpl = (parent / (prefix + "XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("mkdtemp under ", parent.string(), ": ", std::strerror(errno)));
    }
    return ScopedTempDir(std::move(tmpl));
  }

  ScopedTempDir(ScopedTempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScopedTempDir& operator=(ScopedTempDir&& other) noexcept {
    if (this != &other) {
      Remove();
      path_ = std::exchange(other.path_, {});
    }
    return *this;
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  ~ScopedTempDir() { Remove(); }

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScopedTempDir(std::filesystem::path path) : path_(std::move(path)) {}
  void Remove() {
    if (path_.empty()) return;
    std::error_code ec;  // best effort: nothing useful to do with a failure here
    std::filesystem::remove_all(path_, ec);
  }

  std::filesystem::path path_;
};

}  // namespace farm::process

#endif  // LIB_PROCESS_SCOPED_TEMP_DIR_H_
