// CheckStorableText: refuses request text that PostgreSQL `text` cannot
// store -- a NUL byte (libpq would cut the value there) or bytes that are
// not UTF-8 (the server rejects them) -- before any SQL runs, so poison
// input is answered INVALID_ARGUMENT naming the field rather than INTERNAL
// (which clients retry) or silently truncated.
//
// Contract: walks every set string field of `message`, nested messages,
// repeated fields and maps included (bytes fields are exempt). Returns the
// first offender as kInvalidArgument "path.to.field[i]: ..."; never echoes
// the value. Pure function, thread-safe.
#ifndef SCHEDULER_STORABLE_TEXT_H_
#define SCHEDULER_STORABLE_TEXT_H_

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace farm::scheduler {

absl::Status CheckStorableText(const google::protobuf::Message& message);

}  // namespace farm::scheduler

#endif  // SCHEDULER_STORABLE_TEXT_H_
