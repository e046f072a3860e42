#include "agent/health_check.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "health-probe-XXXXXX").string();
  return ::mkdtemp(tmpl.data()) == nullptr ? "" : tmpl;
}

TEST(ProbeWritableDirTest, AWritableDirPassesAndKeepsNoProbeFile) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  EXPECT_TRUE(ProbeWritableDir(dir).ok());
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(ProbeWritableDirTest, ADirThatCannotBeWrittenNamesThePathAndTheError) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  fs::remove_all(dir);
  const absl::Status st = ProbeWritableDir(dir);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("cannot write " + dir + "/.health-probe"));
  EXPECT_THAT(st.message(), HasSubstr("No such file or directory"));
}

TEST(AddWritableDirProbeTest, APassingProbeChecksAnUncheckedHost) {
  pb::AgentHealth health;
  AddWritableDirProbe("/var/lib/farm", absl::OkStatus(), &health);
  EXPECT_TRUE(health.checked());
  EXPECT_TRUE(health.ok());
  EXPECT_EQ(health.detail(), "state dir /var/lib/farm: ok");
  EXPECT_TRUE(health.has_checked_at());
}

TEST(AddWritableDirProbeTest, EitherFailureFailsTheCheck) {
  pb::AgentHealth jobs_ok;
  jobs_ok.set_checked(true);
  jobs_ok.set_ok(true);
  jobs_ok.set_detail("fio: ok, 1 samples");
  AddWritableDirProbe("/var/lib/farm", absl::DeadlineExceededError("the disk does not answer"),
                      &jobs_ok);
  EXPECT_FALSE(jobs_ok.ok());
  EXPECT_EQ(jobs_ok.detail(),
            "fio: ok, 1 samples; state dir /var/lib/farm: DEADLINE_EXCEEDED: the disk does not "
            "answer");

  pb::AgentHealth jobs_failed;
  jobs_failed.set_checked(true);
  jobs_failed.set_ok(false);
  jobs_failed.set_detail("fio: INTERNAL: Input/output error");
  AddWritableDirProbe("/var/lib/farm", absl::OkStatus(), &jobs_failed);
  EXPECT_FALSE(jobs_failed.ok());
  EXPECT_THAT(jobs_failed.detail(), HasSubstr("; state dir /var/lib/farm: ok"));
}

}  // namespace
}  // namespace farm::agent
