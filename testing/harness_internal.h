// Internals of the service harness shared by the instance implementations:
// spawning a server child (own process group, parent-death SIGKILL, optional
// credential drop), waiting for and stopping it, and the per-instance temp
// dir with its cleanup record. Not for use outside testing.
//
// Thread-safety: all functions are thread-safe; a given pid/dir is expected
// to be handled by one owner at a time.
#ifndef TESTING_HARNESS_INTERNAL_H_
#define TESTING_HARNESS_INTERNAL_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace farm::testing::internal {

// How often a server is started on a fresh port when the one picked was
// taken between PickFreePort and the server's bind.
inline constexpr int kStartAttempts = 3;

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string home;
};

// The `postgres` account, for dropping root privileges.
absl::StatusOr<Credentials> LookupUser(const std::string& name);
// Login name of the effective uid.
std::string CurrentUserName();

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path to the binary
  std::string log_path;           // stdout and stderr are appended here
  std::string cwd;                // working directory of the child
  std::optional<Credentials> run_as;
};

// fork + exec with: new process group, stdin from /dev/null, all other fds
// closed, PR_SET_PDEATHSIG(SIGKILL) (set after the credential drop, which
// would clear it), default SIGPIPE and an empty signal mask. Exec failures are
// reported as errors, not as a child exiting with 127.
absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec);

// Non-blocking: true (and the raw wait status) if the child `pid` has exited
// and was reaped.
bool Reaped(pid_t pid, int* wait_status);
// Waits up to `timeout` for the child to exit by itself; returns the raw
// wait status, or kDeadlineExceeded (child still running) after SIGKILLing
// and reaping it.
absl::StatusOr<int> WaitExit(pid_t pid, absl::Duration timeout);
// Sends `signal` to `pid`, waits up to `grace` for it to exit, then SIGKILLs
// its process group and reaps it. Returns the raw wait status.
absl::StatusOr<int> Terminate(pid_t pid, int signal, absl::Duration grace);
std::string DescribeWaitStatus(int wait_status);

// Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22), to
// tell a live process from a recycled pid.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

// Creates HarnessTempBase()/farm-harness-<kind>-XXXXXX (mode 0700, chowned to
// `owner` if given), writes its cleanup record and, first, sweeps stale dirs
// left by dead owners.
absl::StatusOr<std::string> MakeInstanceDir(absl::string_view kind,
                                            const std::optional<Credentials>& owner);
// Rewrites the dir's record with the current server pid (0: none running).
absl::Status WriteRecord(const std::string& dir, absl::string_view kind, pid_t server_pid);
// Removes the dir (best effort, errors ignored: this runs in destructors).
void RemoveInstanceDir(const std::string& dir);
// Kills servers of dead owners and removes their dirs under `base`. Returns
// the number of dirs removed.
int SweepStaleDirs(const std::string& base);

// The file's bytes from `offset` to the end, at most the last `max_bytes`.
std::string ReadTail(const std::string& path, size_t max_bytes, uint64_t offset = 0);
uint64_t FileSize(const std::string& path);

// Polls `pid` (our child) and `url`/-/ready until `ready_status` (200; a
// TLS-only server answers plain HTTP with 400) or timeout; used by
// Prometheus and Alertmanager.
absl::Status WaitHttpReady(pid_t pid, const std::string& url, absl::Duration timeout,
                           const std::string& log_path, absl::string_view what,
                           int ready_status = 200);

// True if the log (from offset) says the listen port was taken.
bool LogSaysAddressInUse(const std::string& log_path, uint64_t offset);

}  // namespace farm::testing::internal

#endif  // TESTING_HARNESS_INTERNAL_H_
