#include "lib/service/flags.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/base/check.h"

namespace farm::service {

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text, DurationRange range) {
  absl::Duration d;
  double seconds = 0;
  bool parsed = false;
  if (absl::SimpleAtod(text, &seconds)) {
    // SimpleAtod takes "inf" and "nan" too; only finite counts of seconds are durations.
    parsed = std::isfinite(seconds);
    d = absl::Seconds(seconds);
  } else {
    parsed = absl::ParseDuration(text, &d) && d != absl::InfiniteDuration();
  }
  const bool positive = range == DurationRange::kPositive;
  if (!parsed || d < absl::ZeroDuration() || (positive && d == absl::ZeroDuration())) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a ", positive ? "positive" : "non-negative",
                     " duration like 30s, 500ms or 2m (a plain number counts as seconds)"));
  }
  return d;
}

CLI::Option* AddDurationOption(CLI::App& app, const std::string& name, absl::Duration* out,
                               const std::string& default_text, const std::string& help,
                               DurationRange range) {
  absl::StatusOr<absl::Duration> initial = ParseDurationFlag(default_text, range);
  FARM_DCHECK(initial.ok(), "default of a duration flag must parse");
  *out = initial.value_or(absl::ZeroDuration());
  return app
      .add_option_function<std::string>(
          name,
          [name, out, range](const std::string& text) {
            absl::StatusOr<absl::Duration> d = ParseDurationFlag(text, range);
            if (!d.ok()) throw CLI::ValidationError(name, std::string(d.status().message()));
            *out = *d;
          },
          help)
      ->default_str(default_text);
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and friends are ParseErrors with exit code 0; app.exit prints
    // the help or the error and its hint.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

}  // namespace farm::service
