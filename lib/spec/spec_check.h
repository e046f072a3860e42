// lib/spec/spec_check: the checks of a matrix spec that need no database,
// from the typed message (or its YAML, mapped by lib/spec/spec_yaml.h) to
// the checked MatrixSpec: required fields, ranges, duplicates, then the
// tables its jobs will meet (lib/spec/table_checks.h). What needs the
// scheduler's catalogs (commit ids, the job count) is checked there.
//
// Contract:
//  - Pure functions, no I/O, thread-safe.
//  - Every problem is reported at once, mapping and table checks together,
//    one per line of the kInvalidArgument message, each naming the field
//    path and the problem, e.g. `modes[1]: unknown mode "stict" (expected
//    off, passthrough, strict, lazy)`; at most FieldErrors::kMaxReported
//    lines, then a count of the rest. A field is reported once, by the first
//    check that refuses it. Size caps give kResourceExhausted.
//  - Platform names the emulator is not known to have are warnings
//    (MatrixSpec::warnings), not errors.
#ifndef LIB_SPEC_SPEC_CHECK_H_
#define LIB_SPEC_SPEC_CHECK_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/spec/matrix_spec.h"

namespace farm::spec {

// A C0 control character (newline, ESC, ...) or DEL: what a terminal acts
// on. Names a person reads (a spec's, a catalog's) must not hold one.
bool HasControlCharacter(std::string_view s);

// The YAML spec mapped onto pb::MatrixSpec (MatrixSpecFromYaml) and checked
// as CheckMatrixSpec checks a typed one, every problem of both in one error.
absl::StatusOr<MatrixSpec> ParseMatrixSpec(std::string_view yaml, const SpecLimits& limits);

// A typed spec checked; a message larger than max_spec_bytes is
// kResourceExhausted.
absl::StatusOr<MatrixSpec> CheckMatrixSpec(const pb::MatrixSpec& spec, const SpecLimits& limits);

}  // namespace farm::spec

#endif  // LIB_SPEC_SPEC_CHECK_H_
