// PostgresInstance: a private cluster per instance. The postmaster runs in the
// foreground as our child (not via pg_ctl, which daemonizes) so that the
// kernel kills it through PR_SET_PDEATHSIG when the test process dies.
#include <libpq-fe.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "testing/harness_internal.h"
#include "testing/service_harness.h"

namespace farm::testing {

namespace {

std::string ServerLog(const std::string& dir) { return dir + "/server.log"; }

// Unix socket paths are limited to 107 bytes (sun_path); beyond that the
// server would refuse to start, so fall back to TCP only.
std::string SocketDirFor(const std::string& dir) {
  return dir.size() + sizeof("/.s.PGSQL.65535") < 100 ? dir : "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostgresInstance>> PostgresInstance::Start(
    const PostgresOptions& options) {
  std::unique_ptr<PostgresInstance> pg(new PostgresInstance());
  pg->options_ = options;
  std::optional<internal::Credentials> owner;
  if (geteuid() == 0) {
    // The server refuses to run as root.
    absl::StatusOr<internal::Credentials> creds = internal::LookupUser("postgres");
    if (!creds.ok()) return creds.status();
    owner = *creds;
    pg->drop_privileges_ = true;
    pg->run_uid_ = creds->uid;
    pg->run_gid_ = creds->gid;
    pg->user_ = creds->name;
  } else {
    pg->user_ = internal::CurrentUserName();
  }
  absl::StatusOr<std::string> dir = internal::MakeInstanceDir("postgres", owner);
  if (!dir.ok()) return dir.status();
  pg->dir_ = *dir;  // from here on the destructor cleans up

  if (absl::Status s = pg->InitDb(); !s.ok()) return s;
  absl::Status started;
  for (int attempt = 0; attempt < internal::kStartAttempts; ++attempt) {
    pg->port_ = PickFreePort();
    if (pg->port_ == 0) return absl::InternalError("no free TCP port on 127.0.0.1");
    started = pg->StartServer();
    if (!absl::IsAlreadyExists(started)) break;
  }
  if (!started.ok()) return started;
  if (absl::StatusOr<std::string> db = pg->CreateDatabase(options.database); !db.ok()) {
    return db.status();
  }
  return pg;
}

PostgresInstance::~PostgresInstance() {
  if (pid_ > 0) (void)Shutdown(SIGQUIT, absl::Seconds(10));  // data is thrown away anyway
  internal::RemoveInstanceDir(dir_);
}

std::string PostgresInstance::Uri(const std::string& db) const {
  return absl::StrCat("postgresql://", user_, "@127.0.0.1:", port_, "/", db);
}

std::string PostgresInstance::LogTail(size_t max_bytes) const {
  return internal::ReadTail(ServerLog(dir_), max_bytes);
}

absl::Status PostgresInstance::InitDb() {
  const std::string log = dir_ + "/initdb.log";
  internal::SpawnSpec spec;
  spec.argv = {options_.bin_dir + "/initdb",
               "--pgdata=" + dir_ + "/data",
               "--username=" + user_,
               "--auth=trust",
               "--encoding=UTF8",
               "--locale=C",
               "--no-sync",
               "--no-instructions"};
  spec.log_path = log;
  spec.cwd = dir_;
  if (drop_privileges_) {
    spec.run_as = internal::Credentials{run_uid_, run_gid_, user_, dir_};
  }
  absl::StatusOr<pid_t> pid = internal::Spawn(spec);
  if (!pid.ok()) {
    return absl::Status(pid.status().code(),
                        absl::StrCat(pid.status().message(), " -- is ", HarnessTempBase(),
                                     " searchable by user ", user_, "? (set FARM_TEST_TMPDIR)"));
  }
  // initdb takes ~1-3 s; a generous bound only guards against a hang.
  absl::StatusOr<int> status = internal::WaitExit(*pid, absl::Seconds(120));
  if (!status.ok() || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::InternalError(absl::StrCat(
        "initdb failed (",
        status.ok() ? internal::DescribeWaitStatus(*status) : status.status().ToString(), "); is ",
        HarnessTempBase(), " searchable by user ", user_,
        "? (set FARM_TEST_TMPDIR) initdb.log tail:\n", internal::ReadTail(log, 3000)));
  }

  std::vector<std::string> conf = {
      "",
      "# --- farm test harness (testing) ---",
      "listen_addresses = '127.0.0.1'",
      absl::StrCat("unix_socket_directories = '", SocketDirFor(dir_), "'"),
      absl::StrCat("fsync = ", options_.fsync ? "on" : "off"),
      absl::StrCat("synchronous_commit = ", options_.fsync ? "on" : "off"),
      absl::StrCat("full_page_writes = ", options_.fsync ? "on" : "off"),
      "shared_buffers = 32MB",
      "logging_collector = off",
  };
  conf.insert(conf.end(), options_.extra_config.begin(), options_.extra_config.end());
  std::ofstream out(dir_ + "/data/postgresql.conf", std::ios::app);
  out << absl::StrJoin(conf, "\n") << "\n";
  if (!out.flush()) return absl::InternalError("cannot append to postgresql.conf");
  return absl::OkStatus();
}

absl::Status PostgresInstance::StartServer() {
  const std::string log = ServerLog(dir_);
  const uint64_t log_offset = internal::FileSize(log);
  internal::SpawnSpec spec;
  spec.argv = {options_.bin_dir + "/postgres", "-D", dir_ + "/data", "-p", absl::StrCat(port_)};
  spec.log_path = log;
  spec.cwd = dir_;
  if (drop_privileges_) {
    spec.run_as = internal::Credentials{run_uid_, run_gid_, user_, dir_};
  }
  absl::StatusOr<pid_t> pid = internal::Spawn(spec);
  if (!pid.ok()) return pid.status();
  pid_ = *pid;
  (void)internal::WriteRecord(dir_, "postgres", pid_);

  const std::string conninfo = absl::StrCat("host=127.0.0.1 port=", port_,
                                            " dbname=postgres connect_timeout=2 user=", user_);
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (true) {
    int status = 0;
    if (internal::Reaped(pid_, &status)) {
      pid_ = 0;
      (void)internal::WriteRecord(dir_, "postgres", 0);
      std::string msg = absl::StrCat(
          "postgres on port ", port_, " ", internal::DescribeWaitStatus(status),
          " during startup; server.log tail:\n", internal::ReadTail(log, 3000, log_offset));
      if (internal::LogSaysAddressInUse(log, log_offset)) return absl::AlreadyExistsError(msg);
      return absl::UnavailableError(msg);
    }
    if (PQping(conninfo.c_str()) == PQPING_OK) return absl::OkStatus();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::string tail = internal::ReadTail(log, 3000, log_offset);
  (void)Shutdown(SIGQUIT, absl::Seconds(5));
  return absl::DeadlineExceededError(
      absl::StrCat("postgres on port ", port_, " did not accept connections within ",
                   absl::FormatDuration(options_.start_timeout), "; server.log tail:\n", tail));
}

absl::Status PostgresInstance::Shutdown(int sig, absl::Duration grace) {
  if (pid_ <= 0) return absl::OkStatus();
  absl::StatusOr<int> status = internal::Terminate(pid_, sig, grace);
  pid_ = 0;
  (void)internal::WriteRecord(dir_, "postgres", 0);
  return status.status();
}

absl::Status PostgresInstance::Stop() { return Shutdown(SIGINT, absl::Seconds(30)); }

absl::Status PostgresInstance::Kill() { return Shutdown(SIGQUIT, absl::Seconds(10)); }

absl::Status PostgresInstance::Restart() {
  if (absl::Status s = Stop(); !s.ok()) return s;
  absl::Status s = StartServer();
  if (absl::IsAlreadyExists(s)) {
    return absl::UnavailableError(absl::StrCat(
        "Restart: port ", port_, " was taken while the server was down: ", s.message()));
  }
  return s;
}

absl::StatusOr<std::string> PostgresInstance::CreateDatabase(const std::string& name) {
  const std::string conninfo =
      absl::StrCat("host=127.0.0.1 port=", port_, " dbname=postgres user=", user_);
  std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(conninfo.c_str()), PQfinish);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", conninfo, ": ", PQerrorMessage(conn.get())));
  }
  std::unique_ptr<char, decltype(&PQfreemem)> ident(
      PQescapeIdentifier(conn.get(), name.c_str(), name.size()), PQfreemem);
  if (!ident) return absl::InvalidArgumentError("bad database name: " + name);
  std::unique_ptr<PGresult, decltype(&PQclear)> res(
      PQexec(conn.get(), absl::StrCat("CREATE DATABASE ", ident.get()).c_str()), PQclear);
  if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
    return absl::InternalError(
        absl::StrCat("CREATE DATABASE ", name, ": ", PQerrorMessage(conn.get())));
  }
  return Uri(name);
}

}  // namespace farm::testing
