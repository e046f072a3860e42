#include "lib/kbuild/build_progress.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/base/file.h"

namespace farm::kbuild {
namespace {

// make's output of a cold arm64 tinyconfig build of the test tree (`make
// -j2 Image`, build directory paths replaced by BUILD): 697 objects, 696 of
// them before the link (`AR vmlinux.a`, `LD vmlinux.o`, ...),
// init/version-timestamp.o during it.
std::string RealImageBuild() {
  absl::StatusOr<std::string> text =
      base::ReadFile(std::string(FARM_SOURCE_DIR) + "/lib/kbuild/testdata/make-image-arm64.txt");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

TEST(MakeOutputReaderTest, CountsTheObjectsOfARealBuildAndFollowsItsPhases) {
  const std::string log = RealImageBuild();
  const size_t link = log.find("  AR      vmlinux.a\n");
  ASSERT_NE(link, std::string::npos);
  MakeOutputReader before;
  before.Feed(log.substr(0, link));
  EXPECT_EQ(before.objects(), 696);
  EXPECT_EQ(before.phase(), BuildPhase::kCompile);
  MakeOutputReader all;
  all.Feed(log);
  EXPECT_EQ(all.objects(), 697);
  EXPECT_EQ(all.phase(), BuildPhase::kLink);
}

// Chunks as a pipe hands them over: lines cut anywhere read as whole lines.
TEST(MakeOutputReaderTest, ALineSplitAcrossChunksCountsOnce) {
  const std::string log = RealImageBuild();
  for (size_t chunk : {1, 7, 100, 4096}) {
    MakeOutputReader r;
    for (size_t i = 0; i < log.size(); i += chunk) r.Feed(absl::string_view(log).substr(i, chunk));
    EXPECT_EQ(r.objects(), 697) << chunk;
    EXPECT_EQ(r.phase(), BuildPhase::kLink) << chunk;
  }
}

// Which lines are objects: C and assembler objects, modules' too; not
// kbuild's generated assembly (.s), host tools, archives or a compiler's
// messages that happen to mention CC.
TEST(MakeOutputReaderTest, OnlyObjectLinesCount) {
  MakeOutputReader r;
  r.Feed(
      "  HOSTCC  scripts/basic/fixdep\n"
      "  CC      kernel/bounds.s\n"
      "  CC      arch/x86/kernel/asm-offsets.s\n"
      "  CC      init/main.o\n"
      "  AS      arch/x86/entry/entry_64.o\n"
      "  AR      init/built-in.a\n"
      "  CC [M]  drivers/iommu/intel/foo.o\n"
      "kernel/dma/mapping.c:12:3: warning: CC is not a thing\n"
      "make[3]: *** [scripts/Makefile.build:250: init/x.o] Error 1\n"
      "  CC      mm/page_alloc.o");  // no newline yet: not read
  EXPECT_EQ(r.objects(), 3);
  EXPECT_EQ(r.phase(), BuildPhase::kCompile);
  r.Feed("\n");
  EXPECT_EQ(r.objects(), 4);
}

// x86_64's link lines, then a module's: link, then modules; never back.
TEST(MakeOutputReaderTest, PhasesGoLinkThenModules) {
  MakeOutputReader r;
  r.Feed("  CC      init/main.o\n  LD      .tmp_vmlinux.kallsyms1\n");
  EXPECT_EQ(r.phase(), BuildPhase::kLink);
  r.Feed("  CC      init/version-timestamp.o\n  LD      vmlinux\n");
  EXPECT_EQ(r.phase(), BuildPhase::kLink);
  r.Feed("  BUILD   arch/x86/boot/bzImage\n  MODPOST Module.symvers\n");
  EXPECT_EQ(r.phase(), BuildPhase::kModules);
  r.Feed("  LD      vmlinux\n");
  EXPECT_EQ(r.phase(), BuildPhase::kModules);
  EXPECT_EQ(r.objects(), 2);
}

TEST(RemainingCompileTest, ScalesTheElapsedTimeByTheObjectsLeft) {
  EXPECT_EQ(RemainingCompile(100, 400, absl::Minutes(2)), absl::Minutes(6));
  EXPECT_EQ(RemainingCompile(300, 400, absl::Minutes(6)), absl::Minutes(2));
  EXPECT_LT(RemainingCompile(0, 400, absl::Minutes(1)), absl::ZeroDuration());
  EXPECT_LT(RemainingCompile(10, 0, absl::Minutes(1)), absl::ZeroDuration());
  EXPECT_LT(RemainingCompile(500, 400, absl::Minutes(1)), absl::ZeroDuration());
}

// Reports come on each phase change and otherwise at most once an interval.
TEST(ProgressReporterTest, ReportsOnPhaseChangesAndAtMostOnceAnInterval) {
  std::vector<BuildProgress> got;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ProgressReporter r([&](const BuildProgress& p) { got.push_back(p); }, t0, 400, absl::Seconds(15));
  r.Phase(BuildPhase::kConfig, t0);  // the phase it starts in: no report
  EXPECT_TRUE(got.empty());
  r.Phase(BuildPhase::kCompile, t0 + absl::Seconds(10));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].phase, BuildPhase::kCompile);
  EXPECT_EQ(got[0].elapsed, absl::Seconds(10));
  std::string hundred;
  for (int i = 0; i < 100; ++i) hundred += "  CC      a/b" + std::to_string(i) + ".o\n";
  r.MakeOutput(hundred, t0 + absl::Seconds(20));  // 10 s after the last: not due
  EXPECT_EQ(got.size(), 1u);
  r.MakeOutput("", t0 + absl::Seconds(70));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].objects, 100);
  EXPECT_EQ(got[1].expected_objects, 400);
  EXPECT_EQ(got[1].elapsed, absl::Seconds(70));
  EXPECT_EQ(got[1].remaining, absl::Minutes(3));                  // 100 in 60 s, 300 left
  r.MakeOutput("  LD      vmlinux.o\n", t0 + absl::Seconds(71));  // phase change: at once
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].phase, BuildPhase::kLink);
  EXPECT_LT(got[2].remaining, absl::ZeroDuration());
  r.Phase(BuildPhase::kStore, t0 + absl::Seconds(90));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3].phase, BuildPhase::kStore);
  EXPECT_EQ(r.objects(), 100);
}

}  // namespace
}  // namespace farm::kbuild
