#include "emu/iommu/io_pgtable.h"

#include <algorithm>

namespace farm::emu {
namespace {
constexpr uint64_t kPresent = 1;
// A level-2 entry that maps 2 MiB itself (io-pgtable-arm block descriptor).
constexpr uint64_t kBlock = 1ULL << 63;
constexpr int kBlockLevel = IoPageTable::kLevels - 2;
inline int Index(uint64_t pfn, int level) {
  // level 0 = root (bits 39..47 of the address, i.e. pfn bits 27..35).
  return static_cast<int>((pfn >> ((IoPageTable::kLevels - 1 - level) * IoPageTable::kBits)) &
                          (IoPageTable::kEntries - 1));
}
}  // namespace

IoPageTable::IoPageTable(Format format) : format_(format) { tables_.emplace_back().fill(0); }

int64_t IoPageTable::NewTable() {
  if (!free_tables_.empty()) {
    int64_t n = free_tables_.back();
    free_tables_.pop_back();
    tables_[n].fill(0);
    return n;
  }
  tables_.emplace_back().fill(0);
  return static_cast<int64_t>(tables_.size()) - 1;
}

// pfn_to_dma_pte / __arm_lpae_map: allocate the next-level table and install
// it in table `t` at `level` (with cmpxchg when lockless, else under the
// domain lock). Indexes tables_ again: a reference into it may dangle after
// NewTable's emplace_back.
int64_t IoPageTable::InstallTable(int64_t t, uint64_t iova_pfn, int level, PtWork* w) {
  const int64_t n = NewTable();
  ++w->tables_allocated;
  ++w->lines;
  tables_[t][Index(iova_pfn, level)] = (static_cast<uint64_t>(n) << 1) | kPresent;
  return n;
}

int64_t IoPageTable::Leaf(uint64_t iova_pfn, bool alloc, PtWork* w) {
  int64_t t = 0;
  for (int level = 0; level < kLevels - 1; ++level) {
    ++w->levels_walked;
    uint64_t& e = tables_[t][Index(iova_pfn, level)];
    // A block is no table to descend into. The DMA API never maps pages into
    // a live block or unmaps part of one (arm_lpae_split_blk_unmap), so a
    // block found here is treated as absent.
    if (!(e & kPresent) || (e & kBlock)) {
      if (!alloc) return -1;
      if (e & kBlock) mapped_ -= kBlockPages;
      t = InstallTable(t, iova_pfn, level, w);
    } else {
      t = static_cast<int64_t>(e >> 1);
    }
  }
  ++w->levels_walked;
  return t;
}

uint64_t* IoPageTable::Level2Entry(uint64_t iova_pfn, bool alloc, PtWork* w) {
  int64_t t = 0;
  for (int level = 0; level < kBlockLevel; ++level) {
    ++w->levels_walked;
    uint64_t e = tables_[t][Index(iova_pfn, level)];
    if (!(e & kPresent)) {
      if (!alloc) return nullptr;
      t = InstallTable(t, iova_pfn, level, w);
    } else {
      t = static_cast<int64_t>(e >> 1);
    }
  }
  ++w->levels_walked;
  return &tables_[t][Index(iova_pfn, kBlockLevel)];
}

void IoPageTable::FreeLeafTable(uint64_t* entry, uint64_t iova_pfn, PtWork* w) {
  const int64_t leaf = static_cast<int64_t>(*entry >> 1);
  for (uint64_t e : tables_[leaf]) {
    if (e & kPresent) --mapped_;
  }
  *entry = 0;
  free_tables_.push_back(leaf);
  if (w->tables_freed++ == 0) w->first_walk_pfn = iova_pfn;
  ++w->lines;
}

// __arm_lpae_map() at the 2 MiB level: iommu_pgsize() picked the block size
// because iova, phys and the remaining length all allow it.
bool IoPageTable::MapBlock(uint64_t pfn, uint64_t phys_pfn, uint64_t left, PtWork* w) {
  if (format_ != Format::kArmLpae || left < kBlockPages || pfn % kBlockPages != 0 ||
      phys_pfn % kBlockPages != 0) {
    return false;
  }
  uint64_t* e = Level2Entry(pfn, true, w);
  // arm_lpae_init_pte(): a table where the block goes is unmapped (a walk
  // flush) and freed before the block is written.
  if ((*e & kPresent) && !(*e & kBlock)) FreeLeafTable(e, pfn, w);
  if (!(*e & kPresent)) mapped_ += kBlockPages;
  *e = (phys_pfn << 1) | kPresent | kBlock;
  ++w->blocks;
  ++w->lines;
  return true;
}

// __iommu_unmap() of an aligned 2 MiB chunk is issued at the 2 MiB page size:
// __arm_lpae_unmap() clears the level-2 entry, whatever it is.
bool IoPageTable::UnmapBlock(uint64_t pfn, uint64_t left, uint64_t* unmapped, PtWork* w) {
  if (format_ != Format::kArmLpae || left < kBlockPages || pfn % kBlockPages != 0) return false;
  uint64_t* e = Level2Entry(pfn, false, w);
  if (e == nullptr || !(*e & kPresent)) return false;
  if (*e & kBlock) {
    *e = 0;
    mapped_ -= kBlockPages;
    *unmapped += kBlockPages;
    ++w->blocks;
    ++w->lines;
    return true;
  }
  const uint64_t before = mapped_;
  FreeLeafTable(e, pfn, w);
  *unmapped += before - mapped_;
  return true;
}

PtWork IoPageTable::Map(uint64_t iova_pfn, uint64_t phys_pfn, uint64_t npages) {
  PtWork w;
  uint64_t i = 0;
  while (i < npages) {
    uint64_t pfn = iova_pfn + i;
    if (MapBlock(pfn, phys_pfn + i, npages - i, &w)) {
      i += kBlockPages;
      continue;
    }
    int64_t leaf = Leaf(pfn, true, &w);
    int idx = Index(pfn, kLevels - 1);
    uint64_t run = std::min<uint64_t>(npages - i, static_cast<uint64_t>(kEntries - idx));
    Table& t = tables_[leaf];
    for (uint64_t k = 0; k < run; ++k) {
      uint64_t& e = t[idx + k];
      if (!(e & kPresent)) ++mapped_;
      e = ((phys_pfn + i + k) << 1) | kPresent;
    }
    w.ptes += static_cast<int>(run);
    // 8 PTEs per 64-byte line.
    w.lines += static_cast<int>((idx + run - 1) / 8 - idx / 8 + 1);
    i += run;
  }
  return w;
}

PtWork IoPageTable::Unmap(uint64_t iova_pfn, uint64_t npages, uint64_t* unmapped) {
  PtWork w;
  uint64_t i = 0;
  *unmapped = 0;
  while (i < npages) {
    uint64_t pfn = iova_pfn + i;
    if (UnmapBlock(pfn, npages - i, unmapped, &w)) {
      i += kBlockPages;
      continue;
    }
    int idx = Index(pfn, kLevels - 1);
    uint64_t run = std::min<uint64_t>(npages - i, static_cast<uint64_t>(kEntries - idx));
    int64_t leaf = Leaf(pfn, false, &w);
    if (leaf >= 0) {
      Table& t = tables_[leaf];
      for (uint64_t k = 0; k < run; ++k) {
        uint64_t& e = t[idx + k];
        if (e & kPresent) {
          ++*unmapped;
          --mapped_;
        }
        e = 0;
      }
      w.ptes += static_cast<int>(run);
      w.lines += static_cast<int>((idx + run - 1) / 8 - idx / 8 + 1);
    }
    i += run;
  }
  return w;
}

uint64_t IoPageTable::Translate(uint64_t iova_pfn) const {
  int64_t t = 0;
  for (int level = 0; level < kLevels - 1; ++level) {
    uint64_t e = tables_[t][Index(iova_pfn, level)];
    if (!(e & kPresent)) return kNone;
    if (e & kBlock) return ((e & ~kBlock) >> 1) + iova_pfn % kBlockPages;
    t = static_cast<int64_t>(e >> 1);
  }
  uint64_t e = tables_[t][Index(iova_pfn, kLevels - 1)];
  return (e & kPresent) ? (e >> 1) : kNone;
}

Iotlb::Iotlb(int entries, int ways)
    : sets_(std::max(1, entries / std::max(1, ways))),
      ways_(std::max(1, ways)),
      tag_(static_cast<size_t>(sets_ * ways_), 0),
      stamp_(static_cast<size_t>(sets_ * ways_), 0) {}

bool Iotlb::Lookup(uint64_t pfn) {
  int base = Set(pfn) * ways_;
  int victim = base;
  ++clock_;
  for (int w = 0; w < ways_; ++w) {
    if (tag_[base + w] == pfn + 1) {
      stamp_[base + w] = clock_;
      ++hits_;
      return true;
    }
    if (stamp_[base + w] < stamp_[victim]) victim = base + w;
  }
  ++misses_;
  tag_[victim] = pfn + 1;
  stamp_[victim] = clock_;
  return false;
}

void Iotlb::InvalidateRange(uint64_t pfn, uint64_t npages) {
  if (npages > 16) {
    InvalidateAll();
    return;
  }
  for (uint64_t p = pfn; p < pfn + npages; ++p) {
    int base = Set(p) * ways_;
    for (int w = 0; w < ways_; ++w) {
      if (tag_[base + w] == p + 1) {
        tag_[base + w] = 0;
        stamp_[base + w] = 0;
      }
    }
  }
}

void Iotlb::InvalidateAll() {
  std::fill(tag_.begin(), tag_.end(), 0);
  std::fill(stamp_.begin(), stamp_.end(), 0);
}

}  // namespace farm::emu
