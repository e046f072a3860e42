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
#include <string>
#include <utility>
#include <vector>

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
bool ReadChunk(int fd, std::string* out, std::size_t cap, bool* truncated,
               const std::function<void(std::string_view)>* on_read = nullptr) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;
    if (on_read != nullptr && *on_read) (*on_read)(std::string_view(buf, static_cast<size_t>(n)));
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

namespace {

// What the child needs, prepared before fork: after fork only
// async-signal-safe calls are allowed (the agent is multi-threaded).
// `argv` and `envp` point into `options.argv` and `env_strings`.
struct ChildExec {
  std::string exe;
  std::vector<std::string> env_strings;
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* cwd = nullptr;
};

absl::Status PrepareExec(const ProcessOptions& options, ChildExec* exec) {
  absl::StatusOr<std::string> exe = ResolveExecutable(options.argv[0]);
  if (!exe.ok()) return exe.status();
  exec->exe = *std::move(exe);
  exec->env_strings =
      options.env ? *options.env
                  : std::vector<std::string>{absl::StrCat("PATH=", kDefaultPath), "LC_ALL=C"};
  for (const std::string& a : options.argv) {
    exec->argv.push_back(const_cast<char*>(a.c_str()));
  }
  exec->argv.push_back(nullptr);
  for (const std::string& e : exec->env_strings) {
    exec->envp.push_back(const_cast<char*>(e.c_str()));
  }
  exec->envp.push_back(nullptr);
  exec->cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  return absl::OkStatus();
}

// The child's descriptors: its stdout, stderr and exec-failure report
// (status) pipes, and /dev/null for its stdin.
struct ChildFds {
  Fd out_r, out_w;
  Fd err_r, err_w;
  Fd status_r, status_w;
  Fd devnull;
};

// Moves `fd` to a descriptor of 3 or above.
absl::Status LiftAboveStdio(Fd* fd) {
  if (fd->get() >= 3) return absl::OkStatus();
  const int moved = ::fcntl(fd->get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", ErrnoText(errno)));
  }
  fd->Reset(moved);
  return absl::OkStatus();
}

absl::Status OpenChildFds(ChildFds* fds) {
  for (auto [r, w] : {std::pair{&fds->out_r, &fds->out_w}, std::pair{&fds->err_r, &fds->err_w},
                      std::pair{&fds->status_r, &fds->status_w}}) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
    }
    r->Reset(p[0]);
    w->Reset(p[1]);
  }
  // A daemonised agent may run with 0-2 closed, so a pipe could land there
  // and be clobbered by the child's dup2 onto stdio: keep every fd the
  // child uses at 3 or above.
  for (Fd* fd : {&fds->out_w, &fds->err_w, &fds->status_w}) {
    if (absl::Status s = LiftAboveStdio(fd); !s.ok()) return s;
  }
  fds->devnull.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (fds->devnull.get() < 0) {
    return absl::InternalError(absl::StrCat("open /dev/null: ", ErrnoText(errno)));
  }
  return LiftAboveStdio(&fds->devnull);
}

// The child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ExecChild(const ChildExec& exec, const ChildFds& fds) {
  // Own group first so a group kill can never miss us.
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
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM}) {
    ::sigaction(sig, &dfl, nullptr);
  }
  const int sfd = fds.status_w.get();
  if (::dup2(fds.devnull.get(), 0) < 0 || ::dup2(fds.out_w.get(), 1) < 0 ||
      ::dup2(fds.err_w.get(), 2) < 0) {
    ChildFail(sfd, 2);
  }
  if (exec.cwd != nullptr && ::chdir(exec.cwd) != 0) ChildFail(sfd, 1);
  // Nothing of the agent's (sockets, database connections) leaks into the
  // tool; the status pipe is close-on-exec and so closes on success.
  if (sfd > 3) ::close_range(3, static_cast<unsigned>(sfd) - 1, 0);
  ::close_range(static_cast<unsigned>(sfd) + 1, UINT_MAX, 0);
  ::execve(exec.exe.c_str(), exec.argv.data(), exec.envp.data());
  ChildFail(sfd, 3);
}

// Waits for the child's exec: OK once it ran (the status pipe closed on
// exec), else reaps the child and says which stage failed.
absl::Status AwaitExec(pid_t pid, const ChildExec& exec, const ProcessOptions& options,
                       const Fd& status_r) {
  ChildError child_error{};
  ssize_t n;
  do {
    n = ::read(status_r.get(), &child_error, sizeof child_error);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof child_error)) return absl::OkStatus();
  int ignored;
  ::waitpid(pid, &ignored, 0);
  const char* stage = child_error.stage == 1   ? "chdir to "
                      : child_error.stage == 2 ? "dup2 for "
                                               : "execve ";
  const std::string what = child_error.stage == 1 ? options.cwd : exec.exe;
  return absl::InternalError(absl::StrCat(stage, what, ": ", ErrnoText(child_error.err)));
}

// The parent's watch over a running child: its output, its end, and the
// signals a timeout or cancellation sends its group.
class ChildWatch {
 public:
  ChildWatch(pid_t pid, const ProcessOptions& options, absl::Time start)
      : pid_(pid),
        options_(options),
        deadline_(options.timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                              : start + options.timeout) {}

  // Until the child is reaped and both pipes are at EOF (or the drain
  // deadline after the child's end passed).
  void Run(const Fd& out_r, const Fd& err_r, ProcessResult* result) {
    ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
    bool out_open = true, err_open = true;
    while (out_open || err_open || !exited_) {
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
        out_open = ReadChunk(out_r.get(), &result->stdout_data, options_.max_stdout,
                             &result->stdout_truncated, &options_.on_stdout);
      }
      if (err_open) {
        err_open = ReadChunk(err_r.get(), &result->stderr_data, options_.max_stderr,
                             &result->stderr_truncated);
      }
      const absl::Time now = absl::Now();
      if (!exited_) {
        if (Reap(now, result)) continue;
        SignalIfDue(now, result);
      } else if (now >= drain_deadline_) {
        break;
      }
    }
  }

 private:
  // Whether the child ended; then its group's stragglers are killed and
  // its status is in *result.
  bool Reap(absl::Time now, ProcessResult* result) {
    // WNOWAIT: the zombie keeps its pid (= our group id) reserved until
    // the stragglers in the group are killed, so the kill cannot hit a
    // recycled group.
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != pid_) {
      return false;
    }
    ::kill(-pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    exited_ = true;
    if (WIFSIGNALED(status)) {
      result->signaled = true;
      result->term_signal = WTERMSIG(status);
    } else {
      result->exit_code = WEXITSTATUS(status);
    }
    // Pipes held by something that escaped the group (setsid) must not
    // hang us.
    drain_deadline_ = now + absl::Seconds(2);
    return true;
  }

  // SIGTERM to the group at the timeout or cancellation, SIGKILL
  // kill_grace later.
  void SignalIfDue(absl::Time now, ProcessResult* result) {
    if (!term_sent_) {
      if (now >= deadline_) {
        result->timed_out = true;
      } else if (options_.cancelled && options_.cancelled()) {
        result->cancelled = true;
      }
      if (result->timed_out || result->cancelled) {
        ::kill(-pid_, SIGTERM);
        term_sent_ = true;
        term_at_ = now;
      }
    } else if (!kill_sent_ && now - term_at_ >= options_.kill_grace) {
      ::kill(-pid_, SIGKILL);
      kill_sent_ = true;
    }
  }

  const pid_t pid_;
  const ProcessOptions& options_;
  const absl::Time deadline_;
  bool exited_ = false;
  bool term_sent_ = false, kill_sent_ = false;
  absl::Time term_at_;
  absl::Time drain_deadline_ = absl::InfiniteFuture();
};

}  // namespace

absl::StatusOr<ProcessResult> RunProcess(const ProcessOptions& options) {
  if (options.argv.empty()) {
    return absl::InvalidArgumentError("RunProcess: empty argv");
  }
  ChildExec exec;
  if (absl::Status s = PrepareExec(options, &exec); !s.ok()) return s;
  ChildFds fds;
  if (absl::Status s = OpenChildFds(&fds); !s.ok()) return s;

  const absl::Time start = absl::Now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", ErrnoText(errno)));
  }
  if (pid == 0) ExecChild(exec, fds);

  // Parent. Also set the group here: whichever runs first wins, and a kill
  // sent right after fork reaches the child's group either way.
  ::setpgid(pid, pid);
  fds.out_w.Reset();
  fds.err_w.Reset();
  fds.status_w.Reset();
  fds.devnull.Reset();
  if (absl::Status s = AwaitExec(pid, exec, options, fds.status_r); !s.ok()) return s;

  ProcessResult result;
  ChildWatch(pid, options, start).Run(fds.out_r, fds.err_r, &result);
  result.wall_time = absl::Now() - start;
  return result;
}

}  // namespace farm::process
