#include "lib/base/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace farm::base {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ReadFileOrEmpty(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  return text.ok() ? *std::move(text) : std::string();
}

bool IsEmptyDirectory(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  // An unreadable directory gives the end iterator too: not empty, unknown.
  const std::filesystem::directory_iterator it(path, ec);
  return !ec && it == std::filesystem::directory_iterator();
}

absl::Status WriteFile(const std::string& path, absl::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const auto failed = [&path] {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return failed();
  const char* data = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status st = failed();
      ::close(fd);
      return st;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  // On disk before the rename publishes it: a reboot must not find an empty
  // file under the old name.
  if (::fsync(fd) != 0) {
    absl::Status st = failed();
    ::close(fd);
    return st;
  }
  if (::close(fd) != 0) return failed();
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return failed();
  return absl::OkStatus();
}

}  // namespace farm::base
