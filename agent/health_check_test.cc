#include "agent/health_check.h"

#include <unistd.h>

#include <array>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace farm::agent {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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

// A host in `mode` of `release` whose jobs use the devices given as
// {path, pci address, group, group type}.
pb::HostFacts HostWith(pb::IommuMode mode, const std::string& release,
                       std::vector<std::array<std::string, 4>> devices) {
  pb::HostFacts host;
  host.set_iommu_mode(mode);
  host.set_kernel_release(release);
  host.set_architecture("x86_64");
  for (const auto& [path, pci, group, type] : devices) {
    pb::InventoryDevice* d = host.mutable_inventory()->add_devices();
    d->set_path(path);
    d->set_block(fs::path(path).filename().string());
    d->set_pci_address(pci);
    d->set_iommu_group(group);
    d->set_group_type(type);
  }
  return host;
}

TEST(IommuGroupCheckTest, DevicesInTheHostsModePass) {
  pb::AgentHealth health;
  AddIommuGroupCheck(HostWith(pb::IOMMU_MODE_STRICT, "6.1.0-57-amd64",
                              {{"/dev/nvme0n1", "0000:00:04.0", "3", "DMA"},
                               {"/dev/nvme1n1", "0000:00:05.0", "4", "DMA"},
                               {"/srv/scratch", "", "", ""}}),
                     "intel_iommu=on iommu.strict=1", &health);
  EXPECT_TRUE(health.checked());
  EXPECT_TRUE(health.ok());
  EXPECT_EQ(health.detail(), "iommu groups: ok (2 devices in strict)");
}

TEST(IommuGroupCheckTest, ADeviceInAnotherModesGroupFailsTheHostAndIsNamed) {
  pb::AgentHealth health;
  health.set_checked(true);
  health.set_ok(true);
  health.set_detail("fio: ok, 1 samples");
  AddIommuGroupCheck(HostWith(pb::IOMMU_MODE_STRICT, "6.1.0-57-amd64",
                              {{"/dev/nvme0n1", "0000:00:04.0", "3", "DMA"},
                               {"/dev/nvme1n1", "0000:00:05.0", "7", "identity"}}),
                     "", &health);
  EXPECT_FALSE(health.ok());
  EXPECT_EQ(health.detail(),
            "fio: ok, 1 samples; iommu groups: /dev/nvme1n1 (nvme1n1 at 0000:00:05.0): IOMMU "
            "group 7 of type identity runs passthrough, the host strict");
}

TEST(IommuGroupCheckTest, EachWayADeviceCanMissTheHostsModeIsAMismatch) {
  // Lazy since v5.15 is DMA-FQ: a DMA group runs strict.
  EXPECT_THAT(IommuGroupMismatches(HostWith(pb::IOMMU_MODE_LAZY, "6.1.0-57-amd64",
                                            {{"/dev/nvme0n1", "0000:00:04.0", "3", "DMA"}}),
                                   ""),
              ElementsAre(HasSubstr("group 3 of type DMA runs strict, the host lazy")));
  // Untranslated on a translating host.
  EXPECT_THAT(IommuGroupMismatches(HostWith(pb::IOMMU_MODE_STRICT, "6.1.0-57-amd64",
                                            {{"/dev/nvme0n1", "0000:00:04.0", "", ""}}),
                                   ""),
              ElementsAre("/dev/nvme0n1 (nvme0n1 at 0000:00:04.0): in no IOMMU group, its DMA "
                          "untranslated, the host strict"));
  // Bound to VFIO: its group's domain is the user's, no mode of the kernel's.
  EXPECT_THAT(IommuGroupMismatches(HostWith(pb::IOMMU_MODE_STRICT, "6.1.0-57-amd64",
                                            {{"/dev/nvme0n1", "0000:00:04.0", "3", "unmanaged"}}),
                                   ""),
              ElementsAre(HasSubstr("type unmanaged runs no known mode, the host strict")));
  // A group on a host that runs with the IOMMU off.
  EXPECT_THAT(IommuGroupMismatches(HostWith(pb::IOMMU_MODE_OFF, "6.1.0-57-amd64",
                                            {{"/dev/nvme0n1", "0000:00:04.0", "3", "identity"}}),
                                   ""),
              ElementsAre(HasSubstr("runs passthrough, the host off")));
}

TEST(IommuGroupCheckTest, APreDmaFqKernelsDmaGroupIsTheCommandLinesStrictness) {
  // Before v5.15 lazy and strict groups both show "DMA".
  const pb::HostFacts lazy = HostWith(pb::IOMMU_MODE_LAZY, "5.10.0-28-amd64",
                                      {{"/dev/nvme0n1", "0000:00:04.0", "3", "DMA"}});
  EXPECT_THAT(IommuGroupMismatches(lazy, "intel_iommu=on"), IsEmpty());
  EXPECT_THAT(IommuGroupMismatches(lazy, "intel_iommu=on iommu.strict=1"),
              ElementsAre(HasSubstr("runs strict, the host lazy")));
  const pb::HostFacts strict = HostWith(pb::IOMMU_MODE_STRICT, "5.10.0-28-amd64",
                                        {{"/dev/nvme0n1", "0000:00:04.0", "3", "DMA"}});
  EXPECT_THAT(IommuGroupMismatches(strict, "intel_iommu=on iommu.strict=1"), IsEmpty());
}

TEST(IommuGroupCheckTest, NothingIsJudgedWithoutAHostModeOrADeviceOnPci) {
  pb::AgentHealth health;
  AddIommuGroupCheck(HostWith(pb::IOMMU_MODE_UNSPECIFIED, "6.1.0-57-amd64",
                              {{"/dev/nvme0n1", "0000:00:04.0", "3", "identity"}}),
                     "", &health);
  AddIommuGroupCheck(
      HostWith(pb::IOMMU_MODE_STRICT, "6.1.0-57-amd64", {{"/srv/scratch", "", "", ""}}), "",
      &health);
  // A group whose type file the kernel does not have says nothing.
  AddIommuGroupCheck(
      HostWith(pb::IOMMU_MODE_STRICT, "5.4.0-1-amd64", {{"/dev/nvme0n1", "0000:00:04.0", "3", ""}}),
      "", &health);
  EXPECT_FALSE(health.checked());
  EXPECT_EQ(health.detail(), "");
}

}  // namespace
}  // namespace farm::agent
