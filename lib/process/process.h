// process: runs one external tool (fio, iozone) without a shell, in its own
// process group, with captured output, a timeout and cancellation.
//
// Contract:
// - RunProcess forks and execve()s argv[0] resolved to an absolute path
//   (ResolveExecutable; no PATH search by the kernel or libc, no /bin/sh
//   fallback). The child gets a fixed minimal environment unless `env` is
//   set, stdin from /dev/null, every other descriptor closed, and its own
//   process group (setpgid in both parent and child, so signals sent to the
//   group never race the exec).
// - stdout and stderr are captured up to max_stdout / max_stderr bytes each;
//   the rest is read and dropped (the child never blocks on a full pipe) and
//   the *_truncated flag is set.
// - When `timeout` passes or `cancelled()` returns true (polled about every
//   20 ms), the whole group gets SIGTERM, then SIGKILL after `kill_grace`.
//   After the main child exits, stragglers left in its group are SIGKILLed,
//   so a run never leaves processes behind.
// - Blocking: RunProcess blocks the calling thread until the child is reaped.
//   It is thread-safe (no shared state); only async-signal-safe calls run in
//   the child between fork and exec, so it is safe in a multi-threaded agent.
// - Errors (absl::Status): InvalidArgument for an empty argv,
//   NotFound when the executable does not exist, Internal when pipe/fork
//   fail or exec fails in the child (errno reported). A child that runs and
//   fails is not an error: see ProcessResult.
#ifndef LIB_PROCESS_PROCESS_H_
#define LIB_PROCESS_PROCESS_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace farm::process {

struct ProcessOptions {
  std::vector<std::string> argv;  // argv[0]: a name on PATH or a path
  std::string cwd;                // empty: inherit
  // Unset: {PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin, LC_ALL=C}.
  std::optional<std::vector<std::string>> env;
  absl::Duration timeout = absl::InfiniteDuration();
  absl::Duration kill_grace = absl::Seconds(2);  // SIGTERM -> SIGKILL
  std::size_t max_stdout = 16 << 20;
  std::size_t max_stderr = 1 << 20;
  std::function<bool()> cancelled;  // may be empty; must be cheap
  // May be empty: called on the calling thread with each piece of stdout as
  // it is read (before the max_stdout cut), for a caller that follows a
  // long run's output; must be cheap.
  std::function<void(std::string_view)> on_stdout;
};

struct ProcessResult {
  int exit_code = -1;   // valid when !signaled
  int term_signal = 0;  // signal that ended the child, when signaled
  bool signaled = false;
  bool timed_out = false;
  bool cancelled = false;
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  absl::Duration wall_time;

  // Exited on its own with status 0.
  bool ok() const { return !signaled && exit_code == 0; }
  // "exit 1", "signal 9 (timed out after 5s)" ... for error messages.
  std::string Describe() const;
};

// Absolute path of `name`: itself when it contains '/', else the first
// executable regular file named `name` on PATH (the given one, or the default
// above when empty). NotFound when there is none.
absl::StatusOr<std::string> ResolveExecutable(const std::string& name,
                                              const std::string& path_env = "");

absl::StatusOr<ProcessResult> RunProcess(const ProcessOptions& options);

}  // namespace farm::process

#endif  // LIB_PROCESS_PROCESS_H_
