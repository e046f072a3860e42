#include "lib/process/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace farm::process {
namespace {

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

std::string ErrnoText(int err) { return std::strerror(err); }

// Owns a file descriptor; closes it once.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Appends what one read() returns to `out` up to `cap`; false at EOF/error.
bool ReadChunk(int fd, std::string* out, std::size_t cap, bool* truncated) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
    const std::size_t room = out->size() < cap ? cap - out->size() : 0;
    const std::size_t take =
        static_cast<std::size_t>(n) < room ? static_cast<std::size_t>(n) : room;
    out->append(buf, take);
    if (take < static_cast<std::size_t>(n)) *truncated = true;
    return true;
  }
}

// The exec-failure report the child writes to the parent before _exit.
struct ChildError {
  int stage;  // 1 chdir, 2 dup2, 3 exec
  int err;
};

[[noreturn]] void ChildFail(int fd, int stage) {
  ChildError e{stage, errno};
  ssize_t ignored = ::write(fd, &e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::string ProcessResult::Describe() const {
  std::string s =
      signaled ? absl::StrCat("killed by signal ", term_signal) : absl::StrCat("exit ", exit_code);
  if (timed_out) absl::StrAppend(&s, " (timed out)");
  if (cancelled) absl::StrAppend(&s, " (cancelled)");
  return s;
}

absl::StatusOr<std::string> ResolveExecutable(const std::string& name,
                                              const std::string& path_env) {
  if (name.empty()) {
    return absl::InvalidArgumentError("empty executable name");
  }
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return absl::NotFoundError(absl::StrCat("executable ", name, " not found or not executable"));
  }
  const std::string path = path_env.empty() ? kDefaultPath : path_env;
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (executable(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("executable ", name, " not found on PATH ", path));
}

absl::StatusOr<ProcessResult> RunProcess(const ProcessOptions& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("RunProcess: empty argv");
  }
  absl::StatusOr<std::string> exe = ResolveExecutable(options.argv[0]);
  if (!exe.ok()) return exe.status();

  // Everything the child touches is prepared before fork: after fork only
  // async-signal-safe calls are allowed (the agent is multi-threaded).
  std::vector<std::string> env_strings =
      options.env ? *options.env
                  : std::vector<std::string>{absl::StrCat("PATH=", kDefaultPath), "LC_ALL=C"};
  std::vector<char*> argv;
  for (const std::string& a : options.argv) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env_strings) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();

  int out_pipe[2], err_pipe[2], status_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  Fd status_r(status_pipe[0]), status_w(status_pipe[1]);
  // A daemonised agent may run with 0-2 closed, so a pipe could land there
  // and be clobbered by the child's dup2 onto stdio: keep every fd the
  // child uses at 3 or above.
  for (Fd* fd : {&out_w, &err_w, &status_w}) {
    if (fd->get() < 3) {
      const int moved = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 3);
      if (moved < 0) {
        return absl::InternalError(absl::StrCat("fcntl: ", ErrnoText(errno)));
      }
      fd->Reset(moved);
    }
  }
  Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.get() < 0) {
    return absl::InternalError(absl::StrCat("open /dev/null: ", ErrnoText(errno)));
  }
  if (devnull.get() < 3) {
    const int moved = ::fcntl(devnull.get(), F_DUPFD_CLOEXEC, 3);
    if (moved < 0) {
      return absl::InternalError(absl::StrCat("fcntl: ", ErrnoText(errno)));
    }
    devnull.Reset(moved);
  }

  const absl::Time start = absl::Now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(errno)));
  }
  if (pid == 0) {
    // Child. Own group first so a group kill can never miss us.
    ::setpgid(0, 0);
    // The agent may block or ignore signals; ignored dispositions and the
    // mask survive execve, and a tool that ignores SIGTERM would only die
    // by SIGKILL.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig :
         {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM}) {
      ::sigaction(sig, &dfl, nullptr);
    }
    const int sfd = status_w.get();
    if (::dup2(devnull.get(), 0) < 0 || ::dup2(out_w.get(), 1) < 0 || ::dup2(err_w.get(), 2) < 0) {
      ChildFail(sfd, 2);
    }
    if (cwd != nullptr && ::chdir(cwd) != 0) ChildFail(sfd, 1);
    // Nothing of the agent's (sockets, database connections) leaks into the
    // tool; the status pipe is close-on-exec and so closes on success.
    if (sfd > 3) ::close_range(3, static_cast<unsigned>(sfd) - 1, 0);
    ::close_range(static_cast<unsigned>(sfd) + 1, UINT_MAX, 0);
    ::execve(exe->c_str(), argv.data(), envp.data());
    ChildFail(sfd, 3);
  }

  // Parent. Also set the group here: whichever runs first wins, and a kill
  // sent right after fork reaches the child's group either way.
  ::setpgid(pid, pid);
  out_w.Reset();
  err_w.Reset();
  status_w.Reset();
  devnull.Reset();

  ChildError child_error{};
  ssize_t n;
  do {
    n = ::read(status_r.get(), &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_error)) {
    int ignored;
    ::waitpid(pid, &ignored, 0);
    const char* stage = child_error.stage == 1   ? "chdir to "
                        : child_error.stage == 2 ? "dup2 for "
                                                 : "execve ";
    const std::string what = child_error.stage == 1 ? options.cwd : *exe;
    return absl::InternalError(absl::StrCat(stage, what, ": ", ErrnoText(child_error.err)));
  }

  ProcessResult result;
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  bool out_open = true, err_open = true;
  bool exited = false;
  bool term_sent = false, kill_sent = false;
  absl::Time term_at;
  const absl::Time deadline = options.timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                          : start + options.timeout;
  absl::Time drain_deadline = absl::InfiniteFuture();

  while (out_open || err_open || !exited) {
    struct pollfd fds[2];
    int nfds = 0;
    if (out_open) fds[nfds++] = {out_r.get(), POLLIN, 0};
    if (err_open) fds[nfds++] = {err_r.get(), POLLIN, 0};
    if (nfds > 0) {
      ::poll(fds, nfds, 20);
    } else {
      ::usleep(20 * 1000);
    }
    if (out_open) {
      out_open =
          ReadChunk(out_r.get(), &result.stdout_data, options.max_stdout, &result.stdout_truncated);
    }
    if (err_open) {
      err_open =
          ReadChunk(err_r.get(), &result.stderr_data, options.max_stderr, &result.stderr_truncated);
    }
    const absl::Time now = absl::Now();
    if (!exited) {
      // WNOWAIT: the zombie keeps its pid (= our group id) reserved until
      // the stragglers in the group are killed, so the kill cannot hit a
      // recycled group.
      siginfo_t info;
      std::memset(&info, 0, sizeof info);
      if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
        ::kill(-pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        exited = true;
        if (WIFSIGNALED(status)) {
          result.signaled = true;
          result.term_signal = WTERMSIG(status);
        } else {
          result.exit_code = WEXITSTATUS(status);
        }
        // Pipes held by something that escaped the group (setsid) must not
        // hang us.
        drain_deadline = now + absl::Seconds(2);
        continue;
      }
      if (!term_sent) {
        if (now >= deadline) {
          result.timed_out = true;
        } else if (options.cancelled && options.cancelled()) {
          result.cancelled = true;
        }
        if (result.timed_out || result.cancelled) {
          ::kill(-pid, SIGTERM);
          term_sent = true;
          term_at = now;
        }
      } else if (!kill_sent && now - term_at >= options.kill_grace) {
        ::kill(-pid, SIGKILL);
        kill_sent = true;
      }
    } else if (now >= drain_deadline) {
      break;
    }
  }
  result.wall_time = absl::Now() - start;
  return result;
}

}  // namespace farm::process
