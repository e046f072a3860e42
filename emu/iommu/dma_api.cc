#include "emu/iommu/dma_api.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "absl/strings/str_cat.h"

namespace farm::emu {
namespace {
constexpr Time kNever = std::numeric_limits<Time>::max();
constexpr uint64_t kPageMask = (1ULL << kIovaShift) - 1;
constexpr uint64_t kDma32LimitPfn = (1ULL << (32 - kIovaShift)) - 1;

uint64_t PagesFor(uint64_t addr, uint64_t len) {
  return ((addr & kPageMask) + len + kPageMask) >> kIovaShift;
}
}  // namespace

absl::StatusOr<Mode> ParseMode(const std::string& s) {
  if (s == "off") return Mode::kOff;
  if (s == "passthrough") return Mode::kPassthrough;
  if (s == "strict") return Mode::kStrict;
  if (s == "lazy") return Mode::kLazy;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", s, "'; valid modes: off, passthrough, strict, lazy"));
}

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kOff:
      return "off";
    case Mode::kPassthrough:
      return "passthrough";
    case Mode::kStrict:
      return "strict";
    case Mode::kLazy:
      return "lazy";
  }
  return "?";
}

struct DmaApi::FqEntry {
  uint64_t pfn;
  uint64_t npages;
  uint64_t counter;
};

// struct iova_fq: a per-CPU (or the single) ring under its own lock.
struct DmaApi::FlushQueue {
  FlushQueue(Engine* e, size_t size) : lock(e, "iova_fq.lock"), ring(size) {}
  SpinLock lock;
  std::vector<FqEntry> ring;
  size_t head = 0;
  size_t count = 0;
};

struct DmaApi::Domain {
  Domain(Sim* sim, int id_, int num_cpus, int iotlb_entries, int iotlb_ways)
      : id(id_),
        iovad(sim, "iovad", 1, num_cpus),
        tlb(iotlb_entries, iotlb_ways),
        pgtbl_lock(sim->engine, "pgtbl_lock") {
    sim->Register(&pgtbl_lock);
  }
  int id;
  IovaDomain iovad;
  IoPageTable pt;
  Iotlb tlb;
  SpinLock pgtbl_lock;
  int dma_bits = 64;
  // iommu_dma_cookie flush-queue state.
  std::vector<std::unique_ptr<FlushQueue>> fqs;
  uint64_t flush_start_cnt = 0;
  uint64_t flush_finish_cnt = 0;
  bool fq_timer_on = false;
};

// deferred_flush_data of aa4732406e12: per CPU, own lock and timer.
struct DmaApi::PercpuDeferred {
  explicit PercpuDeferred(Engine* e) : lock(e, "deferred_flush.lock") {}
  SpinLock lock;
  std::vector<DeferredEntry> entries;
  bool timer_on = false;
};

DmaApi::DmaApi(Sim* sim, Mode mode, std::vector<DeviceSpec> devices, int num_cpus)
    : sim_(sim), mode_(mode), devices_(std::move(devices)), num_cpus_(num_cpus) {
  const Model& m = sim_->m();
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) return;
  inv_ = MakeInvalidator(sim_, num_cpus_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    auto d = std::make_unique<Domain>(sim_, static_cast<int>(i), num_cpus_, m.iotlb_entries,
                                      m.iotlb_ways);
    d->dma_bits = devices_[i].dma_bits;
    if (mode_ == Mode::kLazy && (m.fq_kind == FqKind::kPercpu || m.fq_kind == FqKind::kSingle)) {
      int nq = m.fq_kind == FqKind::kSingle ? 1 : num_cpus_;
      size_t sz = static_cast<size_t>(m.fq_kind == FqKind::kSingle ? m.fq_single_size : m.fq_size);
      for (int q = 0; q < nq; ++q) {
        d->fqs.push_back(std::make_unique<FlushQueue>(sim_->engine, sz));
        sim_->Register(&d->fqs.back()->lock);
      }
    }
    domains_.push_back(std::move(d));
  }
  if (mode_ == Mode::kLazy) {
    if (m.fq_kind == FqKind::kIntelGlobal) {
      async_umap_flush_lock_ = std::make_unique<SpinLock>(sim_->engine, "async_umap_flush_lock");
      sim_->Register(async_umap_flush_lock_.get());
      global_list_.reserve(static_cast<size_t>(m.intel_high_water) + 1);
      deadline_.assign(1, kNever);
    } else if (m.fq_kind == FqKind::kIntelPercpu) {
      for (int c = 0; c < num_cpus_; ++c) {
        percpu_deferred_.push_back(std::make_unique<PercpuDeferred>(sim_->engine));
        percpu_deferred_.back()->entries.reserve(static_cast<size_t>(m.intel_high_water) + 1);
        sim_->Register(&percpu_deferred_.back()->lock);
      }
      deadline_.assign(static_cast<size_t>(num_cpus_), kNever);
    } else {
      deadline_.assign(domains_.size(), kNever);
    }
  }
}

DmaApi::~DmaApi() = default;

void DmaApi::SetDmaBits(int dev, int bits) {
  devices_[dev].dma_bits = bits;
  if (static_cast<size_t>(dev) < domains_.size()) domains_[dev]->dma_bits = bits;
}

int DmaApi::FindDevice(const std::string& name) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool DmaApi::IntelPrivate() const {
  return sim_->m().iommu_type == IommuType::kVtd && sim_->m().map_sg == MapSgKind::kIntelPrivate;
}

uint64_t DmaApi::LimitPfn(const Domain& d) const {
  int bits = std::min(d.dma_bits, sim_->m().addr_bits);
  return (bits >= 64 ? ~0ULL : (1ULL << bits) - 1) >> kIovaShift;
}

void DmaApi::CacheMaint(Cpu& cpu, Sym sym, uint64_t bytes) {
  cpu.Charge(sym, static_cast<Time>((bytes + 63) / 64) * sim_->m().cache_maint_line);
}

void DmaApi::StartDaemons(Engine& engine) {
  const Model& m = sim_->m();
  if (!deadline_.empty()) {
    timer_cpu_ = &engine.AddCpu(0, /*daemon=*/true);
    engine.Start(*timer_cpu_, TimerLoop(*timer_cpu_));
  }
  if (!domains_.empty() && m.allocator == IovaAllocator::kRcache && m.depot == DepotKind::kList) {
    Cpu& d = engine.AddCpu(0, /*daemon=*/true);
    engine.Start(d, DepotLoop(d));
  }
}

// ---- IOVA allocation: intel_alloc_iova() / iommu_dma_alloc_iova().

Task<uint64_t> DmaApi::AllocIova(Cpu& cpu, Domain& d, uint64_t npages) {
  const Model& m = sim_->m();
  uint64_t limit = LimitPfn(d);
  bool try32 = m.dma32_first && devices_[d.id].pci && limit > kDma32LimitPfn;
  uint64_t pfn = 0;
  if (m.allocator == IovaAllocator::kRbtree) {
    // v4.6 intel_alloc_iova(): alloc_iova() on every map, size rounded up to
    // a power of two, below 4 GiB first.
    uint64_t size = std::bit_ceil(npages);
    if (try32) {
      pfn = co_await d.iovad.AllocIova(cpu, size, kDma32LimitPfn, true);
      if (pfn) co_return pfn;
    }
    pfn = co_await d.iovad.AllocIova(cpu, size, limit, true);
    co_return pfn;
  }
  if (try32) {
    pfn = co_await d.iovad.AllocIovaFast(cpu, npages, kDma32LimitPfn, false);
    if (pfn) co_return pfn;
  }
  pfn = co_await d.iovad.AllocIovaFast(cpu, npages, limit, true);
  co_return pfn;
}

Task<void> DmaApi::FreeIova(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  if (sim_->m().allocator == IovaAllocator::kRbtree) {
    co_await d.iovad.FreeIova(cpu, pfn);  // __free_iova()
  } else {
    co_await d.iovad.FreeIovaFast(cpu, pfn, npages);
  }
}

// ---- Page tables: __domain_mapping / __arm_lpae_map and their unmaps.

Task<void> DmaApi::InstallPtes(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t phys_pfn,
                               uint64_t npages, bool flush) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  Sym sym = inv_->map_sym();
  // Before 2c3d273eabe8 the io-pgtable callers serialised on a per-domain
  // lock; VT-d installs tables with cmpxchg64 and never took one.
  bool locked = !m.pgtable_lockless && m.iommu_type != IommuType::kVtd;
  if (locked) co_await d.pgtbl_lock.Lock(cpu, sym);
  PtWork w = d.pt.Map(pfn, phys_pfn, npages);
  cpu.Charge(sym, w.levels_walked * m.pt_level + w.ptes * m.pte_write);
  if (w.tables_allocated) {
    cpu.Charge(Sym::kPgtableAlloc, w.tables_allocated * (m.pt_alloc + m.line.local));
    k.pgtables_allocated += w.tables_allocated;
  }
  k.ptes_written += w.ptes;
  if (flush && m.iommu_type == IommuType::kVtd && !m.vtd_coherent) {
    // domain_flush_cache() -> clflush_cache_range() of the written PTEs.
    cpu.Charge(Sym::kClflush, w.lines * m.clflush_line + (w.lines > 0 ? m.clflush_call : 0));
    k.clflush_lines += w.lines;
  }
  if (locked) d.pgtbl_lock.Unlock(cpu, w.lines);
}

Task<void> DmaApi::ClearPtes(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  Sym sym = inv_->unmap_sym();
  bool locked = !m.pgtable_lockless && m.iommu_type != IommuType::kVtd;
  if (locked) co_await d.pgtbl_lock.Lock(cpu, sym);
  uint64_t unmapped = 0;
  PtWork w = d.pt.Unmap(pfn, npages, &unmapped);
  cpu.Charge(sym, w.levels_walked * m.pt_level + w.ptes * m.pte_write);
  k.ptes_cleared += unmapped;
  if (m.iommu_type == IommuType::kVtd && !m.vtd_coherent) {
    cpu.Charge(Sym::kClflush, w.lines * m.clflush_line + (w.lines > 0 ? m.clflush_call : 0));
    k.clflush_lines += w.lines;
  }
  if (locked) d.pgtbl_lock.Unlock(cpu, w.lines);
}

// ---- map/unmap entry points.

Task<uint64_t> DmaApi::MapPage(Cpu& cpu, int dev, uint64_t phys, uint64_t size, DmaDir dir) {
  const Model& m = sim_->m();
  ++sim_->counters.dma_maps;
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) {
    // dma_direct_map_page(); passthrough = identity domain, same path.
    cpu.Charge(Sym::kDmaDirectMap, m.dma_direct);
    if (!m.dev_coherent && dir != DmaDir::kFromDevice) CacheMaint(cpu, Sym::kDmaDirectMap, size);
    co_return phys;
  }
  Domain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelMapPage : Sym::kIommuDmaMapPage;
  cpu.Charge(entry, m.dma_call);
  if (!m.dev_coherent && dir != DmaDir::kFromDevice) CacheMaint(cpu, entry, size);
  uint64_t npages = PagesFor(phys, size);
  uint64_t pfn = co_await AllocIova(cpu, d, npages);
  if (!pfn) co_return kDmaMappingError;
  if (!IntelPrivate()) {
    cpu.Charge(Sym::kIommuMap, m.iommu_map_call);  // iommu_map() -> __iommu_map()
    ++sim_->counters.iommu_map_calls;
  } else {
    cpu.Charge(Sym::kIntelMapPage, m.vtd_private_map_extra);
  }
  co_await InstallPtes(cpu, d, pfn, phys >> kIovaShift, npages);
  co_await inv_->SyncMap(cpu, d.tlb, pfn, npages);
  co_return (pfn << kIovaShift) | (phys & kPageMask);
}

Task<void> DmaApi::UnmapPage(Cpu& cpu, int dev, uint64_t dma, uint64_t size, DmaDir dir) {
  const Model& m = sim_->m();
  ++sim_->counters.dma_unmaps;
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) {
    cpu.Charge(Sym::kDmaDirectUnmap, m.dma_direct);
    if (!m.dev_coherent && dir != DmaDir::kToDevice) CacheMaint(cpu, Sym::kDmaDirectUnmap, size);
    co_return;
  }
  Domain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelUnmap : Sym::kIommuDmaUnmapPage;
  cpu.Charge(entry, m.dma_call);
  if (!m.dev_coherent && dir != DmaDir::kToDevice) CacheMaint(cpu, entry, size);
  uint64_t pfn = dma >> kIovaShift;
  if (IntelPrivate() && m.vtd_unmap_find_iova) co_await d.iovad.FindIova(cpu, pfn);
  co_await UnmapRange(cpu, d, pfn, PagesFor(dma, size));
}

Task<void> DmaApi::UnmapRange(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  co_await ClearPtes(cpu, d, pfn, npages);
  if (mode_ == Mode::kStrict) {
    // iommu_iotlb_sync() then free: the IOVA is reusable only once the
    // IOTLB can no longer hold it.
    co_await inv_->InvalidateRange(cpu, d.tlb, pfn, npages);
    co_await FreeIova(cpu, d, pfn, npages);
    co_return;
  }
  switch (m.fq_kind) {
    case FqKind::kIntelGlobal:
      co_await AddUnmapGlobal(cpu, d, pfn, npages);
      break;
    case FqKind::kIntelPercpu:
      co_await AddUnmapPercpu(cpu, d, pfn, npages);
      break;
    case FqKind::kPercpu:
    case FqKind::kSingle:
      co_await QueueIova(cpu, d, pfn, npages);
      break;
  }
}

Task<uint64_t> DmaApi::MapSg(Cpu& cpu, int dev, const SgSegment* segs, int nsegs, DmaDir dir) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  ++k.dma_map_sgs;
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) {
    // dma_direct_map_sg(): one call; the per-segment dma_direct_map_page()
    // is a static inline (kernel/dma/direct.h) that, without bouncing, only
    // computes and checks the address: no per-segment call cost. (Charging
    // a whole call per segment made dma-direct dearer than the VT-d private
    // map_sg walk, i.e. iommu=off slower than lazy on iozone-nfsrdma.)
    cpu.Charge(Sym::kDmaDirectMap, m.dma_direct);
    for (int i = 0; i < nsegs; ++i) {
      if (!m.dev_coherent && dir != DmaDir::kFromDevice)
        CacheMaint(cpu, Sym::kDmaDirectMap, segs[i].len);
    }
    co_return nsegs > 0 ? segs[0].phys : 0;
  }
  Domain& d = *domains_[dev];
  const bool priv = IntelPrivate();
  Sym entry = priv ? Sym::kIntelMapSg : Sym::kIommuDmaMapSg;
  cpu.Charge(entry, m.dma_call);
  uint64_t total = 0;
  for (int i = 0; i < nsegs; ++i) {
    total += PagesFor(segs[i].phys, segs[i].len);
    if (!m.dev_coherent && dir != DmaDir::kFromDevice) CacheMaint(cpu, entry, segs[i].len);
  }
  // One IOVA allocation for the whole list.
  uint64_t pfn = co_await AllocIova(cpu, d, total);
  if (!pfn) co_return kDmaMappingError;
  if (priv) {
    // intel_map_sg() -> domain_sg_mapping() -> one __domain_mapping() over
    // the list: one walk per leaf table, one clflush per dirtied line, then
    // one write-buffer flush.
    PtWork sum;
    uint64_t at = pfn;
    for (int i = 0; i < nsegs; ++i) {
      uint64_t n = PagesFor(segs[i].phys, segs[i].len);
      PtWork w = d.pt.Map(at, segs[i].phys >> kIovaShift, n);
      sum.ptes += w.ptes;
      sum.tables_allocated += w.tables_allocated;
      at += n;
    }
    int64_t tables_spanned = static_cast<int64_t>(((pfn + total - 1) >> 9) - (pfn >> 9) + 1);
    int64_t lines = static_cast<int64_t>(((pfn + total - 1) >> 3) - (pfn >> 3) + 1);
    cpu.Charge(Sym::kDomainMapping,
               tables_spanned * IoPageTable::kLevels * m.pt_level + sum.ptes * m.pte_write);
    if (sum.tables_allocated) {
      cpu.Charge(Sym::kPgtableAlloc, sum.tables_allocated * m.pt_alloc);
      k.pgtables_allocated += sum.tables_allocated;
    }
    k.ptes_written += sum.ptes;
    cpu.Charge(Sym::kIntelMapSg, m.vtd_private_map_extra);
    if (!m.vtd_coherent) {
      cpu.Charge(Sym::kClflush, lines * m.clflush_line + m.clflush_call);
      k.clflush_lines += lines;
    }
    co_await inv_->SyncMap(cpu, d.tlb, pfn, total);
    co_return pfn << kIovaShift;
  }
  // iommu_dma_map_sg() -> iommu_map_sg(): __iommu_map() per segment; v5.11
  // synced after each, v5.12+ once for the list.
  const bool vtd_batched_flush =
      m.iommu_type == IommuType::kVtd && !m.vtd_coherent && m.map_sg == MapSgKind::kBatched;
  uint64_t at = pfn;
  for (int i = 0; i < nsegs; ++i) {
    uint64_t n = PagesFor(segs[i].phys, segs[i].len);
    cpu.Charge(Sym::kIommuMap, m.iommu_map_call);
    ++k.iommu_map_calls;
    co_await InstallPtes(cpu, d, at, segs[i].phys >> kIovaShift, n, !vtd_batched_flush);
    if (m.map_sg == MapSgKind::kPerSegment) co_await inv_->SyncMap(cpu, d.tlb, at, n);
    at += n;
  }
  if (vtd_batched_flush) {
    // 933fcd01e97e: intel_iommu_iotlb_sync_map() flushes the PTE lines of the
    // whole list once instead of once per intel_iommu_map().
    int64_t lines = static_cast<int64_t>(((pfn + total - 1) >> 3) - (pfn >> 3) + 1);
    cpu.Charge(Sym::kClflush, lines * m.clflush_line + m.clflush_call);
    k.clflush_lines += lines;
  }
  if (m.map_sg != MapSgKind::kPerSegment) co_await inv_->SyncMap(cpu, d.tlb, pfn, total);
  co_return pfn << kIovaShift;
}

Task<void> DmaApi::UnmapSg(Cpu& cpu, int dev, uint64_t dma, const SgSegment* segs, int nsegs,
                           DmaDir dir) {
  const Model& m = sim_->m();
  ++sim_->counters.dma_unmap_sgs;
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) {
    // dma_direct_unmap_sg(): one call, inline per-segment body (see MapSg).
    cpu.Charge(Sym::kDmaDirectUnmap, m.dma_direct);
    for (int i = 0; i < nsegs; ++i) {
      if (!m.dev_coherent && dir != DmaDir::kToDevice)
        CacheMaint(cpu, Sym::kDmaDirectUnmap, segs[i].len);
    }
    co_return;
  }
  Domain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelUnmap : Sym::kIommuDmaUnmapPage;
  cpu.Charge(entry, m.dma_call);
  uint64_t total = 0;
  for (int i = 0; i < nsegs; ++i) {
    total += PagesFor(segs[i].phys, segs[i].len);
    if (!m.dev_coherent && dir != DmaDir::kToDevice) CacheMaint(cpu, entry, segs[i].len);
  }
  uint64_t pfn = dma >> kIovaShift;
  if (IntelPrivate() && m.vtd_unmap_find_iova) co_await d.iovad.FindIova(cpu, pfn);
  // __iommu_dma_unmap(): one range, one gather, one sync.
  co_await UnmapRange(cpu, d, pfn, total);
}

Time DmaApi::DeviceAccess(int dev, uint64_t dma, uint64_t len) {
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) return 0;
  const Model& m = sim_->m();
  Domain& d = *domains_[dev];
  Time t = 0;
  uint64_t first = dma >> kIovaShift;
  uint64_t n = PagesFor(dma, len);
  for (uint64_t p = first; p < first + n; ++p) {
    if (d.tlb.Lookup(p)) {
      t += m.iotlb_hit;
    } else {
      t += IoPageTable::kLevels * m.iotlb_miss_level;
      if (d.pt.Translate(p) == IoPageTable::kNone) ++sim_->counters.dma_faults;
    }
  }
  return t;
}

uint64_t DmaApi::iotlb_hits() const {
  uint64_t n = 0;
  for (const auto& d : domains_) n += d->tlb.hits();
  return n;
}
uint64_t DmaApi::iotlb_misses() const {
  uint64_t n = 0;
  for (const auto& d : domains_) n += d->tlb.misses();
  return n;
}
uint64_t DmaApi::mapped_pages() const {
  uint64_t n = 0;
  for (const auto& d : domains_) n += d->pt.mapped_pages();
  return n;
}

// ---- 2008 VT-d deferred flushing (5e0d2a6fc094): add_unmap / flush_unmaps.

Task<void> DmaApi::AddUnmapGlobal(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  SpinLock& lock = *async_umap_flush_lock_;
  co_await lock.Lock(cpu, Sym::kAddUnmap);
  if (static_cast<int>(global_list_.size()) >= m.intel_high_water) {
    ++sim_->counters.fq_full_flushes;
    co_await FlushUnmapsGlobal(cpu);
  }
  global_list_.push_back(DeferredEntry{&d, pfn, npages});
  cpu.Charge(Sym::kAddUnmap, m.fq_op);
  ++sim_->counters.fq_queued;
  if (!global_timer_on_) {
    global_timer_on_ = true;
    ArmTimer(0, cpu.now() + m.fq_timeout_ms * kNsPerMs);
  }
  lock.Unlock(cpu, 2);
}

// REQUIRES: async_umap_flush_lock held. One global IOTLB flush, then every
// deferred IOVA freed (each free takes iova_rbtree_lock in 2016 kernels).
Task<void> DmaApi::FlushUnmapsGlobal(Cpu& cpu) {
  const Model& m = sim_->m();
  global_timer_on_ = false;
  if (global_list_.empty()) co_return;
  ++sim_->counters.fq_flushes;
  co_await inv_->InvalidateGlobal(cpu, domains_[0]->tlb);
  for (size_t i = 1; i < domains_.size(); ++i) domains_[i]->tlb.InvalidateAll();
  for (const DeferredEntry& e : global_list_) {
    cpu.Charge(Sym::kFlushUnmaps, m.fq_op);
    co_await FreeIova(cpu, *e.domain, e.pfn, e.npages);
  }
  global_list_.clear();
}

// ---- v4.7 per-CPU deferred invalidation (aa4732406e12).

Task<void> DmaApi::AddUnmapPercpu(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  PercpuDeferred& pd = *percpu_deferred_[cpu.cpu()];
  if (static_cast<int>(pd.entries.size()) >= m.intel_high_water) {
    // "Flush all CPUs' entries to avoid deferring too much."
    ++sim_->counters.fq_full_flushes;
    for (int c = 0; c < num_cpus_; ++c) co_await FlushUnmapsPercpu(cpu, c);
  }
  co_await pd.lock.Lock(cpu, Sym::kAddUnmap);
  pd.entries.push_back(DeferredEntry{&d, pfn, npages});
  cpu.Charge(Sym::kAddUnmap, m.fq_op);
  ++sim_->counters.fq_queued;
  if (!pd.timer_on) {
    pd.timer_on = true;
    ArmTimer(cpu.cpu(), cpu.now() + m.fq_timeout_ms * kNsPerMs);
  }
  pd.lock.Unlock(cpu, 1);
}

// flush_unmaps_timeout(owner_cpu): that CPU's list under its lock.
Task<void> DmaApi::FlushUnmapsPercpu(Cpu& cpu, int owner_cpu) {
  const Model& m = sim_->m();
  PercpuDeferred& pd = *percpu_deferred_[owner_cpu];
  co_await pd.lock.Lock(cpu, Sym::kFlushUnmaps);
  pd.timer_on = false;
  if (!pd.entries.empty()) {
    ++sim_->counters.fq_flushes;
    co_await inv_->InvalidateGlobal(cpu, domains_[0]->tlb);
    for (size_t i = 1; i < domains_.size(); ++i) domains_[i]->tlb.InvalidateAll();
    for (const DeferredEntry& e : pd.entries) {
      cpu.Charge(Sym::kFlushUnmaps, m.fq_op);
      co_await FreeIova(cpu, *e.domain, e.pfn, e.npages);
    }
    pd.entries.clear();
  }
  pd.lock.Unlock(cpu, 2);
}

// ---- dma-iommu flush queue (queue_iova, fq_flush_iotlb, fq_ring_free).

Task<void> DmaApi::QueueIova(Cpu& cpu, Domain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  FlushQueue& fq = d.fqs.size() == 1 ? *d.fqs[0] : *d.fqs[cpu.cpu()];
  co_await fq.lock.Lock(cpu, Sym::kQueueIova);
  // First remove entries already flushed out by another CPU.
  co_await FqRingFree(cpu, d, fq);
  if (fq.count == fq.ring.size()) {
    ++sim_->counters.fq_full_flushes;
    co_await FqFlushIotlb(cpu, d);
    co_await FqRingFree(cpu, d, fq);
  }
  size_t tail = (fq.head + fq.count) % fq.ring.size();
  fq.ring[tail] = FqEntry{pfn, npages, d.flush_start_cnt};
  ++fq.count;
  cpu.Charge(Sym::kQueueIova, m.fq_op);
  ++sim_->counters.fq_queued;
  fq.lock.Unlock(cpu, 1);
  if (!d.fq_timer_on) {
    d.fq_timer_on = true;
    int timeout = d.fqs.size() == 1 ? m.fq_single_timeout_ms : m.fq_timeout_ms;
    ArmTimer(d.id, cpu.now() + timeout * kNsPerMs);
  }
}

Task<void> DmaApi::FqFlushIotlb(Cpu& cpu, Domain& d) {
  ++d.flush_start_cnt;  // atomic64_inc(&cookie->fq_flush_start_cnt)
  ++sim_->counters.fq_flushes;
  co_await inv_->InvalidateDomain(cpu, d.tlb);  // ops->flush_iotlb_all
  ++d.flush_finish_cnt;
}

// REQUIRES: fq.lock held.
Task<void> DmaApi::FqRingFree(Cpu& cpu, Domain& d, FlushQueue& fq) {
  const Model& m = sim_->m();
  uint64_t counter = d.flush_finish_cnt;
  while (fq.count > 0 && fq.ring[fq.head].counter < counter) {
    FqEntry e = fq.ring[fq.head];
    fq.head = (fq.head + 1) % fq.ring.size();
    --fq.count;
    cpu.Charge(Sym::kFqFlush, m.fq_op);
    co_await FreeIova(cpu, d, e.pfn, e.npages);
  }
}

Task<void> DmaApi::FqFlushTimeout(Cpu& cpu, Domain& d) {
  d.fq_timer_on = false;
  ++sim_->counters.fq_timer_flushes;
  co_await FqFlushIotlb(cpu, d);
  for (auto& fq : d.fqs) {
    co_await fq->lock.Lock(cpu, Sym::kFqFlush);
    co_await FqRingFree(cpu, d, *fq);
    fq->lock.Unlock(cpu, 1);
  }
}

// ---- Timers.

void DmaApi::ArmTimer(int timer, Time deadline) {
  deadline_[timer] = deadline;  // mod_timer()
  if (timer_sleeping_ && timer_cpu_) {
    timer_sleeping_ = false;
    timer_cpu_->engine().Wake(*timer_cpu_, deadline);
  }
}

Task<void> DmaApi::OnTimer(Cpu& cpu, int timer) {
  const Model& m = sim_->m();
  switch (m.fq_kind) {
    case FqKind::kIntelGlobal: {
      // flush_unmaps_timeout()
      co_await async_umap_flush_lock_->Lock(cpu, Sym::kFlushUnmaps);
      if (!global_list_.empty()) ++sim_->counters.fq_timer_flushes;
      co_await FlushUnmapsGlobal(cpu);
      async_umap_flush_lock_->Unlock(cpu, 2);
      break;
    }
    case FqKind::kIntelPercpu:
      if (!percpu_deferred_[timer]->entries.empty()) ++sim_->counters.fq_timer_flushes;
      co_await FlushUnmapsPercpu(cpu, timer);
      break;
    case FqKind::kPercpu:
    case FqKind::kSingle:
      co_await FqFlushTimeout(cpu, *domains_[timer]);
      break;
  }
}

Task<void> DmaApi::TimerLoop(Cpu& cpu) {
  for (;;) {
    Time next = *std::min_element(deadline_.begin(), deadline_.end());
    if (next == kNever) {
      timer_sleeping_ = true;
      co_await cpu.Block(Sym::kOther, /*idle=*/true);
      timer_sleeping_ = false;
      continue;
    }
    if (cpu.now() < next) {
      cpu.Idle(next - cpu.now());
      co_await cpu.Sync();
      continue;
    }
    for (size_t i = 0; i < deadline_.size(); ++i) {
      if (deadline_[i] <= cpu.now()) {
        deadline_[i] = kNever;
        co_await OnTimer(cpu, static_cast<int>(i));
      }
    }
  }
}

Task<void> DmaApi::DepotLoop(Cpu& cpu) {
  const Model& m = sim_->m();
  for (;;) {
    cpu.Idle(m.depot_trim_ms * kNsPerMs);
    co_await cpu.Sync();
    for (auto& d : domains_) co_await d->iovad.DepotWork(cpu);
  }
}

}  // namespace farm::emu
