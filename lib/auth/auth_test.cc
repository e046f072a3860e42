#include "lib/auth/auth.h"

#include <gtest/gtest.h>

namespace farm::auth {
namespace {

TEST(BearerMatchesTest, ExactTokenOnly) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cret2", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer S3cret", "s3cret"));
}

TEST(TokenTest, RandomAndHashed) {
  const std::string a = NewToken(), b = NewToken();
  ASSERT_EQ(a.size(), 5u + 64u) << a;
  EXPECT_EQ(a.substr(0, 5), "farm_");
  EXPECT_NE(a, b);
  // SHA-256 of "abc" (FIPS 180-2 test vector).
  EXPECT_EQ(TokenSha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_NE(TokenSha256Hex(a), TokenSha256Hex(b));
}

}  // namespace
}  // namespace farm::auth
