#include "lib/base/file.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace farm::base {
namespace {

namespace fs = std::filesystem;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "base-file-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(FileTest, WriteThenReadIsByteForByte) {
  const std::string bytes("a\r\nb\0c\n", 7);
  ASSERT_TRUE(WriteFile(Path("f"), bytes).ok());
  absl::StatusOr<std::string> back = ReadFile(Path("f"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, bytes);
  ASSERT_TRUE(WriteFile(Path("f"), "short").ok());  // truncates
  EXPECT_EQ(ReadFileOrEmpty(Path("f")), "short");
}

// What the agent asks before mounting debugfs or tracefs on a directory.
TEST_F(FileTest, OnlyAnExistingDirectoryWithNothingInItIsEmpty) {
  fs::create_directory(dir_ / "mnt");
  EXPECT_TRUE(IsEmptyDirectory(Path("mnt")));
  ASSERT_TRUE(WriteFile(Path("mnt/x"), "").ok());
  EXPECT_FALSE(IsEmptyDirectory(Path("mnt")));
  EXPECT_FALSE(IsEmptyDirectory(Path("mnt/x")));  // a file
  EXPECT_FALSE(IsEmptyDirectory(Path("missing")));
}

TEST_F(FileTest, MissingFileIsNotFoundNamingItOrEmpty) {
  absl::StatusOr<std::string> missing = ReadFile(Path("none"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "cannot read " + Path("none"));
  EXPECT_EQ(ReadFileOrEmpty(Path("none")), "");
}

TEST_F(FileTest, WriteIntoAMissingDirectoryIsInternal) {
  absl::Status st = WriteFile(Path("no/such/file"), "x");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(st.message(), "cannot write " + Path("no/such/file"));
  st = WriteFileAtomically(Path("no/such/file"), "x");
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_NE(st.message().find("cannot write " + Path("no/such/file") + ": "), std::string::npos)
      << st;
}

TEST_F(FileTest, AtomicWriteReplacesWholeAndLeavesNoTemporary) {
  ASSERT_TRUE(WriteFileAtomically(Path("state"), "old contents").ok());
  ASSERT_TRUE(WriteFileAtomically(Path("state"), "new").ok());
  EXPECT_EQ(ReadFileOrEmpty(Path("state")), "new");
  EXPECT_FALSE(fs::exists(Path("state.tmp")));
}

TEST_F(FileTest, AtomicWriteTakesTheModeBeforeTheUmask) {
  ASSERT_TRUE(WriteFileAtomically(Path("secret"), "s", 0600).ok());
  struct stat st;
  ASSERT_EQ(::stat(Path("secret").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace farm::base
