#include "agent/runners/iozone_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::runners {
namespace {

absl::Status Refuse(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("iozone param '", key, "' refused: ", why));
}

const std::vector<std::string>& Tests() {
  static const auto* tests =
      new std::vector<std::string>{"write", "rewrite", "read", "reread", "randread", "randwrite"};
  return *tests;
}

}  // namespace

const std::vector<std::string>& IozoneAllowedParams() {
  static const auto* keys = new std::vector<std::string>{
      "tests", "size", "record", "threads", "direct", "machine_info", "directory"};
  return *keys;
}

absl::StatusOr<IozoneSpec> IozoneSpecFromParams(const Params& params) {
  IozoneSpec spec;
  const auto& allowed = IozoneAllowedParams();
  for (const auto& [key, value] : params) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      const std::string lower = absl::AsciiStrToLower(key);
      if (lower == "filename" || lower == "files" || lower == "f") {
        return Refuse(key,
                      "iozone's files are named by the agent inside "
                      "'directory' (an allowed directory)");
      }
      return Refuse(key, absl::StrCat("unknown option; allowed: ", absl::StrJoin(allowed, ", ")));
    }
  }
  bool have_size = false;
  for (const auto& [key, value] : params) {
    if (key == "tests") {
      auto list = ParseList(key, value);
      if (!list.ok()) return list.status();
      for (const std::string& t : *list) {
        if (std::find(Tests().begin(), Tests().end(), t) == Tests().end()) {
          return Refuse(
              key, absl::StrCat("unknown test '", t, "'; allowed: ", absl::StrJoin(Tests(), ", ")));
        }
      }
      spec.tests = *list;
    } else if (key == "size") {
      auto v = ParseBytes(key, value, 64 << 10, 1ull << 40);
      if (!v.ok()) return v.status();
      spec.size_bytes = *v;
      have_size = true;
    } else if (key == "record") {
      auto v = ParseBytes(key, value, 4 << 10, 16 << 20);
      if (!v.ok()) return v.status();
      spec.record_bytes = *v;
    } else if (key == "threads") {
      auto v = ParseInt(key, value, 1, 256);
      if (!v.ok()) return v.status();
      spec.threads = static_cast<int>(*v);
    } else if (key == "direct") {
      auto v = ParseBool(key, value);
      if (!v.ok()) return v.status();
      spec.direct = *v;
    } else if (key == "machine_info") {
      auto v = ParseBool(key, value);
      if (!v.ok()) return v.status();
      spec.machine_info = *v;
    } else if (key == "directory") {
      spec.directory = value;
    }
  }
  if (!have_size) {
    return absl::InvalidArgumentError(
        "iozone param 'size' is required (per-process file size, e.g. 64m)");
  }
  if (spec.size_bytes % 1024 != 0 || spec.record_bytes % 1024 != 0) {
    return absl::InvalidArgumentError("iozone params 'size' and 'record' must be whole KiB");
  }
  if (spec.record_bytes > spec.size_bytes) {
    return absl::InvalidArgumentError("iozone param 'record' must not exceed 'size'");
  }
  return spec;
}

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
