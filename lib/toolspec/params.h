// lib/toolspec/params: strict parsers for the string values of a job's workload params
// (Workload.params, map<string,string>; lists are comma-joined). Shared by
// the fio and iozone specs so both refuse the same malformed values the same
// way.
//
// Contract: pure functions, thread-safe. Every error is InvalidArgument and
// names the param ("param 'bs': ..."). Grammars are deliberately narrow:
// values end up in a tool's argv, so anything outside them (fio's $(...)
// math, ${ENV} expansion, ':' file lists, ',' split values) is refused.
#ifndef LIB_TOOLSPEC_PARAMS_H_
#define LIB_TOOLSPEC_PARAMS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace farm::toolspec {

using Params = std::map<std::string, std::string>;

// The most a job may lay out on its target file system (fio's size x
// numjobs, iozone's size x threads): a submitter must not be able to fill a
// lab host's disk with one job. The agent also checks the target's free
// space before it runs one (agent/runners/free_space.h).
inline constexpr std::uint64_t kMaxJobFootprintBytes = 1ull << 40;  // 1 TiB

// InvalidArgument "<tool>: <what> = N bytes ..." when `footprint` is over
// kMaxJobFootprintBytes; OK otherwise.
absl::Status CheckJobFootprint(absl::string_view tool, absl::string_view what,
                               std::uint64_t footprint);

// "4096", "4k", "4K", "4KiB", "1m", "2g", "1t" -> bytes (binary multiples).
// Result must lie in [min, max].
absl::StatusOr<std::uint64_t> ParseBytes(absl::string_view key, absl::string_view value,
                                         std::uint64_t min, std::uint64_t max);

// Decimal integer in [min, max].
absl::StatusOr<std::int64_t> ParseInt(absl::string_view key, absl::string_view value,
                                      std::int64_t min, std::int64_t max);

// "1", "30s", "2m", "1h" -> whole seconds in [min, max].
absl::StatusOr<std::int64_t> ParseSeconds(absl::string_view key, absl::string_view value,
                                          std::int64_t min, std::int64_t max);

// 1/0, true/false, yes/no, on/off.
absl::StatusOr<bool> ParseBool(absl::string_view key, absl::string_view value);

// "write,read" or "[write, read]" -> {"write", "read"}; empty items refused.
absl::StatusOr<std::vector<std::string>> ParseList(absl::string_view key, absl::string_view value);

// InvalidArgument "<tool> param '<key>' refused: <why>": how a tool spec
// refuses a param it will not pass to the tool.
absl::Status RefuseParam(absl::string_view tool, absl::string_view key, absl::string_view why);

// "0-3,8,10-11": CPU list for fio's cpus_allowed.
absl::Status CheckCpuList(absl::string_view key, absl::string_view value);

}  // namespace farm::toolspec

#endif  // LIB_TOOLSPEC_PARAMS_H_
