// Who may call what: the roles, the principal of a call, the one table that
// gives every RPC the set of roles allowed to call it, and the ownership
// rule of the calls that change one principal's work (cancel, triage).
//
// Roles are four separate capabilities, not a ladder:
//   viewer     reads (matrices, results, agents, catalogs, regressions);
//   submitter  reads, submits matrices, cancels its own and triages the
//              regressions found in its own;
//   agent      the AgentService only (a lab host runs jobs; it does not
//              submit, cancel, triage or read), bound to one agent name;
//   admin      everything, including anyone's cancel and triage.
// A principal is named by the certificate CN or the token's name; the
// owner of a matrix is the principal that submitted it
// (Matrix.submitted_by), of a regression the owner of the matrix it was
// found in (Regression.matrix_id).
//
// Thread-safety: everything here is immutable or a value; the table is
// built once. Nothing here knows gRPC, so the plain services
// (scheduler_service.h) check ownership themselves.
#ifndef SCHEDULER_ROLES_H_
#define SCHEDULER_ROLES_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace farm::scheduler {

enum class Role : int { kNone = 0, kViewer = 1, kSubmitter = 2, kAgent = 3, kAdmin = 4 };

std::string RoleName(Role role);
std::optional<Role> ParseRole(absl::string_view name);

// A set of roles (one bit each); kNone is never a member.
class RoleSet {
 public:
  constexpr RoleSet() = default;
  constexpr RoleSet(std::initializer_list<Role> roles) {
    for (Role r : roles) {
      if (r != Role::kNone) bits_ |= Bit(r);
    }
  }
  constexpr bool Contains(Role r) const { return r != Role::kNone && (bits_ & Bit(r)) != 0; }
  // "submitter or admin".
  std::string ToString() const;
  friend constexpr bool operator==(RoleSet a, RoleSet b) { return a.bits_ == b.bits_; }

 private:
  static constexpr uint32_t Bit(Role r) { return 1u << static_cast<int>(r); }
  uint32_t bits_ = 0;
};

struct Principal {
  enum class Via { kAnonymous, kCertificate, kToken, kBootstrapToken };
  std::string name;
  Role role = Role::kNone;
  Via via = Via::kAnonymous;
  // Agent calls are bound to `name`.
  bool bound_agent() const { return role == Role::kAgent; }
};

struct RpcRule {
  const char* rpc;  // "Service/Method", e.g. "JobService/SubmitMatrix"
  RoleSet allowed;
};
// Every RPC the scheduler serves, with the roles that may call it (health is
// not in it: it stays open). Admin is in every row.
const std::vector<RpcRule>& RpcRoleTable();
// nullopt for an RPC not in the table.
std::optional<RoleSet> AllowedRoles(absl::string_view rpc);

// PERMISSION_DENIED naming the principal and its role: `principal "x"
// (submitter): <what>`.
absl::Status PermissionDenied(const Principal& who, absl::string_view what);
// OK when `who` is an admin or the principal named `owner` (empty: nobody
// owns it, so only an admin); else PermissionDenied: `may not <what>: it
// belongs to "<owner>" ...`, `what` being the action ("cancel matrix 12").
absl::Status CheckOwner(const Principal& who, const std::string& owner, absl::string_view what);

}  // namespace farm::scheduler

#endif  // SCHEDULER_ROLES_H_
