// lib/base/utf8.h: the one UTF-8 well-formedness rule of the tree, as
// PostgreSQL `text` and protobuf `string` fields apply it (no overlong forms,
// no surrogates, nothing above U+10FFFF), and the repair the agent applies to
// tool output before it becomes a report.
//
// Free functions of their arguments: thread-safe, no state.
#ifndef LIB_BASE_UTF8_H_
#define LIB_BASE_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace farm::base {

// True when `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

// Replaces every byte that does not start a well-formed sequence, and every
// truncated sequence, with U+FFFD (as a decoder that substitutes would show
// it). Returns how many replacements it made; `*s` is unchanged when 0.
size_t ReplaceInvalidUtf8(std::string* s);

}  // namespace farm::base

#endif  // LIB_BASE_UTF8_H_
