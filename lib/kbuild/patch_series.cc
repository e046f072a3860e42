#include "lib/kbuild/patch_series.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace farm::kbuild {
namespace {

// git format-patch's mbox separator: "From <40 hex> Mon Sep 17 00:00:00 2001".
bool IsMboxSeparator(absl::string_view line) {
  if (!absl::StartsWith(line, "From ") || line.size() < 46 || line[45] != ' ') return false;
  for (char c : line.substr(5, 40)) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A unified diff's file lines: "--- " then "+++ " on the next line.
bool HoldsDiff(absl::string_view text) {
  bool after_old = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (after_old && absl::StartsWith(line, "+++ ")) return true;
    after_old = absl::StartsWith(line, "--- ");
  }
  return false;
}

// The Subject header of a message (continuation lines joined), "" without
// one; headers end at the first empty line.
std::string Subject(absl::string_view message) {
  std::string subject;
  bool in_subject = false;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    if (line.empty()) break;
    if (in_subject && (line[0] == ' ' || line[0] == '\t')) {
      absl::StrAppend(&subject, " ", absl::StripAsciiWhitespace(line));
      continue;
    }
    in_subject = absl::StartsWithIgnoreCase(line, "Subject:");
    if (in_subject) subject = std::string(absl::StripAsciiWhitespace(line.substr(8)));
  }
  return subject;
}

}  // namespace

absl::StatusOr<std::vector<SeriesPatch>> SplitPatchSeries(absl::string_view text) {
  // Messages: split before every separator line (the text before the first,
  // if any, is a message of its own).
  std::vector<std::string> messages(1);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (IsMboxSeparator(line) && !absl::StripAsciiWhitespace(messages.back()).empty()) {
      messages.emplace_back();
    }
    absl::StrAppend(&messages.back(), line, "\n");
  }
  std::vector<SeriesPatch> out;
  for (std::string& m : messages) {
    if (!HoldsDiff(m)) continue;
    out.push_back(SeriesPatch{Subject(m), std::move(m)});
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "no patch in it: neither a unified diff ('--- ' and '+++ ' file lines) nor mail "
        "holding one");
  }
  return out;
}

}  // namespace farm::kbuild
