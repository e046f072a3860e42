// farmctl prune (admin): retention of the farm's history. Its flags
// (AddPruneCommand), the call (RetentionService.Prune) and the report,
// the same shape for a dry run (what would go) and a real one (what went).
// What is kept and why: docs/scheduler.md "Retention".
//
// Thread-safety: RunPrune uses its Commands (cli/commands.h), one per
// thread; ParsePruneAge and FormatPruneReport are pure and reentrant.
#ifndef CLI_PRUNE_H_
#define CLI_PRUNE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddPruneCommand(CLI::App& app, Subcommands* out);

// "180d", "12h", "90m" (days, or any absl::ParseDuration text);
// kInvalidArgument otherwise or for a duration not above zero.
absl::StatusOr<absl::Duration> ParsePruneAge(const std::string& text);

int RunPrune(Commands& commands, const pb::PruneRequest& request, OutputFormat format);

// One row per count (what went or would go, then what was kept); JSON is
// the response message.
std::string FormatPruneReport(const pb::PruneResponse& report, OutputFormat format);

}  // namespace farm::cli

#endif  // CLI_PRUNE_H_
