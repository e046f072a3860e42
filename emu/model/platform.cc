#include "emu/model/platform.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::emu {
namespace {

Topology MakeTopology(int sockets, int nodes_per_socket, int cpus_per_node) {
  Topology t;
  int nodes = sockets * nodes_per_socket;
  t.num_cpus = nodes * cpus_per_node;
  for (int n = 0; n < nodes; ++n) t.node_socket.push_back(n / nodes_per_socket);
  for (int c = 0; c < t.num_cpus; ++c) t.cpu_node.push_back(c / cpus_per_node);
  return t;
}

// The platforms' settings: one row per model key, one column per platform (the
// index into Build()'s vector); nullptr leaves the key at its registry default.
// docs/emulator.md gives the source of every value.
//
// The current platforms (spr, genoa, grace): the comment above each row says
// where their three values come from. The published figures of these parts'
// IOMMU DMA path that were found are docs/fidelity.md's "Current platforms"
// rows (`farm-emu fidelity`); a key that no such figure sets has no published
// figure for these parts and is labelled:
//   clock:  an older platform's value at the newer clock (the same
//           instruction count): spr = snb16c x 0.8 (2.4 -> 3.0 GHz), genoa =
//           snb16c x 0.7 (-> 3.4 GHz), grace = kunpeng x 0.8 (2.6 -> ~3.2
//           GHz), rounded;
//   reuse:  the older platform of the vendor family unchanged (spr and genoa:
//           2s12c; grace: kunpeng);
//   assume: an assumption, its reason in docs/emulator.md;
// Cost keys this table leaves out keep their registry default on every
// platform, these three included, none with a published figure for them:
// cost.rb_dirty_lines (fit001) and cost.cache_maint_line_ns (never charged:
// every device is coherent). A nullptr in a current platform's column is a
// key its IOMMU model does not read, or 0 where the mechanism is absent
// (near atomics on x86, no per-call clflush with a coherent VT-d walk).
constexpr int kNumPlatforms = 7;
struct SettingRow {
  const char* key;
  std::array<const char*, kNumPlatforms> value;
};
// clang-format off
const SettingRow kSettings[] = {
    // key                     2s12c     snb16c    kunpeng   mmu500    spr       genoa     grace
    // spr, genoa, grace: the parts' IOMMUs (VT-d, AMD-Vi, SMMUv3).
    {"iommu.type",              {"vtd",    "vtd",    "smmuv3", "mmu500", "vtd",    "amd",    "smmuv3"}},
    // kunpeng: seed 002, the NVMe (and, John Garry assumes, its SMMU) on node 2.
    {"iommu.node",              {nullptr,  nullptr,  "2",      nullptr,  nullptr,  nullptr,  "0"}},
    // grace: the kernel's VINTF0 gets num_vcmdqs / num_vintfs = 2 logical VCMDQs.
    {"smmu.vcmdqs",             {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "2"}},
    // grace: assume (not published for any SMMU; the one setting that gives the CMDQV commit's
    // "up to 20%" with fio's strict / passthrough in band, docs/fidelity.md "Current platforms").
    {"smmu.sync_per_batch",     {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "true"}},
    // spr: assume (scalable-mode VT-d, coherent walk; no ECAP dump of an 8480+ found).
    {"vtd.coherent",            {"false",  "false",  nullptr,  nullptr,  "true",   nullptr,  nullptr}},
    // spr: reuse.
    {"vtd.rwbf",                {"false",  "false",  nullptr,  nullptr,  "false",  nullptr,  nullptr}},
    // spr, genoa, grace: PCIe devices snoop on these servers.
    {"dev.coherent",            {"true",   "true",   "true",   "true",   "true",   "true",   "true"}},
    // spr, genoa, grace: reuse (IOTLB sizes are not published for these parts).
    {"iotlb.entries",           {"64",     "64",     "128",    "128",    "64",     "64",     "128"}},
    // spr, genoa, grace: reuse.
    {"iotlb.ways",              {"4",      "4",      "4",      "4",      "4",      "4",      "4"}},
    // spr, genoa, grace: clock.
    {"cost.line_local_ns",      {"5",      "6",      "6",      "8",      "5",      "4",      "5"}},
    // spr, genoa, grace: assume (core-to-core transfer; no per-pair figure used).
    {"cost.line_node_ns",       {"45",     "55",     "60",     "70",     "60",     "100",    "60"}},
    // spr, genoa, grace: = line_node (one node per socket).
    {"cost.line_socket_ns",     {"45",     "55",     "110",    "70",     "60",     "100",    "60"}},
    // spr, genoa, grace: assume (UPI, xGMI, NVLink-C2C transfers: none published here).
    {"cost.line_remote_ns",     {"130",    "160",    "200",    "70",     "150",    "200",    "180"}},
    // LSE atomics at the home node (kunpeng: cmdq llq, lock, valid_map): fitGarry, the home
    // node's occupancy per far atomic and per snoop that puts J. Garry's 64- and 128-CPU rows
    // within 1.15x (docs/fidelity.md, "Contention across sockets"). grace: reuse (Neoverse V2
    // issues LSE atomics; the fabric's far-atomic occupancy is not published). spr, genoa:
    // near atomics (x86 lock ops).
    {"cost.atomic_far_ns",      {nullptr,  nullptr,  "80",     nullptr,  nullptr,  nullptr,  "80"}},
    // spr, genoa, grace: clock.
    {"cost.lock_ns",            {"15",     "12",     "18",     "20",     "10",     "9",      "14"}},
    // spr, genoa, grace: clock.
    {"cost.unlock_ns",          {"5",      "4",      "6",      "8",      "3",      "3",      "5"}},
    // spr, genoa, grace: clock.
    {"cost.rb_visit_ns",        {"5",      "6",      "6",      "8",      "5",      "4",      "5"}},
    // spr, genoa, grace: clock.
    {"cost.rb_insert_ns",       {"35",     "45",     "40",     "50",     "36",     "32",     "32"}},
    // spr, genoa, grace: clock.
    {"cost.rb_erase_ns",        {"35",     "45",     "40",     "50",     "36",     "32",     "32"}},
    // spr, genoa, grace: clock.
    {"cost.kmem_cache_ns",      {"25",     "30",     "30",     "40",     "24",     "21",     "24"}},
    // spr, genoa, grace: clock.
    {"cost.rcache_op_ns",       {"8",      "5",      "10",     "12",     "4",      "4",      "8"}},
    // 2s12c: seed 000 trace, intel_map_sg entry work. spr, genoa, grace: clock.
    {"cost.dma_call_ns",        {"1000",   "50",     "60",     "70",     "40",     "35",     "48"}},
    // New platforms only: the calibrated ones carry it inside cost.dma_call_ns. spr, genoa,
    // grace: assume (get_dma_ops + a predicted indirect branch, ~10-15 cycles; no retpoline).
    {"cost.indirect_call_ns",   {nullptr,  nullptr,  nullptr,  nullptr,  "5",      "5",      "3"}},
    // One instruction per cycle at each part's clock (docs/emulator.md "Clocks assumed"):
    // the factor of a commit's measured instruction delta (sw.*_delta_insns). spr, genoa,
    // grace: assume (no IPC of these paths was measured).
    {"cost.ps_per_insn",        {"400",    "417",    "385",    "400",    "333",    "294",    "313"}},
    // spr, genoa, grace: clock.
    {"cost.dma_direct_ns",      {"25",     "30",     "30",     "40",     "24",     "21",     "24"}},
    // 2s12c: seed 000 trace, __iommu_map per segment. spr, genoa, grace: clock.
    {"cost.iommu_map_call_ns",  {"300",    "50",     "50",     "60",     "40",     "35",     "40"}},
    // spr, genoa, grace: clock.
    {"cost.pt_level_ns",        {"5",      "6",      "6",      "8",      "5",      "4",      "5"}},
    // 2s12c: __domain_mapping per PTE incl. the sg walk. spr, genoa, grace: clock.
    {"cost.pte_write_ns",       {"100",    "3",      "3",      "4",      "3",      "2",      "2"}},
    // spr, genoa, grace: assume (zeroing 4 KiB at DDR5 / LPDDR5X single-core bandwidth).
    {"cost.pt_alloc_ns",        {"400",    "500",    "500",    "700",    "400",    "400",    "400"}},
    // spr: assume; never charged (vtd.coherent=true).
    {"cost.clflush_line_ns",    {"45",     "50",     "40",     "50",     "40",     nullptr,  nullptr}},
    // 2s12c: seed 000 trace, domain_flush_cache per call.
    {"cost.clflush_call_ns",    {"2000",   nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  nullptr}},
    // spr, genoa, grace: reuse.
    {"cost.mmio_write_ns",      {"60",     "70",     "80",     "100",    "60",     "60",     "80"}},
    // spr, genoa, grace: reuse.
    {"cost.mmio_read_ns",       {"350",    "400",    "500",    "450",    "350",    "350",    "500"}},
    // spr, genoa, grace: clock.
    {"cost.cmd_write_ns",       {"8",      "10",     "10",     "12",     "8",      "7",      "8"}},
    // spr, genoa, grace: reuse.
    {"cost.poll_ns",            {"30",     "35",     "40",     "50",     "30",     "30",     "40"}},
    // spr, genoa, grace: clock.
    {"cost.fq_op_ns",           {"12",     "6",      "15",     "18",     "5",      "4",      "12"}},
    // spr, genoa, grace: assume (single-core memset bandwidth).
    {"cost.memset_ns_per_kib",  {"25",     "30",     "30",     "40",     "20",     "20",     "20"}},
    // spr: reuse (no published VT-d invalidation latency of any part was found).
    {"hw.qi_desc_ns",           {"60",     "80",     nullptr,  nullptr,  "60",     nullptr,  nullptr}},
    // spr: reuse.
    {"hw.qi_iotlb_psi_ns",      {"700",    "900",    nullptr,  nullptr,  "700",    nullptr,  nullptr}},
    // spr: reuse.
    {"hw.qi_iotlb_dsi_ns",      {"1000",   "1200",   nullptr,  nullptr,  "1000",   nullptr,  nullptr}},
    // spr: reuse.
    {"hw.qi_iotlb_global_ns",   {"1400",   "1600",   nullptr,  nullptr,  "1400",   nullptr,  nullptr}},
    // spr: reuse; unused (vtd.rwbf=false).
    {"hw.wbf_ns",               {"300",    "350",    nullptr,  nullptr,  "300",    nullptr,  nullptr}},
    // grace: reuse, checked by fio: kunpeng's three values put 64 fio jobs on 8 SSDs at 0.189
    // of passthrough (NVIDIA: 2.8 M / 16.5 M = 0.170, docs/fidelity.md row 1), with the VCMDQs
    // sharing one consumer and the per-batch CMD_SYNC; no factor fits row 1 closer for sure
    // (it is not monotonic in one, docs/fidelity.md "Current platforms" gives the sweep).
    {"hw.smmu_cmd_ns",          {nullptr,  nullptr,  "40",     nullptr,  nullptr,  nullptr,  "40"}},
    {"hw.smmu_tlbi_ns",         {nullptr,  nullptr,  "120",    nullptr,  nullptr,  nullptr,  "120"}},
    {"hw.smmu_sync_ns",         {nullptr,  nullptr,  "300",    nullptr,  nullptr,  nullptr,  "300"}},
    {"hw.mmu500_tlbi_ns",       {nullptr,  nullptr,  nullptr,  "150",    nullptr,  nullptr,  nullptr}},
    {"hw.mmu500_sync_ns",       {nullptr,  nullptr,  nullptr,  "700",    nullptr,  nullptr,  nullptr}},
    // genoa: assume (no published AMD-Vi command latency; a QI descriptor's order).
    {"hw.amd_cmd_ns",           {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "60",     nullptr}},
    // genoa: assume (of the order of 2s12c's PSI).
    {"hw.amd_inv_pages_ns",     {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "700",    nullptr}},
    // genoa: assume (of the order of 2s12c's DSI).
    {"hw.amd_inv_all_ns",       {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "1000",   nullptr}},
    // genoa: assume (of the order of kunpeng's CMD_SYNC).
    {"hw.amd_compl_wait_ns",    {nullptr,  nullptr,  nullptr,  nullptr,  nullptr,  "300",    nullptr}},
    // spr, genoa, grace: reuse.
    {"hw.iotlb_hit_ns",         {"5",      "6",      "6",      "8",      "5",      "5",      "5"}},
    // spr, genoa, grace: reuse (a walk read is DRAM-latency bound).
    {"hw.iotlb_miss_level_ns",  {"110",    "130",    "150",    "180",    "110",    "120",    "150"}},
};
// clang-format on

// Each platform's PCIe facts: its root complexes' lanes (all sockets) and, per
// device, the link it trained at and its own data rate. A link's rate is
// PcieLinkBytesPerSec (the PCIe base specifications' 8/16/32 GT/s per lane,
// 128b/130b). Drive rates are datasheet classes: the seeds name no drive model
// except seed 002's vendor (lspci: "Huawei Technologies Co., Ltd. Device 0123").
struct DeviceRateRow {
  const char* platform;
  const char* device;  // nullptr: the platform row (lanes only)
  int gen, lanes;
  double read_gb_s, write_gb_s;  // GB/s (1e9 bytes); 0 = none stated
};
// clang-format off
const DeviceRateRow kDeviceRates[] = {
    // Xeon E5-2600 v3/v4 and v1 (Haswell/Broadwell-EP, Sandy Bridge-EP): 40
    // PCIe 3.0 lanes per socket (ark.intel.com).
    {"intel-vtd-2s12c",    nullptr, 0, 80, 0, 0},
    // ConnectX-3 Pro: PCIe 3.0 x8 (Mellanox product brief); 7.88 GB/s > 56 Gb/s.
    {"intel-vtd-2s12c",    "nic0",  3, 8,  0, 0},
    // A PCIe 3.0 x4 drive of the seed's era (assumption: the seed names none):
    // Samsung 970 PRO datasheet class, 3,500 MB/s read, 2,300 MB/s write.
    {"intel-vtd-2s12c",    "nvme0", 3, 4,  3.5, 2.3},
    {"intel-vtd-snb16c",   nullptr, 0, 80, 0, 0},
    // ConnectX-3 40 GbE: PCIe 3.0 x8 (Mellanox product brief).
    {"intel-vtd-snb16c",   "nic0",  3, 8,  0, 0},
    // Kunpeng 920: PCIe 4.0 and CCIX, 640 Gb/s in all per chip (Huawei's
    // launch, January 2019) = 40 lanes of 16 GT/s; two chips.
    {"kunpeng920-smmuv3",  nullptr, 0, 80, 0, 0},
    // Seed 002's Huawei NVMe: model not named; taken as a PCIe 3.0 x4 drive
    // (assumption), the class above.
    {"kunpeng920-smmuv3",  "nvme0", 3, 4,  3.5, 2.3},
    // hns3 and the ZIP engine are on-chip (the I/O die), not behind a PCIe
    // link of their own: the hns3's limit is its line rate; the ZIP's none.
    // Seed 004's SoC: lanes not published. Its 50 GbE NIC's link is not
    // named (left unlimited: the line rate binds); NVMe as above (assumption).
    {"arm-mmu500-8c",      "nvme0", 3, 4,  3.5, 2.3},
    // Xeon Platinum 8480+: 80 PCIe 5.0 lanes per socket (ark.intel.com 231746).
    {"intel-spr-2s56c",    nullptr, 0, 160, 0, 0},
    // EPYC 9654: 128 PCIe 5.0 lanes per socket, 128 in a 2-socket system
    // with four xGMI links (amd.com EPYC 9004 product page).
    {"amd-genoa-2s96c",    nullptr, 0, 128, 0, 0},
    // Grace CPU Superchip: 8 x PCIe Gen5 x16 (NVIDIA, "NVIDIA Grace CPU
    // Superchip Architecture In Depth", developer blog, 2022).
    {"nvidia-grace-2s72c", nullptr, 0, 128, 0, 0},
};
// clang-format on

// The current platforms' devices: a PCIe Gen5 NVMe and a 100 GbE NIC on
// node 0 (docs/emulator.md "Current platforms": why 100 GbE). The NVMe: a
// PCIe 5.0 x4 drive of the Samsung PM1743 class (Samsung's announcement,
// December 2021: 13 GB/s sequential read, 6.6 GB/s write); the NIC: PCIe 4.0
// x16 (ConnectX-6 Dx datasheet), 31.5 GB/s, above its 100 Gb/s line rate.
std::vector<DeviceSpec> CurrentServerDevices() {
  DeviceSpec nvme{"nvme0", "PCIe Gen5 NVMe SSD", 0, true, 64, ""};
  nvme.pcie_gen = 5;
  nvme.pcie_lanes = 4;
  nvme.media_read_bytes_per_s = 13e9;
  nvme.media_write_bytes_per_s = 6.6e9;
  DeviceSpec nic{"nic0", "NVIDIA ConnectX-6 Dx 100 GbE NIC", 0, true, 64, "", 100};
  nic.pcie_gen = 4;
  nic.pcie_lanes = 16;
  return {nvme, nic};
}

// Seed 002: John Garry's Kunpeng 920 NVMe queue affinities (23 I/O queues;
// the admin vector, listed first there, carries no I/O).
constexpr char kKunpeng920NvmeIrqs[] =
    "32-38@35;39-45@39;46-51@46;52-57@52;58-63@60;64-69@68;70-75@70;76-80@76;81-85@84;"
    "86-90@86;91-95@92;96-101@100;102-107@102;108-112@108;113-117@116;118-122@118;"
    "123-127@124;0-5@4;6-11@6;12-16@12;17-21@20;22-26@22;27-31@28";

void ApplyDeviceRate(const DeviceRateRow& row, std::vector<Platform>& platforms) {
  for (Platform& p : platforms) {
    if (p.name != row.platform) continue;
    if (row.device == nullptr) {
      p.pcie_lanes = row.lanes;
      return;
    }
    for (DeviceSpec& d : p.devices) {
      if (d.name != row.device) continue;
      d.pcie_gen = row.gen;
      d.pcie_lanes = row.lanes;
      d.media_read_bytes_per_s = row.read_gb_s * 1e9;
      d.media_write_bytes_per_s = row.write_gb_s * 1e9;
    }
  }
}

std::vector<Platform> Build() {
  // In kSettings column order; each settings map ({}) is filled from it below.
  std::vector<Platform> v = {
      // Seed 000 NFS/RDMA client: 2-socket Intel Xeon, 12 cores per socket.
      {"intel-vtd-2s12c",
       "2-socket Intel Xeon (Haswell/Broadwell class), 12 cores/socket, 2 NUMA nodes, VT-d "
       "with queued invalidation; ConnectX RDMA NIC and NVMe on node 0 (seed 000 client)",
       MakeTopology(2, 1, 12),
       // Seed 000: "InfiniBand using CX-3 Pro cards at 56Gb/s".
       {{"nic0", "Mellanox ConnectX-3 Pro 56 Gb/s (FDR InfiniBand) RDMA NIC", 0, true, 64, "", 56},
        {"nvme0", "NVMe SSD", 0, true, 64, ""}},
       IrqChip::kX86Vector,
       {}},
      // Seed 001: 16-core Sandy Bridge (2 x 8 cores), ConnectX-3 40 GbE.
      {"intel-vtd-snb16c",
       "2-socket Intel Xeon E5 (Sandy Bridge), 8 cores/socket, 2 NUMA nodes, VT-d with "
       "queued invalidation, non-coherent page walk; 40 GbE NIC on node 0 (seed 001, "
       "Peleg et al. ATC'15)",
       MakeTopology(2, 1, 8),
       {{"nic0", "Mellanox ConnectX-3 40 GbE NIC", 0, true, 64, "", 40}},
       IrqChip::kX86Vector,
       {}},
      // Seeds 002/003: HiSilicon Kunpeng 920, 2 sockets x 2 dies, 32 cores per
      // die, SMMUv3 without range invalidation.
      {"kunpeng920-smmuv3",
       "HiSilicon Kunpeng 920: 2 sockets x 2 dies, 128 cores, 4 NUMA nodes, Arm SMMUv3 "
       "(no ECMDQ, no range invalidation); NVMe and its SMMU on node 2 (seed 002), hns3 NIC "
       "and ZIP accelerator on node 0 (seeds 002, 003)",
       MakeTopology(2, 2, 32),
       {{"nvme0", "NVMe SSD (PCIe 81:00.0, node 2 as in seed 002)", 2, true, 64,
         kKunpeng920NvmeIrqs},
        {"nic0", "hns3 100 GbE NIC", 0, true, 64, "", 100},
        {"zip0", "HiSilicon ZIP accelerator (Barry Song's test device)", 0, true, 64, ""}},
       IrqChip::kGicIts,
       {}},
      // Seed 004: 8-core ARMv8 SoC with MMU-500 in front of the NIC root port.
      {"arm-mmu500-8c",
       "8-core ARMv8 SoC (Broadcom-class, seed 004), one NUMA node, Arm MMU-500 (SMMUv2) with "
       "TLBSYNC polling; 50 GbE NIC behind the MMU-500, NVMe SSDs on a root complex without IOMMU",
       MakeTopology(1, 1, 8),
       // Seed 004: "the Ethernet throughput out of 50G link".
       {{"nic0", "50 GbE NIC behind MMU-500", 0, true, 64, "", 50},
        // "The root complexes connected to NVMe SSDs remain unchanged (i.e.,
        // without IOMMU)" (seed 004).
        {"nvme0", "NVMe SSDs behind a root complex without IOMMU", 0, true, 64, "", 0,
         DeviceAttach::kNone}},
       IrqChip::kGicIts,
       {}},
      // Intel Xeon Platinum 8480+ (Sapphire Rapids, 4th Gen Xeon Scalable):
      // 56 cores, 2.0 GHz base / 3.8 GHz turbo, 105 MB LLC, four tiles on
      // EMIB, 8 DDR5 channels (ark.intel.com product 231746). Two sockets,
      // sub-NUMA clustering off: one node per socket. VT-d in scalable mode
      // with a coherent page walk. Costs: docs/emulator.md, "Platforms and
      // where the costs come from".
      {"intel-spr-2s56c",
       "2-socket Intel Xeon Platinum 8480+ (Sapphire Rapids), 56 cores/socket, 2 NUMA nodes "
       "(SNC off), VT-d scalable mode with a coherent page walk; PCIe Gen5 NVMe and a 100 GbE "
       "NIC on node 0",
       MakeTopology(2, 1, 56),
       CurrentServerDevices(),
       IrqChip::kX86Vector,
       {}},
      // AMD EPYC 9654 (Genoa, Zen 4): 96 cores in 12 CCDs of 8 around one
      // I/O die, 2.4 GHz base / 3.7 GHz boost, 384 MB L3, 12 DDR5 channels
      // (amd.com EPYC 9654 product page). Two sockets, NPS1: one node per
      // socket. AMD-Vi with the v1 (host) page table, the default for DMA
      // domains. Costs: docs/emulator.md.
      {"amd-genoa-2s96c",
       "2-socket AMD EPYC 9654 (Genoa), 96 cores/socket (12 CCDs), 2 NUMA nodes (NPS1), AMD-Vi "
       "with v1 page tables and the command buffer; PCIe Gen5 NVMe and a 100 GbE NIC on node 0",
       MakeTopology(2, 1, 96),
       CurrentServerDevices(),
       IrqChip::kX86Vector,
       {}},
      // NVIDIA Grace CPU Superchip: two Grace CPUs joined by NVLink-C2C, each
      // 72 Arm Neoverse V2 cores with LPDDR5X (NVIDIA, "NVIDIA Grace CPU
      // Superchip Architecture In Depth", developer blog, 2022). Arm SMMUv3
      // with NVIDIA's Tegra241 CMDQV; the kernel's VINTF0 gets 2 logical
      // VCMDQs (review of the CMDQV iommufd series: "the current HW only
      // supports 2 LVCMDQs"). One node per CPU. Costs: docs/emulator.md.
      {"nvidia-grace-2s72c",
       "NVIDIA Grace CPU Superchip: 2 x 72 Neoverse V2 cores over NVLink-C2C, 2 NUMA nodes, Arm "
       "SMMUv3 with Tegra241 CMDQV (2 VCMDQs for the kernel); NVMe and a 100 GbE NIC on node 0",
       MakeTopology(2, 1, 72),
       CurrentServerDevices(),
       IrqChip::kGicIts,
       {}},
  };
  for (int i = 0; i < kNumPlatforms; ++i) {
    for (const SettingRow& row : kSettings) {
      if (row.value[i] != nullptr) v[i].settings[row.key] = row.value[i];
    }
  }
  for (const DeviceRateRow& row : kDeviceRates) ApplyDeviceRate(row, v);
  return v;
}

}  // namespace

double PcieLinkBytesPerSec(int gen, int lanes) {
  double gt_per_s = gen == 3 ? 8e9 : gen == 4 ? 16e9 : gen == 5 ? 32e9 : 0;
  return gt_per_s * lanes * 128.0 / 130.0 / 8.0;
}

double DeviceDmaBytesPerSec(const DeviceSpec& d, bool to_device) {
  double own = d.link_gbps > 0 ? d.link_gbps * 1e9 / 8.0
                               : (to_device ? d.media_write_bytes_per_s : d.media_read_bytes_per_s);
  double link = PcieLinkBytesPerSec(d.pcie_gen, d.pcie_lanes);
  if (own <= 0) return link;
  if (link <= 0) return own;
  return std::min(own, link);
}

const std::vector<Platform>& AllPlatforms() {
  static const std::vector<Platform>* p = new std::vector<Platform>(Build());
  return *p;
}

absl::StatusOr<const Platform*> FindPlatform(const std::string& name) {
  std::vector<std::string> names;
  for (const Platform& p : AllPlatforms()) {
    if (p.name == name) return &p;
    names.push_back(p.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown platform '", name, "'; valid platforms: ", absl::StrJoin(names, ", ")));
}

}  // namespace farm::emu
