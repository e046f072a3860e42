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

}  // namespace
}  // namespace farm::auth
