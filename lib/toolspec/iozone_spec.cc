#include "lib/toolspec/iozone_spec.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::toolspec {
namespace {

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
        return RefuseParam("iozone", key,
                           "iozone's files are named by the agent inside "
                           "'directory' (an allowed directory)");
      }
      return RefuseParam("iozone", key,
                         absl::StrCat("unknown option; allowed: ", absl::StrJoin(allowed, ", ")));
    }
  }
  bool have_size = false;
  for (const auto& [key, value] : params) {
    if (key == "tests") {
      auto list = ParseList(key, value);
      if (!list.ok()) return list.status();
      for (const std::string& t : *list) {
        if (std::find(Tests().begin(), Tests().end(), t) == Tests().end()) {
          return RefuseParam(
              "iozone", key,
              absl::StrCat("unknown test '", t, "'; allowed: ", absl::StrJoin(Tests(), ", ")));
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
  if (absl::Status st = CheckJobFootprint("iozone", "size x threads", spec.FilesystemFootprint());
      !st.ok())
    return st;
  return spec;
}

}  // namespace farm::toolspec
