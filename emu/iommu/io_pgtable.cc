#include "emu/iommu/io_pgtable.h"

#include <algorithm>

namespace farm::emu {
namespace {
constexpr uint64_t kPresent = 1;
inline int Index(uint64_t pfn, int level) {
  // level 0 = root (bits 39..47 of the address, i.e. pfn bits 27..35).
  return static_cast<int>((pfn >> ((IoPageTable::kLevels - 1 - level) * IoPageTable::kBits)) &
                          (IoPageTable::kEntries - 1));
}
}  // namespace

IoPageTable::IoPageTable() { tables_.emplace_back().fill(0); }

int64_t IoPageTable::Leaf(uint64_t iova_pfn, bool alloc, PtWork* w) {
  int64_t t = 0;
  for (int level = 0; level < kLevels - 1; ++level) {
    ++w->levels_walked;
    uint64_t& e = tables_[t][Index(iova_pfn, level)];
    if (!(e & kPresent)) {
      if (!alloc) return -1;
      // pfn_to_dma_pte / __arm_lpae_map: allocate the next-level table and
      // install it with cmpxchg (lockless) or under the domain lock.
      int64_t n = static_cast<int64_t>(tables_.size());
      tables_.emplace_back().fill(0);
      ++w->tables_allocated;
      ++w->lines;
      // `e` may dangle after emplace_back; index again.
      tables_[t][Index(iova_pfn, level)] = (static_cast<uint64_t>(n) << 1) | kPresent;
      t = n;
    } else {
      t = static_cast<int64_t>(e >> 1);
    }
  }
  ++w->levels_walked;
  return t;
}

PtWork IoPageTable::Map(uint64_t iova_pfn, uint64_t phys_pfn, uint64_t npages) {
  PtWork w;
  uint64_t i = 0;
  while (i < npages) {
    uint64_t pfn = iova_pfn + i;
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
