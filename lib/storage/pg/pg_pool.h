// PgPool: a small fixed-size pool of libpqxx connections to one PostgreSQL
// database, and the one place where libpqxx exceptions become absl::Status.
//
// Contract:
//  - Thread-safe. Each pqxx::connection is used by exactly one thread at a
//    time: Run() checks a connection out, calls `fn`, and checks it back in.
//    Callers block while all connections are busy.
//  - Connections are opened lazily. A connection that breaks (server restart,
//    network) is discarded; the next Run() reconnects. While the server is
//    unreachable, Run() fails fast with kUnavailable (reconnect attempts are
//    spaced by an exponential backoff, 50 ms .. 2 s) instead of hanging, so
//    RPCs answer UNAVAILABLE during an outage and recover by themselves.
//  - Error mapping (ToStatus): connection loss, "in doubt" commits and
//    server shutdown states -> kUnavailable; serialization failure/deadlock
//    -> kAborted; unique violation -> kAlreadyExists; others -> kInternal.
//  - `fn` must not keep the connection beyond the call.
//  - Prepared statements registered with Prepare() exist on every pooled
//    connection: each connection (also one opened after a server restart)
//    gets every registered definition before its first use. libpqxx 6.4
//    sends the PREPARE to the server lazily, on the first exec_prepared.
#ifndef LIB_STORAGE_PG_PG_POOL_H_
#define LIB_STORAGE_PG_PG_POOL_H_

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace farm::storage {

struct PgPoolOptions {
  std::string uri;  // libpq URI or key=value string
  int size = 8;     // connections
  int connect_timeout_seconds = 3;
  // Server-side cap on one statement (0: the server's default); a hung or
  // runaway statement ends with an error instead of holding a connection.
  int statement_timeout_ms = 0;
};

// `conninfo` with TCP keepalives (a peer that vanished is noticed in ~30 s
// rather than the kernel's two hours), jit = off and, when > 0,
// statement_timeout, each unless the URI / key=value string sets it already
// (a string with its own `options` keeps them and gets neither setting).
std::string WithSessionOptions(const std::string& conninfo, int statement_timeout_ms);
// `text` with the password of every database URI or key=value connection
// string in it replaced by "***", for logs and errors.
std::string RedactDatabaseUri(const std::string& text);

// `uri` with connect_timeout=`seconds` added unless it sets one (URI or
// key=value form), so a dead server never hangs a connect.
std::string WithConnectTimeout(const std::string& uri, int seconds);

// Converts the exception currently being handled (inside a catch block) into
// a Status. `what` prefixes the message.
absl::Status CurrentExceptionToStatus(const std::string& what);

class PgPool final {
 public:
  explicit PgPool(PgPoolOptions options);
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;
  ~PgPool();

  // Runs `fn` on a pooled connection. Exceptions thrown by `fn` (pqxx or
  // std) are caught and turned into a Status; a broken connection is dropped.
  absl::Status Run(const std::function<absl::Status(pqxx::connection&)>& fn)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Convenience for value-returning work.
  template <typename T>
  absl::StatusOr<T> Call(const std::function<absl::StatusOr<T>(pqxx::connection&)>& fn) {
    absl::StatusOr<T> out = absl::UnknownError("not run");
    absl::Status st = Run([&](pqxx::connection& c) -> absl::Status {
      out = fn(c);
      return out.status();
    });
    if (!st.ok()) return st;
    return out;
  }

  const std::string& uri() const { return options_.uri; }

  // Registers `sql` as prepared statement `name` on all pooled connections,
  // present and future; use it with txn.exec_prepared(name, ...). Register
  // every statement before the first Run() that uses it. Names are unique.
  void Prepare(const std::string& name, const std::string& sql) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A slot's fields belong to the thread that checked it out (Acquire to
  // Release); the free list decides who that is.
  struct Slot {
    std::unique_ptr<pqxx::connection> conn;
    size_t prepared = 0;  // statements_[0, prepared) are defined on conn
  };
  // Waits for a free slot; connects it if needed (outside mu_).
  absl::StatusOr<Slot*> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(Slot* slot, bool broken) ABSL_LOCKS_EXCLUDED(mu_);
  // Defines the statements registered since the slot's connection last
  // caught up. May throw (pqxx).
  void SyncPrepared(Slot* slot) ABSL_LOCKS_EXCLUDED(mu_);
  bool HasFreeSlot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); }

  const PgPoolOptions options_;
  std::string conninfo_;
  // Waiters for a slot Await HasFreeSlot: absl re-evaluates it whenever mu_
  // is released, so Release() needs no explicit signal.
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);  // owned
  std::vector<Slot*> free_ ABSL_GUARDED_BY(mu_);
  // Reconnect backoff, shared by all slots.
  std::chrono::steady_clock::time_point next_connect_ ABSL_GUARDED_BY(mu_) = {};
  std::chrono::milliseconds backoff_ ABSL_GUARDED_BY(mu_) = std::chrono::milliseconds(0);
  std::vector<std::pair<std::string, std::string>> statements_ ABSL_GUARDED_BY(mu_);
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_POOL_H_
