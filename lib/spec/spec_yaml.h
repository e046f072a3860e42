// lib/spec/spec_yaml: the one mapping between a matrix spec's YAML text
// (docs/scheduler.md "Matrix specs") and the typed iommufarm.v1.MatrixSpec,
// whose field names are the YAML keys. The scheduler, farmctl and the
// analyzer share it, so a spec means the same everywhere.
//
// Contract: pure functions, no I/O, thread-safe. The mapping reports only
// what cannot be mapped (YAML syntax and kinds, unknown keys, unknown mode /
// executor / kind names); every other rule is lib/spec/spec_check.h's, run on
// the message, so YAML and typed specs meet the same rules. Errors name the
// field path, one per line (lib/spec/field_errors.h). Text over
// max_spec_bytes, or whose aliases expand past lib/spec/yaml_limits.h, is
// refused before it is parsed into nodes.
#ifndef LIB_SPEC_SPEC_YAML_H_
#define LIB_SPEC_SPEC_YAML_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/spec/field_errors.h"
#include "lib/spec/matrix_spec.h"

namespace farm::spec {

// Maps `yaml` onto *out, adding what cannot be mapped to `e` and going on,
// so the checks that follow see the rest. Non-OK only when there is no map
// to read: over a size limit (kResourceExhausted or kInvalidArgument),
// a syntax error or a document that is not a map (kInvalidArgument).
absl::Status MapSpecYaml(std::string_view yaml, const SpecLimits& limits, FieldErrors& e,
                         pb::MatrixSpec* out);

// MapSpecYaml's message, or every mapping error in one kInvalidArgument.
absl::StatusOr<pb::MatrixSpec> MatrixSpecFromYaml(std::string_view yaml, const SpecLimits& limits);

// YAML text that MatrixSpecFromYaml maps back onto `spec` (map keys sorted):
// the matrix's spec_yaml when it was submitted typed.
std::string MatrixSpecToYaml(const pb::MatrixSpec& spec);

}  // namespace farm::spec

#endif  // LIB_SPEC_SPEC_YAML_H_
