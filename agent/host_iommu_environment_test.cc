#include "agent/host_iommu_environment.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/base/fake_root_for_test.h"
#include "lib/base/sha256.h"

namespace farm::agent {
namespace {

using base::FakeRoot;

namespace pb = ::iommufarm::v1;

// A VT-d host: dmar0 with caching mode, its DMAR table, a BIOS, and an
// NVMe in group 7 whose config space shows ATS enabled.
void WriteVtdHost(FakeRoot& root, const std::string& group_type) {
  root.Write("sys/class/iommu/dmar0/intel-iommu/cap", "12008c22260286\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/ecap", "f00f5e\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/version", "1:0\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/domains_used", "3\n");
  root.Write("sys/firmware/acpi/tables/DMAR", "DMAR table bytes");
  root.Write("sys/class/dmi/id/bios_vendor", "SeaBIOS\n");
  root.Write("sys/class/dmi/id/bios_version", "1.16.2-debian-1.16.2-1\n");
  root.Write("sys/class/dmi/id/bios_date", "04/01/2014\n");
  root.Write("sys/kernel/iommu_groups/7/type", group_type + "\n");
  root.Link("sys/bus/pci/devices/0000:00:04.0/iommu_group", "../../../../kernel/iommu_groups/7");
  std::string config(4096, '\0');
  config[0x100] = 0x0f;                     // ATS, the only extended capability
  config[0x107] = static_cast<char>(0x80);  // control: enable
  root.Write("sys/bus/pci/devices/0000:00:04.0/config", config);
  root.Dir("sys/bus/pci/devices/0000:00:1f.0");  // no IOMMU group: not listed
}

TEST(HostIommuEnvironmentTest, ReadsAVtdHost) {
  FakeRoot root;
  WriteVtdHost(root, "DMA-FQ");
  const pb::IommuEnvironment env = DetectIommuEnvironment(root.path());
  EXPECT_EQ(env.facts().at("unit/dmar0/cap"), "12008c22260286");
  EXPECT_EQ(env.facts().at("unit/dmar0/ecap"), "f00f5e");
  EXPECT_EQ(env.facts().at("unit/dmar0/version"), "1:0");
  EXPECT_EQ(env.facts().at("unit/dmar0/caching_mode"), "1");
  EXPECT_FALSE(env.facts().contains("unit/dmar0/domains_used"));  // live state, not identity
  EXPECT_EQ(env.facts().at("acpi/DMAR/sha256"), base::Sha256Hex("DMAR table bytes"));
  EXPECT_FALSE(env.facts().contains("acpi/IORT/sha256"));
  EXPECT_EQ(env.facts().at("firmware/bios_vendor"), "SeaBIOS");
  EXPECT_EQ(env.facts().at("firmware/bios_date"), "04/01/2014");
  EXPECT_EQ(env.facts().at("device/0000:00:04.0/domain"), "DMA-FQ");
  EXPECT_EQ(env.facts().at("device/0000:00:04.0/ats"), "on");
  EXPECT_FALSE(env.facts().contains("device/0000:00:1f.0/domain"));
  EXPECT_TRUE(env.unavailable().empty());
  EXPECT_EQ(env.digest().size(), 64u);
}

TEST(HostIommuEnvironmentTest, ADomainTypeChangeChangesTheDigest) {
  FakeRoot a, b;
  WriteVtdHost(a, "DMA-FQ");
  WriteVtdHost(b, "identity");
  EXPECT_NE(DetectIommuEnvironment(a.path()).digest(), DetectIommuEnvironment(b.path()).digest());
  FakeRoot c;
  WriteVtdHost(c, "DMA-FQ");
  EXPECT_EQ(DetectIommuEnvironment(a.path()).digest(), DetectIommuEnvironment(c.path()).digest());
}

TEST(HostIommuEnvironmentTest, SmmuFeaturesComeFromTheKernelLog) {
  FakeRoot root;
  root.Link("sys/class/iommu/smmu3.0x0000000009050000/device",
            "../../../devices/platform/arm-smmu-v3.0.auto");
  root.Link("sys/devices/platform/arm-smmu-v3.0.auto/driver",
            "../../../bus/platform/drivers/arm-smmu-v3");
  root.Dir("sys/bus/platform/drivers/arm-smmu-v3");
  root.Link("sys/class/iommu/smmu3.0x0000000009060000/device",
            "../../../devices/platform/arm-smmu-v3.1.auto");
  root.Link("sys/devices/platform/arm-smmu-v3.1.auto/driver",
            "../../../bus/platform/drivers/arm-smmu-v3");
  root.Write("dev/kmsg",
             "6,312,401234,-;arm-smmu-v3 arm-smmu-v3.0.auto: option mask 0x0\n"
             "6,313,401240,-;arm-smmu-v3 arm-smmu-v3.0.auto: ias 48-bit, oas 48-bit "
             "(features 0x00001fef)\n SUBSYSTEM=platform\n");
  const pb::IommuEnvironment env = DetectIommuEnvironment(root.path());
  EXPECT_EQ(env.facts().at("unit/smmu3.0x0000000009050000/features"), "0x00001fef");
  EXPECT_EQ(env.facts().at("unit/smmu3.0x0000000009050000/oas"), "48");
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x0000000009050000/iidr"));
  // The second unit's line is not in the log (wrapped).
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x0000000009060000/features"));
  EXPECT_FALSE(env.facts().contains("unit/smmu3.0x0000000009060000/features"));
}

// An SMMUv3 host of boot `boot_id` whose kernel log still holds the unit's
// boot line, or (`wrapped`) no longer does.
void WriteSmmuHost(FakeRoot& root, const std::string& boot_id, bool wrapped) {
  root.Link("sys/class/iommu/smmu3.0x0000000009050000/device",
            "../../../devices/platform/arm-smmu-v3.0.auto");
  root.Link("sys/devices/platform/arm-smmu-v3.0.auto/driver",
            "../../../bus/platform/drivers/arm-smmu-v3");
  root.Write("proc/sys/kernel/random/boot_id", boot_id + "\n");
  root.Write("dev/kmsg", wrapped ? "6,90312,9401234,-;nvme nvme0: 8/0/0 default/read/poll queues\n"
                                 : "6,313,401240,-;arm-smmu-v3 arm-smmu-v3.0.auto: ias 48-bit, "
                                   "oas 48-bit (features 0x00001fef)\n");
}

TEST(HostIommuEnvironmentTest, TheRecordOfTheBootKeepsWhatTheWrappedLogLost) {
  FakeRoot root, state;
  const std::string record = state.path() + "/iommu-environment.kmsg";
  WriteSmmuHost(root, "5e1f0c1e-aaaa", false);
  const pb::IommuEnvironment start = DetectIommuEnvironment(root.path(), record);
  ASSERT_EQ(start.facts().at("unit/smmu3.0x0000000009050000/features"), "0x00001fef");

  // The agent restarts in the same boot after the log wrapped: same facts,
  // same digest, from the record.
  FakeRoot later;
  WriteSmmuHost(later, "5e1f0c1e-aaaa", true);
  const pb::IommuEnvironment restarted = DetectIommuEnvironment(later.path(), record);
  EXPECT_EQ(restarted.digest(), start.digest());
  EXPECT_FALSE(restarted.unavailable().contains("unit/smmu3.0x0000000009050000/features"));
  // Without the record the same log loses the features, and the digest.
  const pb::IommuEnvironment unkept = DetectIommuEnvironment(later.path());
  EXPECT_NE(unkept.digest(), start.digest());
  EXPECT_TRUE(unkept.unavailable().contains("unit/smmu3.0x0000000009050000/features"));

  // Another boot (maybe another kernel build) never takes this boot's record.
  FakeRoot next_boot;
  WriteSmmuHost(next_boot, "77d0b007-bbbb", true);
  const pb::IommuEnvironment other = DetectIommuEnvironment(next_boot.path(), record);
  EXPECT_FALSE(other.facts().contains("unit/smmu3.0x0000000009050000/features"));
  EXPECT_NE(other.unavailable()
                .at("unit/smmu3.0x0000000009050000/features")
                .find("nor in the agent's record of this boot"),
            std::string::npos);
}

TEST(HostIommuEnvironmentTest, AnUnwritableRecordOnlyCostsTheRecord) {
  FakeRoot root;
  WriteSmmuHost(root, "5e1f0c1e-aaaa", false);
  const pb::IommuEnvironment env =
      DetectIommuEnvironment(root.path(), root.path() + "/no/such/dir/record");
  EXPECT_EQ(env.facts().at("unit/smmu3.0x0000000009050000/features"), "0x00001fef");
  EXPECT_EQ(env.digest(), DetectIommuEnvironment(root.path()).digest());
}

TEST(HostIommuEnvironmentTest, NamesWhatItCouldNotRead) {
  FakeRoot root;
  root.Link("sys/class/iommu/smmu3.0x0000000009050000/device",
            "../../../devices/platform/arm-smmu-v3.0.auto");
  root.Link("sys/devices/platform/arm-smmu-v3.0.auto/driver",
            "../../../bus/platform/drivers/arm-smmu-v3");
  root.Write("sys/kernel/iommu_groups/1/type", "DMA\n");
  root.Link("sys/bus/pci/devices/0000:00:04.0/iommu_group", "../../../../kernel/iommu_groups/1");
  root.Write("sys/bus/pci/devices/0000:00:04.0/config", std::string(64, '\x86'));
  const pb::IommuEnvironment env = DetectIommuEnvironment(root.path());
  EXPECT_TRUE(env.unavailable().contains("device/*/ats"));
  EXPECT_TRUE(env.unavailable().contains("unit/smmu3.0x0000000009050000/features"));  // no log
  EXPECT_EQ(env.facts().at("device/0000:00:04.0/domain"), "DMA");
}

TEST(HostIommuEnvironmentTest, RefreshRereadsOnlyTheDevices) {
  FakeRoot root;
  WriteVtdHost(root, "DMA-FQ");
  const pb::IommuEnvironment start = DetectIommuEnvironment(root.path());
  root.Write("sys/class/iommu/dmar0/intel-iommu/cap", "0\n");  // fixed until reboot: kept
  root.Write("sys/kernel/iommu_groups/7/type", "identity\n");  // written under the agent
  const pb::IommuEnvironment now = RefreshIommuEnvironment(start, root.path());
  EXPECT_EQ(now.facts().at("unit/dmar0/cap"), "12008c22260286");
  EXPECT_EQ(now.facts().at("device/0000:00:04.0/domain"), "identity");
  EXPECT_NE(now.digest(), start.digest());
}

}  // namespace
}  // namespace farm::agent
