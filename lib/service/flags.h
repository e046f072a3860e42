// farm::service flags: the command-line pieces every farm binary's main.cc
// shares, so that each flag kind is parsed, defaulted and reported one way.
//
// - Durations ("30s", "500ms", "2m", "1h30m", or a plain number of seconds)
//   go through ParseDurationFlag; AddDurationOption binds one straight to an
//   absl::Duration, so a bad value is a usage error naming the flag.
// - Environment fallbacks are CLI11's own: `->envname("FARM_TOKEN")` on the
//   option. Precedence is flag > environment > default; an environment
//   variable that is set but empty counts as unset. --help shows the name.
// - ParseCommandLine parses argv with one exit-status rule for every binary:
//   0 after --help, 2 on a usage error (message on stderr).
//
// Thread-safety: call from main before other threads use the App.
// Ownership: AddDurationOption keeps `out`, which must outlive app.parse.
#ifndef LIB_SERVICE_FLAGS_H_
#define LIB_SERVICE_FLAGS_H_

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace farm::service {

enum class DurationRange {
  kPositive,     // > 0: intervals, lifetimes
  kNonNegative,  // >= 0: grace periods, where 0 means "none"
};

// `text` as a duration in `range`; InvalidArgument quoting `text` otherwise.
absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text,
                                                 DurationRange range = DurationRange::kPositive);

// Adds option `name` whose value is a duration stored in *out. *out starts as
// `default_text` (shown in --help as TEXT=default_text). REQUIRES: default_text
// parses in `range`.
CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* out,
                               const std::string& default_text, const std::string& help,
                               DurationRange range = DurationRange::kPositive);

// Parses the command line. nullopt: go on; otherwise main returns the value.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv);

}  // namespace farm::service

#endif  // LIB_SERVICE_FLAGS_H_
