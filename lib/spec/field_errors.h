// lib/spec/field_errors: the problems found in a spec, one line each naming
// its field path (`modes[1]: unknown mode "stict" ...`), collected so that a
// submitter learns every problem of a spec from one answer.
//
// Contract: a plain value, not thread-safe (one per check). Every line is
// kept whole; ToStatus reports at most kMaxReported of them and counts the
// rest, so a huge spec cannot turn into a huge error. Memory grows with the
// number of distinct paths, which the spec's size bounds.
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
