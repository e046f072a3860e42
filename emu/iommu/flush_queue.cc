#include "emu/iommu/flush_queue.h"

#include <algorithm>
#include <limits>

#include "lib/base/check.h"

namespace farm::emu {
namespace {

constexpr Time kNever = std::numeric_limits<Time>::max();

struct DeferredEntry {
  DmaDomain* domain;
  uint64_t pfn;
  uint64_t npages;
};

// ---- 2008 VT-d deferred flushing (5e0d2a6fc094): add_unmap / flush_unmaps.
class IntelGlobalDeferredFlush final : public DeferredFlush {
 public:
  IntelGlobalDeferredFlush(Sim* sim, Invalidator* inv, const Domains* domains)
      : DeferredFlush(sim, inv, domains, 1),
        async_umap_flush_lock_(sim->engine, "async_umap_flush_lock") {
    sim->Register(&async_umap_flush_lock_);
    list_.reserve(static_cast<size_t>(sim->m().intel_high_water) + 1);
  }

  Task<void> Add(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) override {
    return AddUnmapGlobal(cpu, d, pfn, npages);
  }

 private:
  Task<void> AddUnmapGlobal(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
    const Model& m = sim_->m();
    SpinLock& lock = async_umap_flush_lock_;
    co_await lock.Lock(cpu, Sym::kAddUnmap);
    if (static_cast<int>(list_.size()) >= m.intel_high_water) {
      ++sim_->counters.fq_full_flushes;
      co_await FlushUnmapsGlobal(cpu);
    }
    list_.push_back(DeferredEntry{&d, pfn, npages});
    cpu.Charge(Sym::kAddUnmap, m.fq_op);
    ++sim_->counters.fq_queued;
    if (!timer_on_) {
      timer_on_ = true;
      ArmTimer(0, cpu.now() + m.fq_timeout_ms * kNsPerMs);
    }
    lock.Unlock(cpu, 2);
  }

  // One global IOTLB flush, then every deferred IOVA freed (each free takes
  // iova_rbtree_lock in 2016 kernels).
  Task<void> FlushUnmapsGlobal(Cpu& cpu) {
    FARM_DCHECK(async_umap_flush_lock_.holder() == &cpu, "async_umap_flush_lock held");
    const Model& m = sim_->m();
    timer_on_ = false;
    if (list_.empty()) co_return;
    ++sim_->counters.fq_flushes;
    co_await inv_->InvalidateGlobal(cpu, domains_[0]->tlb);
    for (size_t i = 1; i < domains_.size(); ++i) domains_[i]->tlb.InvalidateAll();
    for (const DeferredEntry& e : list_) {
      cpu.Charge(Sym::kFlushUnmaps, m.fq_op);
      co_await e.domain->FreeIova(cpu, e.pfn, e.npages);
    }
    list_.clear();
  }

  // flush_unmaps_timeout()
  Task<void> OnTimer(Cpu& cpu, int /*timer*/) override {
    co_await async_umap_flush_lock_.Lock(cpu, Sym::kFlushUnmaps);
    if (!list_.empty()) ++sim_->counters.fq_timer_flushes;
    co_await FlushUnmapsGlobal(cpu);
    async_umap_flush_lock_.Unlock(cpu, 2);
  }

  SpinLock async_umap_flush_lock_;
  std::vector<DeferredEntry> list_;
  bool timer_on_ = false;
};

// ---- v4.7 per-CPU deferred invalidation (aa4732406e12).
class IntelPercpuDeferredFlush final : public DeferredFlush {
 public:
  IntelPercpuDeferredFlush(Sim* sim, Invalidator* inv, const Domains* domains, int num_cpus)
      : DeferredFlush(sim, inv, domains, num_cpus), num_cpus_(num_cpus) {
    for (int c = 0; c < num_cpus; ++c) {
      percpu_.push_back(std::make_unique<PercpuDeferred>(sim->engine));
      percpu_.back()->entries.reserve(static_cast<size_t>(sim->m().intel_high_water) + 1);
      sim->Register(&percpu_.back()->lock);
    }
  }

  Task<void> Add(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) override {
    return AddUnmapPercpu(cpu, d, pfn, npages);
  }

 private:
  // deferred_flush_data: per CPU, own lock and timer.
  struct PercpuDeferred {
    explicit PercpuDeferred(Engine* e) : lock(e, "deferred_flush.lock") {}
    SpinLock lock;
    std::vector<DeferredEntry> entries;
    bool timer_on = false;
  };

  Task<void> AddUnmapPercpu(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
    const Model& m = sim_->m();
    PercpuDeferred& pd = *percpu_[cpu.cpu()];
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
  Task<void> FlushUnmapsPercpu(Cpu& cpu, int owner_cpu) {
    const Model& m = sim_->m();
    PercpuDeferred& pd = *percpu_[owner_cpu];
    co_await pd.lock.Lock(cpu, Sym::kFlushUnmaps);
    pd.timer_on = false;
    if (!pd.entries.empty()) {
      ++sim_->counters.fq_flushes;
      co_await inv_->InvalidateGlobal(cpu, domains_[0]->tlb);
      for (size_t i = 1; i < domains_.size(); ++i) domains_[i]->tlb.InvalidateAll();
      for (const DeferredEntry& e : pd.entries) {
        cpu.Charge(Sym::kFlushUnmaps, m.fq_op);
        co_await e.domain->FreeIova(cpu, e.pfn, e.npages);
      }
      pd.entries.clear();
    }
    pd.lock.Unlock(cpu, 2);
  }

  Task<void> OnTimer(Cpu& cpu, int timer) override {
    if (!percpu_[timer]->entries.empty()) ++sim_->counters.fq_timer_flushes;
    co_await FlushUnmapsPercpu(cpu, timer);
  }

  int num_cpus_;
  std::vector<std::unique_ptr<PercpuDeferred>> percpu_;
};

// ---- dma-iommu flush queue: queue_iova, fq_flush_iotlb, fq_ring_free.
class DmaIommuFlushQueue final : public DeferredFlush {
 public:
  DmaIommuFlushQueue(Sim* sim, Invalidator* inv, const Domains* domains, int num_cpus)
      : DeferredFlush(sim, inv, domains, static_cast<int>(domains->size())) {
    const Model& m = sim->m();
    const bool single = m.fq_kind == FqKind::kSingle;
    const int nq = single ? 1 : num_cpus;
    const size_t size = static_cast<size_t>(single ? m.fq_single_size : m.fq_size);
    for (size_t d = 0; d < domains->size(); ++d) {
      cookies_.push_back(std::make_unique<Cookie>());
      for (int q = 0; q < nq; ++q) {
        cookies_.back()->fqs.push_back(std::make_unique<Ring>(sim->engine, size));
        sim->Register(&cookies_.back()->fqs.back()->lock);
      }
    }
  }

  Task<void> Add(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) override {
    return QueueIova(cpu, d, pfn, npages);
  }

 private:
  struct Entry {
    uint64_t pfn;
    uint64_t npages;
    uint64_t counter;
  };
  // struct iova_fq: a per-CPU (or the single) ring under its own lock.
  struct Ring {
    Ring(Engine* e, size_t size) : lock(e, "iova_fq.lock"), ring(size) {}
    SpinLock lock;
    std::vector<Entry> ring;
    size_t head = 0;
    size_t count = 0;
  };
  // The iommu_dma_cookie's flush-queue state of one domain.
  struct Cookie {
    std::vector<std::unique_ptr<Ring>> fqs;
    uint64_t flush_start_cnt = 0;
    uint64_t flush_finish_cnt = 0;
    bool timer_on = false;
  };

  Task<void> QueueIova(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) {
    const Model& m = sim_->m();
    Cookie& c = *cookies_[d.id];
    Ring& fq = c.fqs.size() == 1 ? *c.fqs[0] : *c.fqs[cpu.cpu()];
    co_await fq.lock.Lock(cpu, Sym::kQueueIova);
    // First remove entries already flushed out by another CPU.
    co_await FqRingFree(cpu, d, fq);
    if (fq.count == fq.ring.size()) {
      ++sim_->counters.fq_full_flushes;
      co_await FqFlushIotlb(cpu, d);
      co_await FqRingFree(cpu, d, fq);
    }
    size_t tail = (fq.head + fq.count) % fq.ring.size();
    fq.ring[tail] = Entry{pfn, npages, c.flush_start_cnt};
    ++fq.count;
    cpu.Charge(Sym::kQueueIova, m.fq_op);
    ++sim_->counters.fq_queued;
    fq.lock.Unlock(cpu, 1);
    if (!c.timer_on) {
      c.timer_on = true;
      int timeout = c.fqs.size() == 1 ? m.fq_single_timeout_ms : m.fq_timeout_ms;
      ArmTimer(d.id, cpu.now() + timeout * kNsPerMs);
    }
  }

  Task<void> FqFlushIotlb(Cpu& cpu, DmaDomain& d) {
    Cookie& c = *cookies_[d.id];
    ++c.flush_start_cnt;  // atomic64_inc(&cookie->fq_flush_start_cnt)
    ++sim_->counters.fq_flushes;
    co_await inv_->InvalidateDomain(cpu, d.tlb);  // ops->flush_iotlb_all
    ++c.flush_finish_cnt;
  }

  Task<void> FqRingFree(Cpu& cpu, DmaDomain& d, Ring& fq) {
    FARM_DCHECK(fq.lock.holder() == &cpu, "fq.lock held");
    const Model& m = sim_->m();
    uint64_t counter = cookies_[d.id]->flush_finish_cnt;
    while (fq.count > 0 && fq.ring[fq.head].counter < counter) {
      Entry e = fq.ring[fq.head];
      fq.head = (fq.head + 1) % fq.ring.size();
      --fq.count;
      cpu.Charge(Sym::kFqFlush, m.fq_op);
      co_await d.FreeIova(cpu, e.pfn, e.npages);
    }
  }

  Task<void> FqFlushTimeout(Cpu& cpu, DmaDomain& d) {
    cookies_[d.id]->timer_on = false;
    ++sim_->counters.fq_timer_flushes;
    co_await FqFlushIotlb(cpu, d);
    for (auto& fq : cookies_[d.id]->fqs) {
      co_await fq->lock.Lock(cpu, Sym::kFqFlush);
      co_await FqRingFree(cpu, d, *fq);
      fq->lock.Unlock(cpu, 1);
    }
  }

  Task<void> OnTimer(Cpu& cpu, int timer) override {
    co_await FqFlushTimeout(cpu, *domains_[timer]);
  }

  std::vector<std::unique_ptr<Cookie>> cookies_;  // by domain id
};

}  // namespace

DeferredFlush::DeferredFlush(Sim* sim, Invalidator* inv, const Domains* domains, int num_timers)
    : sim_(sim),
      inv_(inv),
      domains_(*domains),
      deadline_(static_cast<size_t>(num_timers), kNever) {}

void DeferredFlush::StartTimer(Engine& engine) {
  if (deadline_.empty()) return;
  timer_cpu_ = &engine.AddCpu(0, /*daemon=*/true);
  engine.Start(*timer_cpu_, TimerLoop(*timer_cpu_));
}

void DeferredFlush::ArmTimer(int timer, Time deadline) {
  deadline_[timer] = deadline;  // mod_timer()
  if (timer_sleeping_ && timer_cpu_) {
    timer_sleeping_ = false;
    timer_cpu_->engine().Wake(*timer_cpu_, deadline);
  }
}

Task<void> DeferredFlush::TimerLoop(Cpu& cpu) {
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

std::unique_ptr<DeferredFlush> MakeDeferredFlush(
    Sim* sim, Invalidator* inv, const std::vector<std::unique_ptr<DmaDomain>>& domains,
    int num_cpus) {
  switch (sim->m().fq_kind) {
    case FqKind::kIntelGlobal:
      return std::make_unique<IntelGlobalDeferredFlush>(sim, inv, &domains);
    case FqKind::kIntelPercpu:
      return std::make_unique<IntelPercpuDeferredFlush>(sim, inv, &domains, num_cpus);
    case FqKind::kPercpu:
    case FqKind::kSingle:
      break;
  }
  return std::make_unique<DmaIommuFlushQueue>(sim, inv, &domains, num_cpus);
}

}  // namespace farm::emu
