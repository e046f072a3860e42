// lib/spec/field_errors: the problems found in a spec, one line each naming
// its field path (`modes[1]: unknown mode "stict" ...`), collected so that a
// submitter learns every problem of a spec from one answer.
//
// Contract: a plain value, not thread-safe (one per check). ToStatus
// reports at most kMaxReported lines of at most kMaxLineBytes each and
// counts the rest, so a huge spec cannot turn into a huge error or log
// line; callers whose messages are costly to build skip them once full().
// Memory grows with the number of distinct paths, which the spec's size
// bounds.
#ifndef LIB_SPEC_FIELD_ERRORS_H_
#define LIB_SPEC_FIELD_ERRORS_H_

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace farm::spec {

class FieldErrors {
 public:
  // Lines ToStatus shows; later ones are counted in a last line.
  static constexpr size_t kMaxReported = 50;
  // A longer line is cut there (a list of candidates, say).
  static constexpr size_t kMaxLineBytes = 500;

  // `path` empty: a problem of the whole spec.
  void Add(const std::string& path, const std::string& msg);
  // Add unless `path` or a field holding it already has an error: the YAML
  // mapping reports what it could not map, and the checks that follow would
  // otherwise report the same field again (as missing, say).
  void AddIfNew(const std::string& path, const std::string& msg);
  // True when `path` or a field holding it has an error.
  bool Covers(const std::string& path) const;

  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  // True once a further line would only be counted: its text is not needed.
  bool full() const { return lines_.size() >= kMaxReported; }
  // OK when empty; else InvalidArgument, one line per problem (at most
  // kMaxReported, then "... and N more problems").
  absl::Status ToStatus() const;

 private:
  std::vector<std::string> lines_;  // the first kMaxReported
  std::set<std::string> paths_;
  size_t count_ = 0;
};

// `s` in double quotes, as messages quote what the spec says.
std::string Quoted(const std::string& s);

}  // namespace farm::spec

#endif  // LIB_SPEC_FIELD_ERRORS_H_
