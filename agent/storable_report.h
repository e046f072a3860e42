// farm::agent report repair: what the agent does to a report before it goes
// out so that the scheduler can take it, whatever bytes a tool printed.
//
// A protobuf `string` field must hold UTF-8: the scheduler's gRPC layer
// cannot parse a request that does not (it answers UNIMPLEMENTED, and the
// whole report call is lost). Tools print what they like (a device name in
// Latin-1, a cut multi-byte character), so every string field of a report is
// made UTF-8 here, each bad byte shown as U+FFFD. A NUL byte is valid UTF-8
// and is left alone: the scheduler refuses it by field, so the job fails
// once with the reason instead of a result being stored altered.
//
// Raw output is cut at kMaxRawOutputBytes so that one result always fits
// the scheduler's message limit.
//
// Free functions: thread-safe over distinct messages.
#ifndef AGENT_STORABLE_REPORT_H_
#define AGENT_STORABLE_REPORT_H_

#include <cstddef>
#include <string>

#include <google/protobuf/message.h>

namespace farm::agent {

// Raw output kept per result: the scheduler's message limit is 16 MiB, and a
// result's samples and host facts take far less than the rest.
inline constexpr size_t kMaxRawOutputBytes = 12 << 20;

// Replaces invalid UTF-8 in every set string field of `message` (nested,
// repeated and map fields included); returns the bytes replaced.
size_t MakeStringsValidUtf8(google::protobuf::Message* message);

// Cuts `raw` to at most kMaxRawOutputBytes at a character boundary and says
// so at its end; returns true when it cut.
bool CapRawOutput(std::string* raw);

}  // namespace farm::agent

#endif  // AGENT_STORABLE_REPORT_H_
