// sysfs_tree: reading /proc and /sys under a root directory ("/" on a real
// host, a fake tree in tests), as host facts and the inventory do.
//
// Pure helpers over the file system; thread-safe. No ownership.
#ifndef AGENT_SYSFS_TREE_H_
#define AGENT_SYSFS_TREE_H_

#include <filesystem>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "lib/base/file.h"

namespace farm::agent {

// The file's text without surrounding white space; "" when unreadable.
inline std::string ReadTrimmed(const std::filesystem::path& path) {
  return std::string(absl::StripAsciiWhitespace(base::ReadFileOrEmpty(path.string())));
}

// `absolute` ("/sys/class/iommu") under `root`.
inline std::filesystem::path Under(const std::string& root, absl::string_view absolute) {
  absl::ConsumePrefix(&absolute, "/");
  return std::filesystem::path(root) / std::string(absolute);
}

}  // namespace farm::agent

#endif  // AGENT_SYSFS_TREE_H_
