// Tool detection against the fio and iozone that install-deps installs.
#include "agent/runners/tools.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"

namespace farm::runners {
namespace {

TEST(Tools, DetectsInstalledFioAndIozone) {
  // install-deps installs both; the agent advertises them from these.
  auto fio = DetectFio();
  ASSERT_TRUE(fio.ok()) << fio.status();
  EXPECT_TRUE(absl::StartsWith(fio->version, "fio-")) << fio->version;
  EXPECT_EQ(fio->path.front(), '/');
  auto iozone = DetectIozone();
  ASSERT_TRUE(iozone.ok()) << iozone.status();
  double v = 0;
  EXPECT_TRUE(absl::SimpleAtod(iozone->version, &v)) << iozone->version;
  EXPECT_EQ(DetectFio("no-such-fio").status().code(), absl::StatusCode::kNotFound);
  // A binary that runs but prints no version is not advertised.
  EXPECT_EQ(DetectFio("true").status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace farm::runners
