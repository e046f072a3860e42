// MemoryAccessStore: AccessStore in memory for hermetic tests. Tokens and
// agent owners live in this object; agents and leases are read from the
// MemoryDatabase the other memory repositories share.
//
// Contract: thread-safe; `db` is not owned and must outlive this object.
#ifndef LIB_STORAGE_MEMORY_MEMORY_ACCESS_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_ACCESS_STORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lib/storage/access_store.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryAccessStore final : public AccessStore {
 public:
  explicit MemoryAccessStore(MemoryDatabase* db) : db_(db) {}

  absl::StatusOr<ApiToken> CreateToken(const std::string& name, const std::string& role,
                                       const std::string& sha256_hex) override;
  absl::StatusOr<ApiToken> FindToken(const std::string& sha256_hex) override;
  absl::StatusOr<std::vector<ApiToken>> ListTokens() override;
  absl::Status RevokeToken(const std::string& name) override;
  absl::StatusOr<bool> ClaimAgentName(const std::string& name, const std::string& principal,
                                      absl::Duration liveness) override;

 private:
  struct TokenRow {
    ApiToken token;
    std::string sha256_hex;
  };
  MemoryDatabase* const db_;
  absl::Mutex mu_;
  std::map<int64_t, TokenRow> tokens_ ABSL_GUARDED_BY(mu_);  // by id
  int64_t last_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> owners_ ABSL_GUARDED_BY(mu_);  // agent name -> principal
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_ACCESS_STORE_H_
