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

namespace {

using iommufarm::v1::CatalogCommit;

// The commit each non-empty line of git's output stands for (`parse` of the
// line, a trailing CR removed, and its 1-based number), index = its
// position; the first line that does not parse is the error.
template <typename ParseLine>
absl::StatusOr<std::vector<CatalogCommit>> ParseLines(const std::string& output, ParseLine parse) {
  std::vector<CatalogCommit> commits;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    absl::StatusOr<CatalogCommit> commit = parse(line, line_no);
    if (!commit.ok()) return commit.status();
    commit->set_index(static_cast<int32_t>(commits.size()));
    commits.push_back(*std::move(commit));
  }
  return commits;
}

// A commit named by `sha`, which must be 7-64 lowercase hex digits.
absl::StatusOr<CatalogCommit> CommitOf(absl::string_view sha, int line_no) {
  if (sha.size() < 7 || sha.size() > 64 ||
      sha.find_first_not_of("0123456789abcdef") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("git log line ", line_no, ": '", sha, "' is not a commit hash"));
  }
  CatalogCommit commit;
  commit.set_id(std::string(sha));
  return commit;
}

}  // namespace

absl::StatusOr<std::vector<CatalogCommit>> ParseGitLog(const std::string& output) {
  return ParseLines(output,
                    [](absl::string_view line, int line_no) -> absl::StatusOr<CatalogCommit> {
                      const size_t tab = line.find('\t');
                      absl::StatusOr<CatalogCommit> commit = CommitOf(line.substr(0, tab), line_no);
                      if (commit.ok() && tab != absl::string_view::npos) {
                        commit->set_subject(std::string(line.substr(tab + 1)));
                      }
                      return commit;
                    });
}

absl::StatusOr<std::vector<CatalogCommit>> ParseGitGraphLog(const std::string& output) {
  return ParseLines(
      output, [](absl::string_view line, int line_no) -> absl::StatusOr<CatalogCommit> {
        const std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits('\t', 3));
        if (f.size() < 4) {
          return absl::InvalidArgumentError(
              absl::StrCat("git log line ", line_no,
                           ": expected '<sha><TAB><parents><TAB><author><TAB><subject>'"));
        }
        absl::StatusOr<CatalogCommit> commit = CommitOf(f[0], line_no);
        if (!commit.ok()) return commit;
        for (absl::string_view p : absl::StrSplit(f[1], ' ', absl::SkipEmpty()))
          commit->add_parents(std::string(p));
        commit->set_author(std::string(f[2]));
        commit->set_subject(std::string(f[3]));
        return commit;
      });
}

namespace {

// `rev` as a full commit id of `repo`; kInvalidArgument naming both when
// `repo` has no such commit.
absl::StatusOr<std::string> ResolveCommit(const std::string& repo, const std::string& rev) {
  absl::StatusOr<std::string> out = RunProgram({"git", "-C", repo, "rev-parse", "--verify",
                                                "--quiet", "--end-of-options", rev + "^{commit}"});
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--range: unknown commit ", rev, " in ", repo));
  }
  return std::string(absl::StripTrailingAsciiWhitespace(*out));
}

}  // namespace

absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> GitRangeLog(const std::string& repo,
                                                                      const std::string& range) {
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
  absl::StatusOr<std::string> git_dir = RunProgram({"git", "-C", repo, "rev-parse", "--git-dir"});
  if (!git_dir.ok()) {
    if (absl::IsNotFound(git_dir.status())) return git_dir.status();
    return absl::InvalidArgumentError(absl::StrCat("--repo ", repo, " is not a git repository"));
  }
  const std::string a = range.substr(0, dots), b = range.substr(dots + 2);
  absl::StatusOr<std::string> good = ResolveCommit(repo, a);
  if (!good.ok()) return good.status();
  absl::StatusOr<std::string> bad = ResolveCommit(repo, b);
  if (!bad.ok()) return bad.status();
  // Exit 1: not an ancestor. A bisect needs its good end in the bad end's
  // history; git's A..B would silently hold commits that are not after A.
  if (!RunProgram({"git", "-C", repo, "merge-base", "--is-ancestor", *good, *bad}).ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--range ", range, ": ", a,
                                                   " is not an ancestor of ", b,
                                                   " (the good end must be in the bad end's "
                                                   "history)"));
  }
  // Topological, oldest first: every commit after its parents, each side
  // branch's commits together.
  absl::StatusOr<std::string> out =
      RunProgram({"git", "-C", repo, "log", "--topo-order", "--reverse", kGitGraphLogFormat,
                  *good + ".." + *bad, "--"});
  if (!out.ok()) return out.status();
  absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> after = ParseGitGraphLog(*out);
  if (!after.ok()) return after.status();
  absl::StatusOr<std::string> start_line =
      RunProgram({"git", "-C", repo, "log", "-1", kGitGraphLogFormat, *good, "--"});
  if (!start_line.ok()) return start_line.status();
  absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> start = ParseGitGraphLog(*start_line);
  if (!start.ok()) return start.status();
  if (start->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("--range: ", a, " is not a commit"));
  }
  std::vector<iommufarm::v1::CatalogCommit> commits = {std::move(start->front())};
  for (iommufarm::v1::CatalogCommit& c : *after) {
    c.set_index(static_cast<int32_t>(commits.size()));
    commits.push_back(std::move(c));
  }
  return commits;
}

}  // namespace farm::cli
