// Authorization for the scheduler's gRPC adapters: who is calling (the
// principal) and what it may do (its role against one table of every RPC).
//
// Principals: the bearer token of the call if there is one (the bootstrap
// admin token, or an API token from the AccessStore, looked up by SHA-256),
// else the verified client certificate: its CN (or, without one, its first
// SAN) is the name and its one O the role (scripts/farm-certs writes both),
// read from the certificate's fields (cert_identity.h); a certificate that
// names nobody plainly (two Os, a CN outside the name charset) is refused. A
// farm with neither an admin token nor a client CA does not authenticate:
// every caller is the anonymous admin (allowed on loopback only, see
// CheckExposure in server.h).
//
// Roles and the table of who may call what are in roles.h: a call is
// refused unless its principal's role is in RpcRoleTable()'s set for its
// RPC. An agent principal is bound to the agent name it is called by: it
// registers only that name, and its agent calls must carry an agent id of
// that name. Which leases an agent
// holds is the queue's to say, in the statement that renews, releases or
// reports them: another agent's lease in a heartbeat is answered as revoked
// in its slot, the rest are extended. Ownership (who may cancel a matrix or
// triage a regression) is the plain services' to check (roles.h
// CheckOwner), with the principal the adapters hand them.
//
// Token lookups are cached for AuthzOptions::token_cache_ttl (revocation on
// this server drops the token's entries at once; one made on another
// scheduler of the same database is seen within the TTL). Lease renewals
// (Heartbeat, ReleaseLeases) look tokens and agent names up through the
// lease path's own stores (SetLeasePath), so a stalled main pool cannot
// cost an agent its leases.
//
// Thread-safety: Authorizer is thread-safe; its store and queue are not
// owned and must outlive it. Methods that read the store block on the
// database: call them on the worker pool.
#ifndef SCHEDULER_AUTHZ_H_
#define SCHEDULER_AUTHZ_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/storage/access_store.h"
#include "lib/storage/job_queue.h"
#include "scheduler/roles.h"

namespace farm::scheduler {

struct AuthzOptions {
  std::string admin_token;           // bootstrap admin bearer token; empty: none
  bool client_certificates = false;  // the server verifies client certificates
  absl::Duration agent_liveness = absl::Seconds(30);
  absl::Duration token_cache_ttl = absl::Seconds(10);
  // Calls are authenticated (an admin token or client certificates exist).
  bool authenticated() const { return !admin_token.empty() || client_certificates; }
};

class Authorizer final {
 public:
  // `access` may be null (API tokens unknown; agent names not owned);
  // `queue` resolves agent ids to names.
  Authorizer(AuthzOptions options, storage::AccessStore* access, storage::JobQueue* queue)
      : options_(std::move(options)), access_(access), queue_(queue) {}

  // The caller, or UNAUTHENTICATED (no or an unknown/revoked credential).
  // `lease_path`: lookups through the lease path's stores.
  absl::StatusOr<Principal> Authenticate(const grpc::ServerContextBase& ctx,
                                         bool lease_path = false);
  // Authenticate, then PERMISSION_DENIED unless the principal's role is
  // in AllowedRoles(rpc).
  absl::StatusOr<Principal> Authorize(const grpc::ServerContextBase& ctx, absl::string_view rpc);

  // Register: a bound agent registers only its own name; and a name a
  // connected agent of another principal holds is refused (not taken over).
  absl::Status CheckRegister(const Principal& who, const std::string& agent_name);
  // A bound agent calls only with the id of the agent it is; `lease_path`:
  // an unknown id is looked up through the lease path's queue.
  absl::Status CheckAgentId(const Principal& who, int64_t agent_id, bool lease_path = false);
  // The stores lease renewals read through (not owned; null: the main
  // ones). Call before the server serves.
  void SetLeasePath(storage::AccessStore* access, storage::JobQueue* queue) {
    lease_access_ = access;
    lease_queue_ = queue;
  }
  // Drops cached lookups of the tokens of principal `name` (it was revoked).
  void ForgetTokensOf(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // `st` from the queue: a kPermissionDenied is counted as refused and names
  // the principal; anything else comes back as it is.
  absl::Status QueueRefusal(const Principal& who, const absl::Status& st);

  // Calls that reached an adapter (past TLS), and those refused here.
  int64_t calls() const { return calls_.load(); }
  int64_t refused() const { return refused_.load(); }
  void CountCall() { calls_.fetch_add(1); }

 private:
  absl::StatusOr<Principal> FromToken(const std::string& token, bool lease_path)
      ABSL_LOCKS_EXCLUDED(mu_);
  struct CachedToken {
    Principal who;
    absl::Time expires;
  };

  const AuthzOptions options_;
  storage::AccessStore* const access_;
  storage::JobQueue* const queue_;
  std::atomic<int64_t> calls_{0};
  std::atomic<int64_t> refused_{0};
  absl::Mutex mu_;
  // Agent ids never change names: cached for the server's life.
  absl::flat_hash_map<int64_t, std::string> agent_names_ ABSL_GUARDED_BY(mu_);
  // By the token's SHA-256.
  absl::flat_hash_map<std::string, CachedToken> tokens_ ABSL_GUARDED_BY(mu_);
  storage::AccessStore* lease_access_ = nullptr;
  storage::JobQueue* lease_queue_ = nullptr;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_AUTHZ_H_
