#include "lib/spec/field_errors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "lib/base/utf8.h"

namespace farm::spec {

void FieldErrors::Add(const std::string& path, const std::string& msg) {
  ++count_;
  paths_.insert(path);
  if (full()) return;
  std::string line = path.empty() ? msg : path + ": " + msg;
  // A path names what the spec said, keys included; an error line must
  // still be text a status, a log and a terminal carry whole.
  if (line.find('\0') != std::string::npos)
    line = absl::StrReplaceAll(line, {{std::string(1, '\0'), "\\0"}});
  base::ReplaceInvalidUtf8(&line);
  if (line.size() > kMaxLineBytes) {
    // At a character's start, so the cut line is still UTF-8.
    size_t cut = kMaxLineBytes;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
    line.resize(cut);
    line += "...";
  }
  lines_.push_back(std::move(line));
}

void FieldErrors::AddIfNew(const std::string& path, const std::string& msg) {
  if (!Covers(path)) Add(path, msg);
}

bool FieldErrors::Covers(const std::string& path) const {
  // The fields holding `path` are its prefixes that end before a '.' or '['.
  for (size_t i = 1; i < path.size(); ++i) {
    if ((path[i] == '.' || path[i] == '[') && paths_.count(path.substr(0, i)) != 0) return true;
  }
  return paths_.count(path) != 0;
}

absl::Status FieldErrors::ToStatus() const {
  if (count_ == 0) return absl::OkStatus();
  std::string msg = absl::StrJoin(lines_, "\n");
  if (count_ > lines_.size()) {
    absl::StrAppend(&msg, "\n... and ", count_ - lines_.size(), " more problems");
  }
  return absl::InvalidArgumentError(msg);
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

}  // namespace farm::spec
