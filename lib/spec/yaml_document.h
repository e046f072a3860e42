// lib/spec/yaml_document: what a spec or catalog file must be as YAML before
// any of it is read as one: a single document (a second one after `---`
// would be dropped unread), and no key twice in one map (yaml-cpp keeps the
// first and drops the second, so `modes:` written twice would run the
// first list silently).
//
// Contract: pure function of its argument, thread-safe. A document the
// parser rejects passes (the caller's own load reports the syntax error).
#ifndef LIB_SPEC_YAML_DOCUMENT_H_
#define LIB_SPEC_YAML_DOCUMENT_H_

#include <string_view>

#include "absl/status/status.h"

namespace farm::spec {

// InvalidArgument naming the line of the second document or of the key's
// second appearance ("YAML key \"modes\" appears twice in one map (lines 4
// and 9)"); OK otherwise. The message carries no file prefix.
absl::Status CheckYamlDocument(std::string_view yaml);

// InvalidArgument when `text` cannot be a spec's text at all: UTF-16 (a
// byte order mark) or a NUL byte; OK otherwise. (Bytes that are not UTF-8
// are named by the field that holds them, or by ParseMatrixSpec when they
// lie outside every value.) The message carries no field prefix.
absl::Status CheckYamlText(std::string_view text);

}  // namespace farm::spec

#endif  // LIB_SPEC_YAML_DOCUMENT_H_
