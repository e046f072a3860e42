// farmctl's API token commands (admin): token create, list, revoke. Their
// flags (AddTokenCommands), what each does against a farm, and the token
// list.
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; FormatTokens is pure and reentrant.
#ifndef CLI_TOKENS_H_
#define CLI_TOKENS_H_

#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddTokenCommands(CLI::App& app, Subcommands* out);

// create prints the secret, once, alone on stdout.
int RunTokenCreate(Commands& commands, const std::string& name, const std::string& role);
int RunTokenList(Commands& commands, OutputFormat format);
int RunTokenRevoke(Commands& commands, const std::string& name);

// API tokens, never their secrets (the server sends none).
std::string FormatTokens(const std::vector<pb::ApiToken>& tokens,
                         OutputFormat format = OutputFormat::kTable);

}  // namespace farm::cli

#endif  // CLI_TOKENS_H_
