#include "cli/git_import.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace farm::cli {

absl::StatusOr<std::string> RunProgram(const std::vector<std::string>& argv) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execvp(cargv[0], cargv.data());
    // Only async-signal-safe calls between fork and exec/_exit.
    const char msg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::NotFoundError(absl::StrCat("could not run ", argv[0]));
  }
  return absl::UnknownError(absl::StrCat(argv[0], " failed (",
                                         WIFEXITED(status)
                                             ? absl::StrCat("exit status ", WEXITSTATUS(status))
                                             : absl::StrCat("signal ", WTERMSIG(status)),
                                         ")"));
}

absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> ParseGitLog(const std::string& output) {
  std::vector<iommufarm::v1::CatalogCommit> commits;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    size_t tab = line.find('\t');
    absl::string_view sha = line.substr(0, tab);
    if (sha.size() < 7 || sha.size() > 64 ||
        sha.find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("git log line ", line_no, ": '", sha, "' is not a commit hash"));
    }
    iommufarm::v1::CatalogCommit commit;
    commit.set_id(std::string(sha));
    if (tab != absl::string_view::npos) {
      commit.set_subject(std::string(line.substr(tab + 1)));
    }
    commit.set_index(static_cast<int32_t>(commits.size()));
    commits.push_back(std::move(commit));
  }
  return commits;
}

namespace {

// `git -C repo log -1 --format=<format> rev --`: one commit's line.
absl::StatusOr<std::string> GitShowOne(const std::string& repo, const std::string& format,
                                       const std::string& rev) {
  absl::StatusOr<std::string> out =
      RunProgram({"git", "-C", repo, "log", "-1", "--format=" + format, rev, "--"});
  if (!out.ok()) return out.status();
  return std::string(absl::StripTrailingAsciiWhitespace(*out));
}

// The good end A of A..B as a catalog commit, checked to lie on B's
// first-parent line: `after` is the first-parent log of A..B, whose oldest
// commit's first parent is A exactly when it does (an empty log: A is B).
absl::StatusOr<iommufarm::v1::CatalogCommit> RangeStart(
    const std::string& repo, const std::string& a, const std::string& b,
    const std::vector<iommufarm::v1::CatalogCommit>& after) {
  absl::StatusOr<std::string> line = GitShowOne(repo, "%H%x09%s", a);
  if (!line.ok()) return line.status();
  absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> start = ParseGitLog(*line);
  if (!start.ok()) return start.status();
  if (start->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--range: ", a, " is not a commit"));
  }
  absl::StatusOr<std::string> next_parents =
      after.empty() ? GitShowOne(repo, "%H", b) : GitShowOne(repo, "%P", after.front().id());
  if (!next_parents.ok()) return next_parents.status();
  const std::vector<absl::string_view> parents =
      absl::StrSplit(*next_parents, ' ', absl::SkipEmpty());
  if (parents.empty() || parents.front() != start->front().id()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--range ", a, "..", b, ": ", a, " is not on the first-parent line of ", b));
  }
  return start->front();
}

}  // namespace

absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> GitFirstParentLog(
    const std::string& repo, const std::string& range) {
  size_t dots = range.find("..");
  if (dots == std::string::npos || dots == 0 || dots + 2 >= range.size() ||
      range.find("...") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--range '", range, "' must have the form A..B"));
  }
  if (range[0] == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("--range '", range, "' must not start with '-'"));
  }
  absl::StatusOr<std::string> out = RunProgram(
      {"git", "-C", repo, "log", "--first-parent", "--reverse", "--format=%H%x09%s", range, "--"});
  if (!out.ok()) return out.status();
  absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> after = ParseGitLog(*out);
  if (!after.ok()) return after.status();
  absl::StatusOr<iommufarm::v1::CatalogCommit> start =
      RangeStart(repo, range.substr(0, dots), range.substr(dots + 2), *after);
  if (!start.ok()) return start.status();
  std::vector<iommufarm::v1::CatalogCommit> commits = {*std::move(start)};
  for (iommufarm::v1::CatalogCommit& c : *after) {
    c.set_index(static_cast<int32_t>(commits.size()));
    commits.push_back(std::move(c));
  }
  return commits;
}

}  // namespace farm::cli
