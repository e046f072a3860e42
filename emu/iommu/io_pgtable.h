// emu/iommu/io_pgtable.h: multi-level IO page tables and the device-side IOTLB.
//
// IoPageTable is a real 4-level radix table of 512-entry pages (VT-d second-
// level tables / io-pgtable-arm LPAE with a 4 KiB granule, 48-bit IOVA). Map
// and Unmap report what they touched (levels walked, PTEs written, tables
// allocated or freed, 2 MiB blocks, distinct 64-byte PTE lines dirtied),
// which is what the model charges for: pfn_to_dma_pte/__domain_mapping,
// dma_pte_clear_range, __arm_lpae_map/__arm_lpae_unmap, and the VT-d clflush
// of written lines.
//
// Two formats. The VT-d / AMD form maps 4 KiB pages only and keeps table
// pages once allocated (bounded by the IOVA space in use). The io-pgtable-arm
// form (kArmLpae) follows what __iommu_map / __iommu_unmap ask of it through
// iommu_pgsize(): a 2 MiB-aligned run of 512 pages whose physical address is
// 2 MiB-aligned too becomes one level-2 block entry; an unmap that covers a
// whole 2 MiB-aligned chunk is issued at the 2 MiB page size, so a leaf table
// found there is cleared from its parent and freed (__arm_lpae_unmap's
// "flush any partial walks" branch), and a block found there is one leaf.
//
// Iotlb is a set-associative translation cache with LRU replacement,
// hit/miss counting and range / whole-domain invalidation.
//
// Thread-safety: none (engine thread). Ownership: plain value types.
#ifndef EMU_IOMMU_IO_PGTABLE_H_
#define EMU_IOMMU_IO_PGTABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace farm::emu {

//! What one page-table operation touched.
struct PtWork {
  int levels_walked = 0;
  int ptes = 0;
  int tables_allocated = 0;
  int lines = 0;   // distinct 64-byte PTE lines written
  int blocks = 0;  // 2 MiB block entries written or cleared (kArmLpae)
  //! Leaf tables cleared from their parent and freed (kArmLpae): each is one
  //! io_pgtable_tlb_flush_walk() over its 2 MiB, then __arm_lpae_free_pgtable().
  int tables_freed = 0;
  uint64_t first_walk_pfn = 0;  // the first freed table's IOVA pfn
};

class IoPageTable {
 public:
  static constexpr int kLevels = 4;
  static constexpr int kBits = 9;
  static constexpr int kEntries = 1 << kBits;
  static constexpr uint64_t kNone = ~0ULL;
  static constexpr uint64_t kBlockPages = kEntries;  // 2 MiB of 4 KiB pages

  enum class Format { kPagesOnly, kArmLpae };

  explicit IoPageTable(Format format = Format::kPagesOnly);
  //! Installs npages translations iova_pfn+i -> phys_pfn+i. A run of pages
  //! inside one leaf table costs one walk; crossing a table re-walks. With
  //! kArmLpae an aligned 2 MiB run is one block entry; a leaf table already
  //! there is unmapped and freed first (arm_lpae_init_pte), counted in
  //! tables_freed.
  PtWork Map(uint64_t iova_pfn, uint64_t phys_pfn, uint64_t npages);
  //! Clears npages translations; *unmapped counts pages that were present.
  //! ptes counts 4 KiB leaf entries cleared, blocks 2 MiB ones.
  PtWork Unmap(uint64_t iova_pfn, uint64_t npages, uint64_t* unmapped);
  //! Walks the table: the physical pfn, or kNone when not mapped.
  uint64_t Translate(uint64_t iova_pfn) const;
  size_t tables() const { return tables_.size() - free_tables_.size(); }
  uint64_t mapped_pages() const { return mapped_; }

 private:
  using Table = std::array<uint64_t, kEntries>;
  // Returns the leaf table index for iova_pfn, allocating on the way when
  // `alloc`; -1 when absent.
  int64_t Leaf(uint64_t iova_pfn, bool alloc, PtWork* w);
  // The level-2 entry covering iova_pfn, allocating levels 1-2 when `alloc`;
  // nullptr when absent.
  uint64_t* Level2Entry(uint64_t iova_pfn, bool alloc, PtWork* w);
  // __arm_lpae_free_pgtable() of the leaf table a level-2 entry points to.
  void FreeLeafTable(uint64_t* entry, uint64_t iova_pfn, PtWork* w);
  int64_t NewTable();
  int64_t InstallTable(int64_t t, uint64_t iova_pfn, int level, PtWork* w);
  bool MapBlock(uint64_t pfn, uint64_t phys_pfn, uint64_t left, PtWork* w);
  bool UnmapBlock(uint64_t pfn, uint64_t left, uint64_t* unmapped, PtWork* w);
  Format format_;
  std::vector<Table> tables_;
  std::vector<int64_t> free_tables_;
  uint64_t mapped_ = 0;
};

class Iotlb {
 public:
  Iotlb(int entries, int ways);
  //! Looks pfn up; on a miss installs it (evicting the set's LRU entry).
  bool Lookup(uint64_t pfn);
  void InvalidateRange(uint64_t pfn, uint64_t npages);
  void InvalidateAll();
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  int Set(uint64_t pfn) const {
    return static_cast<int>((pfn ^ (pfn >> 7)) % static_cast<uint64_t>(sets_));
  }
  int sets_;
  int ways_;
  std::vector<uint64_t> tag_;  // pfn + 1; 0 = invalid
  std::vector<uint64_t> stamp_;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_IO_PGTABLE_H_
