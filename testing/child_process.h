// ChildProcess: a program under test (farm-agent, farm-scheduler, ...) run as
// a child of the test process, its stdout and stderr captured in files, for
// multi-process tests that kill, stop and restart real binaries.
//
// Lifetime: the destructor SIGCONTs and SIGKILLs the child (if still running)
// and reaps it, also when a test fails early. The child gets
// prctl(PR_SET_PDEATHSIG, SIGKILL), so it dies with the test process (same
// caveat as the harness servers: the *thread* that started it must outlive
// it; start children from the test's main thread).
//
// Everything the child needs is prepared before fork(): between fork and
// exec only async-signal-safe calls run, so starting a child from a process
// with gRPC/PostgreSQL threads is safe.
//
// Thread-safety: not thread-safe; one owner. Non-copyable, non-movable (hold
// it by unique_ptr).
#ifndef TESTING_CHILD_PROCESS_H_
#define TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/base/file.h"

namespace farm::testing {

// The whole file, or "" if it cannot be read (lib/base/file.h).
using ::farm::base::ReadFileOrEmpty;

class ChildProcess final {
 public:
  // Runs argv[0] (a path; no PATH search) with `argv`. stdout goes to
  // `stdout_path`, stderr to `stderr_path`, or to the same file when
  // `stderr_path` is empty. Files are truncated. A child that cannot exec
  // exits with status 127.
  ChildProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
               const std::string& stderr_path = "");
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // kill(pid, sig) while the child has not been reaped.
  void Signal(int sig);
  // Waits for exit and reaps; returns the raw wait status (0 if already reaped).
  int Wait();
  // Wait() bounded by `timeout`: kDeadlineExceeded leaves the child running
  // (the destructor kills it).
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // SIGTERM + Wait; the exit code, or -1 if a signal ended the child.
  int Terminate();
  // Running and not yet reaped (reaps it if it has exited).
  bool Alive();

  std::string Out() const { return ReadFileOrEmpty(stdout_path_); }
  std::string Err() const { return ReadFileOrEmpty(stderr_path_); }

  // Bounded wait until `needle` shows up in stderr (or stdout); an error if
  // the child exits first (with the start of its stderr) or on timeout.
  absl::Status WaitFor(const std::string& needle, bool in_stderr, absl::Duration timeout);

 private:
  std::string stdout_path_;
  std::string stderr_path_;
  pid_t pid_ = -1;
};

}  // namespace farm::testing

#endif  // TESTING_CHILD_PROCESS_H_
