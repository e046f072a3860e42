#include "testing/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing/service_harness.h"

namespace farm::testing {

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stdout_path,
                           const std::string& stderr_path)
    : stdout_path_(stdout_path), stderr_path_(stderr_path.empty() ? stdout_path : stderr_path) {
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const bool same_file = stderr_path_ == stdout_path_;
  const char* out = stdout_path_.c_str();
  const char* err = stderr_path_.c_str();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = same_file ? o : open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(127);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    execv(cargs[0], cargs.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGCONT);  // a stopped child must run to die
    kill(pid_, SIGKILL);
    Wait();
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

int ChildProcess::Wait() {
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  int status = 0;
  absl::Status st = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        if (pid_ <= 0) return true;
        if (waitpid(pid_, &status, WNOHANG) == 0) return false;
        pid_ = -1;
        return true;
      },
      timeout, "the process to exit", absl::Milliseconds(50));
  if (!st.ok()) return st;
  return status;
}

int ChildProcess::Terminate() {
  Signal(SIGTERM);
  const int status = Wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool ChildProcess::Alive() {
  if (pid_ <= 0) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == 0) return true;
  pid_ = -1;
  return false;
}

absl::Status ChildProcess::WaitFor(const std::string& needle, bool in_stderr,
                                   absl::Duration timeout) {
  bool exited = false;
  absl::Status st = PollUntil(
      [&]() -> absl::StatusOr<bool> {
        if ((in_stderr ? Err() : Out()).find(needle) != std::string::npos) return true;
        // PollUntil keeps polling through probe errors; a dead child ends it.
        exited = !Alive();
        return exited;
      },
      timeout, "\"" + needle + "\" from the process");
  if (!st.ok()) return st;
  // It may have printed the needle just before exiting.
  if (exited && (in_stderr ? Err() : Out()).find(needle) == std::string::npos) {
    return absl::InternalError("process exited before printing \"" + needle + "\"; stderr:\n" +
                               Err().substr(0, 4000));
  }
  return absl::OkStatus();
}

}  // namespace farm::testing
