// What the guest init writes for a boot, with the serial tty's "\r\n" and
// a printk line outside any frame: the channels the guest tests parse.
//
// Test data only: constants, no state; include from tests.
#ifndef AGENT_KERNELS_GUEST_CHANNEL_TESTDATA_H_
#define AGENT_KERNELS_GUEST_CHANNEL_TESTDATA_H_

namespace farm::kernels::testdata {

inline constexpr char kStrictChannel[] =
    "@@farm-begin facts\r\n"
    "release=6.1.0-57-cloud-amd64\r\n"
    "machine=x86_64\r\n"
    "cmdline=console=ttyS0 panic=-1 iommu.strict=1\r\n"
    "iommu=dmar0 \r\n"
    "@@farm-end facts 0\r\n"
    "[    3.1] random: crng init done\r\n"
    "@@farm-begin iommu-groups\r\n"
    "0 DMA 0000:00:00.0 \r\n"
    "1 DMA 0000:00:01.0 \r\n"
    "2 DMA 0000:00:1f.0 0000:00:1f.2 0000:00:1f.3 \r\n"
    "@@farm-end iommu-groups 0\r\n"
    "@@farm-begin nvme\r\n"
    "nvme0 0000:00:01.0 1 nvme0n1 \r\n"
    "@@farm-end nvme 0\r\n"
    "@@farm-begin tool\r\n"
    "{\r\n  \"fio version\" : \"fio-3.33\"\r\n}\r\n"
    "@@farm-end tool 0\r\n"
    "@@farm-begin tool-stderr\r\n"
    "@@farm-end tool-stderr 0\r\n"
    "@@farm-done\r\n";

// The q35 + intel-iommu guest of docs/kernels.md asked for lazy: its
// command line carries the farm's iommu.strict=0, and the VT-d driver under
// QEMU's caching mode ("IOMMU batching disallowed due to virtualization")
// left the NVMe's group a strict "DMA" domain. Everything else as
// kStrictChannel.
inline constexpr char kLazyAskedStrictRanChannel[] =
    "@@farm-begin facts\r\n"
    "release=6.1.0-57-cloud-amd64\r\n"
    "machine=x86_64\r\n"
    "cmdline=console=ttyS0 earlyprintk=serial,ttyS0,115200 panic=-1 iommu.strict=0\r\n"
    "iommu=dmar0 \r\n"
    "@@farm-end facts 0\r\n"
    "@@farm-begin iommu-groups\r\n"
    "0 DMA 0000:00:00.0 \r\n"
    "1 DMA 0000:00:02.0 \r\n"
    "@@farm-end iommu-groups 0\r\n"
    "@@farm-begin nvme\r\n"
    "nvme0 0000:00:02.0 1 nvme0n1 \r\n"
    "@@farm-end nvme 0\r\n"
    "@@farm-begin tool\r\n"
    "{\r\n  \"fio version\" : \"fio-3.33\"\r\n}\r\n"
    "@@farm-end tool 0\r\n"
    "@@farm-begin tool-stderr\r\n"
    "@@farm-end tool-stderr 0\r\n"
    "@@farm-done\r\n";

}  // namespace farm::kernels::testdata

#endif  // AGENT_KERNELS_GUEST_CHANNEL_TESTDATA_H_
