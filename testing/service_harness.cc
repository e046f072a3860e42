// Shared pieces of the harness: ports, HTTP, process spawning, temp dirs and
// the cleanup records that let a later run kill what a killed test left.
#include "testing/service_harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/base/file.h"
#include "testing/harness_internal.h"

extern char** environ;

namespace farm::testing {

namespace fs = std::filesystem;

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    socklen_t len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
  }
  close(fd);
  return port;
}

std::string HarnessTempBase() {
  const char* env = std::getenv("FARM_TEST_TMPDIR");
  if (env != nullptr && *env != '\0') return env;
  return "/tmp";
}

// ------------------------------------------------------------------- HTTP

namespace {

void EnsureCurlInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t AppendBody(char* data, size_t size, size_t nmemb, void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

absl::StatusOr<HttpResponse> HttpRequest(const std::string& url, const std::string* post_body,
                                         const std::string& content_type, absl::Duration timeout) {
  EnsureCurlInit();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) return absl::InternalError("curl_easy_init failed");
  HttpResponse response;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // thread-safe timeouts, no SIGALRM
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // loopback services never go through a proxy
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  if (post_body != nullptr) {
    headers = curl_slist_append(headers, absl::StrCat("Content-Type: ", content_type).c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_body->size()));
  }
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(post_body ? "POST " : "GET ", url, ": ",
                                               error[0] ? error : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  char* ct = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != nullptr) {
    response.content_type = ct;
  }
  return response;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout) {
  return HttpRequest(url, nullptr, "", timeout);
}

absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& body,
                                      const std::string& content_type, absl::Duration timeout) {
  return HttpRequest(url, &body, content_type, timeout);
}

std::string UrlEncode(absl::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

absl::Status PollUntil(const std::function<absl::StatusOr<bool>()>& probe, absl::Duration timeout,
                       absl::string_view what, absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::OkStatus();
  while (true) {
    absl::StatusOr<bool> done = probe();
    if (done.ok() && *done) return absl::OkStatus();
    if (!done.ok()) last = done.status();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(interval);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("timed out after ", absl::FormatDuration(timeout), " waiting for ", what,
                   last.ok() ? "" : absl::StrCat(" (last error: ", last.ToString(), ")")));
}

// ---------------------------------------------------------------- internal

namespace internal {

absl::StatusOr<Credentials> LookupUser(const std::string& name) {
  passwd pw{};
  passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("user '", name, "' does not exist (install postgresql-15)"));
  }
  return Credentials{pw.pw_uid, pw.pw_gid, pw.pw_name, pw.pw_dir ? pw.pw_dir : "/"};
}

std::string CurrentUserName() {
  passwd pw{};
  passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(geteuid(), &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr) {
    return pw.pw_name;
  }
  const char* user = std::getenv("USER");
  return user != nullptr ? user : absl::StrCat(geteuid());
}

absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  if (access(spec.argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat(spec.argv[0], " is not executable: ", std::strerror(errno)));
  }
  // Everything the child needs is prepared here: between fork and exec only
  // async-signal-safe calls are allowed (the test process may have threads).
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  std::vector<std::string> env_storage;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    if (spec.run_as && (absl::StartsWith(kv, "HOME=") || absl::StartsWith(kv, "USER=") ||
                        absl::StartsWith(kv, "LOGNAME="))) {
      continue;
    }
    env_storage.emplace_back(kv);
  }
  if (spec.run_as) {
    env_storage.push_back("HOME=" + spec.run_as->home);
    env_storage.push_back("USER=" + spec.run_as->name);
    env_storage.push_back("LOGNAME=" + spec.run_as->name);
  }
  std::vector<char*> envp;
  for (std::string& kv : env_storage) envp.push_back(kv.data());
  envp.push_back(nullptr);

  int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("open ", spec.log_path, ": ", std::strerror(errno)));
  }
  if (spec.run_as) (void)fchown(log_fd, spec.run_as->uid, spec.run_as->gid);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const char* cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  const bool drop = spec.run_as.has_value();
  const uid_t uid = drop ? spec.run_as->uid : 0;
  const gid_t gid = drop ? spec.run_as->gid : 0;

  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(log_fd);
    if (null_fd >= 0) close(null_fd);
    close(err_pipe[0]);
    close(err_pipe[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(e)));
  }
  if (pid == 0) {
    auto fail = [&](int what) {
      int e = errno;
      int msg[2] = {what, e};
      (void)!write(err_pipe[1], msg, sizeof(msg));
      _exit(127);
    };
    setpgid(0, 0);  // own group: terminal signals do not reach it, we can kill the group
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    // Close everything else (listening sockets of the test, e.g. an exposer)
    // so the server does not keep them alive; keep only the error pipe.
    if (err_pipe[1] > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(err_pipe[1] - 1), 0u);
    syscall(SYS_close_range, static_cast<unsigned>(err_pipe[1] + 1), ~0u, 0u);
    if (drop) {
      if (setgroups(1, &gid) != 0) fail(1);
      if (setgid(gid) != 0) fail(2);
      if (setuid(uid) != 0) fail(3);
    }
    // After the credential change, which clears the parent-death signal.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(4);
    if (getppid() != parent) _exit(126);  // parent died before prctl took effect
    if (cwd != nullptr && chdir(cwd) != 0) fail(5);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    fail(6);
  }
  close(log_fd);
  if (null_fd >= 0) close(null_fd);
  close(err_pipe[1]);
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = read(err_pipe[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n > 0) {
    int status = 0;
    waitpid(pid, &status, 0);
    static const char* const kStep[] = {"?",     "setgroups", "setgid", "setuid",
                                        "prctl", "chdir",     "execve"};
    const char* step = (msg[0] >= 1 && msg[0] <= 6) ? kStep[msg[0]] : "?";
    return absl::InternalError(absl::StrCat("starting ", spec.argv[0], ": ", step,
                                            " failed: ", std::strerror(msg[1]),
                                            cwd ? absl::StrCat(" (cwd ", spec.cwd, ")") : ""));
  }
  return pid;
}

bool Reaped(pid_t pid, int* wait_status) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid || (r < 0 && errno == ECHILD)) {
    if (wait_status != nullptr) *wait_status = (r == pid) ? status : 0;
    return true;
  }
  return false;
}

absl::StatusOr<int> WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (!Reaped(pid, &status)) {
    if (absl::Now() >= deadline) {
      (void)Terminate(pid, SIGKILL, absl::Seconds(5));
      return absl::DeadlineExceededError(absl::StrCat("process ", pid, " still running after ",
                                                      absl::FormatDuration(timeout), "; killed"));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return status;
}

absl::StatusOr<int> Terminate(pid_t pid, int sig, absl::Duration grace) {
  if (pid <= 0) return absl::InvalidArgumentError("Terminate: no process");
  int status = 0;
  if (Reaped(pid, &status)) {
    kill(-pid, SIGKILL);  // stragglers in its group, if any
    return status;
  }
  kill(pid, sig);
  const absl::Time deadline = absl::Now() + grace;
  while (absl::Now() < deadline) {
    if (Reaped(pid, &status)) {
      kill(-pid, SIGKILL);
      return status;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (true) {
    pid_t r = waitpid(pid, &status, 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
  }
  return absl::DeadlineExceededError(absl::StrCat("process ", pid, " ignored signal ", sig, " for ",
                                                  absl::FormatDuration(grace),
                                                  "; killed with SIGKILL"));
}

std::string DescribeWaitStatus(int s) {
  if (WIFEXITED(s)) return absl::StrCat("exited with status ", WEXITSTATUS(s));
  if (WIFSIGNALED(s)) return absl::StrCat("killed by signal ", WTERMSIG(s));
  return absl::StrCat("wait status ", s);
}

std::optional<uint64_t> ProcessStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // comm (field 2) may contain spaces and parens; fields resume after the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(line).substr(close + 2), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); starttime is field 22.
  uint64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) return std::nullopt;
  if (fields[0] == "Z" || fields[0] == "X") return std::nullopt;  // dead, awaiting reaping
  return start;
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string ReadTail(const std::string& path, size_t max_bytes, uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  uint64_t size = FileSize(path);
  uint64_t from = offset;
  if (size > from + max_bytes) from = size - max_bytes;
  in.seekg(static_cast<std::streamoff>(from));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

constexpr char kRecordName[] = "harness.record";
constexpr char kDirPrefix[] = "farm-harness-";

std::map<std::string, std::string> ReadRecord(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

int64_t RecordInt(const std::map<std::string, std::string>& rec, const std::string& key) {
  auto it = rec.find(key);
  int64_t v = 0;
  if (it == rec.end() || !absl::SimpleAtoi(it->second, &v)) return 0;
  return v;
}

// Alive and the same process as recorded (not a recycled pid).
bool SameProcessAlive(int64_t pid, int64_t start) {
  if (pid <= 0) return false;
  std::optional<uint64_t> now = ProcessStartTime(static_cast<pid_t>(pid));
  return now.has_value() && static_cast<int64_t>(*now) == start;
}

// A postmaster killed by SIGKILL leaves its small SysV segment behind; free
// it once nobody is attached (postmaster.pid line 7: "key shmid").
void ReleasePostgresShm(const fs::path& dir) {
  std::ifstream in(dir / "data" / "postmaster.pid");
  std::string line;
  for (int i = 0; i < 7 && std::getline(in, line); ++i) {
    if (i != 6) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int shmid = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &shmid) && shmid > 0) {
      shmid_ds ds{};
      if (shmctl(shmid, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0) {
        shmctl(shmid, IPC_RMID, nullptr);
      }
    }
  }
}

}  // namespace

absl::Status WriteRecord(const std::string& dir, absl::string_view kind, pid_t server_pid) {
  std::optional<uint64_t> self_start = ProcessStartTime(getpid());
  std::optional<uint64_t> server_start = ProcessStartTime(server_pid);
  return base::WriteFileAtomically(absl::StrCat(dir, "/", kRecordName),
                                   absl::StrCat("kind=", kind, "\nowner_pid=", getpid(),
                                                "\nowner_start=", self_start.value_or(0),
                                                "\nserver_pid=", server_pid > 0 ? server_pid : 0,
                                                "\nserver_start=", server_start.value_or(0), "\n"));
}

int SweepStaleDirs(const std::string& base) {
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path dir = it->path();
    if (!absl::StartsWith(dir.filename().string(), kDirPrefix)) continue;
    std::error_code sec;
    if (!fs::is_directory(dir, sec)) continue;
    const fs::path record_path = dir / kRecordName;
    if (!fs::exists(record_path, sec)) {
      // Either being created right now or left by a crash before the record
      // was written; only old ones are garbage.
      auto mtime = fs::last_write_time(dir, sec);
      if (sec || fs::file_time_type::clock::now() - mtime < std::chrono::hours(1)) continue;
    } else {
      auto rec = ReadRecord(record_path);
      if (SameProcessAlive(RecordInt(rec, "owner_pid"), RecordInt(rec, "owner_start"))) continue;
      const int64_t server = RecordInt(rec, "server_pid");
      const int64_t server_start = RecordInt(rec, "server_start");
      if (SameProcessAlive(server, server_start)) {
        const bool pg = rec["kind"] == "postgres";
        // SIGQUIT is postgres' immediate shutdown: it also takes the backends down.
        kill(static_cast<pid_t>(server), pg ? SIGQUIT : SIGKILL);
        for (int i = 0; i < 500 && SameProcessAlive(server, server_start); ++i) {
          absl::SleepFor(absl::Milliseconds(10));
        }
        if (SameProcessAlive(server, server_start)) {
          kill(-static_cast<pid_t>(server), SIGKILL);
          kill(static_cast<pid_t>(server), SIGKILL);
        }
      }
      if (rec["kind"] == "postgres") ReleasePostgresShm(dir);
    }
    fs::remove_all(dir, sec);
    if (!sec) ++removed;
  }
  return removed;
}

absl::StatusOr<std::string> MakeInstanceDir(absl::string_view kind,
                                            const std::optional<Credentials>& owner) {
  const std::string base = HarnessTempBase();
  std::error_code ec;
  fs::create_directories(base, ec);
  SweepStaleDirs(base);
  std::string templ = absl::StrCat(base, "/", kDirPrefix, kind, "-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", templ, ": ", std::strerror(errno),
                                            " (set FARM_TEST_TMPDIR to a writable directory)"));
  }
  if (owner && chown(templ.c_str(), owner->uid, owner->gid) != 0) {
    int e = errno;
    RemoveInstanceDir(templ);
    return absl::InternalError(
        absl::StrCat("chown ", templ, " to ", owner->name, ": ", std::strerror(e)));
  }
  if (absl::Status s = WriteRecord(templ, kind, 0); !s.ok()) {
    RemoveInstanceDir(templ);
    return s;
  }
  return templ;
}

void RemoveInstanceDir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

bool LogSaysAddressInUse(const std::string& log_path, uint64_t offset) {
  std::string tail = ReadTail(log_path, 1 << 16, offset);
  return tail.find("ddress already in use") != std::string::npos;
}

absl::Status WaitHttpReady(pid_t pid, const std::string& url, absl::Duration timeout,
                           const std::string& log_path, absl::string_view what, int ready_status) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last;
  while (true) {
    int status = 0;
    if (Reaped(pid, &status)) {
      return absl::UnavailableError(absl::StrCat(what, " ", DescribeWaitStatus(status),
                                                 " before it was ready; log tail:\n",
                                                 ReadTail(log_path, 3000)));
    }
    absl::StatusOr<HttpResponse> r = HttpGet(url, absl::Seconds(2));
    if (r.ok() && r->status == ready_status) return absl::OkStatus();
    last = r.ok() ? absl::StrCat("HTTP ", r->status, " ", r->body) : r.status().ToString();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(what, " not ready at ", url, " after ",
                                                  absl::FormatDuration(timeout), " (last: ", last,
                                                  "); log tail:\n", ReadTail(log_path, 3000)));
}

}  // namespace internal
}  // namespace farm::testing
