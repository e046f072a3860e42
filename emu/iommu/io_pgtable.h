// emu/iommu/io_pgtable.h: multi-level IO page tables and the device-side IOTLB.
//
// IoPageTable is a real 4-level radix table of 512-entry pages (VT-d second-
// level tables / io-pgtable-arm LPAE with a 4 KiB granule, 48-bit IOVA). Map
// and Unmap report what they touched (levels walked, PTEs written, tables
// allocated, distinct 64-byte PTE lines dirtied), which is what the model
// charges for: pfn_to_dma_pte/__domain_mapping, dma_pte_clear_range,
// __arm_lpae_map/__arm_lpae_unmap, and the VT-d clflush of written lines.
// Table pages are kept once allocated (bounded by the IOVA space in use).
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
  int lines = 0;  // distinct 64-byte PTE lines written
};

class IoPageTable {
 public:
  static constexpr int kLevels = 4;
  static constexpr int kBits = 9;
  static constexpr int kEntries = 1 << kBits;
  static constexpr uint64_t kNone = ~0ULL;

  IoPageTable();
  //! Installs npages translations iova_pfn+i -> phys_pfn+i. A run of pages
  //! inside one leaf table costs one walk; crossing a table re-walks.
  PtWork Map(uint64_t iova_pfn, uint64_t phys_pfn, uint64_t npages);
  //! Clears npages translations; *unmapped counts PTEs that were present.
  PtWork Unmap(uint64_t iova_pfn, uint64_t npages, uint64_t* unmapped);
  //! Walks the table: the physical pfn, or kNone when not mapped.
  uint64_t Translate(uint64_t iova_pfn) const;
  size_t tables() const { return tables_.size(); }
  uint64_t mapped_pages() const { return mapped_; }

 private:
  using Table = std::array<uint64_t, kEntries>;
  // Returns the leaf table index for iova_pfn, allocating on the way when
  // `alloc`; -1 when absent.
  int64_t Leaf(uint64_t iova_pfn, bool alloc, PtWork* w);
  std::vector<Table> tables_;
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
