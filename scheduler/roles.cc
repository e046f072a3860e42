#include "scheduler/roles.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace farm::scheduler {

std::string RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kSubmitter:
      return "submitter";
    case Role::kAgent:
      return "agent";
    case Role::kAdmin:
      return "admin";
    case Role::kNone:
      break;
  }
  return "none";
}

std::optional<Role> ParseRole(absl::string_view name) {
  for (Role r : {Role::kViewer, Role::kSubmitter, Role::kAgent, Role::kAdmin}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

std::string RoleSet::ToString() const {
  std::vector<std::string> names;
  for (Role r : {Role::kViewer, Role::kSubmitter, Role::kAgent, Role::kAdmin}) {
    if (Contains(r)) names.push_back(RoleName(r));
  }
  if (names.empty()) return "no role";
  std::string out = names[0];
  for (size_t i = 1; i < names.size(); ++i) {
    out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

const std::vector<RpcRule>& RpcRoleTable() {
  // The one place that says who may call what. Reads are for the people of
  // the farm, not its hosts: an agent needs none of them.
  constexpr RoleSet kReaders = {Role::kViewer, Role::kSubmitter, Role::kAdmin};
  constexpr RoleSet kSubmitters = {Role::kSubmitter, Role::kAdmin};
  constexpr RoleSet kAgents = {Role::kAgent, Role::kAdmin};
  constexpr RoleSet kAdmins = {Role::kAdmin};
  static const std::vector<RpcRule>* const kTable = new std::vector<RpcRule>{
      {"JobService/SubmitMatrix", kSubmitters},
      {"JobService/GetMatrix", kReaders},
      {"JobService/ListMatrices", kReaders},
      {"JobService/WatchMatrix", kReaders},
      // Only the matrix's owner or an admin (JobService::CancelMatrix).
      {"JobService/CancelMatrix", kSubmitters},
      {"JobService/GetResults", kReaders},
      {"JobService/GetRawOutput", kReaders},
      {"JobService/ListAgents", kReaders},
      {"JobService/ListCatalogs", kReaders},
      {"JobService/GetCatalog", kReaders},
      {"JobService/LoadCatalog", kAdmins},
      {"JobService/ImportGitCatalog", kAdmins},
      {"AgentService/Register", kAgents},
      {"AgentService/Heartbeat", kAgents},
      {"AgentService/LeaseJobs", kAgents},
      {"AgentService/ReportResult", kAgents},
      {"AgentService/ReportResults", kAgents},
      {"AgentService/ReportFailure", kAgents},
      {"AgentService/ReleaseLeases", kAgents},
      {"AnalysisService/ListRegressions", kReaders},
      {"AnalysisService/GetRegression", kReaders},
      {"AnalysisService/GetBisect", kReaders},
      // Only the owner of the regression's matrix or an admin
      // (AnalysisService::UpdateRegression).
      {"AnalysisService/UpdateRegression", kSubmitters},
      {"AccessService/CreateToken", kAdmins},
      {"AccessService/ListTokens", kAdmins},
      {"AccessService/RevokeToken", kAdmins},
      {"RetentionService/Prune", kAdmins},
  };
  return *kTable;
}

std::optional<RoleSet> AllowedRoles(absl::string_view rpc) {
  for (const RpcRule& r : RpcRoleTable()) {
    if (rpc == r.rpc) return r.allowed;
  }
  return std::nullopt;
}

absl::Status PermissionDenied(const Principal& who, absl::string_view what) {
  return absl::PermissionDeniedError(absl::StrCat("principal \"", absl::CEscape(who.name), "\" (",
                                                  RoleName(who.role), "): ", what));
}

absl::Status CheckOwner(const Principal& who, const std::string& owner, absl::string_view what) {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  if (!owner.empty() && who.name == owner) return absl::OkStatus();
  if (owner.empty()) {
    return PermissionDenied(
        who, absl::StrCat("may not ", what, ": it has no recorded owner (only an admin may)"));
  }
  return PermissionDenied(who,
                          absl::StrCat("may not ", what, ": it belongs to \"", absl::CEscape(owner),
                                       "\" (only its owner or an admin may)"));
}

}  // namespace farm::scheduler
