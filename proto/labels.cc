#include "proto/labels.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::proto {
namespace {

bool KeyChar(char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '_' || c == '/' ||
         c == '-';
}
bool ValueChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '/' || c == '+' ||
         c == '-';
}

}  // namespace

absl::Status CheckLabel(absl::string_view key, absl::string_view value) {
  if (key.empty() || key.size() > 63 || !std::all_of(key.begin(), key.end(), KeyChar) ||
      !absl::ascii_isalnum(key.front())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label key '", key, "': 1-63 of a-z 0-9 . _ / - starting with a letter or digit"));
  }
  if (value.empty() || value.size() > 128 || !std::all_of(value.begin(), value.end(), ValueChar)) {
    return absl::InvalidArgumentError(
        absl::StrCat("label ", key, " value '", value, "': 1-128 of A-Z a-z 0-9 . _ : / + -"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& items) {
  std::map<std::string, std::string> labels;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("label '", item, "' is not KEY=VALUE"));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (absl::Status st = CheckLabel(key, value); !st.ok()) return st;
    if (!labels.emplace(key, value).second) {
      return absl::InvalidArgumentError(absl::StrCat("label ", key, " given twice"));
    }
  }
  return labels;
}

bool LabelsHold(const google::protobuf::Map<std::string, std::string>& have,
                const google::protobuf::Map<std::string, std::string>& want) {
  return MissingLabels(have, want).empty();
}

std::vector<std::string> MissingLabels(
    const google::protobuf::Map<std::string, std::string>& have,
    const google::protobuf::Map<std::string, std::string>& want) {
  std::vector<std::string> missing;
  for (const auto& [k, v] : want) {
    auto it = have.find(k);
    if (it == have.end() || it->second != v) missing.push_back(absl::StrCat(k, "=", v));
  }
  std::sort(missing.begin(), missing.end());
  return missing;
}

std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

}  // namespace farm::proto
