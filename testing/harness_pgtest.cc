// Smoke tests of PostgresInstance against the real server: queries through
// libpqxx, restart and immediate-shutdown recovery, and teardown (also when
// the owning process is SIGKILLed).
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <pqxx/pqxx>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/service_harness.h"

namespace farm::testing {
namespace {

bool Accepts(int port) {
  const std::string conninfo =
      absl::StrCat("host=127.0.0.1 port=", port, " dbname=postgres connect_timeout=2");
  return PQping(conninfo.c_str()) == PQPING_OK;
}

int CountRows(const std::string& uri) {
  pqxx::connection conn(uri);
  pqxx::work tx(conn);
  return tx.exec("SELECT count(*) FROM kv")[0][0].as<int>();
}

TEST(PostgresHarness, QueriesSurviveRestart) {
  absl::StatusOr<std::unique_ptr<PostgresInstance>> pg = PostgresInstance::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  const std::string uri = (*pg)->Uri();
  EXPECT_EQ(uri,
            absl::StrCat("postgresql://", (*pg)->user(), "@127.0.0.1:", (*pg)->port(), "/farm"));
  {
    pqxx::connection conn(uri);
    pqxx::work tx(conn);
    std::string version = tx.exec("SELECT version()")[0][0].as<std::string>();
    EXPECT_NE(version.find("PostgreSQL 15"), std::string::npos) << version;
    tx.exec("CREATE TABLE kv (k text PRIMARY KEY, v bigint NOT NULL)");
    tx.exec_params("INSERT INTO kv VALUES ($1, $2), ($3, $4)", "a", 1, "b", 2);
    tx.commit();
  }
  {
    pqxx::connection conn(uri);
    pqxx::work tx(conn);
    pqxx::result r = tx.exec_params("SELECT v FROM kv WHERE k = $1", "b");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0][0].as<int64_t>(), 2);
  }

  absl::StatusOr<std::string> other = (*pg)->CreateDatabase("other");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(*other, (*pg)->Uri("other"));
  {
    pqxx::connection conn(*other);
    pqxx::work tx(conn);
    EXPECT_EQ(tx.exec("SELECT current_database()")[0][0].as<std::string>(), "other");
  }
  EXPECT_FALSE((*pg)->CreateDatabase("other").ok());  // exists already

  const int port = (*pg)->port();
  ASSERT_TRUE((*pg)->Restart().ok());
  EXPECT_EQ((*pg)->port(), port);
  EXPECT_EQ(CountRows(uri), 2);

  // Immediate shutdown: clients see the server gone, recovery on next start.
  ASSERT_TRUE((*pg)->Kill().ok());
  EXPECT_FALSE((*pg)->running());
  EXPECT_THROW(pqxx::connection{uri}, pqxx::broken_connection);
  ASSERT_TRUE((*pg)->Restart().ok());
  EXPECT_EQ(CountRows(uri), 2);
}

TEST(PostgresHarness, DestructorStopsServerAndRemovesDir) {
  std::string dir;
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<PostgresInstance>> pg = PostgresInstance::Start();
    ASSERT_TRUE(pg.ok()) << pg.status();
    dir = (*pg)->dir();
    port = (*pg)->port();
    EXPECT_TRUE(std::filesystem::exists(dir + "/data/PG_VERSION"));
    EXPECT_TRUE(Accepts(port));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(Accepts(port));
}

// The owner dies without running any destructor (as under a ctest timeout):
// the kernel must take the server down, and the next Start() must remove the
// dead owner's temp dir.
TEST(PostgresHarness, ServerDiesWithKilledOwnerAndDirIsSwept) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    absl::StatusOr<std::unique_ptr<PostgresInstance>> pg = PostgresInstance::Start();
    std::string line = pg.ok() ? absl::StrCat((*pg)->port(), " ", (*pg)->dir(), "\n")
                               : absl::StrCat("0 ", pg.status().ToString(), "\n");
    (void)!write(fds[1], line.data(), line.size());
    pause();  // until SIGKILLed
    _exit(0);
  }
  close(fds[1]);
  std::string line;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) {
    line.append(buf, static_cast<size_t>(n));
    if (line.find('\n') != std::string::npos) break;
  }
  close(fds[0]);
  int port = 0;
  char dir[400] = {0};
  ASSERT_EQ(std::sscanf(line.c_str(), "%d %399s", &port, dir), 2) << line;
  ASSERT_GT(port, 0) << line;
  EXPECT_TRUE(Accepts(port));

  kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);

  absl::Status gone = PollUntil([&]() -> absl::StatusOr<bool> { return !Accepts(port); },
                                absl::Seconds(30), "orphaned postgres to exit");
  EXPECT_TRUE(gone.ok()) << gone;
  EXPECT_TRUE(std::filesystem::exists(dir));  // nobody could remove it yet

  absl::StatusOr<std::unique_ptr<PostgresInstance>> next = PostgresInstance::Start();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace farm::testing
