#include "emu/model/platform.h"

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
constexpr int kNumPlatforms = 4;
struct SettingRow {
  const char* key;
  std::array<const char*, kNumPlatforms> value;
};
// clang-format off
const SettingRow kSettings[] = {
    // key                     2s12c     snb16c    kunpeng   mmu500
    {"iommu.type",              {"vtd",    "vtd",    "smmuv3", "mmu500"}},
    // kunpeng: seed 002, the NVMe (and, John Garry assumes, its SMMU) on node 2.
    {"iommu.node",              {nullptr,  nullptr,  "2",      nullptr}},
    {"vtd.coherent",            {"false",  "false",  nullptr,  nullptr}},
    {"vtd.rwbf",                {"false",  "false",  nullptr,  nullptr}},
    {"dev.coherent",            {"true",   "true",   "true",   "true"}},
    {"iotlb.entries",           {"64",     "64",     "128",    "128"}},
    {"iotlb.ways",              {"4",      "4",      "4",      "4"}},
    {"cost.line_local_ns",      {"5",      "6",      "6",      "8"}},
    {"cost.line_node_ns",       {"45",     "55",     "60",     "70"}},
    {"cost.line_socket_ns",     {"45",     "55",     "110",    "70"}},
    {"cost.line_remote_ns",     {"130",    "160",    "200",    "70"}},
    // LSE atomics at the home node (kunpeng: cmdq llq, valid_map).
    {"cost.atomic_far_ns",      {nullptr,  nullptr,  "20",     nullptr}},
    {"cost.lock_ns",            {"15",     "12",     "18",     "20"}},
    {"cost.unlock_ns",          {"5",      "4",      "6",      "8"}},
    {"cost.rb_visit_ns",        {"5",      "6",      "6",      "8"}},
    {"cost.rb_insert_ns",       {"35",     "45",     "40",     "50"}},
    {"cost.rb_erase_ns",        {"35",     "45",     "40",     "50"}},
    {"cost.kmem_cache_ns",      {"25",     "30",     "30",     "40"}},
    {"cost.rcache_op_ns",       {"8",      "5",      "10",     "12"}},
    // 2s12c: seed 000 trace, intel_map_sg entry work.
    {"cost.dma_call_ns",        {"1000",   "50",     "60",     "70"}},
    {"cost.dma_direct_ns",      {"25",     "30",     "30",     "40"}},
    // 2s12c: seed 000 trace, __iommu_map per segment.
    {"cost.iommu_map_call_ns",  {"300",    "50",     "50",     "60"}},
    {"cost.pt_level_ns",        {"5",      "6",      "6",      "8"}},
    // 2s12c: __domain_mapping per PTE incl. the sg walk.
    {"cost.pte_write_ns",       {"100",    "3",      "3",      "4"}},
    {"cost.pt_alloc_ns",        {"400",    "500",    "500",    "700"}},
    {"cost.clflush_line_ns",    {"45",     "50",     "40",     "50"}},
    // 2s12c: seed 000 trace, domain_flush_cache per call.
    {"cost.clflush_call_ns",    {"2000",   nullptr,  nullptr,  nullptr}},
    {"cost.mmio_write_ns",      {"60",     "70",     "80",     "100"}},
    {"cost.mmio_read_ns",       {"350",    "400",    "500",    "450"}},
    {"cost.cmd_write_ns",       {"8",      "10",     "10",     "12"}},
    {"cost.poll_ns",            {"30",     "35",     "40",     "50"}},
    {"cost.fq_op_ns",           {"12",     "6",      "15",     "18"}},
    {"cost.memset_ns_per_kib",  {"25",     "30",     "30",     "40"}},
    {"hw.qi_desc_ns",           {"60",     "80",     nullptr,  nullptr}},
    {"hw.qi_iotlb_psi_ns",      {"700",    "900",    nullptr,  nullptr}},
    {"hw.qi_iotlb_dsi_ns",      {"1000",   "1200",   nullptr,  nullptr}},
    {"hw.qi_iotlb_global_ns",   {"1400",   "1600",   nullptr,  nullptr}},
    {"hw.wbf_ns",               {"300",    "350",    nullptr,  nullptr}},
    {"hw.smmu_cmd_ns",          {nullptr,  nullptr,  "40",     nullptr}},
    {"hw.smmu_tlbi_ns",         {nullptr,  nullptr,  "120",    nullptr}},
    {"hw.smmu_sync_ns",         {nullptr,  nullptr,  "300",    nullptr}},
    {"hw.mmu500_tlbi_ns",       {nullptr,  nullptr,  nullptr,  "150"}},
    {"hw.mmu500_sync_ns",       {nullptr,  nullptr,  nullptr,  "700"}},
    {"hw.iotlb_hit_ns",         {"5",      "6",      "6",      "8"}},
    {"hw.iotlb_miss_level_ns",  {"110",    "130",    "150",    "180"}},
};
// clang-format on

// Seed 002: John Garry's Kunpeng 920 NVMe queue affinities (23 I/O queues;
// the admin vector, listed first there, carries no I/O).
constexpr char kKunpeng920NvmeIrqs[] =
    "32-38@35;39-45@39;46-51@46;52-57@52;58-63@60;64-69@68;70-75@70;76-80@76;81-85@84;"
    "86-90@86;91-95@92;96-101@100;102-107@102;108-112@108;113-117@116;118-122@118;"
    "123-127@124;0-5@4;6-11@6;12-16@12;17-21@20;22-26@22;27-31@28";

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
  };
  for (int i = 0; i < kNumPlatforms; ++i) {
    for (const SettingRow& row : kSettings) {
      if (row.value[i] != nullptr) v[i].settings[row.key] = row.value[i];
    }
  }
  return v;
}

}  // namespace

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
