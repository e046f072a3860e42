#include "cli/git_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

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

TEST(GitFirstParentLogTest, RejectsBadRange) {
  EXPECT_FALSE(GitFirstParentLog("/tmp", "abc").ok());
  EXPECT_FALSE(GitFirstParentLog("/tmp", "a...b").ok());
  EXPECT_FALSE(GitFirstParentLog("/tmp", "--output=x..b").ok());
}

TEST(RunProgramTest, CapturesOutputAndExitStatus) {
  auto out = RunProgram({"printf", "%s;", "a b", "c"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "a b;c;");
  EXPECT_FALSE(RunProgram({"false"}).ok());
  EXPECT_EQ(RunProgram({"/nonexistent/program"}).status().code(), absl::StatusCode::kNotFound);
}

TEST(GitFirstParentLogTest, ReadsARealRepository) {
  if (RunProgram({"git", "--version"}).status().code() == absl::StatusCode::kNotFound) {
    GTEST_SKIP() << "git not installed";
  }
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("farm-git-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = dir.string();
  auto git = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {
        "git", "-C", d, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProgram(argv);
  };
  ASSERT_TRUE(git({"init", "-q"}).ok());
  for (const char* msg : {"base", "second; $(rm -rf /)", "third"}) {
    ASSERT_TRUE(git({"commit", "-q", "--allow-empty", "-m", msg}).ok());
  }
  ASSERT_TRUE(git({"tag", "base", "HEAD~2"}).ok());
  auto commits = GitFirstParentLog(d, "base..HEAD");
  ASSERT_TRUE(commits.ok()) << commits.status();
  ASSERT_EQ(commits->size(), 2u);
  EXPECT_EQ((*commits)[0].subject(), "second; $(rm -rf /)");
  EXPECT_EQ((*commits)[1].subject(), "third");
  EXPECT_EQ((*commits)[0].id().size(), 40u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace farm::cli
