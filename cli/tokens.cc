#include "cli/tokens.h"

#include <memory>

#include "absl/strings/str_cat.h"

namespace farm::cli {

void AddTokenCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string name, role;
    std::string revoke_name;
    std::string list_format;
  };
  auto a = std::make_shared<Args>();
  auto* token = app.add_subcommand("token", "API tokens (admin): create, list, revoke");
  token->require_subcommand(1);
  auto* create = token->add_subcommand(
      "create", "create a token; prints the secret once on stdout (only its hash is stored)");
  create->add_option("--name", a->name, "principal name (an agent token: the agent name)")
      ->required();
  create
      ->add_option("--role", a->role,
                   "viewer (reads), submitter (reads, submit; cancel and triage its own), "
                   "agent (the agent calls only, as agent --name) or admin (everything)")
      ->required()
      ->check(CLI::IsMember({"viewer", "submitter", "agent", "admin"}));
  out->push_back({create, [a](Commands& c) { return RunTokenCreate(c, a->name, a->role); }});
  auto* list = token->add_subcommand("list", "list tokens (never their secrets)");
  AddOutputOption(list, &a->list_format);
  out->push_back({list, [a](Commands& c) { return RunTokenList(c, ToFormat(a->list_format)); }});
  auto* revoke = token->add_subcommand("revoke", "revoke the live token NAME");
  revoke->add_option("NAME", a->revoke_name, "token name")->required();
  out->push_back({revoke, [a](Commands& c) { return RunTokenRevoke(c, a->revoke_name); }});
}

int RunTokenCreate(Commands& commands, const std::string& name, const std::string& role) {
  pb::CreateTokenRequest request;
  request.set_name(name);
  request.set_role(role);
  pb::CreateTokenResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.access().CreateToken(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("CreateToken", client::ToAbsl(status));
  commands.out() << response.token() << "\n";
  commands.err() << "token \"" << response.info().name() << "\" (role " << response.info().role()
                 << ") created; it is shown only this once\n";
  return 0;
}

int RunTokenList(Commands& commands, OutputFormat format) {
  pb::ListTokensResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.access().ListTokens(ctx.get(), {}, &response);
  if (!status.ok()) return commands.Fail("ListTokens", client::ToAbsl(status));
  commands.out() << FormatTokens({response.tokens().begin(), response.tokens().end()}, format);
  return 0;
}

int RunTokenRevoke(Commands& commands, const std::string& name) {
  pb::RevokeTokenRequest request;
  request.set_name(name);
  pb::RevokeTokenResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.access().RevokeToken(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("RevokeToken", client::ToAbsl(status));
  commands.err() << "token \"" << name << "\" revoked\n";
  return 0;
}

std::string FormatTokens(const std::vector<pb::ApiToken>& tokens, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListTokensResponse message;
  for (const pb::ApiToken& t : tokens) {
    rows.push_back({absl::StrCat(t.id()), t.name(), t.role(), FormatTimestamp(t.created_at()),
                    t.revoked() ? "revoked" : "live"});
    *message.add_tokens() = t;
  }
  return RenderList({"id", "name", "role", "created", "state"}, rows, message, format,
                    "no tokens\n");
}

}  // namespace farm::cli
