// lib/spec/yaml_limits: bounds on what a YAML document's aliases expand to, checked
// on the parser's event stream before any node tree is built, so a small
// document of nested aliases ("billion laughs") is refused at a cost linear
// in its text instead of expanding into gigabytes in the loader or in the
// code that walks the tree.
//
// Contract: pure function of its arguments, thread-safe. A document the
// parser rejects passes (the caller's own load reports the syntax error).
#ifndef LIB_SPEC_YAML_LIMITS_H_
#define LIB_SPEC_YAML_LIMITS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace farm::spec {

struct YamlExpansionLimits {
  // A spec is at most 1 MiB of text (SpecLimits); aliases may multiply it a
  // few times, not by orders of magnitude.
  int64_t max_aliases = 1000;            // alias references in the document
  int64_t max_expanded_nodes = 250000;   // nodes with every alias expanded
  int64_t max_expanded_bytes = 4 << 20;  // scalar bytes with every alias expanded
};

// InvalidArgument naming the limit when the document, with its aliases
// expanded, is over one of `limits`; OK otherwise.
absl::Status CheckYamlExpansion(std::string_view yaml, const YamlExpansionLimits& limits);

}  // namespace farm::spec

#endif  // LIB_SPEC_YAML_LIMITS_H_
