// MemoryAccessStore: tokens, agent-name ownership, lease holders.
#include <gtest/gtest.h>

#include "lib/storage/memory/memory_access_store.h"
#include "lib/storage/memory/memory_store.h"

namespace farm::storage {
namespace {

TEST(MemoryAccessStoreTest, TokensAreFoundByHashUntilRevoked) {
  MemoryStore store;
  MemoryAccessStore access(&store.db());
  absl::StatusOr<ApiToken> t = access.CreateToken("ci", "submitter", "hash-1");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(access.CreateToken("ci", "viewer", "hash-2").status().code(),
            absl::StatusCode::kAlreadyExists);
  absl::StatusOr<ApiToken> found = access.FindToken("hash-1");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->name, "ci");
  EXPECT_EQ(found->role, "submitter");
  EXPECT_TRUE(access.RevokeToken("ci").ok());
  EXPECT_EQ(access.FindToken("hash-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(access.RevokeToken("ci").code(), absl::StatusCode::kNotFound);
  // The name is free again once revoked; the list keeps both.
  EXPECT_TRUE(access.CreateToken("ci", "viewer", "hash-3").ok());
  absl::StatusOr<std::vector<ApiToken>> all = access.ListTokens();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_TRUE((*all)[0].revoked);
  EXPECT_FALSE((*all)[1].revoked);
}

TEST(MemoryAccessStoreTest, ConnectedAgentNameStaysWithItsPrincipal) {
  MemoryStore store;
  MemoryAccessStore access(&store.db());
  EXPECT_TRUE(*access.ClaimAgentName("a", "alice", absl::Seconds(30)));
  // Not connected yet (never registered): another principal may claim it.
  EXPECT_TRUE(*access.ClaimAgentName("a", "bob", absl::Seconds(30)));
  pb::RegisterRequest reg;
  reg.set_name("a");
  reg.set_slots(1);
  ASSERT_TRUE(store.RegisterAgent(reg, RetryPolicy{}).ok());
  EXPECT_FALSE(*access.ClaimAgentName("a", "alice", absl::Seconds(30)));
  EXPECT_TRUE(*access.ClaimAgentName("a", "bob", absl::Seconds(30)));
}

}  // namespace
}  // namespace farm::storage
