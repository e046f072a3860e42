// The redaction of database URIs for logs and errors (pg_pool.h): no server.
#include "lib/storage/pg/pg_pool.h"

#include <gtest/gtest.h>

namespace farm::storage {
namespace {

TEST(RedactDatabaseUriTest, PasswordsAreHidden) {
  EXPECT_EQ(RedactDatabaseUri("postgresql://farm:s3cret@db.lab:5432/farm?sslmode=require"),
            "postgresql://farm:***@db.lab:5432/farm?sslmode=require");
  EXPECT_EQ(RedactDatabaseUri("connect to host=db password=s3cret dbname=farm failed"),
            "connect to host=db password=*** dbname=farm failed");
  EXPECT_EQ(RedactDatabaseUri("postgresql://farm@127.0.0.1/farm"),
            "postgresql://farm@127.0.0.1/farm");
}

}  // namespace
}  // namespace farm::storage
