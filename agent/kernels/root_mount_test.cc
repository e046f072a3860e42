#include "agent/kernels/root_mount.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/kstore/kernel_store.h"
#include "proto/failure_marks.h"

namespace farm::kernels {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::FieldsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class RootMountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "root-mount-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
  }
  void TearDown() override { fs::remove_all(root_); }

  void Write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  // `link` -> `target`, both under the root; the link relative, as sysfs's.
  void Link(const fs::path& link, const fs::path& target) {
    fs::create_directories((root_ / link).parent_path());
    fs::create_directories(root_ / target);
    fs::create_directory_symlink(fs::relative(root_ / target, (root_ / link).parent_path()),
                                 root_ / link);
  }

  // An NVMe disk with a partition, as sysfs lays it out: the class link to
  // the disk under the controller under the PCI function, nvme's driver
  // bound to the function.
  void NvmeHost() {
    const fs::path pci = "sys/devices/pci0000:00/0000:00:01.0";
    const fs::path disk = pci / "nvme/nvme0/nvme0n1";
    fs::create_directories(root_ / disk / "nvme0n1p2");
    Write(disk / "nvme0n1p2/partition", "2\n");
    Link("sys/class/block/nvme0n1", disk);
    Link("sys/class/block/nvme0n1p2", disk / "nvme0n1p2");
    Link(disk / "device", pci / "nvme/nvme0");
    Link(pci / "driver", "sys/bus/pci/drivers/nvme");
  }

  fs::path root_;
};

TEST_F(RootMountTest, AnNvmeRootNeedsItsDriverAndItsFileSystem) {
  NvmeHost();
  Write("proc/self/mounts",
        "rootfs / rootfs rw 0 0\n/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n"
        "proc /proc proc rw 0 0\n");
  EXPECT_THAT(
      ReadRootNeeds(root_.string()),
      ElementsAre(FieldsAre("CONFIG_BLK_DEV_NVME", "the root /dev/nvme0n1p2 is on driver nvme"),
                  FieldsAre("CONFIG_EXT4_FS", "the root is ext4")));
}

TEST_F(RootMountTest, ARootItCannotPlaceNeedsNothingButItsFileSystem) {
  // An overlay or a device sysfs does not show: nothing of the device.
  Write("proc/self/mounts", "overlay / overlay rw 0 0\n");
  EXPECT_THAT(ReadRootNeeds(root_.string()), IsEmpty());
  Write("proc/self/mounts", "/dev/mapper/vg-root / xfs rw 0 0\n");
  EXPECT_THAT(ReadRootNeeds(root_.string()),
              ElementsAre(FieldsAre("CONFIG_XFS_FS", "the root is xfs")));
}

class CheckMountsRootTest : public RootMountTest {
 protected:
  kstore::KernelBuild Build(const std::string& config, const std::string& initrd = "") {
    Write("store/b/config", config);
    kstore::KernelBuild b;
    b.commit = "c0ffee";
    b.release = "6.1.192-gc0ffee";
    b.config = "config";
    b.initrd = initrd;
    b.dir = (root_ / "store/b").string();
    return b;
  }
  const std::vector<RootNeed> needs_ = {
      {"CONFIG_BLK_DEV_NVME", "the root /dev/nvme0n1 is on driver nvme"},
      {"CONFIG_EXT4_FS", "the root is ext4"}};
};

TEST_F(CheckMountsRootTest, EveryNeedBuiltInPasses) {
  EXPECT_TRUE(CheckMountsRoot(Build("CONFIG_BLK_DEV_NVME=y\nCONFIG_EXT4_FS=y\n"), needs_).ok());
}

TEST_F(CheckMountsRootTest, AModuleOrAnOptionLeftOutIsNamedWithItsReason) {
  const absl::Status st =
      CheckMountsRoot(Build("CONFIG_BLK_DEV_NVME=m\n# CONFIG_EXT4_FS is not set\n"), needs_);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("CONFIG_BLK_DEV_NVME=m (the root /dev/nvme0n1 is on "
                                      "driver nvme), CONFIG_EXT4_FS=(not set) (the root is "
                                      "ext4)"));
  const std::string message(st.message());
  EXPECT_EQ(proto::UnmeasurableMark(message), proto::kDoesNotBootMark);
}

TEST_F(CheckMountsRootTest, AnInitramfsOrAMissingConfigIsNotJudged) {
  EXPECT_TRUE(CheckMountsRoot(Build("CONFIG_BLK_DEV_NVME=m\n", "initrd.img"), needs_).ok());
  kstore::KernelBuild no_config = Build("");
  no_config.config = "";
  EXPECT_TRUE(CheckMountsRoot(no_config, needs_).ok());
  EXPECT_TRUE(CheckMountsRoot(Build("CONFIG_BLK_DEV_NVME=m\n"), {}).ok());
}

}  // namespace
}  // namespace farm::kernels
