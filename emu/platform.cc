#include "emu/platform.h"

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

std::vector<Platform> Build() {
  std::vector<Platform> v;
  {
    // Seed 000 NFS/RDMA client: 2-socket Intel Xeon, 12 cores per socket.
    Platform p;
    p.name = "intel-vtd-2s12c";
    p.description =
        "2-socket Intel Xeon (Haswell/Broadwell class), 12 cores/socket, 2 NUMA nodes, VT-d "
        "with queued invalidation; ConnectX RDMA NIC and NVMe on node 0 (seed 000 client)";
    p.topology = MakeTopology(2, 1, 12);
    p.devices = {{"nic0", "Mellanox ConnectX-4 (mlx5) 100 Gb/s RDMA NIC", 0, true, 64},
                 {"nvme0", "NVMe SSD", 0, true, 64}};
    p.settings = {
        {"iommu.type", "vtd"},
        {"vtd.coherent", "false"},
        {"vtd.rwbf", "false"},
        {"dev.coherent", "true"},
        {"cost.line_local_ns", "5"},
        {"cost.line_node_ns", "45"},
        {"cost.line_socket_ns", "45"},
        {"cost.line_remote_ns", "130"},
        {"cost.lock_ns", "15"},
        {"cost.unlock_ns", "5"},
        {"cost.rb_visit_ns", "5"},
        {"cost.rb_insert_ns", "35"},
        {"cost.rb_erase_ns", "35"},
        {"cost.kmem_cache_ns", "25"},
        {"cost.rcache_op_ns", "8"},
        {"cost.dma_call_ns", "1000"},  // seed 000 trace: intel_map_sg entry work, issue 5
        {"cost.dma_direct_ns", "25"},
        {"cost.iommu_map_call_ns", "300"},  // seed 000 trace: __iommu_map per segment
        {"cost.pt_level_ns", "5"},
        {"cost.pte_write_ns", "100"},  // __domain_mapping per PTE incl. the sg walk
        {"cost.pt_alloc_ns", "400"},
        {"cost.clflush_line_ns", "45"},
        {"cost.clflush_call_ns", "2000"},  // seed 000 trace: domain_flush_cache per call
        {"cost.mmio_write_ns", "60"},
        {"cost.mmio_read_ns", "350"},
        {"cost.cmd_write_ns", "8"},
        {"cost.poll_ns", "30"},
        {"cost.fq_op_ns", "12"},
        {"cost.memset_ns_per_kib", "25"},
        {"hw.qi_desc_ns", "60"},
        {"hw.qi_iotlb_psi_ns", "700"},
        {"hw.qi_iotlb_dsi_ns", "1000"},
        {"hw.qi_iotlb_global_ns", "1400"},
        {"hw.wbf_ns", "300"},
        {"hw.iotlb_hit_ns", "5"},
        {"hw.iotlb_miss_level_ns", "110"},
        {"iotlb.entries", "64"},
        {"iotlb.ways", "4"},
    };
    v.push_back(std::move(p));
  }
  {
    // Seed 001: 16-core Sandy Bridge (2 x 8 cores), ConnectX-3 40 GbE.
    Platform p;
    p.name = "intel-vtd-snb16c";
    p.description =
        "2-socket Intel Xeon E5 (Sandy Bridge), 8 cores/socket, 2 NUMA nodes, VT-d with "
        "queued invalidation, non-coherent page walk; 40 GbE NIC on node 0 (seed 001, "
        "Peleg et al. ATC'15)";
    p.topology = MakeTopology(2, 1, 8);
    p.devices = {{"nic0", "Mellanox ConnectX-3 40 GbE NIC", 0, true, 64}};
    p.settings = {
        {"iommu.type", "vtd"},
        {"vtd.coherent", "false"},
        {"vtd.rwbf", "false"},
        {"dev.coherent", "true"},
        {"cost.line_local_ns", "6"},
        {"cost.line_node_ns", "55"},
        {"cost.line_socket_ns", "55"},
        {"cost.line_remote_ns", "160"},
        {"cost.lock_ns", "12"},
        {"cost.unlock_ns", "4"},
        {"cost.rb_visit_ns", "6"},
        {"cost.rb_insert_ns", "45"},
        {"cost.rb_erase_ns", "45"},
        {"cost.kmem_cache_ns", "30"},
        {"cost.rcache_op_ns", "5"},
        {"cost.dma_call_ns", "50"},
        {"cost.dma_direct_ns", "30"},
        {"cost.iommu_map_call_ns", "50"},
        {"cost.pt_level_ns", "6"},
        {"cost.pte_write_ns", "3"},
        {"cost.pt_alloc_ns", "500"},
        {"cost.clflush_line_ns", "50"},
        {"cost.mmio_write_ns", "70"},
        {"cost.mmio_read_ns", "400"},
        {"cost.cmd_write_ns", "10"},
        {"cost.poll_ns", "35"},
        {"cost.fq_op_ns", "6"},
        {"cost.memset_ns_per_kib", "30"},
        {"hw.qi_desc_ns", "80"},
        {"hw.qi_iotlb_psi_ns", "900"},
        {"hw.qi_iotlb_dsi_ns", "1200"},
        {"hw.qi_iotlb_global_ns", "1600"},
        {"hw.wbf_ns", "350"},
        {"hw.iotlb_hit_ns", "6"},
        {"hw.iotlb_miss_level_ns", "130"},
        {"iotlb.entries", "64"},
        {"iotlb.ways", "4"},
    };
    v.push_back(std::move(p));
  }
  {
    // Seeds 002/003: HiSilicon Kunpeng 920, 2 sockets x 2 dies, 32 cores per
    // die, SMMUv3 without range invalidation.
    Platform p;
    p.name = "kunpeng920-smmuv3";
    p.description =
        "HiSilicon Kunpeng 920: 2 sockets x 2 dies, 128 cores, 4 NUMA nodes, Arm SMMUv3 "
        "(no ECMDQ, no range invalidation); NVMe, hns3 NIC and ZIP accelerator on node 0 "
        "(seeds 002, 003)";
    p.topology = MakeTopology(2, 2, 32);
    p.devices = {{"nvme0", "NVMe SSD (PCIe, node 0)", 0, true, 64},
                 {"nic0", "hns3 100 GbE NIC", 0, true, 64},
                 {"zip0", "HiSilicon ZIP accelerator (Barry Song's test device)", 0, true, 64}};
    p.settings = {
        {"iommu.type", "smmuv3"},
        {"dev.coherent", "true"},
        {"cost.line_local_ns", "6"},
        {"cost.line_node_ns", "60"},
        {"cost.line_socket_ns", "110"},
        {"cost.line_remote_ns", "200"},
        // LSE atomics (cmdq llq cmpxchg, valid_map, cmdq->lock) execute at the
        // home node; occupancy per op (docs/emulator.md, J. Garry's figures).
        {"cost.atomic_far_ns", "20"},
        {"cost.lock_ns", "18"},
        {"cost.unlock_ns", "6"},
        {"cost.rb_visit_ns", "6"},
        {"cost.rb_insert_ns", "40"},
        {"cost.rb_erase_ns", "40"},
        {"cost.kmem_cache_ns", "30"},
        {"cost.rcache_op_ns", "10"},
        {"cost.dma_call_ns", "60"},
        {"cost.dma_direct_ns", "30"},
        {"cost.iommu_map_call_ns", "50"},
        {"cost.pt_level_ns", "6"},
        {"cost.pte_write_ns", "3"},
        {"cost.pt_alloc_ns", "500"},
        {"cost.clflush_line_ns", "40"},
        {"cost.mmio_write_ns", "80"},
        {"cost.mmio_read_ns", "500"},
        {"cost.cmd_write_ns", "10"},
        {"cost.poll_ns", "40"},
        {"cost.fq_op_ns", "15"},
        {"cost.memset_ns_per_kib", "30"},
        {"hw.smmu_cmd_ns", "40"},
        {"hw.smmu_tlbi_ns", "120"},
        {"hw.smmu_sync_ns", "300"},
        {"hw.iotlb_hit_ns", "6"},
        {"hw.iotlb_miss_level_ns", "150"},
        {"iotlb.entries", "128"},
        {"iotlb.ways", "4"},
    };
    v.push_back(std::move(p));
  }
  {
    // Seed 004: 8-core ARMv8 SoC with MMU-500 in front of the NIC root port.
    Platform p;
    p.name = "arm-mmu500-8c";
    p.description =
        "8-core ARMv8 SoC (Broadcom-class, seed 004), one NUMA node, Arm MMU-500 (SMMUv2) with "
        "TLBSYNC polling; 50 GbE NIC and NVMe";
    p.topology = MakeTopology(1, 1, 8);
    p.devices = {{"nic0", "50 GbE NIC behind MMU-500", 0, true, 64},
                 {"nvme0", "NVMe SSD", 0, true, 64}};
    p.settings = {
        {"iommu.type", "mmu500"},      {"dev.coherent", "true"},
        {"cost.line_local_ns", "8"},   {"cost.line_node_ns", "70"},
        {"cost.line_socket_ns", "70"}, {"cost.line_remote_ns", "70"},
        {"cost.lock_ns", "20"},        {"cost.unlock_ns", "8"},
        {"cost.rb_visit_ns", "8"},     {"cost.rb_insert_ns", "50"},
        {"cost.rb_erase_ns", "50"},    {"cost.kmem_cache_ns", "40"},
        {"cost.rcache_op_ns", "12"},   {"cost.dma_call_ns", "70"},
        {"cost.dma_direct_ns", "40"},  {"cost.iommu_map_call_ns", "60"},
        {"cost.pt_level_ns", "8"},     {"cost.pte_write_ns", "4"},
        {"cost.pt_alloc_ns", "700"},   {"cost.clflush_line_ns", "50"},
        {"cost.mmio_write_ns", "100"}, {"cost.mmio_read_ns", "450"},
        {"cost.cmd_write_ns", "12"},   {"cost.poll_ns", "50"},
        {"cost.fq_op_ns", "18"},       {"cost.memset_ns_per_kib", "40"},
        {"hw.mmu500_tlbi_ns", "150"},  {"hw.mmu500_sync_ns", "700"},
        {"hw.iotlb_hit_ns", "8"},      {"hw.iotlb_miss_level_ns", "180"},
        {"iotlb.entries", "128"},      {"iotlb.ways", "4"},
    };
    v.push_back(std::move(p));
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
