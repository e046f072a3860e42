// PgAccessStore: AccessStore in PostgreSQL (tables api_tokens and
// agent_principals of migration 5; agents and jobs for liveness and lease
// holders).
//
// Contract: thread-safe; does not own the pool, which must outlive it.
#ifndef LIB_STORAGE_PG_PG_ACCESS_STORE_H_
#define LIB_STORAGE_PG_PG_ACCESS_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "lib/storage/access_store.h"
#include "lib/storage/pg/pg_pool.h"

namespace farm::storage {

class PgAccessStore final : public AccessStore {
 public:
  explicit PgAccessStore(PgPool* pool) : pool_(pool) {}
  PgAccessStore(const PgAccessStore&) = delete;
  PgAccessStore& operator=(const PgAccessStore&) = delete;

  absl::StatusOr<ApiToken> CreateToken(const std::string& name, const std::string& role,
                                       const std::string& sha256_hex) override;
  absl::StatusOr<ApiToken> FindToken(const std::string& sha256_hex) override;
  absl::StatusOr<std::vector<ApiToken>> ListTokens() override;
  absl::Status RevokeToken(const std::string& name) override;
  absl::StatusOr<bool> ClaimAgentName(const std::string& name, const std::string& principal,
                                      absl::Duration liveness) override;

 private:
  PgPool* const pool_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_ACCESS_STORE_H_
