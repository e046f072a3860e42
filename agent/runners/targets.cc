#include "agent/runners/targets.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace farm::runners {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve ", path, ": ", std::strerror(errno)));
  }
  return std::string(buf);
}

// Refuses what no target path needs and something downstream would
// misread: fio splits filename on ':'; control characters garble logs.
absl::Status CheckPathText(absl::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty target path");
  for (char c : path) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("target path \"", path, "\" contains a control character"));
    }
    if (c == ':' || c == '\\' || c == '$') {
      return absl::InvalidArgumentError(
          absl::StrCat("target path \"", path, "\" contains '", std::string(1, c),
                       "' (fio reads ':' as a list of files and may expand '$'); not allowed"));
    }
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") {
      return absl::PermissionDeniedError(
          absl::StrCat("target path \"", path, "\" contains '..'; not allowed"));
    }
  }
  return absl::OkStatus();
}

bool IsUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || absl::StartsWith(path, absl::StrCat(dir, "/"));
}

}  // namespace

absl::StatusOr<AllowedTargets> AllowedTargets::Parse(const std::vector<std::string>& dirs,
                                                     const std::vector<std::string>& devices) {
  AllowedTargets t;
  for (const std::string& d : dirs) {
    absl::StatusOr<std::string> real = RealPath(d);
    if (!real.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-dir ", d, ": ", real.status().message()));
    }
    struct stat st;
    if (::stat(real->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("--allow-dir ", d, ": not a directory"));
    }
    if (real->find_first_of(":$\\") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow-dir ", d, ": path contains ':', '$' or '\\', which fio would misread"));
    }
    t.dirs_.push_back(*real);
  }
  for (const std::string& spec : devices) {
    absl::string_view path = spec;
    bool writable = false;
    if (absl::ConsumeSuffix(&path, ":rw")) {
      writable = true;
    } else {
      absl::ConsumeSuffix(&path, ":ro");
    }
    absl::StatusOr<std::string> real = RealPath(std::string(path));
    if (!real.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-device ", spec, ": ", real.status().message()));
    }
    struct stat st;
    if (::stat(real->c_str(), &st) != 0 || !(S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-device ", spec, ": not a block or character device"));
    }
    t.devices_.push_back({*real, writable});
  }
  return t;
}

absl::StatusOr<std::string> AllowedTargets::DefaultDirectory() const {
  if (dirs_.empty()) {
    return absl::PermissionDeniedError(
        "no target given and the agent allows no directory (--allow-dir)");
  }
  return dirs_.front();
}

absl::StatusOr<std::string> AllowedTargets::AbsoluteTarget(absl::string_view path) const {
  if (absl::Status s = CheckPathText(path); !s.ok()) return s;
  if (path.front() == '/') return std::string(path);
  absl::StatusOr<std::string> base = DefaultDirectory();
  if (!base.ok()) return base.status();
  return absl::StrCat(*base, "/", path);
}

absl::Status AllowedTargets::CheckInsideAllowedDir(const std::string& canonical,
                                                   absl::string_view requested) const {
  for (const std::string& d : dirs_) {
    if (IsUnder(canonical, d)) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("target \"", requested, "\" resolves to ", canonical,
                   ", which is outside the allowed directories [", absl::StrJoin(dirs_, ", "),
                   "] (agent --allow-dir)"));
}

absl::StatusOr<std::string> AllowedTargets::ResolveDirectory(absl::string_view path) const {
  absl::StatusOr<std::string> absolute = AbsoluteTarget(path);
  if (!absolute.ok()) return absolute.status();
  absl::StatusOr<std::string> real = RealPath(*absolute);
  if (!real.ok()) return real.status();
  struct stat st;
  if (::stat(real->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target directory ", path, " is not a directory"));
  }
  if (absl::Status s = CheckInsideAllowedDir(*real, path); !s.ok()) return s;
  return *real;
}

absl::StatusOr<std::string> AllowedTargets::ResolveFile(absl::string_view path) const {
  absl::StatusOr<std::string> absolute = AbsoluteTarget(path);
  if (!absolute.ok()) return absolute.status();
  const std::string& full = *absolute;
  const size_t slash = full.rfind('/');
  const std::string parent = slash == 0 ? "/" : full.substr(0, slash);
  const std::string leaf = full.substr(slash + 1);
  if (leaf.empty() || leaf == ".") {
    return absl::InvalidArgumentError(absl::StrCat("target file \"", path, "\" has no file name"));
  }
  absl::StatusOr<std::string> real_parent = RealPath(parent);
  if (!real_parent.ok()) return real_parent.status();
  const std::string canonical =
      *real_parent == "/" ? "/" + leaf : absl::StrCat(*real_parent, "/", leaf);
  if (absl::Status s = CheckInsideAllowedDir(canonical, path); !s.ok()) {
    return s;
  }
  struct stat st;
  if (::lstat(canonical.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat("target file ", canonical,
                       " is a symbolic link; links could point outside the allowed "
                       "directories"));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::PermissionDeniedError(
          absl::StrCat("target file ", canonical,
                       " exists and is not a regular file (devices need "
                       "--allow-device)"));
    }
    if (st.st_nlink > 1) {
      return absl::PermissionDeniedError(
          absl::StrCat("target file ", canonical,
                       " has several hard links; one may live outside the allowed "
                       "directories"));
    }
  } else if (errno != ENOENT) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot stat ", canonical, ": ", std::strerror(errno)));
  }
  return canonical;
}

absl::StatusOr<std::string> AllowedTargets::ResolveDevice(absl::string_view path,
                                                          bool write) const {
  if (absl::Status s = CheckPathText(path); !s.ok()) return s;
  absl::StatusOr<std::string> real = RealPath(std::string(path));
  if (!real.ok()) return real.status();
  for (const AllowedDevice& d : devices_) {
    if (d.path != *real) continue;
    if (write && !d.writable) {
      return absl::PermissionDeniedError(
          absl::StrCat("device ", *real,
                       " is allowed read-only; this job writes to it (the agent needs "
                       "--allow-device ",
                       *real, ":rw)"));
    }
    return *real;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "device ", path, " (", *real, ") is not allowed on this agent (--allow-device)"));
}

}  // namespace farm::runners
