#include "emu/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/iommu_mode/iommu_mode.h"

namespace farm::emu {
namespace {

// The default domain type of an identity group, which the group.<kind>.type
// keys spell the same.
constexpr const char* kIdentityType = iommu_mode::DomainType(iommu_mode::Mode::kPassthrough);

ParamSpec Int(std::string key, int64_t def, std::string unit, std::string desc, double min = 0,
              double max = 1e15) {
  return ParamSpec{std::move(key),
                   ParamKind::kInt,
                   std::to_string(def),
                   std::move(unit),
                   std::move(desc),
                   {},
                   min,
                   max,
                   ""};
}
ParamSpec Dbl(std::string key, std::string def, std::string unit, std::string desc, double min = 0,
              double max = 1e15) {
  return ParamSpec{std::move(key),
                   ParamKind::kDouble,
                   std::move(def),
                   std::move(unit),
                   std::move(desc),
                   {},
                   min,
                   max,
                   ""};
}
ParamSpec Bool(std::string key, bool def, std::string desc) {
  return ParamSpec{
      std::move(key), ParamKind::kBool, def ? "true" : "false", "", std::move(desc), {}, 0, 1, ""};
}
ParamSpec Enum(std::string key, std::string def, std::vector<std::string> choices,
               std::string desc) {
  return ParamSpec{std::move(key),
                   ParamKind::kEnum,
                   std::move(def),
                   "",
                   std::move(desc),
                   std::move(choices),
                   0,
                   0,
                   ""};
}

// The cost keys, in registry order: each row is the registry entry and the
// Model field it fills, so BuildParams(), Model::From() and Model::ApplyNoise()
// walk one table instead of three hand-kept lists.
struct CostKey {
  const char* key;
  int64_t def;
  const char* desc;
  Time LineCosts::*line = nullptr;  // a field of Model::line, or
  Time Model::*time = nullptr;      // a Model cost field, or
  int Model::*count = nullptr;      // an integer field (never noise-scaled)
  const char* unit = "ns";
  double max = 1e15;
  bool noisy = true;  // scaled by noise.cv
};

const CostKey kCostKeys[] = {
    {.key = "cost.line_local_ns",
     .def = 5,
     .desc = "Atomic RMW on a cache line this CPU owns.",
     .line = &LineCosts::local},
    {.key = "cost.line_node_ns",
     .def = 50,
     .desc = "Cache-line transfer between two CPUs of one NUMA node.",
     .line = &LineCosts::node},
    {.key = "cost.line_socket_ns",
     .def = 90,
     .desc = "Cache-line transfer between two nodes of one socket.",
     .line = &LineCosts::socket},
    {.key = "cost.line_remote_ns",
     .def = 180,
     .desc = "Cache-line transfer between sockets.",
     .line = &LineCosts::remote},
    {.key = "cost.lock_ns",
     .def = 15,
     .desc = "Uncontended spin_lock_irqsave on a lock whose line this CPU owns.",
     .line = &LineCosts::lock},
    {.key = "cost.unlock_ns",
     .def = 5,
     .desc = "spin_unlock_irqrestore.",
     .line = &LineCosts::unlock},
    {.key = "cost.atomic_far_ns",
     .def = 0,
     .desc = "Occupancy of one atomic RMW at a contended line's home node when the platform "
             "executes LSE atomics far (Arm); 0 = near atomics, the line moves to the requester "
             "for every RMW (x86).",
     .line = &LineCosts::atomic_far,
     .noisy = false},
    {.key = "cost.rb_visit_ns",
     .def = 4,
     .desc = "Per rbtree node visited (rb_prev/rb_next/descent).",
     .time = &Model::rb_visit},
    {.key = "cost.rb_insert_ns",
     .def = 30,
     .desc = "rb_link_node + rb_insert_color.",
     .time = &Model::rb_insert},
    {.key = "cost.rb_erase_ns",
     .def = 30,
     .desc = "rb_erase with rebalancing.",
     .time = &Model::rb_erase},
    {.key = "cost.rb_dirty_lines",
     .def = 5,
     .desc = "Cache lines an rbtree insert or erase writes (node, parent links, rebalancing, "
             "cached_node); they move with iova_rbtree_lock to the next holder on another CPU, "
             "which pays a line transfer for each.",
     .count = &Model::rb_dirty_lines,
     .unit = "lines",
     .max = 64,
     .noisy = false},
    {.key = "cost.kmem_cache_ns",
     .def = 25,
     .desc = "kmem_cache_alloc/free of a struct iova or magazine bookkeeping.",
     .time = &Model::kmem_cache},
    {.key = "cost.rcache_op_ns",
     .def = 8,
     .desc = "Magazine push/pop (excluding locks).",
     .time = &Model::rcache_op},
    {.key = "cost.dma_call_ns",
     .def = 40,
     .desc = "Fixed body of a dma_map/unmap entry point with an IOMMU (iommu_dma_map_page / "
             "intel_map_page: lookups, alignment, checks).",
     .time = &Model::dma_call},
    {.key = "cost.indirect_call_ns",
     .def = 0,
     .desc = "The dma_map_ops indirect call (get_dma_ops + a retpolined or predicted indirect "
             "branch) a DMA API entry pays on the IOMMU path while dma.ops_indirect is true. "
             "0 = folded into cost.dma_call_ns (the calibrated platforms).",
     .time = &Model::indirect_call},
    {.key = "cost.ps_per_insn",
     .def = 400,
     .desc = "Time per instruction of the platform's cores on the DMA API path, ps: the "
             "per-platform factor that turns a commit's measured instruction delta "
             "(sw.map_delta_insns, sw.unmap_delta_insns) into time. 400 = one instruction "
             "per cycle at 2.5 GHz.",
     .time = &Model::ps_per_insn,
     .unit = "ps"},
    {.key = "cost.dma_direct_ns",
     .def = 25,
     .desc = "dma_direct_map_page / unmap (iommu off or passthrough).",
     .time = &Model::dma_direct},
    {.key = "cost.iommu_map_call_ns",
     .def = 40,
     .desc = "Per __iommu_map / ops->map call (iommu_pgsize, domain checks, indirect call).",
     .time = &Model::iommu_map_call},
    {.key = "cost.pt_level_ns",
     .def = 4,
     .desc = "Per IO page-table level walked.",
     .time = &Model::pt_level},
    {.key = "cost.pte_write_ns",
     .def = 2,
     .desc = "Per PTE written or cleared.",
     .time = &Model::pte_write},
    {.key = "cost.pt_alloc_ns",
     .def = 400,
     .desc = "Allocate and zero one page-table page.",
     .time = &Model::pt_alloc},
    {.key = "cost.clflush_line_ns",
     .def = 40,
     .desc = "clflush of one PTE cache line for a non-coherent VT-d walker.",
     .time = &Model::clflush_line},
    {.key = "cost.clflush_call_ns",
     .def = 0,
     .desc = "Fixed part of one domain_flush_cache() -> clflush_cache_range() call on a "
             "non-coherent VT-d walker (the mb() pair around the clflush loop), on top of "
             "cost.clflush_line_ns per line.",
     .time = &Model::clflush_call},
    {.key = "vtd.private_map_extra_ns",
     .def = 0,
     .desc = "Extra CPU per intel_map_sg/intel_map_page call on the VT-d private path. A kernel "
             "key for a measured cost without a modelled mechanism: the catalog sets it at "
             "c062db039f40 (seed 000, domain geometry 48->47 bits; fitted).",
     .time = &Model::vtd_private_map_extra,
     .noisy = false},
    {.key = "cost.cache_maint_line_ns",
     .def = 10,
     .desc = "CPU cache maintenance per 64 B line for a non-coherent device.",
     .time = &Model::cache_maint_line},
    {.key = "cost.mmio_write_ns",
     .def = 60,
     .desc = "Posted MMIO register write.",
     .time = &Model::mmio_write},
    {.key = "cost.mmio_read_ns",
     .def = 300,
     .desc = "MMIO register read (round trip).",
     .time = &Model::mmio_read},
    {.key = "cost.cmd_write_ns",
     .def = 8,
     .desc = "Write one invalidation descriptor / SMMU command into queue memory.",
     .time = &Model::cmd_write},
    {.key = "cost.poll_ns",
     .def = 30,
     .desc = "One poll of a completion word (wait descriptor status, CMD_SYNC MSI); also the delay "
             "to notice completion.",
     .time = &Model::poll},
    {.key = "cost.fq_op_ns",
     .def = 12,
     .desc = "Flush-queue ring bookkeeping per entry.",
     .time = &Model::fq_op},
    {.key = "cost.memset_ns_per_kib",
     .def = 20,
     .desc = "memset/memcpy per KiB (workload buffer work).",
     .time = &Model::memset_per_kib},
    // ---- Device costs.
    {.key = "hw.qi_desc_ns",
     .def = 50,
     .desc = "VT-d invalidation queue: fetch+decode per descriptor (incl. the wait descriptor's "
             "status write).",
     .time = &Model::qi_desc},
    {.key = "hw.qi_iotlb_psi_ns",
     .def = 600,
     .desc = "VT-d page-selective IOTLB invalidation.",
     .time = &Model::qi_iotlb_psi},
    {.key = "hw.qi_iotlb_dsi_ns",
     .def = 900,
     .desc = "VT-d domain-selective IOTLB invalidation.",
     .time = &Model::qi_iotlb_dsi},
    {.key = "hw.qi_iotlb_global_ns",
     .def = 1200,
     .desc = "VT-d global IOTLB invalidation.",
     .time = &Model::qi_iotlb_global},
    {.key = "hw.wbf_ns",
     .def = 300,
     .desc = "VT-d write-buffer flush completion (GSTS.WBFS).",
     .time = &Model::wbf},
    {.key = "hw.smmu_cmd_ns",
     .def = 30,
     .desc = "SMMUv3: consume one command from the queue.",
     .time = &Model::smmu_cmd},
    {.key = "hw.smmu_tlbi_ns",
     .def = 100,
     .desc = "SMMUv3: TLBI_NH_VA / TLBI_NH_ASID execution.",
     .time = &Model::smmu_tlbi},
    {.key = "hw.smmu_sync_ns",
     .def = 250,
     .desc = "SMMUv3: CMD_SYNC completion incl. MSI write.",
     .time = &Model::smmu_sync},
    {.key = "hw.mmu500_tlbi_ns",
     .def = 150,
     .desc = "MMU-500: one TLBIVA/TLBIASID.",
     .time = &Model::mmu500_tlbi},
    {.key = "hw.mmu500_sync_ns",
     .def = 600,
     .desc = "MMU-500: TLBSYNC completion after the last invalidation.",
     .time = &Model::mmu500_sync},
    {.key = "hw.amd_cmd_ns",
     .def = 40,
     .desc = "AMD-Vi: fetch and decode one command-buffer entry.",
     .time = &Model::amd_cmd},
    {.key = "hw.amd_inv_pages_ns",
     .def = 600,
     .desc = "AMD-Vi: INVALIDATE_IOMMU_PAGES of a page range.",
     .time = &Model::amd_inv_pages},
    {.key = "hw.amd_inv_all_ns",
     .def = 900,
     .desc = "AMD-Vi: INVALIDATE_IOMMU_PAGES of the whole domain (address all ones, S=1).",
     .time = &Model::amd_inv_all},
    {.key = "hw.amd_compl_wait_ns",
     .def = 250,
     .desc = "AMD-Vi: COMPLETION_WAIT until its semaphore store is visible.",
     .time = &Model::amd_compl_wait},
    {.key = "hw.iotlb_hit_ns", .def = 5, .desc = "Device IOTLB hit.", .time = &Model::iotlb_hit},
    {.key = "hw.iotlb_miss_level_ns",
     .def = 120,
     .desc = "Device IOTLB miss: per page-table level read by the walker.",
     .time = &Model::iotlb_miss_level},
};

Time& CostField(Model& m, const CostKey& c) { return c.line ? m.line.*c.line : m.*c.time; }

std::vector<ParamSpec> BuildParams() {
  std::vector<ParamSpec> p;
  // ---- Code paths (what a kernel commit changes).
  p.push_back(Enum("iommu.type", "vtd", {"vtd", "smmuv3", "mmu500", "amd"},
                   "IOMMU hardware and driver: Intel VT-d (drivers/iommu/intel), Arm SMMUv3 "
                   "(arm-smmu-v3.c), Arm MMU-500/SMMUv2 (arm-smmu.c), AMD-Vi "
                   "(drivers/iommu/amd). Set by the platform."));
  p.push_back(Int("iommu.addr_bits", 48, "bits",
                  "IOVA aperture width of the DMA domain (domain geometry; c062db039f40 made "
                  "VT-d 48->47).",
                  32, 64));
  p.push_back(
      Int("iommu.node", 0, "node",
          "NUMA node of the IOMMU unit: its command queue memory and registers, and the "
          "driver's shared command-queue words (allocated on the SMMU's node), are homed "
          "there, so CPUs on other nodes pay the node distance to reach them (SMMUv3 today; "
          "past the platform's last node: its last node). Set by the platform.",
          0, 1023));
  p.push_back(Enum("iova.allocator", "rcache", {"rbtree", "rcache"},
                   "IOVA allocation: rbtree = alloc_iova/__free_iova under iova_rbtree_lock on "
                   "every map/unmap (before 9257b4a206fc, v4.7); rcache = alloc_iova_fast/"
                   "free_iova_fast with per-CPU magazines in front of the rbtree."));
  p.push_back(Enum("iova.dma_iommu_alloc", "alloc_iova_fast", {"alloc_iova", "alloc_iova_fast"},
                   "How dma-iommu (the path of every IOMMU but VT-d's private dma_ops and AMD's "
                   "own) allocates: alloc_iova = __alloc_iova(): alloc_iova() under "
                   "iova_rbtree_lock on every map, size-aligned but not rounded up, and "
                   "find_iova() + __free_iova() on unmap (before bb65a64c7285); alloc_iova_fast "
                   "= the per-CPU rcache, sizes below the cache limit rounded up to a power of "
                   "two."));
  p.push_back(Bool("iova.dma32_first", true,
                   "PCI devices first try an IOVA below 4 GiB, then the full mask "
                   "(iommu_dma_alloc_iova / intel_alloc_iova)."));
  p.push_back(Int("iova.rcache.max_order", 6, "log2 granules",
                  "IOVA_RANGE_CACHE_MAX_SIZE: sizes below 2^(n-1) granules are cached.", 1, 12));
  p.push_back(Int("iova.rcache.mag_size", 127, "pfns",
                  "IOVA_MAG_SIZE: pfns per magazine (128; 127 since v6.0).", 2, 4096));
  p.push_back(Enum("iova.rcache.depot", "list", {"bounded", "list"},
                   "Global depot per size class: bounded = array of MAX_GLOBAL_MAGS, a full depot "
                   "frees a whole magazine into the rbtree (before v6.7); list = unbounded list "
                   "trimmed by delayed work (911aa1245da8, 233045378dbb, v6.7)."));
  p.push_back(Int("iova.rcache.max_global_mags", 32, "magazines",
                  "MAX_GLOBAL_MAGS: depot capacity with iova.rcache.depot=bounded.", 0, 4096));
  p.push_back(Int("iova.rcache.trim_ms", 100, "ms",
                  "Depot trim period with iova.rcache.depot=list (IOVA_DEPOT_DELAY); trims to "
                  "num_online_cpus magazines.",
                  1, 100000));
  p.push_back(Bool("iova.rcache.limit_scan", true,
                   "iova_magazine_pop scans the magazine for a pfn under limit_pfn (newer "
                   "kernels); false = only the top entry is tried (v4.7)."));
  p.push_back(Enum("fq.kind", "percpu", {"intel-global", "intel-percpu", "percpu", "single"},
                   "Deferred (lazy) invalidation: intel-global = one list under "
                   "async_umap_flush_lock, high-water 250, 10 ms (5e0d2a6fc094, 2008); "
                   "intel-percpu = per-CPU lists, a full list flushes all CPUs (aa4732406e12, "
                   "v4.7); percpu = dma-iommu/iova flush queue, per-CPU rings (v4.14+); single = "
                   "one shared queue (v6.7 option)."));
  p.push_back(
      Int("fq.size", 256, "entries", "IOVA_FQ_SIZE: per-CPU flush queue ring size.", 2, 1 << 20));
  p.push_back(Int("fq.timeout_ms", 10, "ms", "IOVA_FQ_TIMEOUT: flush queue timer.", 1, 100000));
  p.push_back(
      Int("fq.single_size", 32768, "entries", "Single flush queue size (v6.7).", 2, 1 << 24));
  p.push_back(
      Int("fq.single_timeout_ms", 1000, "ms", "Single flush queue timer (v6.7).", 1, 100000));
  p.push_back(Int("fq.intel_high_water", 250, "entries",
                  "HIGH_WATER_MARK of the VT-d deferred flush lists (intel-global, "
                  "intel-percpu).",
                  1, 1 << 20));
  p.push_back(Enum("map_sg", "batched", {"intel-private", "per-segment", "batched"},
                   "Scatterlist mapping: intel-private = intel_map_sg (one IOVA, one "
                   "__domain_mapping, one write-buffer flush; before c588072bba6b); per-segment "
                   "= __iommu_map per segment with its own sync (v5.11); batched = one "
                   "iotlb_sync_map for the list (d8c1df02ac7f, v5.12+). intel-private also "
                   "selects the VT-d private map_page/unmap path."));
  p.push_back(Bool("nvme.clamp_dma_opt", true,
                   "nvme_pci_alloc_dev() caps max_hw_sectors at dma_opt_mapping_size(), the "
                   "IOVA rcache's largest size behind an IOMMU, so large I/Os are split into "
                   "commands whose IOVAs stay cacheable (3710e2b056cb, v6.4); before, only the "
                   "MDTS and NVME_MAX_KB_SZ cap a command (fio-nvme)."));
  p.push_back(Bool("vtd.unmap_find_iova", false,
                   "intel_unmap looks the IOVA up with find_iova under iova_rbtree_lock (before "
                   "the v4.7 series switched to pfns)."));
  p.push_back(Bool("vtd.coherent", false,
                   "VT-d page-walk coherency (ECAP.C). When false every written PTE line is "
                   "clflushed (domain_flush_cache)."));
  p.push_back(Bool("vtd.rwbf", false,
                   "VT-d requires write-buffer flushing (CAP.RWBF or quirk): "
                   "iommu_flush_write_buffer does a GCMD.WBF handshake under register_lock."));
  p.push_back(Bool("vtd.cache_lock", true,
                   "VT-d strict and flush-queue invalidations go through cache_tag_flush_range/"
                   "_all, which hold the domain's cache_lock across qi_submit_sync, wait "
                   "included (a600ccd0a347, 4e589a53685c, v6.10); false = the xa_for_each loop "
                   "over the domain's IOMMUs without a lock (before)."));
  p.push_back(Bool("dma.ops_indirect", false,
                   "dma_map_page_attrs and friends reach dma-iommu through the dma_map_ops "
                   "indirect call (before b5c58b2fdc42, v6.12), charged cost.indirect_call_ns "
                   "per DMA API entry on the IOMMU path; false = direct calls."));
  p.push_back(Bool("amd.selective_flush", true,
                   "AMD-Vi strict unmap flushes the gathered range (fc65d0acaf23, v5.15); false "
                   "= amd_iommu_iotlb_sync flushes the whole domain (before)."));
  p.push_back(Bool("amd.wait_unlocked", true,
                   "AMD-Vi iommu_completion_wait polls its semaphore after dropping iommu->lock "
                   "(d2a0cac10597); false = the wait_on_sem spin holds the lock (before), so "
                   "every CPU's commands queue behind the waiter."));
  p.push_back(
      Enum("amd.strict_policy", "domain-type", {"driver", "late-set", "early-set", "domain-type"},
           "Who decides whether an AMD-Vi DMA domain gets a flush queue (lazy) or not (strict): "
           "driver = the driver's own policy, strict only with amd_iommu=fullflush, iommu.strict "
           "not read on x86 (before a250c23f15c2); late-set = the core's iommu_dma_strict, which "
           "starts strict and which the driver sets from amd_iommu_unmap_flush only after "
           "bus_set_iommu() has allocated the boot-time default domains, so a lazy request left to "
           "the kernel's default gets strict (a250c23f15c2, v5.13); early-set = the same, set "
           "before bus_set_iommu() (be227f8e99a6, v5.14); domain-type = the default domain type "
           "DMA or DMA-FQ from iommu.strict, else iommu.default_dma (c208916fe6c7, v5.15)."));
  p.push_back(Enum("iommu.default_dma", "lazy", {"lazy", "strict"},
                   "The kernel's built-in DMA domain strictness, CONFIG_IOMMU_DEFAULT_DMA_LAZY / "
                   "_STRICT (e96763ec42ce: LAZY by default where AMD_IOMMU or INTEL_IOMMU is "
                   "built); read where amd.strict_policy=domain-type and the command line "
                   "leaves strictness to the kernel (boot.lazy_request=default)."));
  p.push_back(Enum("boot.lazy_request", "param", {"param", "default"},
                   "How a run asks for lazy mode: param = iommu.strict=0 on the command line, "
                   "as the farm's real runs do (lib/iommu_mode KernelParams); default = "
                   "nothing, the kernel's own default decides, as a user's boot does. Strict "
                   "is always asked for with the switch the kernel reads on its driver "
                   "(amd_iommu=fullflush before a250c23f15c2, iommu.strict=1 since)."));
  p.push_back(Bool("fq.init_fails", false,
                   "The flush queue of a lazy DMA domain cannot be set up "
                   "(iommu_dma_init_fq(), init_iova_flush_queue() before v5.15): the domain "
                   "falls back to strict, as the kernel does. A test tree's lever; no "
                   "released kernel sets it."));
  p.push_back(Bool("smmu.tegra241_cmdqv", true,
                   "The SMMUv3 driver uses NVIDIA Tegra241 CMDQV virtual command queues when "
                   "the platform has them (918eb5c856f6, v6.12): tegra241_cmdqv_get_cmdq picks "
                   "VCMDQ smp_processor_id() % smmu.vcmdqs; false = the one SMMU cmdq."));
  p.push_back(Int("smmu.vcmdqs", 0, "queues",
                  "Logical VCMDQs of the kernel's VINTF0 (Tegra241 CMDQV; "
                  "num_vcmdqs / num_vintfs). 0 = the SMMU has no CMDQV. Set by the platform.",
                  0, 128));
  p.push_back(Bool("smmu.sync_per_batch", false,
                   "SMMUv3 hardware: the command consumer performs the TLBIs of a batch one "
                   "owner published with one PROD write, then one CMD_SYNC handshake that "
                   "completes every CMD_SYNC of that batch; the handshake stalls only its own "
                   "queue (a Tegra241 VCMDQ's stalls no other VCMDQ). false = every CMD_SYNC "
                   "costs hw.smmu_sync_ns of the consumer, in slot order. Set by the platform."));
  for (const char* side : {"map", "unmap"}) {
    p.push_back(Int(absl::StrCat("sw.", side, "_delta_insns"), 0, "instructions",
                    absl::StrCat("Instructions the commit's dma_", side,
                                 " path on the IOMMU executes beyond the catalog reference's, "
                                 "measured from the commit's own kernel (dma_map_benchmark in "
                                 "an instruction-counted guest: farmctl catalog measure); "
                                 "charged at cost.ps_per_insn on every IOMMU-path ",
                                 side, " entry. Negative = fewer. 0 = the catalog's model."),
                    -1e9, 1e9));
  }
  p.push_back(Enum("smmu.cmdq", "lockfree", {"spinlock", "lockfree"},
                   "SMMUv3 command queue: spinlock = one cmdq lock held for insertion and "
                   "CMD_SYNC wait (before 587e6c10a7ce); lockfree = cmpxchg slot reservation, "
                   "owner gathering, CMD_SYNC poll (587e6c10a7ce, v5.4)."));
  p.push_back(Int("smmu.cmdq_batch", 64, "commands",
                  "CMDQ_BATCH_ENTRIES: commands per cmdlist before an intermediate submit.", 1,
                  4096));
  p.push_back(Bool("smmu.range_inv", true,
                   "The SMMUv3 driver builds range TLBI_NH_VA commands (NUM, SCALE, TG, TTL) "
                   "when the SMMU reports IDR3.RIL (6a481a95d4c1, v5.7): one command per "
                   "5-bit chunk of the page count; false = one command per granule."));
  p.push_back(Bool("smmu.ril", false,
                   "The SMMU implements range invalidation (SMMUv3.2 IDR3.RIL). A platform "
                   "fact; without it smmu.range_inv changes nothing."));
  p.push_back(Int("smmu.max_tlbi_ops", 0, "commands",
                  "CMDQ_MAX_TLBI_OPS on the DMA unmap path: an SMMU without range "
                  "invalidation that would need this many per-granule TLBIs or more gets one "
                  "TLBI_NH_ASID instead (512 with 4 KiB pages, d5afb4b47e13 for SVA only; the "
                  "DMA path in Nicolin Chen's arm_smmu_invs series, merge not confirmed). "
                  "0 = per-granule commands whatever the size.",
                  0, 1 << 20));
  p.push_back(Bool("iopgtable.lockless", true,
                   "io-pgtable-arm installs intermediate tables with cmpxchg, so it needs no "
                   "caller lock (2c3d273eabe8, v4.13). false: the caller must serialise, and the "
                   "model takes the domain's pgtbl_lock whatever the driver keys say. VT-d is "
                   "always lockless."));
  p.push_back(Bool("mmu500.pgtbl_lock", false,
                   "arm-smmu.c arm_smmu_map/arm_smmu_unmap take smmu_domain->pgtbl_lock around "
                   "ops->map/ops->unmap; ops->unmap (arm_lpae_unmap) ends with "
                   "io_pgtable_tlb_sync(), so the TLBI writes and the TLB sync run under it and "
                   "every strict unmap of the domain serialises (before 523d7423e21b, v4.13)."));
  p.push_back(Bool("smmu.pgtbl_lock", false,
                   "arm-smmu-v3.c: the same pgtbl_lock around ops->map/ops->unmap, the CMD_SYNC "
                   "of a strict unmap inside it (before 58188afeb727, v4.13)."));
  p.push_back(Enum("mmu500.tlb_sync", "context", {"global", "context"},
                   "MMU-500 TLB sync after invalidation: global = __arm_smmu_tlb_sync() on the "
                   "global sTLBGSYNC/sTLBGSTATUS registers with no lock of its own (v4.12, "
                   "v4.13); context = arm_smmu_tlb_sync_context(), the context bank's "
                   "TLBSYNC/TLBSTATUS polled under smmu_domain->cb_lock (v4.14)."));
  p.push_back(Int("iotlb.entries", 64, "entries", "Device-side IOTLB capacity.", 1, 1 << 20));
  p.push_back(Int("iotlb.ways", 4, "ways", "IOTLB associativity.", 1, 64));
  p.push_back(Bool("dev.coherent", true,
                   "DMA-coherent device: no CPU cache maintenance on map/unmap "
                   "(arch_sync_dma_for_device)."));
  for (const char* kind : {"nic", "nvme", "zip"}) {
    p.push_back(Enum(
        absl::StrCat("group.", kind, ".type"), "auto",
        {"auto", "translated", std::string(kIdentityType), "none"},
        absl::StrCat("IOMMU attachment of the platform's ", kind,
                     " devices, the iommu group's default domain type "
                     "(/sys/kernel/iommu_groups/N/type, writable since v5.11): "
                     "auto = the platform's fact (`farm-emu list platforms`); "
                     "translated = a DMA domain, ",
                     iommu_mode::DomainType(iommu_mode::Mode::kStrict), " with --mode strict, ",
                     iommu_mode::DomainType(iommu_mode::Mode::kLazy), " with lazy; ", kIdentityType,
                     " = passthrough (dma-direct); none = not behind "
                     "an IOMMU (dma-direct). --mode off/passthrough put every "
                     "device on dma-direct.")));
  }
  ParamSpec noise = Dbl("noise.cv", "workload", "ratio",
                        "Run-to-run noise of one repeat, a coefficient of variation drawn from "
                        "the run seed: one N(1, cv) factor each for CPU work (every cost.* "
                        "key and the workload's CPU costs), device work (every hw.* key and "
                        "the workload's device service times) and turnaround (device "
                        "latency, round trip, server time). workload = the workload's declared CV, "
                        "from published repeats of "
                        "the real tool (`farm-emu list workloads`, docs/fidelity.md); 0 = "
                        "identical output for identical input.",
                        0, 0.5);
  noise.word = "workload";
  p.push_back(noise);

  // ---- CPU costs.
  // ---- CPU and device costs.
  for (const CostKey& c : kCostKeys) p.push_back(Int(c.key, c.def, c.unit, c.desc, 0, c.max));
  return p;
}

}  // namespace

const std::vector<ParamSpec>& AllParams() {
  static const std::vector<ParamSpec>* params = new std::vector<ParamSpec>(BuildParams());
  return *params;
}

const ParamSpec* FindParam(const std::string& key) {
  for (const ParamSpec& p : AllParams()) {
    if (p.key == key) return &p;
  }
  return nullptr;
}

ModelConfig::ModelConfig() {
  for (const ParamSpec& p : AllParams()) values_[p.key] = p.default_value;
}

namespace {

absl::Status Validate(const ParamSpec& spec, std::string& value) {
  switch (spec.kind) {
    case ParamKind::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("key ", spec.key, ": '", value, "' is not an integer"));
      }
      if (v < spec.min || v > spec.max) {
        return absl::InvalidArgumentError(absl::StrCat("key ", spec.key, ": ", v, " out of range [",
                                                       spec.min, ", ", spec.max, "]"));
      }
      value = std::to_string(v);
      return absl::OkStatus();
    }
    case ParamKind::kDouble: {
      if (!spec.word.empty() && value == spec.word) return absl::OkStatus();
      double v;
      if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
        if (!spec.word.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "key ", spec.key, ": '", value, "' is neither a number nor '", spec.word, "'"));
        }
        return absl::InvalidArgumentError(
            absl::StrCat("key ", spec.key, ": '", value, "' is not a number"));
      }
      if (v < spec.min || v > spec.max) {
        return absl::InvalidArgumentError(absl::StrCat(
            "key ", spec.key, ": ", value, " out of range [", spec.min, ", ", spec.max, "]"));
      }
      return absl::OkStatus();
    }
    case ParamKind::kBool: {
      std::string l = absl::AsciiStrToLower(value);
      if (l == "true" || l == "1" || l == "yes" || l == "on") {
        value = "true";
      } else if (l == "false" || l == "0" || l == "no" || l == "off") {
        value = "false";
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("key ", spec.key, ": '", value, "' is not a boolean (true|false)"));
      }
      return absl::OkStatus();
    }
    case ParamKind::kEnum:
      if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "key ", spec.key, ": '", value, "' is not one of ", absl::StrJoin(spec.choices, "|")));
      }
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::string Suggest(const std::string& key) {
  // The registered key sharing the longest prefix with `key`.
  const ParamSpec* best = nullptr;
  size_t best_len = 0;
  for (const ParamSpec& p : AllParams()) {
    size_t n = 0;
    while (n < p.key.size() && n < key.size() && p.key[n] == key[n]) ++n;
    if (n > best_len) {
      best_len = n;
      best = &p;
    }
  }
  if (best && best_len >= 3) return absl::StrCat(" (did you mean '", best->key, "'?)");
  return "";
}

}  // namespace

absl::Status CheckModelKey(absl::string_view key, absl::string_view value) {
  return ModelConfig().Apply({{std::string(key), std::string(value)}}).status();
}

absl::StatusOr<ModelConfig> ModelConfig::Apply(
    const std::map<std::string, std::string>& overrides) const {
  ModelConfig out = *this;
  for (const auto& [key, raw] : overrides) {
    const ParamSpec* spec = FindParam(key);
    if (!spec) {
      return absl::InvalidArgumentError(absl::StrCat("unknown model key '", key, "'", Suggest(key),
                                                     "; `farm-emu list params` lists them"));
    }
    std::string value(absl::StripAsciiWhitespace(raw));
    if (absl::Status s = Validate(*spec, value); !s.ok()) return s;
    out.values_[key] = value;
  }
  return out;
}

const std::string& ModelConfig::Get(const std::string& key) const {
  static const std::string kEmpty;
  auto it = values_.find(key);
  return it == values_.end() ? kEmpty : it->second;
}

absl::StatusOr<std::map<std::string, std::string>> ParseKeyValues(const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view part :
       absl::StrSplit(text, absl::ByAnyChar(", ;\t\n"), absl::SkipWhitespace())) {
    size_t eq = part.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected key=value, got '", std::string(part), "'"));
    }
    out[std::string(absl::StripAsciiWhitespace(part.substr(0, eq)))] =
        std::string(absl::StripAsciiWhitespace(part.substr(eq + 1)));
  }
  return out;
}

absl::StatusOr<Model> Model::From(const ModelConfig& cfg) {
  Model m;
  auto i = [&](const char* k) -> int64_t { return std::atoll(cfg.Get(k).c_str()); };
  auto b = [&](const char* k) { return cfg.Get(k) == "true"; };
  auto s = [&](const char* k) -> const std::string& { return cfg.Get(k); };

  const std::string& t = s("iommu.type");
  m.iommu_type = t == "vtd"      ? IommuType::kVtd
                 : t == "smmuv3" ? IommuType::kSmmuV3
                 : t == "amd"    ? IommuType::kAmd
                                 : IommuType::kMmu500;
  m.addr_bits = static_cast<int>(i("iommu.addr_bits"));
  m.iommu_node = static_cast<int>(i("iommu.node"));
  m.allocator = s("iova.allocator") == "rbtree" ? IovaAllocator::kRbtree : IovaAllocator::kRcache;
  m.dma_iommu_alloc =
      s("iova.dma_iommu_alloc") == "alloc_iova" ? DmaIommuAlloc::kAllocIova : DmaIommuAlloc::kFast;
  m.dma32_first = b("iova.dma32_first");
  m.rcache_max_order = static_cast<int>(i("iova.rcache.max_order"));
  m.mag_size = static_cast<int>(i("iova.rcache.mag_size"));
  m.depot = s("iova.rcache.depot") == "list" ? DepotKind::kList : DepotKind::kBounded;
  m.max_global_mags = static_cast<int>(i("iova.rcache.max_global_mags"));
  m.depot_trim_ms = static_cast<int>(i("iova.rcache.trim_ms"));
  m.mag_limit_scan = b("iova.rcache.limit_scan");
  const std::string& fq = s("fq.kind");
  m.fq_kind = fq == "intel-global"   ? FqKind::kIntelGlobal
              : fq == "intel-percpu" ? FqKind::kIntelPercpu
              : fq == "single"       ? FqKind::kSingle
                                     : FqKind::kPercpu;
  m.fq_size = static_cast<int>(i("fq.size"));
  m.fq_timeout_ms = static_cast<int>(i("fq.timeout_ms"));
  m.fq_single_size = static_cast<int>(i("fq.single_size"));
  m.fq_single_timeout_ms = static_cast<int>(i("fq.single_timeout_ms"));
  m.intel_high_water = static_cast<int>(i("fq.intel_high_water"));
  const std::string& sg = s("map_sg");
  m.map_sg = sg == "intel-private" ? MapSgKind::kIntelPrivate
             : sg == "per-segment" ? MapSgKind::kPerSegment
                                   : MapSgKind::kBatched;
  m.vtd_unmap_find_iova = b("vtd.unmap_find_iova");
  m.nvme_clamp_dma_opt = b("nvme.clamp_dma_opt");
  m.vtd_coherent = b("vtd.coherent");
  m.vtd_rwbf = b("vtd.rwbf");
  m.vtd_cache_lock = b("vtd.cache_lock");
  m.dma_ops_indirect = b("dma.ops_indirect");
  m.amd_selective_flush = b("amd.selective_flush");
  m.amd_wait_unlocked = b("amd.wait_unlocked");
  const std::string& sp = s("amd.strict_policy");
  m.amd_strict_policy = sp == "driver"      ? AmdStrictPolicy::kDriver
                        : sp == "late-set"  ? AmdStrictPolicy::kLateSet
                        : sp == "early-set" ? AmdStrictPolicy::kEarlySet
                                            : AmdStrictPolicy::kDomainType;
  m.default_dma_lazy = s("iommu.default_dma") == "lazy";
  m.lazy_by_default = s("boot.lazy_request") == "default";
  m.fq_init_fails = b("fq.init_fails");
  m.tegra241_cmdqv = b("smmu.tegra241_cmdqv");
  m.smmu_vcmdqs = static_cast<int>(i("smmu.vcmdqs"));
  m.smmu_sync_per_batch = b("smmu.sync_per_batch");
  m.map_delta_insns = i("sw.map_delta_insns");
  m.unmap_delta_insns = i("sw.unmap_delta_insns");
  m.cmdq = s("smmu.cmdq") == "spinlock" ? CmdqKind::kSpinlock : CmdqKind::kLockfree;
  m.cmdq_batch = static_cast<int>(i("smmu.cmdq_batch"));
  m.smmu_range_inv = b("smmu.range_inv");
  m.smmu_ril = b("smmu.ril");
  m.smmu_max_tlbi_ops = static_cast<int>(i("smmu.max_tlbi_ops"));
  m.pgtable_lockless = b("iopgtable.lockless");
  m.mmu500_pgtbl_lock = b("mmu500.pgtbl_lock");
  m.smmu_pgtbl_lock = b("smmu.pgtbl_lock");
  m.mmu500_tlb_sync =
      s("mmu500.tlb_sync") == "global" ? Mmu500TlbSync::kGlobal : Mmu500TlbSync::kContext;
  m.iotlb_entries = static_cast<int>(i("iotlb.entries"));
  m.iotlb_ways = static_cast<int>(i("iotlb.ways"));
  if (m.iotlb_entries % m.iotlb_ways != 0) {
    return absl::InvalidArgumentError("iotlb.entries must be a multiple of iotlb.ways");
  }
  m.dev_coherent = b("dev.coherent");
  auto attach = [&](const char* k) {
    const std::string& v = s(k);
    return v == "translated"    ? DeviceAttach::kTranslated
           : v == kIdentityType ? DeviceAttach::kIdentity
           : v == "none"        ? DeviceAttach::kNone
                                : DeviceAttach::kAuto;
  };
  m.group_nic = attach("group.nic.type");
  m.group_nvme = attach("group.nvme.type");
  m.group_zip = attach("group.zip.type");
  if (s("noise.cv") != "workload") m.noise_cv = std::atof(s("noise.cv").c_str());

  for (const CostKey& c : kCostKeys) {
    if (c.count) {
      m.*c.count = static_cast<int>(i(c.key));
    } else {
      CostField(m, c) = i(c.key);
    }
  }
  return m;
}

DeviceAttach Model::AttachOf(const DeviceSpec& d) const {
  DeviceAttach a = DeviceAttach::kAuto;
  if (d.name.starts_with("nic")) a = group_nic;
  if (d.name.starts_with("nvme")) a = group_nvme;
  if (d.name.starts_with("zip")) a = group_zip;
  return a == DeviceAttach::kAuto ? d.attach : a;
}

void Model::ApplyNoise(double cpu, double device) {
  for (const CostKey& c : kCostKeys) {
    if (!c.noisy) continue;
    const double k = std::string_view(c.key).starts_with("hw.") ? device : cpu;
    if (k == 1.0) continue;
    Time& v = CostField(*this, c);
    v = static_cast<Time>(std::llround(static_cast<double>(v) * k));
  }
}

}  // namespace farm::emu
