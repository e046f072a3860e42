#include "agent/inventory.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <map>

#include "absl/strings/str_cat.h"
#include "lib/base/fake_root_for_test.h"

namespace farm::agent {
namespace {

using base::FakeRoot;

namespace pb = ::iommufarm::v1;

// A two-socket VT-d host with one NVMe behind dmar1, shaped as sysfs is.
void WriteVtdHost(FakeRoot& root) {
  root.Write("proc/cpuinfo",
             "processor\t: 0\nvendor_id\t: GenuineIntel\n"
             "model name\t: Intel(R) Xeon(R) Platinum 8480+\n\nprocessor\t: 1\n"
             "model name\t: Intel(R) Xeon(R) Platinum 8480+\n");
  root.Write("proc/meminfo", "MemTotal:       527968112 kB\nMemFree:        1 kB\n");
  root.Write("sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
  root.Write("sys/devices/system/cpu/cpu1/topology/physical_package_id", "1\n");
  root.Write("sys/devices/system/cpu/cpu2/topology/physical_package_id", "1\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/cap", "d2008c40660462\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/ecap", "f050da\n");
  root.Write("sys/class/iommu/dmar0/intel-iommu/version", "1:0\n");
  root.Dir("sys/class/iommu/dmar0/devices");
  root.Write("sys/class/iommu/dmar1/intel-iommu/cap", "d2008c40660462\n");
  root.Link("sys/class/iommu/dmar1/devices/0000:17:00.0",
            "../../../../bus/pci/devices/0000:17:00.0");
  const std::string nvme = "sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0";
  root.Dir(nvme + "/nvme/nvme0/nvme0n1/nvme0n1p1");
  root.Write(nvme + "/nvme/nvme0/nvme0n1/nvme0n1p1/partition", "1\n");
  root.Write(nvme + "/nvme/nvme0/model", "SAMSUNG MZQL2960HCJR-00A07\n");
  root.Link(nvme + "/nvme/nvme0/nvme0n1/device", "../../nvme0");
  root.Link("sys/class/block/nvme0n1",
            "../../devices/pci0000:16/0000:16:02.0/0000:17:00.0/nvme/nvme0/nvme0n1");
  root.Link("sys/class/block/nvme0n1p1",
            "../../devices/pci0000:16/0000:16:02.0/0000:17:00.0/nvme/nvme0/nvme0n1/nvme0n1p1");
  root.Link("sys/bus/pci/devices/0000:17:00.0",
            "../../../devices/pci0000:16/0000:16:02.0/0000:17:00.0");
  root.Link(nvme + "/driver", "../../../../bus/pci/drivers/nvme");
  root.Dir("sys/bus/pci/drivers/nvme");
  root.Link(nvme + "/iommu_group", "../../../../kernel/iommu_groups/23");
  root.Write("sys/kernel/iommu_groups/23/type", "DMA-FQ\n");
}

TEST(DetectInventoryTest, ReadsCpusMemoryIommuUnitsAndTheDevicesJobsMayUse) {
  FakeRoot root;
  WriteVtdHost(root);
  pb::Inventory inv = DetectInventory({.allow_devices = {"/dev/nvme0n1p1"}}, root.path());
  EXPECT_EQ(inv.cpu_model(), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(inv.sockets(), 2u);
  EXPECT_EQ(inv.memory_kib(), 527968112u);
  ASSERT_EQ(inv.iommus_size(), 2);
  EXPECT_EQ(inv.iommus(0).name(), "dmar0");
  EXPECT_EQ(inv.iommus(0).attributes().at("intel-iommu/ecap"), "f050da");
  EXPECT_EQ(inv.iommus(0).attributes().at("intel-iommu/version"), "1:0");
  EXPECT_EQ(inv.iommus(0).devices(), 0u);
  EXPECT_EQ(inv.iommus(1).devices(), 1u);
  ASSERT_EQ(inv.devices_size(), 1);
  const pb::InventoryDevice& d = inv.devices(0);
  EXPECT_EQ(d.path(), "/dev/nvme0n1p1");
  EXPECT_EQ(d.block(), "nvme0n1p1");
  EXPECT_EQ(d.pci_address(), "0000:17:00.0");
  EXPECT_EQ(d.driver(), "nvme");
  EXPECT_EQ(d.iommu_group(), "23");
  EXPECT_EQ(d.group_type(), "DMA-FQ");
}

TEST(DetectInventoryTest, ADirectoryIsDescribedByTheBlockDeviceUnderItsFileSystem) {
  FakeRoot root;
  WriteVtdHost(root);
  struct stat st {};
  ASSERT_EQ(stat(root.path().c_str(), &st), 0);
  root.Link(absl::StrCat("sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev)),
            "../../devices/pci0000:16/0000:16:02.0/0000:17:00.0/nvme/nvme0/nvme0n1/nvme0n1p1");
  pb::Inventory inv = DetectInventory({.allow_dirs = {root.path()}}, root.path());
  ASSERT_EQ(inv.devices_size(), 1);
  EXPECT_EQ(inv.devices(0).block(), "nvme0n1p1");
  EXPECT_EQ(inv.devices(0).pci_address(), "0000:17:00.0");
  EXPECT_EQ(inv.devices(0).group_type(), "DMA-FQ");
}

TEST(DetectInventoryTest, Arm64NamesItsCpuByImplementerAndPartAndSmmuByDriver) {
  FakeRoot root;
  root.Write("proc/cpuinfo",
             "processor\t: 0\nBogoMIPS\t: 200.00\nCPU implementer\t: 0x48\nCPU part\t: 0xd01\n");
  root.Dir("sys/devices/platform/arm-smmu-v3.0.auto");
  root.Link("sys/devices/platform/arm-smmu-v3.0.auto/driver",
            "../../../bus/platform/drivers/arm-smmu-v3");
  root.Link("sys/class/iommu/smmu3.0x0000000009050000/device",
            "../../../devices/platform/arm-smmu-v3.0.auto");
  pb::Inventory inv = DetectInventory({}, root.path());
  EXPECT_EQ(inv.cpu_model(), "implementer 0x48 part 0xd01");
  ASSERT_EQ(inv.iommus_size(), 1);
  EXPECT_EQ(inv.iommus(0).driver(), "arm-smmu-v3");
  EXPECT_TRUE(inv.iommus(0).attributes().empty());
}

TEST(DetectInventoryTest, AnEmptyTreeGivesAnEmptyInventoryNotAnError) {
  FakeRoot root;
  pb::Inventory inv = DetectInventory({.allow_devices = {"/dev/sdz"}}, root.path());
  EXPECT_EQ(inv.cpu_model(), "");
  EXPECT_EQ(inv.sockets(), 0u);
  ASSERT_EQ(inv.devices_size(), 1);
  EXPECT_EQ(inv.devices(0).pci_address(), "");
  // Every monitor counter is listed, absent, each with its reason.
  ASSERT_EQ(inv.monitor_counters_size(), 5);
  for (const pb::MonitorCounter& c : inv.monitor_counters()) {
    EXPECT_FALSE(c.present()) << c.name();
    EXPECT_FALSE(c.note().empty()) << c.name();
  }
}

TEST(DetectInventoryTest, ListsTheMonitorCountersThisHostHas) {
  FakeRoot root;
  root.Dir("sys/kernel/tracing/instances");
  root.Dir("sys/kernel/tracing/events/iommu/map");
  root.Dir("sys/kernel/tracing/events/iommu/unmap");
  root.Write("sys/kernel/debug/iommu/intel/dmar_perf_latency", "");
  root.Write("sys/kernel/debug/iommu/intel/invalidation_queue", "");
  pb::Inventory inv = DetectInventory({}, root.path());
  std::map<std::string, bool> present;
  for (const pb::MonitorCounter& c : inv.monitor_counters()) present[c.name()] = c.present();
  EXPECT_EQ(present, (std::map<std::string, bool>{{"dmar_perf_latency", true},
                                                  {"invalidation_queue", true},
                                                  {"pmcg", false},
                                                  {"trace/iommu:map", true},
                                                  {"trace/iommu:unmap", true}}));
}

}  // namespace
}  // namespace farm::agent
