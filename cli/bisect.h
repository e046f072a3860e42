// farmctl bisect: the bisect of a regression, step by step. Its flags
// (AddBisectCommand), what it does against a farm, and the bisect views.
//
// Thread-safety: RunBisect uses its Commands (cli/commands.h), one per
// thread; the Format* functions are pure and reentrant.
#ifndef CLI_BISECT_H_
#define CLI_BISECT_H_

#include <cstdint>
#include <string>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddBisectCommand(CLI::App& app, Subcommands* out);

int RunBisect(Commands& commands, int64_t id, bool id_is_bisect, OutputFormat format);

std::string FormatBisectTable(const pb::Bisect& bisect);
// Where a step's runs ran: "emulator", "<tool> on real kernels", or "-" when
// the store did not record it.
std::string StepRanOn(const pb::BisectStep& step);
std::string FormatBisectJson(const pb::Bisect& bisect);
// One line per step, each with the bisect's id, regression, state and
// culprit; header line first.
std::string FormatBisectCsv(const pb::Bisect& bisect);

}  // namespace farm::cli

#endif  // CLI_BISECT_H_
