// emu/iommu/flush_queue.h: deferred IOTLB flushing, the back half of a lazy
// unmap.
//
// In lazy mode an unmap clears the PTEs and hands the IOVA range to a
// DeferredFlush instead of invalidating at once; the policy batches the
// invalidation and frees the IOVAs only after it. fq.kind selects one of
// four, each over real list or ring state in virtual time:
//  - intel-global: the 2008 VT-d deferred list (5e0d2a6fc094, add_unmap /
//    flush_unmaps): one list under async_umap_flush_lock, one global IOTLB
//    flush when it reaches fq.intel_high_water or fq.timeout_ms after the
//    first entry, then every IOVA freed under the lock;
//  - intel-percpu: the v4.7 per-CPU lists (aa4732406e12), each under its own
//    lock with its own timer; a full list flushes every CPU's list;
//  - percpu / single: the dma-iommu flush queue (queue_iova, fq_flush_iotlb,
//    fq_ring_free, fq_flush_timeout): per domain, per-CPU rings of fq.size
//    (or one ring of fq.single_size), flush start/finish counters, a
//    fq.timeout_ms (fq.single_timeout_ms) timer.
// Timer handlers run on one daemon CPU that StartTimer() adds.
//
// Thread-safety: engine thread only. Ownership: a policy owns its lists,
// rings, locks and timer state; it borrows Sim, the Invalidator and the
// domains, which DmaApi owns and which outlive it.
#ifndef EMU_IOMMU_FLUSH_QUEUE_H_
#define EMU_IOMMU_FLUSH_QUEUE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "emu/engine/engine.h"
#include "emu/engine/task.h"
#include "emu/iommu/domain.h"
#include "emu/iommu/invalidation.h"
#include "emu/iommu/sim.h"

namespace farm::emu {

class DeferredFlush {
 public:
  virtual ~DeferredFlush() = default;
  DeferredFlush(const DeferredFlush&) = delete;
  DeferredFlush& operator=(const DeferredFlush&) = delete;

  //! Defers the IOTLB invalidation and the IOVA free of [pfn, pfn + npages)
  //! of `d`, whose PTEs are already cleared.
  virtual Task<void> Add(Cpu& cpu, DmaDomain& d, uint64_t pfn, uint64_t npages) = 0;

  //! Adds the timer daemon to `engine`. Call once, before Engine::Run().
  void StartTimer(Engine& engine);

 protected:
  using Domains = std::vector<std::unique_ptr<DmaDomain>>;
  DeferredFlush(Sim* sim, Invalidator* inv, const Domains* domains, int num_timers);

  //! mod_timer(): timer `timer` fires at `deadline`.
  void ArmTimer(int timer, Time deadline);
  //! What timer `timer` does when it fires, on the timer daemon.
  virtual Task<void> OnTimer(Cpu& cpu, int timer) = 0;

  Sim* const sim_;
  Invalidator* const inv_;
  const Domains& domains_;

 private:
  Task<void> TimerLoop(Cpu& cpu);

  // Timer i fires at deadline_[i] (kNever when idle).
  std::vector<Time> deadline_;
  Cpu* timer_cpu_ = nullptr;
  bool timer_sleeping_ = false;
};

//! The policy for the model's fq.kind. `domains` must not grow afterwards;
//! `num_cpus` is the number of CPU slots (per-CPU lists and rings).
std::unique_ptr<DeferredFlush> MakeDeferredFlush(
    Sim* sim, Invalidator* inv, const std::vector<std::unique_ptr<DmaDomain>>& domains,
    int num_cpus);

}  // namespace farm::emu

#endif  // EMU_IOMMU_FLUSH_QUEUE_H_
