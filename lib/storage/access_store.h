// AccessStore: what the scheduler's authorization layer reads and writes --
// API tokens (stored by their SHA-256 only), the principal that owns each
// agent name, and who holds a job's lease (so an agent cannot report on
// another agent's lease).
//
// Contract: as every repository (repositories.h): thread-safe, kUnavailable
// when the database is away, kNotFound / kAlreadyExists as documented per
// method. Roles are plain strings here (viewer, submitter, agent, admin);
// their meaning is the scheduler's (scheduler/authz.h).
#ifndef LIB_STORAGE_ACCESS_STORE_H_
#define LIB_STORAGE_ACCESS_STORE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace farm::storage {

struct ApiToken {
  int64_t id = 0;
  std::string name;
  std::string role;
  absl::Time created_at;
  bool revoked = false;
  absl::Time revoked_at;  // when revoked
};

class AccessStore {
 public:
  virtual ~AccessStore() = default;

  // kAlreadyExists when a live (unrevoked) token already has `name`.
  virtual absl::StatusOr<ApiToken> CreateToken(const std::string& name, const std::string& role,
                                               const std::string& sha256_hex) = 0;
  // The live token whose hash is `sha256_hex`; kNotFound if unknown or revoked.
  virtual absl::StatusOr<ApiToken> FindToken(const std::string& sha256_hex) = 0;
  // Every token, revoked ones too, by id.
  virtual absl::StatusOr<std::vector<ApiToken>> ListTokens() = 0;
  // Revokes the live token named `name`; kNotFound if there is none.
  virtual absl::Status RevokeToken(const std::string& name) = 0;

  // Makes `principal` the owner of agent name `name` and returns true,
  // unless another principal owns it and that agent is connected (a
  // heartbeat within `liveness`): then false and nothing changes.
  virtual absl::StatusOr<bool> ClaimAgentName(const std::string& name, const std::string& principal,
                                              absl::Duration liveness) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_ACCESS_STORE_H_
