// farmctl agents: the registered agents with their hardware, health and the
// kernels they offer. Its flags (AddAgentsCommand), what it does against a
// farm, and the agent list.
//
// Thread-safety: RunAgents uses its Commands (cli/commands.h), one per
// thread; FormatAgents is pure and reentrant.
#ifndef CLI_AGENTS_H_
#define CLI_AGENTS_H_

#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddAgentsCommand(CLI::App& app, Subcommands* out);

int RunAgents(Commands& commands, OutputFormat format);

// A list as RenderList renders it (cli/format.h).
std::string FormatAgents(const std::vector<pb::Agent>& agents,
                         OutputFormat format = OutputFormat::kTable);

}  // namespace farm::cli

#endif  // CLI_AGENTS_H_
