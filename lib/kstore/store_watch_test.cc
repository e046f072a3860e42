#include "lib/kstore/store_watch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace farm::kstore {
namespace {

namespace fs = std::filesystem;

class StoreWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "store-watch-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    store_ = root_ / "store";
    fs::create_directories(store_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A build directory `dir` (under root_, not yet in the store) of commit
  // `commit` with `release`.
  fs::path MakeBuild(const std::string& dir, const std::string& commit,
                     const std::string& release) {
    const fs::path d = root_ / dir;
    fs::create_directories(d);
    std::ofstream(d / "vmlinuz") << "image";
    KernelBuild b;
    b.commit = commit;
    b.release = release;
    b.arch = kArchX86;
    b.image = "vmlinuz";
    std::ofstream(d / kManifestName) << FormatManifest(b);
    return d;
  }

  std::string Releases(const StoreWatch::Snapshot& s) {
    if (!s.listing->ok()) return std::string(s.listing->status().message());
    std::string out;
    for (const KernelBuild& b : (*s.listing)->builds) absl::StrAppend(&out, b.release, " ");
    return out;
  }

  fs::path root_, store_;
};

// Long after every write: nothing is racy.
absl::Time Later() { return absl::Now() + absl::Hours(1); }

TEST_F(StoreWatchTest, ReadsTheStoreAgainOnlyWhenItChanged) {
  StoreWatch watch(store_.string(), Later);
  EXPECT_EQ(Releases(watch.Current()), "");
  EXPECT_EQ(Releases(watch.Current()), "");
  EXPECT_EQ(watch.reads(), 1u);

  // A build renamed in, as the builder and ImportDeb add one.
  fs::rename(MakeBuild("a", "c1", "6.1.0-ga"), store_ / "c1-x86_64");
  StoreWatch::Snapshot one = watch.Current();
  EXPECT_EQ(Releases(one), "6.1.0-ga ");
  EXPECT_EQ(watch.Current().generation, one.generation);
  EXPECT_EQ(watch.reads(), 2u);

  // Swapped in one step (the builder's RENAME_EXCHANGE over a rebuild).
  const fs::path rebuilt = MakeBuild("b", "c1", "6.1.0-gb");
  ASSERT_EQ(::renameat2(AT_FDCWD, rebuilt.c_str(), AT_FDCWD, (store_ / "c1-x86_64").c_str(),
                        RENAME_EXCHANGE),
            0);
  EXPECT_EQ(Releases(watch.Current()), "6.1.0-gb ");
  EXPECT_EQ(watch.reads(), 3u);

  // A manifest edited in place.
  KernelBuild edited;
  edited.commit = "c1";
  edited.release = "6.1.0-gcc";  // another size: the same clock tick may hold both writes
  edited.arch = kArchX86;
  edited.image = "vmlinuz";
  std::ofstream(store_ / "c1-x86_64" / kManifestName) << FormatManifest(edited);
  EXPECT_EQ(Releases(watch.Current()), "6.1.0-gcc ");

  // Work in progress (a dot directory) is no change; a removal is.
  fs::create_directories(store_ / ".kbuild-tmp");
  std::ofstream(store_ / ".kbuild-tmp" / "vmlinuz") << "half";
  const std::uint64_t before = watch.reads();
  watch.Current();
  EXPECT_EQ(watch.reads(), before + 1) << "the store directory's time moved";
  watch.Current();
  EXPECT_EQ(watch.reads(), before + 1);
  fs::remove_all(store_ / "c1-x86_64");
  EXPECT_EQ(Releases(watch.Current()), "");
}

TEST_F(StoreWatchTest, AFreshlyWrittenStoreIsReadAgainUntilItsTimesAreOld) {
  fs::rename(MakeBuild("a", "c1", "6.1.0-ga"), store_ / "c1-x86_64");
  absl::Time now = absl::Now();
  StoreWatch watch(store_.string(), [&now] { return now; });
  watch.Current();
  watch.Current();
  EXPECT_EQ(watch.reads(), 2u) << "written within the racy window: not trusted";
  now += StoreWatch::kRacyWindow + absl::Seconds(1);
  watch.Current();
  watch.Current();
  watch.Current();
  EXPECT_EQ(watch.reads(), 3u);
}

TEST_F(StoreWatchTest, AMissingStoreIsNotFoundUntilItAppears) {
  StoreWatch watch((root_ / "later").string(), Later);
  StoreWatch::Snapshot missing = watch.Current();
  EXPECT_EQ(missing.listing->status().code(), absl::StatusCode::kNotFound);
  watch.Current();
  EXPECT_EQ(watch.reads(), 1u);
  fs::create_directories(root_ / "later");
  EXPECT_TRUE(watch.Current().listing->ok());
}

}  // namespace
}  // namespace farm::kstore
