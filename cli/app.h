// farmctl's command line, shared by every noun: the global options (where
// the scheduler is, how to reach it securely), the --output option of list
// commands, and running the one subcommand the command line chose.
//
// A noun (cli/matrix.h, cli/catalog.h, ...) adds its subcommands to the app
// with an Add*Commands(CLI::App&, Subcommands*) function that main.cc calls
// once; CLI11 lists subcommands in the order they were added. Each
// Subcommand's run closure holds the noun's parsed arguments and calls the
// noun's Run* function with the Commands (cli/commands.h) built from the
// global options.
//
// Thread-safety: single-threaded, as command-line parsing is. Ownership: the
// app owns the subcommands; the closures own their arguments.
#ifndef CLI_APP_H_
#define CLI_APP_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/format.h"
#include "lib/client/client.h"

namespace farm::cli {

// A subcommand and what running it does once the command line is parsed.
// Its arguments live in the closure, which CLI11's options write into.
struct Subcommand {
  CLI::App* app;
  std::function<int(Commands&)> run;
  // The exit status of a usage error of this subcommand: 2, except where 2
  // has a meaning of its own (farmctl gate: inconclusive).
  int usage_error_exit = 2;
};
using Subcommands = std::vector<Subcommand>;

// --output,-o on a list command: one of OutputFormatNames(); any other value
// is a usage error (exit 2) that lists them.
CLI::Option* AddOutputOption(CLI::App* command, std::string* format,
                             const std::string& description = "table, csv or json");
// The value of an AddOutputOption option; parsing already checked it.
OutputFormat ToFormat(const std::string& s);

// The flags every subcommand shares: where the scheduler is and how to reach
// it securely.
struct GlobalFlags {
  client::ClientOptions options;
  client::SecurityFlags security;
};
// Adds --server and the security options to `app`; `flags` must outlive the
// parse.
void AddGlobalOptions(CLI::App& app, GlobalFlags* flags);

// Parses argv, builds the Commands from `flags` and runs the chosen
// subcommand; returns the process exit status (2 for a usage error).
int RunCommandLine(CLI::App& app, const GlobalFlags& flags, const Subcommands& subcommands,
                   int argc, char** argv);

}  // namespace farm::cli

#endif  // CLI_APP_H_
