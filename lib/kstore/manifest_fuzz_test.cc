// Property tests of the kernel store's manifest reader (ParseManifest) over
// mutated kernel.yaml files: any text gets an answer naming the file, never
// a crash or a hang; a manifest that reads keeps its paths inside the build
// directory and reads back the same from FormatManifest. testing/fuzz.h says
// how to run longer.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lib/kstore/kernel_store.h"
#include "lib/kstore/manifest_testdata.h"
#include "testing/fuzz.h"

namespace farm::kstore {
namespace {

using ::farm::kstore::testdata::kGood;

using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

constexpr char kBuilt[] =
    "commit: 9257b4a206fc\n"
    "release: 6.8.0-farm+\n"
    "arch: x86_64\n"
    "image: arch/x86/boot/bzImage\n"
    "initrd: initrd.img\n"
    "modules: modules\n"
    "source: linux-image-6.1.0-57-cloud-arm64_6.1.192-3_arm64.deb\n"
    "tree: https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git\n"
    "config_hash: 3f2a\n"
    "fragments: [q35-intel-iommu.config, debug.config]\n"
    "compiler: \"gcc (Debian 12.2.0-14) 12.2.0\"\n"
    "build_seconds: 43.2\n"
    "dma_map_benchmark: dma_map_benchmark\n";

// A path of the manifest stays inside the build directory.
bool Inside(const std::string& path) {
  return path.empty() || (path[0] != '/' && path != ".." && !absl::StartsWith(path, "../") &&
                          !absl::StrContains(path, "/../") && !absl::EndsWith(path, "/.."));
}

void ManifestProperties(const std::string& text) {
  absl::StatusOr<KernelBuild> b = ParseManifest(text, "store/x/kernel.yaml");
  if (!b.ok()) {
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
    EXPECT_TRUE(absl::StartsWith(b.status().message(), "store/x/kernel.yaml")) << b.status();
    EXPECT_LE(b.status().message().size(), 1024 + text.size()) << b.status();
    return;
  }
  EXPECT_TRUE(IsPlainName(b->commit)) << b->commit;
  EXPECT_TRUE(IsPlainName(b->release)) << b->release;
  EXPECT_TRUE(b->arch == kArchX86 || b->arch == kArchArm64) << b->arch;
  for (const std::string* p :
       {&b->image, &b->initrd, &b->config, &b->modules, &b->dma_map_benchmark}) {
    EXPECT_TRUE(Inside(*p)) << *p;
  }
  const std::string again_text = FormatManifest(*b);
  absl::StatusOr<KernelBuild> again = ParseManifest(again_text, "again");
  ASSERT_TRUE(again.ok()) << again.status() << "\nwritten as:\n" << again_text;
  EXPECT_EQ(FormatManifest(*again), again_text);
  EXPECT_EQ(again->commit, b->commit);
  EXPECT_EQ(again->release, b->release);
  EXPECT_EQ(again->image, b->image);
  EXPECT_EQ(again->version, b->version);
  EXPECT_EQ(again->source, b->source);
  EXPECT_EQ(again->compiler, b->compiler);
  EXPECT_EQ(again->fragments, b->fragments);
  EXPECT_EQ(again->build_seconds, b->build_seconds);
}

// A value of bytes that are not UTF-8 (a Latin-1 compiler name) was read
// as is and written back replaced.
TEST(ManifestFuzzTest, TextThatIsNotUtf8IsRefused) {
  absl::StatusOr<KernelBuild> b =
      ParseManifest(std::string(kGood) + "compiler: gcc (\xe9dition)\n", "m");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  ManifestProperties(std::string(kGood) + "compiler: gcc (\xe9dition)\n");
}

TEST(ManifestFuzzTest, MutatedManifestsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(5000);
  Mutator m(config.seed, {kGood, kBuilt},
            {"commit: ",
             "release: ",
             "arch: ",
             "image: ",
             "initrd: ",
             "config: ",
             "modules: ",
             "version: ",
             "source: ",
             "tree: ",
             "fragments: ",
             "compiler: ",
             "build_seconds: ",
             "dma_map_benchmark: ",
             "x86_64",
             "aarch64",
             "../",
             "/etc/passwd",
             "a/../../b",
             "'",
             ": |\n  "});
  RunFuzz(
      config, [&] { return m.Next(); }, ManifestProperties);
}

}  // namespace
}  // namespace farm::kstore
