#include "lib/storage/memory/memory_access_store.h"

#include "absl/strings/str_cat.h"

namespace farm::storage {

absl::StatusOr<ApiToken> MemoryAccessStore::CreateToken(const std::string& name,
                                                        const std::string& role,
                                                        const std::string& sha256_hex) {
  const absl::Time now = db_->Now();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, row] : tokens_) {
    if (!row.token.revoked && row.token.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("a live token is named \"", name, "\""));
    }
    if (row.sha256_hex == sha256_hex) return absl::AlreadyExistsError("token hash collision");
  }
  TokenRow row;
  row.token.id = ++last_id_;
  row.token.name = name;
  row.token.role = role;
  row.token.created_at = now;
  row.sha256_hex = sha256_hex;
  tokens_[row.token.id] = row;
  return row.token;
}

absl::StatusOr<ApiToken> MemoryAccessStore::FindToken(const std::string& sha256_hex) {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, row] : tokens_) {
    if (!row.token.revoked && row.sha256_hex == sha256_hex) return row.token;
  }
  return absl::NotFoundError("unknown or revoked token");
}

absl::StatusOr<std::vector<ApiToken>> MemoryAccessStore::ListTokens() {
  absl::MutexLock lock(&mu_);
  std::vector<ApiToken> out;
  for (const auto& [id, row] : tokens_) out.push_back(row.token);
  return out;
}

absl::Status MemoryAccessStore::RevokeToken(const std::string& name) {
  const absl::Time now = db_->Now();
  absl::MutexLock lock(&mu_);
  for (auto& [id, row] : tokens_) {
    if (!row.token.revoked && row.token.name == name) {
      row.token.revoked = true;
      row.token.revoked_at = now;
      return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat("no live token named \"", name, "\""));
}

absl::StatusOr<bool> MemoryAccessStore::ClaimAgentName(const std::string& name,
                                                       const std::string& principal,
                                                       absl::Duration liveness) {
  const absl::Time now = db_->Now();
  const bool connected = db_->Read([&](const MemoryDatabase::Tables& t) {
    for (const auto& [id, a] : t.agents) {
      if (a.name == name) return a.last_heartbeat > now - liveness;
    }
    return false;
  });
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(name);
  if (it != owners_.end() && it->second != principal && connected) return false;
  owners_[name] = principal;
  return true;
}

}  // namespace farm::storage
