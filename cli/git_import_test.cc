#include "cli/git_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"

namespace farm::cli {
namespace {

TEST(ParseGitLogTest, LinesBecomeCommitsInOrder) {
  auto commits = ParseGitLog(
      "65f746e8285f1234\tiommu/vt-d: one\nc588072bba6b\tiommu/vt-d: Convert "
      "intel iommu driver to the iommu ops\n\n");
  ASSERT_TRUE(commits.ok()) << commits.status();
  ASSERT_EQ(commits->size(), 2u);
  EXPECT_EQ((*commits)[0].id(), "65f746e8285f1234");
  EXPECT_EQ((*commits)[0].index(), 0);
  EXPECT_EQ((*commits)[1].subject(), "iommu/vt-d: Convert intel iommu driver to the iommu ops");
  EXPECT_EQ((*commits)[1].index(), 1);
}

TEST(ParseGitLogTest, RejectsNonHashNamingTheLine) {
  auto commits = ParseGitLog("abcdef0\tok\nfatal: bad revision\n");
  ASSERT_FALSE(commits.ok());
  EXPECT_NE(commits.status().message().find("line 2"), std::string::npos) << commits.status();
}

TEST(GitRangeLogTest, RejectsBadRange) {
  EXPECT_FALSE(GitRangeLog("/tmp", "abc").ok());
  EXPECT_FALSE(GitRangeLog("/tmp", "a...b").ok());
  EXPECT_FALSE(GitRangeLog("/tmp", "--output=x..b").ok());
}

TEST(RunProgramTest, CapturesOutputAndExitStatus) {
  auto out = RunProgram({"printf", "%s;", "a b", "c"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "a b;c;");
  EXPECT_FALSE(RunProgram({"false"}).ok());
  EXPECT_EQ(RunProgram({"/nonexistent/program"}).status().code(), absl::StatusCode::kNotFound);
}

// A throw-away git repository in a temp dir, removed at the end.
class TinyRepo {
 public:
  TinyRepo()
      : dir_(std::filesystem::temp_directory_path() /
             ("farm-git-test-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TinyRepo() { std::filesystem::remove_all(dir_); }
  std::string path() const { return dir_.string(); }
  absl::StatusOr<std::string> Git(std::vector<std::string> args) const {
    std::vector<std::string> argv = {"git", "-C", path()};
    for (const char* c : {"user.name=t", "user.email=t@t", "commit.gpgsign=false"}) {
      argv.insert(argv.end(), {"-c", c});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  }
  bool Commit(const std::string& msg) const {
    return Git({"commit", "-q", "--allow-empty", "-m", msg}).ok();
  }

 private:
  std::filesystem::path dir_;
};

bool HaveGit() {
  return RunProgram({"git", "--version"}).status().code() != absl::StatusCode::kNotFound;
}

std::vector<std::string> Subjects(const std::vector<iommufarm::v1::CatalogCommit>& commits) {
  std::vector<std::string> out;
  for (const auto& c : commits) out.push_back(c.subject());
  return out;
}

TEST(ParseGitGraphLogTest, FieldsAreSplitAtTheFirstThreeTabs) {
  auto commits = ParseGitGraphLog(
      "abcdef0\t\tA U Thor <a@example.org>\tfirst\n"
      "1234567\tabcdef0 89abcde\tB Tab <b@example.org>\tsubject\twith a tab\n");
  ASSERT_TRUE(commits.ok()) << commits.status();
  ASSERT_EQ(commits->size(), 2u);
  EXPECT_EQ((*commits)[0].parents_size(), 0);
  EXPECT_EQ((*commits)[0].author(), "A U Thor <a@example.org>");
  EXPECT_EQ((*commits)[1].parents_size(), 2);
  EXPECT_EQ((*commits)[1].author(), "B Tab <b@example.org>");
  EXPECT_EQ((*commits)[1].subject(), "subject\twith a tab");
  auto short_line = ParseGitGraphLog("abcdef0\t\tfirst\n");
  ASSERT_FALSE(short_line.ok());
  EXPECT_NE(short_line.status().message().find("line 1"), std::string::npos);
}

TEST(GitRangeLogTest, ARealRangeStartsWithItsGoodEnd) {
  if (!HaveGit()) GTEST_SKIP() << "git not installed";
  TinyRepo repo;
  ASSERT_TRUE(repo.Git({"init", "-q"}).ok());
  for (const char* msg : {"root", "base", "second; $(rm -rf /)", "third"}) {
    ASSERT_TRUE(repo.Commit(msg));
  }
  ASSERT_TRUE(repo.Git({"tag", "base", "HEAD~2"}).ok());
  auto commits = GitRangeLog(repo.path(), "base..HEAD");
  ASSERT_TRUE(commits.ok()) << commits.status();
  EXPECT_EQ(Subjects(*commits), (std::vector<std::string>{"base", "second; $(rm -rf /)", "third"}));
  for (int i = 0; i < static_cast<int>(commits->size()); ++i) {
    EXPECT_EQ((*commits)[i].index(), i);
    EXPECT_EQ((*commits)[i].id().size(), 40u);
    EXPECT_EQ((*commits)[i].author(), "t <t@t>");
  }
  auto same = GitRangeLog(repo.path(), "HEAD..HEAD");
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(Subjects(*same), std::vector<std::string>{"third"});
}

// A merged side branch is imported whole: its commits after the good end,
// in topological order, each naming its parents.
TEST(GitRangeLogTest, AMergedSideBranchComesWithItsParents) {
  if (!HaveGit()) GTEST_SKIP() << "git not installed";
  TinyRepo repo;
  ASSERT_TRUE(repo.Git({"init", "-q"}).ok());
  ASSERT_TRUE(repo.Commit("base"));
  ASSERT_TRUE(repo.Git({"checkout", "-q", "-b", "side"}).ok());
  ASSERT_TRUE(repo.Commit("on side"));
  ASSERT_TRUE(repo.Commit("on side 2"));
  ASSERT_TRUE(repo.Git({"checkout", "-q", "-"}).ok());
  ASSERT_TRUE(repo.Commit("trunk"));
  ASSERT_TRUE(repo.Git({"merge", "-q", "--no-ff", "-m", "merge side", "side"}).ok());
  auto commits = GitRangeLog(repo.path(), "HEAD~1~1..HEAD");
  ASSERT_TRUE(commits.ok()) << commits.status();
  ASSERT_EQ(commits->size(), 5u) << ::testing::PrintToString(Subjects(*commits));
  EXPECT_EQ(commits->front().subject(), "base");
  EXPECT_EQ(commits->back().subject(), "merge side");
  // Parents come first; the merge names trunk then the side branch's tip.
  std::map<std::string, int> at;
  for (const auto& c : *commits) at[c.id()] = c.index();
  for (const auto& c : *commits) {
    for (const std::string& p : c.parents()) {
      if (at.contains(p)) EXPECT_LT(at[p], c.index()) << c.subject();
    }
  }
  const auto& merge = commits->back();
  ASSERT_EQ(merge.parents_size(), 2);
  EXPECT_EQ((*commits)[at[merge.parents(0)]].subject(), "trunk");
  EXPECT_EQ((*commits)[at[merge.parents(1)]].subject(), "on side 2");
  // The side branch's good end may be the range's too: it is in HEAD's history.
  auto from_side = GitRangeLog(repo.path(), "side..HEAD");
  ASSERT_TRUE(from_side.ok()) << from_side.status();
  EXPECT_EQ(Subjects(*from_side), (std::vector<std::string>{"on side 2", "trunk", "merge side"}));
}

TEST(GitRangeLogTest, BadInputIsNamed) {
  if (!HaveGit()) GTEST_SKIP() << "git not installed";
  TinyRepo repo;
  ASSERT_TRUE(repo.Git({"init", "-q"}).ok());
  ASSERT_TRUE(repo.Commit("base"));
  ASSERT_TRUE(repo.Git({"checkout", "-q", "-b", "side"}).ok());
  ASSERT_TRUE(repo.Commit("on side"));
  ASSERT_TRUE(repo.Git({"checkout", "-q", "-"}).ok());
  ASSERT_TRUE(repo.Commit("trunk"));
  // Neither end is in the other's history.
  auto apart = GitRangeLog(repo.path(), "side..HEAD");
  ASSERT_FALSE(apart.ok());
  EXPECT_EQ(apart.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(apart.status().message(),
            "--range side..HEAD: side is not an ancestor of HEAD (the good end must be in the "
            "bad end's history)");
  auto unknown = GitRangeLog(repo.path(), "HEAD..no-such-branch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(),
            absl::StrCat("--range: unknown commit no-such-branch in ", repo.path()));
  auto outside = GitRangeLog("/proc/self", "a..b");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outside.status().message(), "--repo /proc/self is not a git repository");
}

}  // namespace
}  // namespace farm::cli
