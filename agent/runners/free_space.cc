#include "agent/runners/free_space.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace farm::runners {

std::uint64_t FreeSpaceReserve(std::uint64_t filesystem_bytes) {
  return std::min<std::uint64_t>(filesystem_bytes / 20, 4ull << 30);
}

absl::Status CheckFreeSpace(const std::string& directory, std::uint64_t needed) {
  if (needed == 0) return absl::OkStatus();
  struct statvfs fs {};
  if (statvfs(directory.c_str(), &fs) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot read the free space of ", directory, ": ", std::strerror(errno)));
  }
  const std::uint64_t unit = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
  const std::uint64_t available = static_cast<std::uint64_t>(fs.f_bavail) * unit;
  const std::uint64_t reserve = FreeSpaceReserve(static_cast<std::uint64_t>(fs.f_blocks) * unit);
  const std::uint64_t usable = available > reserve ? available - reserve : 0;
  if (needed <= usable) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "the job lays out ", needed, " bytes under ", directory, " but only ", usable,
      " bytes are free there beyond the ", reserve, " kept free (", available, " available)"));
}

}  // namespace farm::runners
