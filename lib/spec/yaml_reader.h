// lib/spec/yaml_reader: reads one YAML node of a spec into a typed value,
// or reports to FieldErrors, under the node's field path, why it cannot:
// the wrong kind of node, a value out of range, an unknown key of a map.
// The spec's own keys are lib/spec/spec_yaml.cc's; these know none of them.
//
// Contract: pure functions of their arguments, thread-safe over distinct
// FieldErrors. A Get* that returns false has added exactly one error and
// left *out unchanged.
#ifndef LIB_SPEC_YAML_READER_H_
#define LIB_SPEC_YAML_READER_H_

#include <cstdint>
#include <set>
#include <string>

#include <google/protobuf/repeated_ptr_field.h>
#include <yaml-cpp/yaml.h>

#include "lib/spec/field_errors.h"

namespace farm::spec {

// "a map", "a list", "a scalar", "empty": for "expected X, got <kind>".
const char* KindOf(const YAML::Node& n);

// A non-empty scalar.
bool GetString(const YAML::Node& n, const std::string& path, FieldErrors& e, std::string* out);
// An integer in [lo, hi].
bool GetInt(const YAML::Node& n, const std::string& path, FieldErrors& e, int64_t lo, int64_t hi,
            int64_t* out);
bool GetBool(const YAML::Node& n, const std::string& path, FieldErrors& e, bool* out);
// A non-negative integer of 64 bits.
bool GetUint64(const YAML::Node& n, const std::string& path, FieldErrors& e, uint64_t* out);
// A scalar, or a non-empty list of scalars (comma-joined).
bool GetParamValue(const YAML::Node& n, const std::string& path, FieldErrors& e, std::string* out);

// A string or a non-empty list of strings. Entries keep their YAML index (a
// bad one is added as "") so later checks name the same index.
void GetStringList(const YAML::Node& n, const std::string& path, FieldErrors& e,
                   google::protobuf::RepeatedPtrField<std::string>* out);

// Every key of `map` not in `allowed` is an error naming it and the choices.
void CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed,
               FieldErrors& e);

// Every scalar of `root`, keys included, is text a protobuf string and a
// PostgreSQL text column can hold: YAML escapes ("\0", "\xff" in a
// double-quoted scalar) and raw bytes give values the request's own UTF-8
// check never sees. An offender is an error under its field path, with its
// line; the value is not echoed.
void CheckScalarText(const YAML::Node& root, FieldErrors& e);

}  // namespace farm::spec

#endif  // LIB_SPEC_YAML_READER_H_
