#include "lib/storage/pg/pg_access_store.h"

#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::storage {
namespace {

constexpr char kTokenCols[] =
    "id, name, role, (extract(epoch from created_at) * 1000000)::bigint, revoked_at IS NOT NULL, "
    "coalesce((extract(epoch from revoked_at) * 1000000)::bigint, 0)";

ApiToken TokenFromRow(const pqxx::row& r) {
  ApiToken t;
  t.id = r[0].as<int64_t>();
  t.name = r[1].as<std::string>();
  t.role = r[2].as<std::string>();
  t.created_at = absl::FromUnixMicros(r[3].as<int64_t>());
  t.revoked = r[4].as<bool>();
  t.revoked_at = absl::FromUnixMicros(r[5].as<int64_t>());
  return t;
}

}  // namespace

absl::StatusOr<ApiToken> PgAccessStore::CreateToken(const std::string& name,
                                                    const std::string& role,
                                                    const std::string& sha256_hex) {
  return pool_->Call<ApiToken>([&](pqxx::connection& c) -> absl::StatusOr<ApiToken> {
    pqxx::work w(c);
    // The partial unique index on live names decides races between schedulers.
    pqxx::result r = w.exec_params(
        std::string("INSERT INTO api_tokens (name, role, token_sha256) VALUES ($1, $2, $3) "
                    "ON CONFLICT DO NOTHING RETURNING ") +
            kTokenCols,
        name, role, sha256_hex);
    w.commit();
    if (r.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("a live token is named \"", name, "\""));
    }
    return TokenFromRow(r[0]);
  });
}

absl::StatusOr<ApiToken> PgAccessStore::FindToken(const std::string& sha256_hex) {
  return pool_->Call<ApiToken>([&](pqxx::connection& c) -> absl::StatusOr<ApiToken> {
    pqxx::nontransaction n(c);
    pqxx::result r = n.exec_params(std::string("SELECT ") + kTokenCols +
                                       " FROM api_tokens WHERE token_sha256 = $1 AND "
                                       "revoked_at IS NULL",
                                   sha256_hex);
    if (r.empty()) return absl::NotFoundError("unknown or revoked token");
    return TokenFromRow(r[0]);
  });
}

absl::StatusOr<std::vector<ApiToken>> PgAccessStore::ListTokens() {
  return pool_->Call<std::vector<ApiToken>>(
      [&](pqxx::connection& c) -> absl::StatusOr<std::vector<ApiToken>> {
        pqxx::nontransaction n(c);
        pqxx::result r =
            n.exec(std::string("SELECT ") + kTokenCols + " FROM api_tokens ORDER BY id");
        std::vector<ApiToken> out;
        for (const pqxx::row& row : r) out.push_back(TokenFromRow(row));
        return out;
      });
}

absl::Status PgAccessStore::RevokeToken(const std::string& name) {
  return pool_->Run([&](pqxx::connection& c) -> absl::Status {
    pqxx::work w(c);
    pqxx::result r = w.exec_params(
        "UPDATE api_tokens SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL "
        "RETURNING id",
        name);
    w.commit();
    if (r.empty()) return absl::NotFoundError(absl::StrCat("no live token named \"", name, "\""));
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> PgAccessStore::ClaimAgentName(const std::string& name,
                                                   const std::string& principal,
                                                   absl::Duration liveness) {
  return pool_->Call<bool>([&](pqxx::connection& c) -> absl::StatusOr<bool> {
    pqxx::work w(c);
    // One statement: the owner changes only when it is the same principal or
    // the agent of that name is not connected.
    pqxx::result r = w.exec_params(
        "INSERT INTO agent_principals (name, principal) VALUES ($1, $2) "
        "ON CONFLICT (name) DO UPDATE SET principal = excluded.principal, claimed_at = now() "
        "WHERE agent_principals.principal = excluded.principal OR NOT EXISTS ("
        "  SELECT 1 FROM agents a WHERE a.name = excluded.name "
        "  AND a.last_heartbeat > now() - make_interval(secs => $3)) "
        "RETURNING name",
        name, principal, absl::ToDoubleSeconds(liveness));
    w.commit();
    return !r.empty();
  });
}

}  // namespace farm::storage
