// farmctl: the iommu-farm command line client. Each noun adds its
// subcommands (cli/app.h); --help lists them in the order they are added.
#include <CLI/CLI.hpp>

#include "cli/agents.h"
#include "cli/app.h"
#include "cli/bisect.h"
#include "cli/catalog.h"
#include "cli/compare.h"
#include "cli/gate.h"
#include "cli/kernels.h"
#include "cli/matrix.h"
#include "cli/prune.h"
#include "cli/regressions.h"
#include "cli/report_command.h"
#include "cli/results.h"
#include "cli/tokens.h"

int main(int argc, char** argv) {
  namespace cli = farm::cli;
  CLI::App app{
      "farmctl: submit and follow iommu-farm matrices, read results, agents, "
      "catalogs, kernel stores and regressions, write HTML reports.\nExit status: 0 ok, 1 server "
      "or I/O error "
      "(or a --wait matrix with failed jobs), 2 usage error; farmctl gate has its own (farmctl "
      "gate --help)."};
  app.require_subcommand(1);
  cli::GlobalFlags flags;
  cli::AddGlobalOptions(app, &flags);
  cli::Subcommands subcommands;
  cli::AddMatrixCommands(app, &subcommands);
  cli::AddResultCommands(app, &subcommands);
  cli::AddTokenCommands(app, &subcommands);
  cli::AddPruneCommand(app, &subcommands);
  cli::AddAgentsCommand(app, &subcommands);
  cli::AddCatalogCommands(app, &subcommands);
  cli::AddKernelsCommands(app, &subcommands);
  cli::AddRegressionCommands(app, &subcommands);
  cli::AddBisectCommand(app, &subcommands);
  cli::AddCompareCommands(app, &subcommands);
  cli::AddGateCommand(app, &subcommands);
  cli::AddReportCommand(app, &subcommands);
  return cli::RunCommandLine(app, flags, subcommands, argc, argv);
}
