#include "emu/model/kernel.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "emu/model/catalog.h"
#include "emu/model/model_config.h"

namespace farm::emu {
namespace {

std::vector<CommitEntry> Build() {
  return {
      {"v4.6",
       "Linux 4.6 (stock 2016: rbtree IOVA allocator, 2008 global deferred flush, VT-d private "
       "DMA ops, SMMUv3 cmdq spinlock, locked io-pgtable)",
       {{"iova.allocator", "rbtree"},
        {"fq.kind", "intel-global"},
        {"map_sg", "intel-private"},
        {"vtd.unmap_find_iova", "true"},
        {"smmu.cmdq", "spinlock"},
        {"iopgtable.lockless", "false"},
        {"iova.rcache.mag_size", "128"},
        {"iova.rcache.depot", "bounded"},
        {"iova.rcache.limit_scan", "false"},
        {"iommu.addr_bits", "48"}}},
      {"9257b4a206fc",
       "iommu/iova: introduce per-cpu caching to iova allocation",
       {{"iova.allocator", "rcache"}}},
      {"aa4732406e12",
       "iommu/vt-d: per-cpu deferred invalidation queues",
       {{"fq.kind", "intel-percpu"}, {"vtd.unmap_find_iova", "false"}}},
      {"v4.7", "Linux 4.7", {}},
      {"2c3d273eabe8",
       "iommu/io-pgtable-arm: Support lockless operation",
       {{"iopgtable.lockless", "true"}}},
      {"v4.14",
       "Linux 4.14 (flush queue in the IOVA layer; VT-d and dma-iommu use it; "
       "dma-iommu uses the per-CPU IOVA caches, bb65a64c7285)",
       {{"fq.kind", "percpu"}}},
      {"587e6c10a7ce",
       "iommu/arm-smmu-v3: Reduce contention during command-queue insertion",
       {{"smmu.cmdq", "lockfree"}}},
      {"v5.4", "Linux 5.4", {{"iova.rcache.limit_scan", "true"}}},
      {"v5.10", "Linux 5.10", {}},
      {"65f746e8285f", "seed-000 good commit (before the VT-d dma-iommu conversion)", {}},
      {"c062db039f40",
       "iommu/vt-d: domain geometry update (48 -> 47 bit IOVA aperture)",
       {{"iommu.addr_bits", "47"}}},
      {"c588072bba6b",
       "iommu/vt-d: Convert intel iommu driver to the iommu ops",
       {{"map_sg", "per-segment"}}},
      {"v5.11", "Linux 5.11", {}},
      {"d8c1df02ac7f", "iommu: Move iotlb_sync_map out from __iommu_map", {{"map_sg", "batched"}}},
      {"v5.12", "Linux 5.12", {}},
      {"v6.0", "Linux 6.0 (IOVA_MAG_SIZE 127)", {{"iova.rcache.mag_size", "127"}}},
      {"911aa1245da8",
       "iommu/iova: Make the rcache depot scale better",
       {{"iova.rcache.depot", "list"}}},
      {"233045378dbb", "iommu/iova: Manage the depot list size", {}},
      {"v6.7", "Linux 6.7", {}},
  };
}

}  // namespace

const std::vector<CommitEntry>& BuiltinCommits() {
  static const std::vector<CommitEntry>* c = new std::vector<CommitEntry>(Build());
  return *c;
}

absl::StatusOr<std::map<std::string, std::string>> AccumulateSettings(
    const std::vector<CommitEntry>& commits, const std::string& id) {
  std::map<std::string, std::string> acc;
  for (const CommitEntry& c : commits) {
    for (const auto& [k, v] : c.set) acc[k] = v;
    if (c.id == id) return acc;
  }
  std::vector<std::string> ids;
  for (const CommitEntry& c : commits) ids.push_back(c.id);
  return absl::NotFoundError(absl::StrCat("unknown kernel '", id,
                                          "'; known: ", absl::StrJoin(ids, ", "),
                                          ", stock-2016, patched-2016, latest, or k=v,..."));
}

absl::StatusOr<std::map<std::string, std::string>> ResolveKernel(const std::string& id,
                                                                 const std::string& catalog_path) {
  std::string base = id;
  std::string extra;
  if (size_t plus = id.find('+'); plus != std::string::npos) {
    base = id.substr(0, plus);
    extra = id.substr(plus + 1);
  } else if (id.find('=') != std::string::npos) {
    base = "";
    extra = id;
  }
  std::map<std::string, std::string> out;
  if (base == "stock-2016") base = "v4.6";
  if (base == "patched-2016") base = "aa4732406e12";
  if (!base.empty()) {
    // Commit ids and tags resolve through the commit catalog (emu/catalog.h):
    // --catalog FILE, else $FARM_EMU_CATALOG, else the shipped linux-iommu.yaml.
    // Its keys are checked against the model-key registry.
    farm::emu::KeyValidator validator = [](absl::string_view k, absl::string_view v) {
      return ModelConfig().Apply({{std::string(k), std::string(v)}}).status();
    };
    std::string path = catalog_path;
    if (path.empty()) {
      absl::StatusOr<std::string> def = farm::emu::DefaultCatalogPath();
      if (!def.ok()) return def.status();
      path = *def;
    }
    absl::StatusOr<farm::emu::Catalog> catalog = farm::emu::Catalog::LoadFile(path, validator);
    if (!catalog.ok()) return catalog.status();
    if (base == "latest" || base == "default") base = catalog->commits().back().id;
    absl::StatusOr<farm::emu::ResolvedCommit> r = catalog->Resolve(base);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("--kernel: ", r.status().message(),
                                                          " (catalog ", path, ")"));
    }
    out = std::move(r->settings);
  }
  if (!extra.empty()) {
    auto kv = ParseKeyValues(extra);
    if (!kv.ok()) return kv.status();
    for (const auto& [k, v] : *kv) out[k] = v;
  }
  return out;
}

}  // namespace farm::emu
