#include "agent/runners/iozone_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::runners {
namespace {

absl::Status CheckFilePrefix(const std::string& file_prefix) {
  if (file_prefix.empty() ||
      file_prefix.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
          std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone file prefix \"", file_prefix, "\" is not [A-Za-z0-9_.-]+"));
  }
  return absl::OkStatus();
}

// Everything but the -F files, which the caller appends.
std::vector<std::string> IozoneArgvHead(const IozoneSpec& spec, const std::string& iozone) {
  std::set<int> groups = {0};
  for (const std::string& t : spec.tests) {
    if (t == "read" || t == "reread") groups.insert(1);
    if (t == "randread" || t == "randwrite") groups.insert(2);
  }
  std::vector<std::string> argv = {iozone, "-s", absl::StrCat(spec.size_bytes / 1024, "k"), "-r",
                                   absl::StrCat(spec.record_bytes / 1024, "k")};
  for (int g : groups) argv.push_back(absl::StrCat("-i", g));
  if (spec.direct) argv.push_back("-I");
  if (spec.machine_info) argv.push_back("-M");
  argv.push_back("-t");
  argv.push_back(absl::StrCat(spec.threads));
  argv.push_back("-F");
  return argv;
}

}  // namespace

absl::StatusOr<IozoneCommand> BuildIozoneCommand(const IozoneSpec& spec,
                                                 const AllowedTargets& allowed,
                                                 const std::string& iozone,
                                                 const std::string& file_prefix) {
  if (absl::Status s = CheckFilePrefix(file_prefix); !s.ok()) return s;
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
  cmd.argv = IozoneArgvHead(spec, iozone);
  for (const std::string& f : cmd.files) cmd.argv.push_back(f);
  return cmd;
}

absl::StatusOr<std::vector<std::string>> BuildIozoneGuestArgv(const IozoneSpec& spec,
                                                              const std::string& directory,
                                                              const std::string& iozone,
                                                              const std::string& file_prefix) {
  if (absl::Status s = CheckFilePrefix(file_prefix); !s.ok()) return s;
  if (!spec.directory.empty() && spec.directory != directory) {
    return absl::InvalidArgumentError(absl::StrCat("a guest iozone's only directory is ", directory,
                                                   "; the spec names '", spec.directory, "'"));
  }
  std::vector<std::string> argv = IozoneArgvHead(spec, iozone);
  for (int i = 0; i < spec.threads; ++i) {
    argv.push_back(absl::StrCat(directory, "/", file_prefix, ".", i));
  }
  return argv;
}

}  // namespace farm::runners
