// emu/model/model_config.h: the named model keys (code-path choices and costs).
//
// Every behaviour the emulator can switch (which IOVA allocator, which flush
// queue, which SMMUv3 command queue, ...) and every cost it charges is a key
// with a default, a unit and a description. A run's configuration is resolved
// in layers, each a plain key=value map applied with ModelConfig::Apply():
//   registry defaults -> platform cost table -> kernel (commit) settings
//   -> user `--set` overrides.
// A commit catalog is therefore nothing more than key maps per commit.
//
// ModelConfig holds validated strings (what is printed and hashed); Model is
// the typed view the hot paths read, built once per run by Model::From().
// Thread-safety: immutable after construction; safe to share read-only.
#ifndef EMU_MODEL_MODEL_CONFIG_H_
#define EMU_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "emu/engine/engine.h"
#include "emu/model/platform.h"

namespace farm::emu {

enum class ParamKind { kInt, kDouble, kBool, kEnum };

//! One model key.
struct ParamSpec {
  std::string key;
  ParamKind kind;
  std::string default_value;
  std::string unit;  // "ns", "entries", "ms", "" ...
  std::string description;
  std::vector<std::string> choices;  // kEnum only
  double min = 0;                    // kInt / kDouble
  double max = 1e18;
  //! kDouble only: a word accepted besides a number ("" = none); noise.cv's
  //! "workload" = the workload's declared run-to-run CV.
  std::string word;
};

//! All keys, in documentation order.
const std::vector<ParamSpec>& AllParams();
//! Spec for `key`, or nullptr.
const ParamSpec* FindParam(const std::string& key);

//! A complete, validated assignment of every key.
class ModelConfig {
 public:
  //! Every key at its registry default.
  ModelConfig();
  //! Returns a copy with `overrides` applied. Errors: unknown key (with a
  //! suggestion), or a value of the wrong type / out of range / not a choice.
  absl::StatusOr<ModelConfig> Apply(const std::map<std::string, std::string>& overrides) const;
  const std::string& Get(const std::string& key) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

//! One `key: value` against the registry: what `farm-emu --set`, a spec's
//! `set:` and a catalog's `set:` are held to (its signature is a catalog's
//! KeyValidator). Errors as Apply's.
absl::Status CheckModelKey(absl::string_view key, absl::string_view value);

//! Parses "k=v,k2=v2" (also accepts ';' or whitespace separators).
absl::StatusOr<std::map<std::string, std::string>> ParseKeyValues(const std::string& text);

enum class IommuType { kVtd, kSmmuV3, kMmu500, kAmd };
enum class IovaAllocator { kRbtree, kRcache };
// alloc_iova() on every map, or alloc_iova_fast().
enum class DmaIommuAlloc { kAllocIova, kFast };
enum class DepotKind { kBounded, kList };
enum class FqKind { kIntelGlobal, kIntelPercpu, kPercpu, kSingle };
enum class MapSgKind { kIntelPrivate, kPerSegment, kBatched };
enum class CmdqKind { kSpinlock, kLockfree };
enum class Mmu500TlbSync { kGlobal, kContext };
enum class AmdStrictPolicy { kDriver, kLateSet, kEarlySet, kDomainType };

//! Typed view of a ModelConfig; field comments name the key.
struct Model {
  static absl::StatusOr<Model> From(const ModelConfig& cfg);

  // Code paths.
  IommuType iommu_type = IommuType::kVtd;                            // iommu.type
  int addr_bits = 48;                                                // iommu.addr_bits
  int iommu_node = 0;                                                // iommu.node
  IovaAllocator allocator = IovaAllocator::kRcache;                  // iova.allocator
  DmaIommuAlloc dma_iommu_alloc = DmaIommuAlloc::kFast;              // iova.dma_iommu_alloc
  bool dma32_first = true;                                           // iova.dma32_first
  int rcache_max_order = 6;                                          // iova.rcache.max_order
  int mag_size = 128;                                                // iova.rcache.mag_size
  DepotKind depot = DepotKind::kBounded;                             // iova.rcache.depot
  int max_global_mags = 32;                                          // iova.rcache.max_global_mags
  int depot_trim_ms = 100;                                           // iova.rcache.trim_ms
  bool mag_limit_scan = true;                                        // iova.rcache.limit_scan
  FqKind fq_kind = FqKind::kPercpu;                                  // fq.kind
  int fq_size = 256;                                                 // fq.size
  int fq_timeout_ms = 10;                                            // fq.timeout_ms
  int fq_single_size = 32768;                                        // fq.single_size
  int fq_single_timeout_ms = 1000;                                   // fq.single_timeout_ms
  int intel_high_water = 250;                                        // fq.intel_high_water
  MapSgKind map_sg = MapSgKind::kBatched;                            // map_sg
  bool vtd_unmap_find_iova = false;                                  // vtd.unmap_find_iova
  bool vtd_coherent = false;                                         // vtd.coherent
  bool vtd_rwbf = false;                                             // vtd.rwbf
  bool vtd_cache_lock = true;                                        // vtd.cache_lock
  bool dma_ops_indirect = false;                                     // dma.ops_indirect
  bool nvme_clamp_dma_opt = true;                                    // nvme.clamp_dma_opt
  bool amd_selective_flush = true;                                   // amd.selective_flush
  bool amd_wait_unlocked = true;                                     // amd.wait_unlocked
  AmdStrictPolicy amd_strict_policy = AmdStrictPolicy::kDomainType;  // amd.strict_policy
  bool default_dma_lazy = true;                                      // iommu.default_dma
  bool lazy_by_default = false;                                      // boot.lazy_request
  bool fq_init_fails = false;                                        // fq.init_fails
  bool tegra241_cmdqv = true;                                        // smmu.tegra241_cmdqv
  int smmu_vcmdqs = 0;                                               // smmu.vcmdqs
  bool smmu_sync_per_batch = false;                                  // smmu.sync_per_batch
  CmdqKind cmdq = CmdqKind::kLockfree;                               // smmu.cmdq
  int cmdq_batch = 64;                                               // smmu.cmdq_batch
  bool smmu_range_inv = true;                                        // smmu.range_inv
  bool smmu_ril = false;                                             // smmu.ril
  int smmu_max_tlbi_ops = 0;                                         // smmu.max_tlbi_ops
  bool pgtable_lockless = true;                                      // iopgtable.lockless
  bool mmu500_pgtbl_lock = false;                                    // mmu500.pgtbl_lock
  bool smmu_pgtbl_lock = false;                                      // smmu.pgtbl_lock
  Mmu500TlbSync mmu500_tlb_sync = Mmu500TlbSync::kContext;           // mmu500.tlb_sync
  int iotlb_entries = 64;                                            // iotlb.entries
  int iotlb_ways = 4;                                                // iotlb.ways
  bool dev_coherent = true;                                          // dev.coherent
  DeviceAttach group_nic = DeviceAttach::kAuto;                      // group.nic.type
  DeviceAttach group_nvme = DeviceAttach::kAuto;                     // group.nvme.type
  DeviceAttach group_zip = DeviceAttach::kAuto;                      // group.zip.type
  //! The attachment of platform device `d`: its group.<kind>.type key (kind =
  //! the name's prefix: nic, nvme, zip), else the platform's fact.
  DeviceAttach AttachOf(const DeviceSpec& d) const;
  //! noise.cv: a CV, or unset for "workload" (the run uses the workload's
  //! declared CV, WorkloadInfo::noise_cv).
  std::optional<double> noise_cv;

  // CPU costs (ns).
  LineCosts line;  // cost.line_*_ns, cost.lock_ns, cost.unlock_ns
  Time rb_visit = 0, rb_insert = 0, rb_erase = 0;
  int rb_dirty_lines = 5;  // cost.rb_dirty_lines
  Time kmem_cache = 0, rcache_op = 0, dma_call = 0, dma_direct = 0;
  Time indirect_call = 0;  // cost.indirect_call_ns
  Time ps_per_insn = 0;    // cost.ps_per_insn: the platform's time per instruction
  // sw.map_delta_insns / sw.unmap_delta_insns: the commit's measured
  // instructions per map / unmap beyond the catalog reference's.
  int64_t map_delta_insns = 0, unmap_delta_insns = 0;
  Time iommu_map_call = 0, pt_level = 0, pte_write = 0, pt_alloc = 0;
  Time clflush_line = 0, cache_maint_line = 0, mmio_write = 0, mmio_read = 0;
  Time clflush_call = 0;           // cost.clflush_call_ns
  Time vtd_private_map_extra = 0;  // vtd.private_map_extra_ns
  Time cmd_write = 0, poll = 0, fq_op = 0, memset_per_kib = 0;
  // Device costs (ns).
  Time qi_desc = 0, qi_iotlb_psi = 0, qi_iotlb_dsi = 0, qi_iotlb_global = 0, wbf = 0;
  Time smmu_cmd = 0, smmu_tlbi = 0, smmu_sync = 0;
  Time mmu500_tlbi = 0, mmu500_sync = 0;
  Time amd_cmd = 0, amd_inv_pages = 0, amd_inv_all = 0, amd_compl_wait = 0;
  Time iotlb_hit = 0, iotlb_miss_level = 0;

  //! One repeat's run-to-run noise on the cost keys: every device cost
  //! (hw.*) is scaled by `device`, every other cost by `cpu` (this run's CPU
  //! speed: frequency, cache and placement move all CPU work together).
  void ApplyNoise(double cpu, double device);
};

}  // namespace farm::emu

#endif  // EMU_MODEL_MODEL_CONFIG_H_
