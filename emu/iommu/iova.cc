#include "emu/iommu/iova.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "lib/base/check.h"

namespace farm::emu {
namespace {

// order_base_2(): ceil(log2(n)), 0 for n <= 1.
int OrderBase2(uint64_t n) { return n <= 1 ? 0 : 64 - std::countl_zero(n - 1); }

// fls_long(): 1-based index of the most significant set bit, 0 for 0.
int FlsLong(uint64_t x) { return x == 0 ? 0 : 64 - std::countl_zero(x); }

}  // namespace

IovaDomain::IovaDomain(Sim* sim, std::string name, uint64_t start_pfn, int num_cpus)
    : sim_(sim),
      name_(std::move(name)),
      start_pfn_(start_pfn),
      // init_iova_domain(): dma_32bit_pfn = 1UL << (32 - iova_shift).
      dma_32bit_pfn_(1ULL << (32 - kIovaShift)),
      max32_alloc_size_(dma_32bit_pfn_),
      tree_(&pool_),
      rbtree_lock_(sim ? sim->engine : nullptr, "iova_rbtree_lock"),
      num_cpus_(num_cpus) {
  // The anchor node sits above the top of the usable address space, so the
  // downward walk always has a starting point.
  anchor_ = tree_.insert(IovaRange{kIovaAnchor, kIovaAnchor}).first;
  cached_node_ = anchor_;
  cached32_node_ = anchor_;
  if (sim_ && sim_->engine) {
    sim_->Register(&rbtree_lock_);
    // init_iova_rcaches(): loaded and prev magazines per CPU per size class.
    for (int o = 0; o < sim_->m().rcache_max_order; ++o) {
      auto rc = std::make_unique<Rcache>(sim_->engine);
      sim_->Register(&rc->lock);
      for (int c = 0; c < num_cpus; ++c) {
        auto cr = std::make_unique<CpuRcache>(sim_->engine);
        cr->loaded = NewMagazine();
        cr->prev = NewMagazine();
        rc->cpu.push_back(std::move(cr));
      }
      rcaches_.push_back(std::move(rc));
    }
  }
}

IovaDomain::~IovaDomain() = default;

int IovaDomain::LookupDepth() const {
  // A balanced search visits about log2(n)+1 nodes.
  return std::bit_width(tree_.size());
}

// __alloc_and_insert_iova_range() (drivers/iommu/iova.c, v5.15+ shape): walk
// the tree backwards from the cached node looking for a gap under high_pfn;
// on failure retry once from the limit (iova_find_limit), then record
// max32_alloc_size so later requests of this size fail fast.
uint64_t IovaDomain::AllocAndInsertRangeLocked(uint64_t size, uint64_t limit_pfn, bool size_aligned,
                                               int* visited) {
  FARM_DCHECK(RbtreeLockHeldOrNoEngine(), "iova_rbtree_lock held");
  uint64_t align_mask = ~0ULL;
  if (size_aligned) align_mask <<= FlsLong(size - 1);
  uint64_t high_pfn = limit_pfn;
  uint64_t low_pfn = start_pfn_;
  uint64_t new_pfn = 0;

  if (limit_pfn <= dma_32bit_pfn_ && size >= max32_alloc_size_) {
    if (sim_) ++sim_->counters.max32_fast_fails;
    return 0;  // iova32_full
  }

  It curr = CachedFor(limit_pfn);
  IovaRange curr_iova = *curr;
  uint64_t retry_pfn = curr_iova.pfn_hi;
  It prev = curr;
  bool have_curr = true;

  for (;;) {
    do {
      high_pfn = std::min(high_pfn, curr_iova.pfn_lo);
      new_pfn = (high_pfn - size) & align_mask;
      prev = curr;
      ++*visited;
      if (curr == tree_.begin()) {
        have_curr = false;  // rb_prev() returned NULL
      } else {
        --curr;
        curr_iova = *curr;
      }
    } while (have_curr && new_pfn <= curr_iova.pfn_hi && new_pfn >= low_pfn);

    if (high_pfn < size || new_pfn < low_pfn) {
      if (low_pfn == start_pfn_ && retry_pfn < limit_pfn) {
        high_pfn = limit_pfn;
        low_pfn = retry_pfn + 1;
        // iova_find_limit(): the lowest node at or above the limit.
        if (limit_pfn > dma_32bit_pfn_) {
          curr = anchor_;
        } else {
          curr = tree_.lower_bound(IovaRange{limit_pfn, limit_pfn});
          *visited += LookupDepth();
        }
        curr_iova = *curr;
        have_curr = true;
        continue;  // goto retry
      }
      max32_alloc_size_ = size;
      return 0;  // iova32_full
    }
    break;
  }

  // pfn_lo is size-aligned when size_aligned; `prev` is a valid place to
  // start the insertion (iova_insert_rbtree with a start node).
  It n = tree_.emplace_hint(
      prev, IovaRange{new_pfn, new_pfn + size - 1, inserting_cpu_, inserting_node_});
  // __cached_rbnode_insert_update()
  if (n->pfn_hi < dma_32bit_pfn_) {
    cached32_node_ = n;
  } else {
    cached_node_ = n;
  }
  return new_pfn;
}

// __cached_rbnode_delete_update()
void IovaDomain::DeleteUpdateCached(It free) {
  IovaRange cached = *cached32_node_;
  if (free == cached32_node_ || (free->pfn_hi < dma_32bit_pfn_ && free->pfn_lo >= cached.pfn_lo)) {
    cached32_node_ = std::next(free);
  }
  if (free->pfn_lo < dma_32bit_pfn_) max32_alloc_size_ = dma_32bit_pfn_;
  cached = *cached_node_;
  if (free->pfn_lo >= cached.pfn_lo) cached_node_ = std::next(free);
}

bool IovaDomain::ContainsLocked(uint64_t pfn, int* visited, const IovaRange** found) const {
  FARM_DCHECK(RbtreeLockHeldOrNoEngine(), "iova_rbtree_lock held");
  *visited += LookupDepth();
  auto it = tree_.upper_bound(IovaRange{pfn, pfn});
  if (it == tree_.begin()) return false;
  --it;
  if (it->pfn_lo > pfn || pfn > it->pfn_hi || it == anchor_) return false;
  if (found) *found = &*it;
  return true;
}

bool IovaDomain::RemoveLocked(uint64_t pfn, int* visited, IovaRange* owner) {
  FARM_DCHECK(RbtreeLockHeldOrNoEngine(), "iova_rbtree_lock held");
  // private_find_iova()
  *visited += LookupDepth();
  auto it = tree_.upper_bound(IovaRange{pfn, pfn});
  if (it == tree_.begin()) return false;
  --it;
  if (it == anchor_ || pfn > it->pfn_hi) return false;
  if (owner) *owner = *it;
  // remove_iova()
  DeleteUpdateCached(it);
  tree_.erase(it);
  return true;
}

// ---- Kernel entry points.

// The struct iova that find_iova()/__free_iova() reach (pfn_lo/pfn_hi read,
// its rb_node rewritten by rb_erase(), free_iova_mem() storing SLUB's free
// pointer in it) was written by the CPU whose alloc_iova() created it. When
// another CPU finds or frees it (v4.6 flush_unmaps() freeing every CPU's
// deferred IOVAs with __free_iova(), an unmap on a CPU other than the
// mapping one) the line comes from that CPU's cache: a dependent miss inside
// the iova_rbtree_lock critical section, not overlapped with the next
// entry's, since each entry takes the lock (a locked instruction) first.
// iova_magazine_free_pfns() frees a whole magazine under one lock hold, where
// the misses of consecutive entries may overlap: not charged there.
Time IovaDomain::RemoteIovaLine(const Cpu& cpu, const IovaRange& owner) const {
  if (owner.owner_cpu < 0 || owner.owner_cpu == cpu.index()) return 0;
  return sim_->engine->Transfer(owner.owner_node, cpu.node());
}

Task<uint64_t> IovaDomain::AllocIova(Cpu& cpu, uint64_t size, uint64_t limit_pfn,
                                     bool size_aligned) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  cpu.Charge(Sym::kKmemCache, m.kmem_cache);  // alloc_iova_mem()
  co_await rbtree_lock_.Lock(cpu, Sym::kAllocIova);
  inserting_cpu_ = cpu.index();
  inserting_node_ = cpu.node();
  int visited = 0;
  // alloc_iova() passes limit_pfn + 1: the walk's limit is exclusive.
  uint64_t pfn = AllocAndInsertRangeLocked(size, limit_pfn + 1, size_aligned, &visited);
  k.rbtree_nodes_visited += visited;
  Time cost = visited * m.rb_visit;
  if (pfn) {
    ++k.rbtree_allocs;
    cost += m.rb_insert;
  } else {
    ++k.rbtree_alloc_failures;
  }
  cpu.Charge(Sym::kAllocIova, cost);
  rbtree_lock_.Unlock(cpu, pfn ? m.rb_dirty_lines : 0);
  if (!pfn) cpu.Charge(Sym::kKmemCache, m.kmem_cache);  // free_iova_mem()
  co_return pfn;
}

Task<void> IovaDomain::FreeIova(Cpu& cpu, uint64_t pfn) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  co_await rbtree_lock_.Lock(cpu, Sym::kFreeIova);
  int visited = 0;
  IovaRange node{};
  bool found = RemoveLocked(pfn, &visited, &node);
  k.rbtree_nodes_visited += visited;
  if (found) ++k.rbtree_frees;
  cpu.Charge(Sym::kFreeIova,
             visited * m.rb_visit + (found ? m.rb_erase + RemoteIovaLine(cpu, node) : 0));
  rbtree_lock_.Unlock(cpu, found ? m.rb_dirty_lines : 0);
  cpu.Charge(Sym::kKmemCache, m.kmem_cache);  // free_iova_mem()
}

Task<void> IovaDomain::FreeFoundIova(Cpu& cpu, uint64_t pfn) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  co_await rbtree_lock_.Lock(cpu, Sym::kFreeIova);
  int unused = 0;  // the node is in hand: no walk to charge
  IovaRange node{};
  bool found = RemoveLocked(pfn, &unused, &node);
  if (found) ++k.rbtree_frees;
  cpu.Charge(Sym::kFreeIova, found ? m.rb_erase + RemoteIovaLine(cpu, node) : 0);
  rbtree_lock_.Unlock(cpu, found ? m.rb_dirty_lines : 0);
  cpu.Charge(Sym::kKmemCache, m.kmem_cache);  // free_iova_mem()
}

Task<void> IovaDomain::FindIova(Cpu& cpu, uint64_t pfn) {
  const Model& m = sim_->m();
  co_await rbtree_lock_.Lock(cpu, Sym::kFindIova);
  int visited = 0;
  const IovaRange* node = nullptr;
  Time line = 0;
  if (ContainsLocked(pfn, &visited, &node)) {
    line = RemoteIovaLine(cpu, *node);
    // The finder now holds the line's latest copy (the caller frees it next).
    node->owner_cpu = cpu.index();
    node->owner_node = cpu.node();
  }
  ++sim_->counters.find_iova;
  sim_->counters.rbtree_nodes_visited += visited;
  cpu.Charge(Sym::kFindIova, visited * m.rb_visit + line);
  rbtree_lock_.Unlock(cpu, 0);
}

IovaDomain::Magazine* IovaDomain::NewMagazine() {
  if (!free_mags_.empty()) {
    Magazine* m = free_mags_.back();
    free_mags_.pop_back();
    m->size = 0;
    return m;
  }
  auto m = std::make_unique<Magazine>();
  m->pfns.assign(static_cast<size_t>(sim_->m().mag_size), 0);
  magazines_.push_back(std::move(m));
  return magazines_.back().get();
}

void IovaDomain::FreeMagazine(Magazine* m) { free_mags_.push_back(m); }

// iova_magazine_pop()
uint64_t IovaDomain::MagazinePop(Magazine* mag, uint64_t limit_pfn) {
  if (mag->size == 0) return 0;
  if (!sim_->m().mag_limit_scan) {
    // v4.7: only the top entry is considered.
    if (mag->pfns[mag->size - 1] > limit_pfn) return 0;
    return mag->pfns[--mag->size];
  }
  // Only fall back to the rbtree if we have no suitable pfns at all.
  int i = mag->size - 1;
  for (; mag->pfns[i] > limit_pfn; --i) {
    if (i == 0) return 0;
  }
  uint64_t pfn = mag->pfns[i];
  mag->pfns[i] = mag->pfns[--mag->size];
  return pfn;
}

// __iova_rcache_get(): plain code while the CPU's rcache lock is free and
// its loaded or prev magazine has entries; coroutines for the rest.
Task<uint64_t> IovaDomain::RcacheGet(Cpu& cpu, uint64_t size, uint64_t limit_pfn) {
  int log = OrderBase2(size);
  if (log >= sim_->m().rcache_max_order) return uint64_t{0};
  Rcache& rc = *rcaches_[log];
  CpuRcache& cr = *rc.cpu[cpu.cpu()];
  if (!cr.lock.TryAcquireNow(cpu, Sym::kRcacheGet)) {
    return RcacheGetContended(cpu, rc, cr, size, limit_pfn);
  }
  return RcacheGetLocked(cpu, rc, cr, size, limit_pfn);
}

Task<uint64_t> IovaDomain::RcacheGetContended(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                              uint64_t limit_pfn) {
  co_await cr.lock.AcquireSlow(cpu, Sym::kRcacheGet);
  const uint64_t pfn = co_await RcacheGetLocked(cpu, rc, cr, size, limit_pfn);
  co_return pfn;
}

Task<uint64_t> IovaDomain::RcacheGetLocked(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                           uint64_t limit_pfn) {
  if (cr.loaded->size > 0) {
    // pop from the loaded magazine
  } else if (cr.prev->size > 0) {
    std::swap(cr.prev, cr.loaded);
  } else {
    return RcacheGetFromDepot(cpu, rc, cr, size, limit_pfn);
  }
  return RcachePopUnlock(cpu, cr, /*has_pfn=*/true, size, limit_pfn);
}

Task<uint64_t> IovaDomain::RcacheGetFromDepot(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                              uint64_t limit_pfn) {
  bool has_pfn = false;
  co_await rc.lock.Lock(cpu, Sym::kRcacheGet);
  if (!rc.depot.empty()) {
    FreeMagazine(cr.loaded);
    cr.loaded = rc.depot.back();
    rc.depot.pop_back();
    ++sim_->counters.depot_loads;
    has_pfn = true;
  }
  cpu.Charge(Sym::kRcacheGet, sim_->m().rcache_op);
  rc.lock.Unlock(cpu, 1);
  co_return RcachePopUnlock(cpu, cr, has_pfn, size, limit_pfn);
}

uint64_t IovaDomain::RcachePopUnlock(Cpu& cpu, CpuRcache& cr, bool has_pfn, uint64_t size,
                                     uint64_t limit_pfn) {
  uint64_t pfn = has_pfn ? MagazinePop(cr.loaded, limit_pfn - size) : 0;
  cpu.Charge(Sym::kRcacheGet, sim_->m().rcache_op);
  cr.lock.Unlock(cpu, 1);
  return pfn;
}

// __iova_rcache_insert(): plain code while the CPU's rcache lock is free and
// its loaded or prev magazine has room; coroutines for the rest.
Task<bool> IovaDomain::RcacheInsert(Cpu& cpu, uint64_t pfn, uint64_t size) {
  int log = OrderBase2(size);
  if (log >= sim_->m().rcache_max_order) return false;
  Rcache& rc = *rcaches_[log];
  CpuRcache& cr = *rc.cpu[cpu.cpu()];
  if (!cr.lock.TryAcquireNow(cpu, Sym::kRcacheInsert)) {
    return RcacheInsertContended(cpu, rc, cr, pfn);
  }
  return RcacheInsertLocked(cpu, rc, cr, pfn);
}

Task<bool> IovaDomain::RcacheInsertContended(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn) {
  co_await cr.lock.AcquireSlow(cpu, Sym::kRcacheInsert);
  const bool inserted = co_await RcacheInsertLocked(cpu, rc, cr, pfn);
  co_return inserted;
}

Task<bool> IovaDomain::RcacheInsertLocked(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn) {
  const int mag_size = sim_->m().mag_size;
  if (cr.loaded->size < mag_size) {
    // can insert
  } else if (cr.prev->size < mag_size) {
    std::swap(cr.prev, cr.loaded);
  } else {
    return RcacheInsertToDepot(cpu, rc, cr, pfn);
  }
  MagazinePushUnlock(cpu, cr, pfn);
  return true;
}

Task<bool> IovaDomain::RcacheInsertToDepot(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn) {
  const Model& m = sim_->m();
  Magazine* mag_to_free = nullptr;
  Magazine* new_mag = NewMagazine();  // iova_magazine_alloc(GFP_ATOMIC)
  cpu.Charge(Sym::kKmemCache, m.kmem_cache);
  co_await rc.lock.Lock(cpu, Sym::kRcacheInsert);
  if (m.depot == DepotKind::kList || static_cast<int>(rc.depot.size()) < m.max_global_mags) {
    rc.depot.push_back(cr.loaded);
    ++sim_->counters.depot_stores;
  } else {
    mag_to_free = cr.loaded;
  }
  cpu.Charge(Sym::kRcacheInsert, m.rcache_op);
  rc.lock.Unlock(cpu, 1);
  cr.loaded = new_mag;
  MagazinePushUnlock(cpu, cr, pfn);
  if (mag_to_free) {
    // A full depot: the whole magazine goes back to the rbtree under its
    // lock, 128 lookups and erases in one critical section.
    ++sim_->counters.depot_full_frees;
    co_await MagazineFreePfns(cpu, mag_to_free);
    FreeMagazine(mag_to_free);
    cpu.Charge(Sym::kKmemCache, m.kmem_cache);
  }
  co_return true;
}

void IovaDomain::MagazinePushUnlock(Cpu& cpu, CpuRcache& cr, uint64_t pfn) {
  cr.loaded->pfns[cr.loaded->size++] = pfn;  // iova_magazine_push()
  cpu.Charge(Sym::kRcacheInsert, sim_->m().rcache_op);
  cr.lock.Unlock(cpu, 1);
}

// iova_magazine_free_pfns()
Task<void> IovaDomain::MagazineFreePfns(Cpu& cpu, Magazine* mag) {
  const Model& m = sim_->m();
  Counters& k = sim_->counters;
  if (mag->size == 0) co_return;
  co_await rbtree_lock_.Lock(cpu, Sym::kMagazineFreePfns);
  int visited = 0;
  int freed = 0;
  for (int i = 0; i < mag->size; ++i) {
    if (RemoveLocked(mag->pfns[i], &visited)) ++freed;
  }
  k.rbtree_nodes_visited += visited;
  k.rbtree_frees += freed;
  cpu.Charge(Sym::kMagazineFreePfns, visited * m.rb_visit + freed * (m.rb_erase + m.kmem_cache));
  rbtree_lock_.Unlock(cpu, std::min(m.rb_dirty_lines * freed, 64));
  mag->size = 0;
}

// alloc_iova_fast(): an rcache hit that did not wait returns without a
// coroutine.
Task<uint64_t> IovaDomain::AllocIovaFast(Cpu& cpu, uint64_t size, uint64_t limit_pfn,
                                         bool flush_rcache) {
  const Model& m = sim_->m();
  if (size < (1ULL << (m.rcache_max_order - 1))) size = std::bit_ceil(size);
  Task<uint64_t> get = RcacheGet(cpu, size, limit_pfn + 1);
  if (get.ready() && get.value() != 0) {
    ++sim_->counters.rcache_hits;
    return get.value();
  }
  return AllocIovaFastSlow(cpu, std::move(get), size, limit_pfn, flush_rcache);
}

Task<uint64_t> IovaDomain::AllocIovaFastSlow(Cpu& cpu, Task<uint64_t> get, uint64_t size,
                                             uint64_t limit_pfn, bool flush_rcache) {
  const Model& m = sim_->m();
  const bool cacheable = OrderBase2(size) < m.rcache_max_order;
  uint64_t pfn = co_await get;
  if (pfn) {
    ++sim_->counters.rcache_hits;
    co_return pfn;
  }
  if (cacheable) ++sim_->counters.rcache_misses;
  for (;;) {
    pfn = co_await AllocIova(cpu, size, limit_pfn, true);
    if (pfn || !flush_rcache) co_return pfn;
    // Try replenishing IOVAs by flushing rcache.
    flush_rcache = false;
    ++sim_->counters.rcache_flushes;
    co_await FlushRcaches(cpu);
  }
}

// free_iova_fast(): an rcache insert that did not wait returns without a
// coroutine.
Task<void> IovaDomain::FreeIovaFast(Cpu& cpu, uint64_t pfn, uint64_t size) {
  const Model& m = sim_->m();
  if (size < (1ULL << (m.rcache_max_order - 1))) size = std::bit_ceil(size);
  Task<bool> insert = RcacheInsert(cpu, pfn, size);
  if (insert.ready() && insert.value()) {
    ++sim_->counters.rcache_inserts;
    return {};
  }
  return FreeIovaFastSlow(cpu, std::move(insert), pfn);
}

Task<void> IovaDomain::FreeIovaFastSlow(Cpu& cpu, Task<bool> insert, uint64_t pfn) {
  const bool inserted = co_await insert;
  if (inserted) {
    ++sim_->counters.rcache_inserts;
    co_return;
  }
  ++sim_->counters.rcache_insert_fails;
  co_await FreeIova(cpu, pfn);
}

Task<void> IovaDomain::FlushRcaches(Cpu& cpu) {
  // free_cpu_cached_iovas() for each online CPU.
  for (auto& rc : rcaches_) {
    for (auto& cr : rc->cpu) {
      co_await cr->lock.Lock(cpu, Sym::kMagazineFreePfns);
      co_await MagazineFreePfns(cpu, cr->loaded);
      co_await MagazineFreePfns(cpu, cr->prev);
      cr->lock.Unlock(cpu, 1);
    }
  }
  // free_global_cached_iovas()
  for (auto& rc : rcaches_) {
    co_await rc->lock.Lock(cpu, Sym::kMagazineFreePfns);
    while (!rc->depot.empty()) {
      Magazine* mag = rc->depot.back();
      rc->depot.pop_back();
      co_await MagazineFreePfns(cpu, mag);
      FreeMagazine(mag);
    }
    rc->lock.Unlock(cpu, 1);
  }
}

Task<void> IovaDomain::DepotWork(Cpu& cpu) {
  for (auto& rc : rcaches_) {
    co_await rc->lock.Lock(cpu, Sym::kMagazineFreePfns);
    Magazine* mag = nullptr;
    if (static_cast<int>(rc->depot.size()) > num_cpus_) {
      mag = rc->depot.back();
      rc->depot.pop_back();
    }
    rc->lock.Unlock(cpu, 1);
    if (mag) {
      ++sim_->counters.depot_trims;
      co_await MagazineFreePfns(cpu, mag);
      FreeMagazine(mag);
    }
  }
}

uint64_t IovaDomain::CachedPfns() const {
  uint64_t n = 0;
  for (const auto& rc : rcaches_) {
    for (const auto& cr : rc->cpu) n += cr->loaded->size + cr->prev->size;
    for (const Magazine* m : rc->depot) n += m->size;
  }
  return n;
}

}  // namespace farm::emu
