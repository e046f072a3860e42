// emu/iommu/iova.h: the IOVA allocator of drivers/iommu/iova.c over real state.
//
// IovaDomain models one `struct iova_domain`: an ordered tree of allocated
// ranges (std::set with a pooled allocator standing in for the rbtree), the
// anchor node at IOVA_ANCHOR, cached_node / cached32_node, max32_alloc_size,
// one iova_rbtree_lock, and the per-CPU rcache (loaded/prev magazines per size
// class, a depot per size class: bounded to MAX_GLOBAL_MAGS before v6.7, an
// unbounded list trimmed by delayed work after).
//
// The *Locked methods are the pure data-structure algorithms (callable from
// tests without an engine); the Task methods are the kernel entry points: they
// take the locks in virtual time and charge costs per node visited, per
// magazine operation, per struct allocated.
//
// Units: pfns of the IOVA granule (4 KiB). Sizes in granules.
// Thread-safety: single-threaded (engine thread). Ownership: owns the tree,
// magazines and locks; borrows Sim.
#ifndef EMU_IOMMU_IOVA_H_
#define EMU_IOMMU_IOVA_H_

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <string>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/sim.h"

namespace farm::emu {

inline constexpr uint64_t kIovaAnchor = ~0ULL;
inline constexpr int kIovaShift = 12;

struct IovaRange {
  uint64_t pfn_lo;
  uint64_t pfn_hi;
  //! The CPU whose cache holds the range's struct iova line: the one whose
  //! alloc_iova() wrote it, or the last to find_iova() it. -1 = none
  //! (anchor, tests). Not part of the ordering.
  mutable int owner_cpu = -1;
  mutable int owner_node = 0;
};

class IovaDomain {
 public:
  //! `start_pfn` is the lowest allocatable pfn (dma-iommu uses 1);
  //! `num_cpus` sizes the per-CPU caches.
  IovaDomain(Sim* sim, std::string name, uint64_t start_pfn, int num_cpus);
  ~IovaDomain();
  IovaDomain(const IovaDomain&) = delete;
  IovaDomain& operator=(const IovaDomain&) = delete;

  // ---- Kernel entry points (virtual time, costs, locks).

  //! alloc_iova_fast(): rcache, then the rbtree; with `flush_rcache`, on
  //! failure frees every CPU's cached IOVAs and retries once. `limit_pfn` is
  //! the highest usable pfn. Returns the pfn, 0 on failure.
  Task<uint64_t> AllocIovaFast(Cpu& cpu, uint64_t size, uint64_t limit_pfn, bool flush_rcache);
  //! free_iova_fast(): into the rcache, else free_iova().
  Task<void> FreeIovaFast(Cpu& cpu, uint64_t pfn, uint64_t size);
  //! alloc_iova(): the rbtree allocator under iova_rbtree_lock.
  Task<uint64_t> AllocIova(Cpu& cpu, uint64_t size, uint64_t limit_pfn, bool size_aligned);
  //! free_iova(): private_find_iova + remove_iova under iova_rbtree_lock.
  Task<void> FreeIova(Cpu& cpu, uint64_t pfn);
  //! __free_iova(): remove_iova() of the node find_iova() returned, under
  //! iova_rbtree_lock; the lookup was paid by FindIova().
  Task<void> FreeFoundIova(Cpu& cpu, uint64_t pfn);
  //! find_iova(): lookup under iova_rbtree_lock (2016 intel_unmap).
  Task<void> FindIova(Cpu& cpu, uint64_t pfn);
  //! free_cpu_cached_iovas() for every CPU + free_global_cached_iovas().
  Task<void> FlushRcaches(Cpu& cpu);
  //! iova_depot_work_func(): trims each depot list by one magazine when it
  //! holds more than num_online_cpus (v6.7 list depot).
  Task<void> DepotWork(Cpu& cpu);

  // ---- Pure algorithms. iova_rbtree_lock must be held (checked with
  // FARM_DCHECK) unless the domain has no engine (Sim or its engine null).

  //! __alloc_and_insert_iova_range(); `limit_pfn` exclusive. Adds the nodes
  //! walked to *visited. Returns the new pfn_lo or 0 on failure.
  uint64_t AllocAndInsertRangeLocked(uint64_t size, uint64_t limit_pfn, bool size_aligned,
                                     int* visited);
  //! private_find_iova() + remove_iova(). Returns false if pfn not allocated.
  //! With `owner`, the removed range's owner_cpu/owner_node are copied there.
  bool RemoveLocked(uint64_t pfn, int* visited, IovaRange* owner = nullptr);
  //! private_find_iova() only; with `found`, the range found.
  bool ContainsLocked(uint64_t pfn, int* visited, const IovaRange** found = nullptr) const;

  size_t tree_size() const { return tree_.size() - 1; }  // excluding the anchor
  uint64_t max32_alloc_size() const { return max32_alloc_size_; }
  uint64_t dma_32bit_pfn() const { return dma_32bit_pfn_; }
  IovaRange cached_node() const { return *cached_node_; }
  IovaRange cached32_node() const { return *cached32_node_; }
  SpinLock& rbtree_lock() { return rbtree_lock_; }
  //! Pfns currently held in magazines (loaded+prev+depot), all classes.
  uint64_t CachedPfns() const;

 private:
  struct ByLo {
    bool operator()(const IovaRange& a, const IovaRange& b) const { return a.pfn_lo < b.pfn_lo; }
  };
  using Tree = std::pmr::set<IovaRange, ByLo>;
  using It = Tree::iterator;

  struct Magazine {
    int size = 0;
    std::vector<uint64_t> pfns;
  };
  struct CpuRcache {
    CpuRcache(Engine* e) : lock(e, "iova_cpu_rcache.lock") {}
    SpinLock lock;
    Magazine* loaded = nullptr;
    Magazine* prev = nullptr;
  };
  struct Rcache {
    Rcache(Engine* e) : lock(e, "iova_rcache.lock") {}
    SpinLock lock;
    std::vector<Magazine*> depot;
    std::vector<std::unique_ptr<CpuRcache>> cpu;
  };

  bool RbtreeLockHeldOrNoEngine() const {
    return sim_ == nullptr || sim_->engine == nullptr || rbtree_lock_.holder() != nullptr;
  }
  It CachedFor(uint64_t limit_pfn) {
    return limit_pfn <= dma_32bit_pfn_ ? cached32_node_ : cached_node_;
  }
  int LookupDepth() const;
  void DeleteUpdateCached(It free);  // __cached_rbnode_delete_update
  //! The found struct iova's line, pulled by `cpu` when another CPU's cache
  //! holds it: find_iova() and free_iova()/__free_iova(), not
  //! iova_magazine_free_pfns().
  Time RemoteIovaLine(const Cpu& cpu, const IovaRange& owner) const;
  Magazine* NewMagazine();
  void FreeMagazine(Magazine* m);
  uint64_t MagazinePop(Magazine* m, uint64_t limit_pfn);
  //! iova_magazine_free_pfns(): frees a magazine's pfns under the rbtree lock.
  Task<void> MagazineFreePfns(Cpu& cpu, Magazine* mag);
  Task<uint64_t> RcacheGet(Cpu& cpu, uint64_t size, uint64_t limit_pfn);
  // RcacheGet's parts: the lock taken after a wait, the rest with
  // cpu_rcache->lock held, a magazine from the depot, and the pop + unlock.
  Task<uint64_t> RcacheGetContended(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                    uint64_t limit_pfn);
  Task<uint64_t> RcacheGetLocked(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                 uint64_t limit_pfn);
  Task<uint64_t> RcacheGetFromDepot(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t size,
                                    uint64_t limit_pfn);
  uint64_t RcachePopUnlock(Cpu& cpu, CpuRcache& cr, bool has_pfn, uint64_t size,
                           uint64_t limit_pfn);
  Task<bool> RcacheInsert(Cpu& cpu, uint64_t pfn, uint64_t size);
  // RcacheInsert's parts, as RcacheGet's; the depot part also frees a
  // magazine a full bounded depot refused.
  Task<bool> RcacheInsertContended(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn);
  Task<bool> RcacheInsertLocked(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn);
  Task<bool> RcacheInsertToDepot(Cpu& cpu, Rcache& rc, CpuRcache& cr, uint64_t pfn);
  void MagazinePushUnlock(Cpu& cpu, CpuRcache& cr, uint64_t pfn);
  //! alloc_iova_fast() once the rcache step waited or found nothing: `get`
  //! is that step, not yet awaited.
  Task<uint64_t> AllocIovaFastSlow(Cpu& cpu, Task<uint64_t> get, uint64_t size, uint64_t limit_pfn,
                                   bool flush_rcache);
  //! free_iova_fast() once the rcache insert waited or failed.
  Task<void> FreeIovaFastSlow(Cpu& cpu, Task<bool> insert, uint64_t pfn);

  Sim* sim_;
  std::string name_;
  uint64_t start_pfn_;
  uint64_t dma_32bit_pfn_;
  uint64_t max32_alloc_size_;
  std::pmr::unsynchronized_pool_resource pool_;
  Tree tree_;
  It anchor_;
  It cached_node_;
  It cached32_node_;
  SpinLock rbtree_lock_;
  // The CPU whose alloc_iova() is inserting (owner of the new struct iova).
  int inserting_cpu_ = -1;
  int inserting_node_ = 0;
  std::vector<std::unique_ptr<Rcache>> rcaches_;
  std::vector<std::unique_ptr<Magazine>> magazines_;  // every magazine ever made
  std::vector<Magazine*> free_mags_;
  int num_cpus_;
};

}  // namespace farm::emu

#endif  // EMU_IOMMU_IOVA_H_
