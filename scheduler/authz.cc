#include "scheduler/authz.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/auth/auth.h"
#include "scheduler/cert_identity.h"

namespace farm::scheduler {
namespace {

std::string FirstProperty(const grpc::AuthContext& auth, const char* property) {
  std::vector<grpc::string_ref> values = auth.FindPropertyValues(property);
  if (values.empty()) return "";
  return std::string(values.front().data(), values.front().size());
}

}  // namespace

absl::StatusOr<Principal> Authorizer::FromToken(const std::string& token, bool lease_path) {
  if (!options_.admin_token.empty() &&
      auth::BearerMatches("Bearer " + token, options_.admin_token)) {
    return Principal{"admin-token", Role::kAdmin, Principal::Via::kBootstrapToken};
  }
  storage::AccessStore* store = lease_path && lease_access_ != nullptr ? lease_access_ : access_;
  if (store == nullptr) return absl::UnauthenticatedError("wrong bearer token");
  const std::string sha = auth::TokenSha256Hex(token);
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = tokens_.find(sha);
    if (it != tokens_.end() && it->second.expires > now) return it->second.who;
  }
  absl::StatusOr<storage::ApiToken> t = store->FindToken(sha);
  if (absl::IsNotFound(t.status())) {
    return absl::UnauthenticatedError("unknown or revoked bearer token");
  }
  if (!t.ok()) return t.status();
  std::optional<Role> role = ParseRole(t->role);
  Principal who{t->name, role.value_or(Role::kNone), Principal::Via::kToken};
  absl::MutexLock lock(&mu_);
  // Live tokens are few; expired entries go when the map outgrows them.
  if (tokens_.size() > 4096)
    absl::erase_if(tokens_, [&](const auto& e) { return e.second.expires <= now; });
  tokens_[sha] = CachedToken{who, now + options_.token_cache_ttl};
  return who;
}

void Authorizer::ForgetTokensOf(const std::string& name) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(tokens_, [&](const auto& e) { return e.second.who.name == name; });
}

absl::StatusOr<Principal> Authorizer::Authenticate(const grpc::ServerContextBase& ctx,
                                                   bool lease_path) {
  const auto& md = ctx.client_metadata();
  if (md.find("authorization") != md.end()) {
    const std::string token = auth::BearerToken(ctx);
    if (token.empty()) {
      return absl::UnauthenticatedError("authorization metadata is not \"Bearer <token>\"");
    }
    return FromToken(token, lease_path);
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (options_.client_certificates && auth != nullptr && auth->IsPeerAuthenticated()) {
    // The certificate's own fields, not gRPC's printed subject (see
    // cert_identity.h).
    absl::StatusOr<CertIdentity> id =
        IdentityFromPem(FirstProperty(*auth, GRPC_X509_PEM_CERT_PROPERTY_NAME),
                        FirstProperty(*auth, GRPC_X509_SAN_PROPERTY_NAME));
    if (!id.ok()) return absl::UnauthenticatedError(id.status().message());
    return Principal{id->name, ParseRole(id->organization).value_or(Role::kNone),
                     Principal::Via::kCertificate};
  }
  if (!options_.authenticated()) return Principal{"anonymous", Role::kAdmin};
  return absl::UnauthenticatedError(
      "no credentials: present a client certificate (--tls-cert/--tls-key) or a bearer token "
      "(--token-file or FARM_TOKEN)");
}

absl::StatusOr<Principal> Authorizer::Authorize(const grpc::ServerContextBase& ctx,
                                                absl::string_view rpc) {
  const bool lease_path = rpc == "AgentService/Heartbeat" || rpc == "AgentService/ReleaseLeases";
  absl::StatusOr<Principal> who = Authenticate(ctx, lease_path);
  if (!who.ok()) {
    refused_.fetch_add(1);
    return who.status();
  }
  const std::optional<RoleSet> allowed = AllowedRoles(rpc);
  if (!allowed.has_value() || !allowed->Contains(who->role)) {
    refused_.fetch_add(1);
    return PermissionDenied(
        *who, absl::StrCat(rpc, " is for role ",
                           allowed.has_value() ? allowed->ToString() : "(unlisted rpc)"));
  }
  return who;
}

absl::Status Authorizer::CheckRegister(const Principal& who, const std::string& agent_name) {
  if (who.bound_agent() && agent_name != who.name) {
    refused_.fetch_add(1);
    return PermissionDenied(
        who, absl::StrCat("may register only as agent \"", absl::CEscape(who.name), "\", not \"",
                          absl::CEscape(agent_name.substr(0, 64)), "\""));
  }
  if (access_ == nullptr || !options_.authenticated()) return absl::OkStatus();
  absl::StatusOr<bool> claimed =
      access_->ClaimAgentName(agent_name, who.name, options_.agent_liveness);
  if (!claimed.ok()) return claimed.status();
  if (!*claimed) {
    refused_.fetch_add(1);
    return PermissionDenied(who,
                            absl::StrCat("agent name \"", absl::CEscape(agent_name.substr(0, 64)),
                                         "\" belongs to a connected agent of another principal"));
  }
  return absl::OkStatus();
}

absl::Status Authorizer::CheckAgentId(const Principal& who, int64_t agent_id, bool lease_path) {
  if (!who.bound_agent()) return absl::OkStatus();
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    auto it = agent_names_.find(agent_id);
    if (it != agent_names_.end()) name = it->second;
  }
  if (name.empty()) {
    storage::JobQueue* queue = lease_path && lease_queue_ != nullptr ? lease_queue_ : queue_;
    absl::StatusOr<std::string> n = queue->AgentName(agent_id);
    if (absl::IsNotFound(n.status())) {
      refused_.fetch_add(1);
      return PermissionDenied(who, absl::StrCat("agent ", agent_id, " is not this agent"));
    }
    if (!n.ok()) return n.status();
    name = *n;
    absl::MutexLock lock(&mu_);
    agent_names_[agent_id] = name;
  }
  if (name != who.name) {
    refused_.fetch_add(1);
    return PermissionDenied(who, absl::StrCat("agent ", agent_id, " is not this agent"));
  }
  return absl::OkStatus();
}

absl::Status Authorizer::QueueRefusal(const Principal& who, const absl::Status& st) {
  if (!absl::IsPermissionDenied(st)) return st;
  refused_.fetch_add(1);
  return PermissionDenied(who, st.message());
}

}  // namespace farm::scheduler
