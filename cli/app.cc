#include "cli/app.h"

#include <iostream>
#include <optional>

#include "absl/status/statusor.h"
#include "lib/service/flags.h"

namespace farm::cli {
namespace {

// The client's options with the security flags applied; an error is a usage
// error (exit 2), its message the line to print.
absl::StatusOr<client::ClientOptions> ResolveClientOptions(const GlobalFlags& flags) {
  client::ClientOptions options = flags.options;
  if (absl::Status st = client::ApplySecurity(flags.security, &options); !st.ok()) {
    return st;
  }
  return options;
}

// Runs the one subcommand the command line chose.
int RunChosen(const Subcommands& subcommands, Commands& commands, const CLI::App& app) {
  for (const Subcommand& s : subcommands) {
    if (*s.app) return s.run(commands);
  }
  std::cerr << app.help();
  return 2;
}

// The usage-error status of the subcommand the command line reached (CLI11
// counts a subcommand as parsed once its name was read), else 2.
int UsageErrorExit(const Subcommands& subcommands) {
  for (const Subcommand& s : subcommands) {
    if (s.app->parsed() > 0) return s.usage_error_exit;
  }
  return 2;
}

}  // namespace

CLI::Option* AddOutputOption(CLI::App* command, std::string* format,
                             const std::string& description) {
  *format = "table";
  return command->add_option("--output,-o", *format, description)
      ->check(CLI::IsMember(OutputFormatNames()));
}

OutputFormat ToFormat(const std::string& s) {
  return ParseOutputFormat(s).value_or(OutputFormat::kTable);
}

void AddGlobalOptions(CLI::App& app, GlobalFlags* flags) {
  flags->options.server = client::kDefaultServer;
  app.add_option("--server", flags->options.server,
                 "scheduler address HOST:PORT, or several IP:PORT separated by commas "
                 "(schedulers sharing one database; calls fail over between them)")
      ->capture_default_str()
      ->envname("FARM_SERVER");
  client::AddSecurityOptions(app, &flags->security);
}

int RunCommandLine(CLI::App& app, const GlobalFlags& flags, const Subcommands& subcommands,
                   int argc, char** argv) {
  if (std::optional<int> exit = service::ParseCommandLine(app, argc, argv)) {
    return *exit == 2 ? UsageErrorExit(subcommands) : *exit;
  }
  absl::StatusOr<client::ClientOptions> options = ResolveClientOptions(flags);
  if (!options.ok()) {
    std::cerr << "farmctl: " << options.status().message() << "\n";
    return UsageErrorExit(subcommands);
  }
  Commands commands(*options, std::cout, std::cerr);
  return RunChosen(subcommands, commands, app);
}

}  // namespace farm::cli
