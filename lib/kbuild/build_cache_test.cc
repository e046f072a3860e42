#include "lib/kbuild/build_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {
namespace {

namespace fs = std::filesystem;

process::ScopedTempDir TempDir() {
  absl::StatusOr<process::ScopedTempDir> d =
      process::ScopedTempDir::Create(fs::temp_directory_path(), "kbuild-cache-");
  EXPECT_TRUE(d.ok()) << d.status();
  return *std::move(d);
}

// A build directory of `bytes` used `age_s` seconds ago.
fs::path MakeBuildDir(const fs::path& root, const std::string& name, size_t bytes, int age_s) {
  const fs::path dir = root / name;
  fs::create_directories(dir / "obj");
  std::ofstream(dir / "obj/vmlinux") << std::string(bytes, 'x');
  TouchLastUse(dir.string());
  fs::last_write_time(dir / "last-use",
                      fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  return dir;
}

TEST(DirLock, OneHolderAtATime) {
  process::ScopedTempDir d = TempDir();
  const std::string path = (d.path() / "b.lock").string();
  absl::StatusOr<DirLock> first = DirLock::Acquire(path, absl::ZeroDuration());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<DirLock> second = DirLock::Acquire(path, absl::Milliseconds(150));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("held by another build"), std::string::npos);
  { DirLock gone = *std::move(first); }
  EXPECT_TRUE(DirLock::Acquire(path, absl::ZeroDuration()).ok());
}

TEST(EvictLeastRecentlyUsed, OldestFirstDownToTheBoundNeverLockedOrKept) {
  process::ScopedTempDir d = TempDir();
  const fs::path oldest = MakeBuildDir(d.path(), "a", 1000, 400);
  const fs::path old_locked = MakeBuildDir(d.path(), "b", 1000, 300);
  const fs::path old = MakeBuildDir(d.path(), "c", 1000, 200);
  const fs::path recent = MakeBuildDir(d.path(), "d", 1000, 100);
  const fs::path current = MakeBuildDir(d.path(), "e", 1000, 500);  // in use: kept
  absl::StatusOr<DirLock> held =
      DirLock::Acquire(old_locked.string() + ".lock", absl::ZeroDuration());
  ASSERT_TRUE(held.ok());
  Eviction e = EvictLeastRecentlyUsed(d.path().string(), 3200, current.string());
  EXPECT_EQ(e.removed, (std::vector<std::string>{oldest.string(), old.string()}));
  EXPECT_GE(e.bytes_before, 5000u);
  EXPECT_LE(e.bytes_after, 3200u);
  EXPECT_FALSE(fs::exists(oldest));
  EXPECT_TRUE(fs::exists(old_locked));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(current));
  // Under the bound: nothing goes.
  EXPECT_TRUE(EvictLeastRecentlyUsed(d.path().string(), 1 << 20, "").removed.empty());
}

TEST(DirectoryBytes, SumsRegularFiles) {
  process::ScopedTempDir d = TempDir();
  fs::create_directories(d.path() / "x/y");
  std::ofstream(d.path() / "x/a") << std::string(10, 'a');
  std::ofstream(d.path() / "x/y/b") << std::string(32, 'b');
  fs::create_symlink(d.path() / "x/a", d.path() / "x/link");
  EXPECT_EQ(DirectoryBytes((d.path() / "x").string()), 42u);
}

}  // namespace
}  // namespace farm::kbuild
