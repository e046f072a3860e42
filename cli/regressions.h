// farmctl's regression commands: regressions (the list), regression show,
// regression mark (triage). Their flags (AddRegressionCommands), what each
// does against a farm, and the regression views.
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; the other functions are pure and reentrant.
#ifndef CLI_REGRESSIONS_H_
#define CLI_REGRESSIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddRegressionCommands(CLI::App& app, Subcommands* out);

// `group` != 0: only that regression group's members.
int RunRegressions(Commands& commands, bool all, OutputFormat format, int64_t group = 0);
int RunRegressionShow(Commands& commands, int64_t regression_id, OutputFormat format);
// `state` is a triage state (ParseRegressionMark) or kReopen.
int RunRegressionMark(Commands& commands, int64_t regression_id, const std::string& state,
                      const std::string& note);
inline constexpr char kReopen[] = "reopen";

// Accepts "fixed", "false-positive", "acknowledged", "ignored" (reopening is
// UpdateRegressionRequest.reopen, not a state).
absl::StatusOr<pb::RegressionState> ParseRegressionMark(const std::string& s);

std::string FormatRegressionsTable(const std::vector<pb::Regression>& regs);
std::string FormatRegressionsJson(const std::vector<pb::Regression>& regs);
// One line per regression; primary_metrics joined by ';', the last column
// `culprits` as id:share joined by ';'. Header line first.
std::string FormatRegressionsCsv(const std::vector<pb::Regression>& regs);
// The detail view; with several culprits, one row per culprit and its share.
std::string FormatRegression(const pb::Regression& reg);
std::string FormatRegressionJson(const pb::Regression& reg);

// One row per culprit, for the detail views of a regression and of its
// bisect (cli/bisect.h); empty when there is no list.
std::string CulpritsTable(const google::protobuf::RepeatedPtrField<pb::Culprit>& culprits);

}  // namespace farm::cli

#endif  // CLI_REGRESSIONS_H_
