#include "agent/runners/iozone_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::runners {

absl::StatusOr<IozoneCommand> BuildIozoneCommand(const IozoneSpec& spec,
                                                 const AllowedTargets& allowed,
                                                 const std::string& iozone,
                                                 const std::string& file_prefix) {
  if (file_prefix.empty() ||
      file_prefix.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone file prefix \"", file_prefix, "\" is not [A-Za-z0-9_.-]+"));
  }
  IozoneCommand cmd;
  absl::StatusOr<std::string> dir = spec.directory.empty()
                                        ? allowed.DefaultDirectory()
                                        : allowed.ResolveDirectory(spec.directory);
  if (!dir.ok()) return dir.status();
  cmd.directory = *dir;
  // Every file must itself pass the file checks (no symlink planted under
  // the name we are about to use).
  for (int i = 0; i < spec.threads; ++i) {
    auto file = allowed.ResolveFile(absl::StrCat(*dir, "/", file_prefix, ".", i));
    if (!file.ok()) return file.status();
    cmd.files.push_back(*file);
  }
  std::set<int> groups = {0};
  for (const std::string& t : spec.tests) {
    if (t == "read" || t == "reread") groups.insert(1);
    if (t == "randread" || t == "randwrite") groups.insert(2);
  }
  cmd.argv = {iozone, "-s", absl::StrCat(spec.size_bytes / 1024, "k"), "-r",
              absl::StrCat(spec.record_bytes / 1024, "k")};
  for (int g : groups) cmd.argv.push_back(absl::StrCat("-i", g));
  if (spec.direct) cmd.argv.push_back("-I");
  if (spec.machine_info) cmd.argv.push_back("-M");
  cmd.argv.push_back("-t");
  cmd.argv.push_back(absl::StrCat(spec.threads));
  cmd.argv.push_back("-F");
  for (const std::string& f : cmd.files) cmd.argv.push_back(f);
  return cmd;
}

}  // namespace farm::runners
