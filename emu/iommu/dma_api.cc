#include "emu/iommu/dma_api.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "lib/base/check.h"

namespace farm::emu {
namespace {
constexpr uint64_t kPageMask = (1ULL << kIovaShift) - 1;
constexpr uint64_t kDma32LimitPfn = (1ULL << (32 - kIovaShift)) - 1;

uint64_t PagesFor(uint64_t addr, uint64_t len) {
  return ((addr & kPageMask) + len + kPageMask) >> kIovaShift;
}
}  // namespace

absl::StatusOr<Mode> ParseMode(const std::string& s) {
  if (const std::optional<Mode> m = iommu_mode::FromWord(s)) return *m;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", s, "'; valid modes: ", iommu_mode::WordList()));
}

DmaApi::DmaApi(Sim* sim, Mode mode, std::vector<DeviceSpec> devices, int num_cpus)
    : sim_(sim), mode_(mode), devices_(std::move(devices)), num_cpus_(num_cpus) {
  if (mode_ == Mode::kOff || mode_ == Mode::kPassthrough) {
    direct_.assign(devices_.size(), true);
    return;
  }
  // A device in an identity group, or behind no IOMMU, uses dma-direct.
  for (const DeviceSpec& d : devices_) {
    direct_.push_back(sim_->m().AttachOf(d) != DeviceAttach::kTranslated);
  }
  inv_ = MakeInvalidator(sim_, num_cpus_);
  for (size_t i = 0; i < devices_.size(); ++i) {
    auto d = std::make_unique<DmaDomain>(sim_, static_cast<int>(i), num_cpus_,
                                         DmaIommuAllocIova() ? DmaDomain::Free::kFindAndFreeIova
                                         : sim_->m().allocator == IovaAllocator::kRbtree
                                             ? DmaDomain::Free::kFreeIova
                                             : DmaDomain::Free::kFreeIovaFast);
    d->dma_bits = devices_[i].dma_bits;
    d->flush_queue = mode_ == Mode::kLazy;
    domains_.push_back(std::move(d));
  }
  if (mode_ == Mode::kLazy) flush_ = MakeDeferredFlush(sim_, inv_.get(), domains_, num_cpus_);
}

DmaApi::~DmaApi() = default;

void DmaApi::SetDmaBits(int dev, int bits) {
  devices_[dev].dma_bits = bits;
  if (static_cast<size_t>(dev) < domains_.size()) domains_[dev]->dma_bits = bits;
}

uint64_t DmaApi::OptMappingSize(int dev) const {
  if (direct_[dev] || IntelPrivate()) return 0;
  return uint64_t{1} << (kIovaShift + sim_->m().rcache_max_order - 1);
}

void DmaApi::StartMeasurement(Cpu& cpu) {
  FARM_DCHECK(cpu.now() == cpu.engine().current_time(), "cpu.Sync() just before");
  if (sim_->measuring) return;
  for (const auto& c : cpu.engine().cpus()) {
    if (c->daemon()) c->ResetAccounting();
  }
  sim_->StartMeasurement();
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

bool DmaApi::DmaIommuAllocIova() const {
  // AMD's own dma_ops allocated through alloc_iova_fast from v4.8 until its
  // dma-iommu conversion, which came after bb65a64c7285.
  const Model& m = sim_->m();
  return !IntelPrivate() && m.iommu_type != IommuType::kAmd &&
         m.dma_iommu_alloc == DmaIommuAlloc::kAllocIova;
}

uint64_t DmaApi::LimitPfn(const DmaDomain& d) const {
  int bits = std::min(d.dma_bits, sim_->m().addr_bits);
  return (bits >= 64 ? ~0ULL : (1ULL << bits) - 1) >> kIovaShift;
}

void DmaApi::EntryCall(Cpu& cpu, Sym entry, bool map) {
  const Model& m = sim_->m();
  // The commit's own software cost: the instructions its kernel's map or
  // unmap path executes beyond the catalog reference's (measured in an
  // instruction-counted guest), at this platform's time per instruction.
  // The waits on the IOMMU and on other CPUs stay the model's.
  const int64_t delta_ps = (map ? m.map_delta_insns : m.unmap_delta_insns) * m.ps_per_insn;
  cpu.Charge(entry, std::max<Time>(0, m.dma_call + delta_ps / 1000));
  // dma_map_page_attrs() -> get_dma_ops(dev)->map_page(): until b5c58b2fdc42
  // the IOMMU path was reached through an indirect call (intel_dma_ops, then
  // iommu_dma_ops); since, use_dma_iommu() calls iommu_dma_map_page() directly.
  if (m.dma_ops_indirect) cpu.Charge(entry, m.indirect_call);
}

void DmaApi::CacheMaint(Cpu& cpu, Sym sym, uint64_t bytes) {
  cpu.Charge(sym, static_cast<Time>((bytes + 63) / 64) * sim_->m().cache_maint_line);
}

void DmaApi::StartDaemons(Engine& engine) {
  const Model& m = sim_->m();
  if (flush_) flush_->StartTimer(engine);
  if (!domains_.empty() && m.allocator == IovaAllocator::kRcache && m.depot == DepotKind::kList) {
    Cpu& d = engine.AddCpu(0, /*daemon=*/true);
    engine.Start(d, DepotLoop(d));
  }
}

// ---- IOVA allocation: intel_alloc_iova() / iommu_dma_alloc_iova().

Task<uint64_t> DmaApi::AllocIova(Cpu& cpu, DmaDomain& d, uint64_t npages) {
  const Model& m = sim_->m();
  const uint64_t limit = LimitPfn(d);
  if (DmaIommuAllocIova()) {
    // __alloc_iova(): one size-aligned alloc_iova() under the device's
    // mask, its length the mapping's pages (no rounding, no 32-bit first).
    return d.iovad.AllocIova(cpu, npages, limit, true);
  }
  if (m.dma32_first && devices_[d.id].pci && limit > kDma32LimitPfn) {
    return AllocIova32First(cpu, d, npages, limit);
  }
  if (m.allocator == IovaAllocator::kRbtree) {
    return d.iovad.AllocIova(cpu, std::bit_ceil(npages), limit, true);
  }
  return d.iovad.AllocIovaFast(cpu, npages, limit, true);
}

// A PCI device with a mask above 32 bits tries below 4 GiB first (dma32_first).
Task<uint64_t> DmaApi::AllocIova32First(Cpu& cpu, DmaDomain& d, uint64_t npages, uint64_t limit) {
  uint64_t pfn = 0;
  if (sim_->m().allocator == IovaAllocator::kRbtree) {
    // v4.6 intel_alloc_iova(): alloc_iova() on every map, size rounded up to
    // a power of two, below 4 GiB first.
    const uint64_t size = std::bit_ceil(npages);
    pfn = co_await d.iovad.AllocIova(cpu, size, kDma32LimitPfn, true);
    if (pfn) co_return pfn;
    pfn = co_await d.iovad.AllocIova(cpu, size, limit, true);
    co_return pfn;
  }
  pfn = co_await d.iovad.AllocIovaFast(cpu, npages, kDma32LimitPfn, false);
  if (pfn) co_return pfn;
  pfn = co_await d.iovad.AllocIovaFast(cpu, npages, limit, true);
  co_return pfn;
}

// ---- Page tables: __domain_mapping / __arm_lpae_map and their unmaps.

// Only a held pgtbl_lock or a leaf table to free can wait; without either
// the PTEs are written here and no coroutine is started.
Task<void> DmaApi::InstallPtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn,
                               uint64_t npages, bool flush) {
  if (PgtblLocked()) return InstallPtesLocked(cpu, d, pfn, phys_pfn, npages, flush);
  const PtWork w = WritePtes(cpu, d, pfn, phys_pfn, npages);
  if (w.tables_freed > 0) return FreeTablesThenFlush(cpu, d, w, flush);
  FlushPtes(cpu, w, flush);
  return {};
}

// arm_smmu_map(): the driver's pgtbl_lock around ops->map.
Task<void> DmaApi::InstallPtesLocked(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn,
                                     uint64_t npages, bool flush) {
  co_await d.pgtbl_lock.Lock(cpu, inv_->map_sym());
  const PtWork w = WritePtes(cpu, d, pfn, phys_pfn, npages);
  if (w.tables_freed > 0) co_await FreeTables(cpu, d, w);
  FlushPtes(cpu, w, flush);
  d.pgtbl_lock.Unlock(cpu, w.lines);
}

Task<void> DmaApi::FreeTablesThenFlush(Cpu& cpu, DmaDomain& d, PtWork w, bool flush) {
  co_await FreeTables(cpu, d, w);
  FlushPtes(cpu, w, flush);
}

PtWork DmaApi::WritePtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys_pfn, uint64_t npages) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  const PtWork w = d.pt.Map(pfn, phys_pfn, npages);
  cpu.Charge(inv_->map_sym(), w.levels_walked * m.pt_level + w.ptes * m.pte_write);
  if (w.tables_allocated) {
    cpu.Charge(Sym::kPgtableAlloc, w.tables_allocated * (m.pt_alloc + m.line.local));
    k.pgtables_allocated += w.tables_allocated;
  }
  k.ptes_written += w.ptes + w.blocks;
  return w;
}

void DmaApi::FlushPtes(Cpu& cpu, const PtWork& w, bool flush) {
  const Model& m = sim_->m();
  if (flush && m.iommu_type == IommuType::kVtd && !m.vtd_coherent) {
    // domain_flush_cache() -> clflush_cache_range() of the written PTEs.
    cpu.Charge(Sym::kClflush, w.lines * m.clflush_line + (w.lines > 0 ? m.clflush_call : 0));
    sim_->counters.clflush_lines += w.lines;
  }
}

PtWork DmaApi::ClearPtes(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  Sym sym = inv_->unmap_sym();
  uint64_t unmapped = 0;
  PtWork w = d.pt.Unmap(pfn, npages, &unmapped);
  cpu.Charge(sym, w.levels_walked * m.pt_level + (w.ptes + w.blocks) * m.pte_write);
  k.ptes_cleared += unmapped;
  if (m.iommu_type == IommuType::kVtd && !m.vtd_coherent) {
    cpu.Charge(Sym::kClflush, w.lines * m.clflush_line + (w.lines > 0 ? m.clflush_call : 0));
    k.clflush_lines += w.lines;
  }
  return w;
}

// __arm_lpae_unmap()'s non-leaf branch, per table the page table let go:
// io_pgtable_tlb_flush_walk() over its 2 MiB, then __arm_lpae_free_pgtable()
// (the page freed costs what allocating one does: cost.pt_alloc_ns).
Task<void> DmaApi::FreeTables(Cpu& cpu, DmaDomain& d, const PtWork& w) {
  for (int i = 0; i < w.tables_freed; ++i) {
    const uint64_t pfn = w.first_walk_pfn + static_cast<uint64_t>(i) * IoPageTable::kBlockPages;
    co_await inv_->FlushWalk(cpu, d.tlb, pfn, IoPageTable::kBlockPages);
    cpu.Charge(Sym::kArmLpaeFreePgtable, sim_->m().pt_alloc);
    ++sim_->counters.pgtables_freed;
  }
}

bool DmaApi::PgtblLocked() const {
  // arm_smmu_map/arm_smmu_unmap held smmu_domain->pgtbl_lock around
  // ops->map/ops->unmap until 523d7423e21b (arm-smmu.c) and 58188afeb727
  // (arm-smmu-v3.c); an io-pgtable without 2c3d273eabe8's cmpxchg table
  // install needs that caller lock anyway. VT-d installs tables with
  // cmpxchg64 and never took one.
  const Model& m = sim_->m();
  switch (m.iommu_type) {
    case IommuType::kVtd:
    case IommuType::kAmd:  // iommu_v1_map_pages(): cmpxchg64 table install
      return false;
    case IommuType::kMmu500:
      return m.mmu500_pgtbl_lock || !m.pgtable_lockless;
    case IommuType::kSmmuV3:
      return m.smmu_pgtbl_lock || !m.pgtable_lockless;
  }
  return false;
}

// ---- map/unmap entry points.

// Plain code until something waits (dma_map_page() on an uncontended path
// starts no coroutine); then the rest is a coroutine.
Task<uint64_t> DmaApi::MapPage(Cpu& cpu, int dev, uint64_t phys, uint64_t size, DmaDir dir) {
  const Model& m = sim_->m();
  ++sim_->counters.dma_maps;
  if (direct_[dev]) {
    // dma_direct_map_page(); passthrough = identity domain, same path.
    cpu.Charge(Sym::kDmaDirectMap, m.dma_direct);
    if (!m.dev_coherent && dir != DmaDir::kFromDevice) CacheMaint(cpu, Sym::kDmaDirectMap, size);
    return phys;
  }
  DmaDomain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelMapPage : Sym::kIommuDmaMapPage;
  EntryCall(cpu, entry, /*map=*/true);
  if (!m.dev_coherent && dir != DmaDir::kFromDevice) CacheMaint(cpu, entry, size);
  uint64_t npages = PagesFor(phys, size);
  Task<uint64_t> alloc = AllocIova(cpu, d, npages);
  if (!alloc.ready()) return MapPageAfterAlloc(cpu, d, std::move(alloc), phys, npages);
  return MapIova(cpu, d, alloc.value(), phys, npages);
}

Task<uint64_t> DmaApi::MapPageAfterAlloc(Cpu& cpu, DmaDomain& d, Task<uint64_t> alloc,
                                         uint64_t phys, uint64_t npages) {
  const uint64_t pfn = co_await alloc;
  const uint64_t addr = co_await MapIova(cpu, d, pfn, phys, npages);
  co_return addr;
}

// iommu_dma_map_page() once the IOVA is allocated (0: none).
Task<uint64_t> DmaApi::MapIova(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t phys,
                               uint64_t npages) {
  const Model& m = sim_->m();
  if (!pfn) return kDmaMappingError;
  if (!IntelPrivate()) {
    cpu.Charge(Sym::kIommuMap, m.iommu_map_call);  // iommu_map() -> __iommu_map()
    ++sim_->counters.iommu_map_calls;
  } else {
    cpu.Charge(Sym::kIntelMapPage, m.vtd_private_map_extra);
  }
  const uint64_t addr = (pfn << kIovaShift) | (phys & kPageMask);
  Task<void> install = InstallPtes(cpu, d, pfn, phys >> kIovaShift, npages);
  if (!install.ready()) return MapIovaTail(cpu, d, std::move(install), pfn, npages, addr);
  Task<void> sync = inv_->SyncMap(cpu, d.tlb, pfn, npages);
  if (!sync.ready()) return MapIovaTail(cpu, d, {}, pfn, npages, addr, std::move(sync));
  return addr;
}

// The waits of MapIova: the PTE install (when it has not run), then
// iotlb_sync_map (`sync` when already called, else called here).
Task<uint64_t> DmaApi::MapIovaTail(Cpu& cpu, DmaDomain& d, Task<void> install, uint64_t pfn,
                                   uint64_t npages, uint64_t addr, Task<void> sync) {
  if (!install.ready()) {
    co_await install;
    co_await inv_->SyncMap(cpu, d.tlb, pfn, npages);
  } else {
    co_await sync;
  }
  co_return addr;
}

Task<void> DmaApi::UnmapPage(Cpu& cpu, int dev, uint64_t dma, uint64_t size, DmaDir dir) {
  const Model& m = sim_->m();
  ++sim_->counters.dma_unmaps;
  if (direct_[dev]) {
    cpu.Charge(Sym::kDmaDirectUnmap, m.dma_direct);
    if (!m.dev_coherent && dir != DmaDir::kToDevice) CacheMaint(cpu, Sym::kDmaDirectUnmap, size);
    return {};
  }
  DmaDomain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelUnmap : Sym::kIommuDmaUnmapPage;
  EntryCall(cpu, entry, /*map=*/false);
  if (!m.dev_coherent && dir != DmaDir::kToDevice) CacheMaint(cpu, entry, size);
  uint64_t pfn = dma >> kIovaShift;
  if (IntelPrivate() && m.vtd_unmap_find_iova) {
    return FindIovaThenUnmap(cpu, d, pfn, PagesFor(dma, size));
  }
  return UnmapRange(cpu, d, pfn, PagesFor(dma, size));
}

// v4.6 intel_unmap(): find_iova() for the range's size first.
Task<void> DmaApi::FindIovaThenUnmap(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
  co_await d.iovad.FindIova(cpu, pfn);
  co_await UnmapRange(cpu, d, pfn, npages);
}

// A plain function while the pgtbl_lock (if any) is free, no leaf table is
// freed and the IOTLB sync does not wait; the rest is a coroutine from the
// first wait.
Task<void> DmaApi::UnmapRange(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
  const bool locked = PgtblLocked();  // arm_smmu_unmap()
  if (locked && !d.pgtbl_lock.TryAcquireNow(cpu, inv_->unmap_sym())) {
    return UnmapRangeLocking(cpu, d, pfn, npages);
  }
  const PtWork w = ClearPtes(cpu, d, pfn, npages);
  if (w.tables_freed > 0) return FreeTablesThenSync(cpu, d, pfn, npages, w, locked);
  return IotlbSyncThenFree(cpu, d, pfn, npages, w, locked);
}

// UnmapRange once the pgtbl_lock is contended: AcquireSlow() is the rest of
// its Lock().
Task<void> DmaApi::UnmapRangeLocking(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
  co_await d.pgtbl_lock.AcquireSlow(cpu, inv_->unmap_sym());
  const PtWork w = ClearPtes(cpu, d, pfn, npages);
  if (w.tables_freed > 0) co_await FreeTables(cpu, d, w);
  co_await IotlbSyncThenFree(cpu, d, pfn, npages, w, /*locked=*/true);
}

Task<void> DmaApi::FreeTablesThenSync(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages,
                                      PtWork w, bool locked) {
  co_await FreeTables(cpu, d, w);
  co_await IotlbSyncThenFree(cpu, d, pfn, npages, w, locked);
}

Task<void> DmaApi::IotlbSyncThenFree(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages,
                                     const PtWork& w, bool locked) {
  if (d.flush_queue) {
    if (locked) d.pgtbl_lock.Unlock(cpu, w.lines);
    return flush_->Add(cpu, d, pfn, npages);
  }
  // iommu_iotlb_sync() then free: the IOVA is reusable only once the
  // IOTLB can no longer hold it. Under the driver's pgtbl_lock this is
  // arm_lpae_unmap()'s io_pgtable_tlb_sync(), inside the lock. The gather
  // holds one page size: iommu_iotlb_gather_add_page() syncs what it has
  // before a leaf of another size joins, so blocks and 4 KiB leaves of one
  // unmap are two syncs.
  if (w.blocks > 0) {
    Task<void> sync = inv_->InvalidateRange(cpu, d.tlb, pfn, w.blocks * IoPageTable::kBlockPages,
                                            IoPageTable::kBlockPages);
    if (!sync.ready()) return IotlbSyncWait(cpu, d, pfn, npages, w, locked, std::move(sync));
  }
  const AfterIotlbSync after{&DmaApi::FreeIovaAfterSync, &d, pfn, npages, w.lines, locked};
  if (w.ptes > 0 || w.blocks == 0) {
    return inv_->InvalidateRangeThen(cpu, d.tlb, pfn, static_cast<uint64_t>(w.ptes), 1, after);
  }
  return FreeIovaAfterSync(after, cpu);
}

Task<void> DmaApi::FreeIovaAfterSync(const AfterIotlbSync& a, Cpu& cpu) {
  if (a.locked) a.domain->pgtbl_lock.Unlock(cpu, a.dirty_lines);
  return a.domain->FreeIova(cpu, a.pfn, a.npages);
}

Task<void> DmaApi::IotlbSyncWait(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages, PtWork w,
                                 bool locked, Task<void> sync) {
  co_await sync;
  if (w.ptes > 0) {
    co_await inv_->InvalidateRange(cpu, d.tlb, pfn, static_cast<uint64_t>(w.ptes), 1);
  }
  if (locked) d.pgtbl_lock.Unlock(cpu, w.lines);
  co_await d.FreeIova(cpu, pfn, npages);
}

Task<uint64_t> DmaApi::MapSg(Cpu& cpu, int dev, const SgSegment* segs, int nsegs, DmaDir dir) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  ++k.dma_map_sgs;
  if (direct_[dev]) {
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
  DmaDomain& d = *domains_[dev];
  const bool priv = IntelPrivate();
  Sym entry = priv ? Sym::kIntelMapSg : Sym::kIommuDmaMapSg;
  EntryCall(cpu, entry, /*map=*/true);
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
  if (direct_[dev]) {
    // dma_direct_unmap_sg(): one call, inline per-segment body (see MapSg).
    cpu.Charge(Sym::kDmaDirectUnmap, m.dma_direct);
    for (int i = 0; i < nsegs; ++i) {
      if (!m.dev_coherent && dir != DmaDir::kToDevice)
        CacheMaint(cpu, Sym::kDmaDirectUnmap, segs[i].len);
    }
    co_return;
  }
  DmaDomain& d = *domains_[dev];
  Sym entry = IntelPrivate() ? Sym::kIntelUnmap : Sym::kIommuDmaUnmapPage;
  EntryCall(cpu, entry, /*map=*/false);
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
  if (direct_[dev]) return 0;
  const Model& m = sim_->m();
  DmaDomain& d = *domains_[dev];
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

// ---- iova_depot_work_func(), every iova.rcache.trim_ms.

Task<void> DmaApi::DepotLoop(Cpu& cpu) {
  const Model& m = sim_->m();
  for (;;) {
    cpu.Idle(m.depot_trim_ms * kNsPerMs);
    co_await cpu.Sync();
    for (auto& d : domains_) co_await d->iovad.DepotWork(cpu);
  }
}

}  // namespace farm::emu
