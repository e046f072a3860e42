#include "emu/iommu/invalidation.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <map>
#include <string>

namespace farm::emu {
namespace {

// `sync`, then `after`, in a frame of their own.
Task<void> AwaitThenAfter(Task<void> sync, AfterIotlbSync after, Cpu& cpu) {
  co_await sync;
  co_await after.run(after, cpu);
}

// `t` followed by `after` (may be null): a frame only when `t` waits.
[[gnu::always_inline]] inline Task<void> RunAfter(Task<void> t, const AfterIotlbSync* after,
                                                  Cpu& cpu) {
  if (after == nullptr) return t;
  if (t.ready()) return after->run(*after, cpu);
  return AwaitThenAfter(std::move(t), *after, cpu);
}

// ---------------------------------------------------------------------------
// Intel VT-d invalidation queue.
class VtdQi final : public Invalidator {
 public:
  explicit VtdQi(Sim* sim)
      : sim_(sim),
        q_lock_(sim->engine, "qi->q_lock"),
        register_lock_(sim->engine, "iommu->register_lock") {
    sim->Register(&q_lock_);
    sim->Register(&register_lock_);
  }

  Sym map_sym() const override { return Sym::kDomainMapping; }
  Sym unmap_sym() const override { return Sym::kDmaPteClear; }

  // __mapping_notify_one(): without caching mode only the write buffer may
  // need flushing, and only on hardware that reports RWBF.
  Task<void> SyncMap(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) override {
    if (!sim_->m().vtd_rwbf) return {};
    return FlushWriteBuffer(cpu);
  }

  // iommu_flush_iotlb_psi() -> qi_flush_iotlb(): one page-selective (or, when
  // the aligned mask gets too large, domain-selective) IOTLB descriptor.
  // Since v6.10 through cache_tag_flush_range(), which walks the domain's
  // cache tags under domain->cache_lock and keeps it until qi_submit_sync()
  // returns, so strict unmaps of one domain no longer overlap their waits.
  Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                             uint64_t /*granule*/) override {
    const Model& m = sim_->m();
    ++sim_->counters.inv_range;
    bool psi = npages <= 512;  // cap_max_amask_val on typical parts: 2 MiB
    SpinLock* cache_lock = m.vtd_cache_lock ? &CacheLock(tlb) : nullptr;
    if (cache_lock) co_await cache_lock->Lock(cpu, Sym::kCacheTagFlush);
    co_await QiSubmitSync(cpu, 1, psi ? m.qi_iotlb_psi : m.qi_iotlb_dsi);
    if (cache_lock) cache_lock->Unlock(cpu, 0);
    tlb.InvalidateRange(pfn, npages);
  }

  // intel_flush_iotlb_all(): cache_tag_flush_all() since v6.10, the same lock.
  Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) override {
    const Model& m = sim_->m();
    ++sim_->counters.inv_domain;
    SpinLock* cache_lock = m.vtd_cache_lock ? &CacheLock(tlb) : nullptr;
    if (cache_lock) co_await cache_lock->Lock(cpu, Sym::kCacheTagFlush);
    co_await QiSubmitSync(cpu, 1, m.qi_iotlb_dsi);
    if (cache_lock) cache_lock->Unlock(cpu, 0);
    tlb.InvalidateAll();
  }

  Task<void> InvalidateGlobal(Cpu& cpu, Iotlb& tlb) override {
    ++sim_->counters.inv_global;
    co_await QiSubmitSync(cpu, 1, sim_->m().qi_iotlb_global);
    tlb.InvalidateAll();
  }

 private:
  // qi_submit_sync(): write `ndesc` descriptors and a wait descriptor under
  // q_lock, write the tail register, then spin until the hardware writes the
  // wait descriptor's status. The kernel drops and retakes q_lock around each
  // cpu_relax() of that spin; the model lets the wait run unlocked and takes
  // the lock once more for the final check and slot reclaim.
  Task<void> QiSubmitSync(Cpu& cpu, int ndesc, Time hw_work) {
    const Model& m = sim_->m();
    co_await q_lock_.Lock(cpu, Sym::kQiSubmitSync);
    cpu.Charge(Sym::kQiSubmitSync, (ndesc + 1) * m.cmd_write + m.mmio_write);
    // Submissions are ordered by q_lock, so the queue sees them in time order.
    Time done = hw_.Submit(cpu.now(), (ndesc + 1) * m.qi_desc + hw_work);
    sim_->counters.qi_descriptors += ndesc + 1;
    ++sim_->counters.syncs;
    q_lock_.Unlock(cpu, 1);
    cpu.SpinUntil(done + m.poll, Sym::kQiSubmitSync);
    co_await q_lock_.Lock(cpu, Sym::kQiSubmitSync);
    cpu.Charge(Sym::kQiSubmitSync, m.cmd_write);
    q_lock_.Unlock(cpu, 1);
  }

  // iommu_flush_write_buffer(): GCMD.WBF then poll GSTS under register_lock.
  Task<void> FlushWriteBuffer(Cpu& cpu) {
    const Model& m = sim_->m();
    co_await register_lock_.Lock(cpu, Sym::kFlushWriteBuffer);
    cpu.Charge(Sym::kFlushWriteBuffer, m.mmio_write);
    Time done = wbf_hw_.Submit(cpu.now(), m.wbf);
    Time t = cpu.now() + m.mmio_read;
    while (t < done) t += m.mmio_read;  // IOMMU_WAIT_OP polling GSTS
    cpu.SpinUntil(t, Sym::kFlushWriteBuffer);
    ++sim_->counters.write_buffer_flushes;
    register_lock_.Unlock(cpu, 0);
  }

  // One dmar_domain->cache_lock per domain; a domain's Iotlb stands for it.
  SpinLock& CacheLock(const Iotlb& tlb) {
    std::unique_ptr<SpinLock>& lock = cache_locks_[&tlb];
    if (!lock) {
      lock = std::make_unique<SpinLock>(sim_->engine, "dmar_domain->cache_lock");
      sim_->Register(lock.get());
    }
    return *lock;
  }

  Sim* sim_;
  SpinLock q_lock_;
  SpinLock register_lock_;
  DeviceQueue hw_;
  DeviceQueue wbf_hw_;
  std::map<const Iotlb*, std::unique_ptr<SpinLock>> cache_locks_;
};

// ---------------------------------------------------------------------------
// AMD-Vi command buffer (drivers/iommu/amd/iommu.c). The v1 page table installs
// intermediate tables with cmpxchg64 and needs no caller lock; there is no
// iotlb_sync_map work on bare metal (amd_iommu_iotlb_sync_map() acts only with
// NpCache, a virtualised IOMMU).
class AmdIommu final : public Invalidator {
 public:
  explicit AmdIommu(Sim* sim) : sim_(sim), lock_(sim->engine, "iommu->lock") {
    sim->Register(&lock_);
  }

  Sym map_sym() const override { return Sym::kAmdV1Map; }
  Sym unmap_sym() const override { return Sym::kAmdV1Unmap; }
  Task<void> SyncMap(Cpu&, Iotlb&, uint64_t, uint64_t) override { return {}; }

  // amd_iommu_iotlb_sync(): amd_iommu_domain_flush_pages() over the gathered
  // range since fc65d0acaf23; before it, amd_iommu_flush_iotlb_all().
  Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                             uint64_t /*granule*/) override {
    const Model& m = sim_->m();
    if (!m.amd_selective_flush) {
      co_await InvalidateDomain(cpu, tlb);
      co_return;
    }
    ++sim_->counters.inv_range;
    co_await QueueCommand(cpu, m.amd_inv_pages);
    co_await CompletionWait(cpu);
    tlb.InvalidateRange(pfn, npages);
  }

  // amd_iommu_flush_iotlb_all(): the whole-domain INVALIDATE_IOMMU_PAGES,
  // then amd_iommu_domain_flush_complete().
  Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) override {
    ++sim_->counters.inv_domain;
    co_await QueueCommand(cpu, sim_->m().amd_inv_all);
    co_await CompletionWait(cpu);
    tlb.InvalidateAll();
  }

 private:
  // iommu_queue_command_sync(): under iommu->lock, copy the command into the
  // ring buffer and write the tail register; the hardware consumes in order.
  Task<void> QueueCommand(Cpu& cpu, Time hw_work) {
    const Model& m = sim_->m();
    co_await lock_.Lock(cpu, Sym::kAmdQueueCommand);
    cpu.Charge(Sym::kAmdQueueCommand, m.cmd_write + m.mmio_write);
    hw_.Submit(cpu.now(), m.amd_cmd + hw_work);
    ++sim_->counters.cmdq_commands;
    lock_.Unlock(cpu, 1);
  }

  // iommu_completion_wait(): COMPLETION_WAIT queued under iommu->lock, then
  // wait_on_sem() polls the semaphore the hardware stores. Since d2a0cac10597
  // the poll runs after the unlock; before, it held the lock, so every other
  // CPU's commands waited for this one's completion.
  Task<void> CompletionWait(Cpu& cpu) {
    const Model& m = sim_->m();
    co_await lock_.Lock(cpu, Sym::kAmdCompletionWait);
    cpu.Charge(Sym::kAmdCompletionWait, m.cmd_write + m.mmio_write);
    Time done = hw_.Submit(cpu.now(), m.amd_cmd + m.amd_compl_wait);
    ++sim_->counters.cmdq_commands;
    ++sim_->counters.syncs;
    if (m.amd_wait_unlocked) {
      lock_.Unlock(cpu, 1);
      cpu.SpinUntil(done + m.poll, Sym::kAmdCompletionWait);
    } else {
      cpu.SpinUntil(done + m.poll, Sym::kAmdCompletionWait);
      lock_.Unlock(cpu, 1);
    }
  }

  Sim* sim_;
  SpinLock lock_;
  DeviceQueue hw_;
};

// ---------------------------------------------------------------------------
// The Arm drivers share io-pgtable-arm (__arm_lpae_map/unmap) and neither has
// an iotlb_sync_map callback, so nothing is charged after a map.
class ArmInvalidator : public Invalidator {
 public:
  Sym map_sym() const final { return Sym::kArmLpaeMap; }
  Sym unmap_sym() const final { return Sym::kArmLpaeUnmap; }
  Task<void> SyncMap(Cpu&, Iotlb&, uint64_t, uint64_t) final { return {}; }
};

// ---------------------------------------------------------------------------
// Arm SMMUv3 command queue.
class SmmuV3Cmdq final : public ArmInvalidator {
 public:
  //! `consumer`: the SMMU's command consumption (TLB invalidation and
  //! CMD_SYNC processing), shared by every queue of one SMMU; null gives the
  //! queue an SMMU of its own. `busy_polling`: the queue's CMD_SYNC is
  //! CS_NONE and its issuer polls the CONS register
  //! (arm_smmu_cmdq_needs_busy_polling(), true for a Tegra241 VCMDQ).
  explicit SmmuV3Cmdq(Sim* sim, std::string lock_name = "smmu->cmdq.lock",
                      DeviceQueue* consumer = nullptr, bool busy_polling = false)
      : sim_(sim),
        busy_polling_(busy_polling),
        hw_(consumer != nullptr ? *consumer : own_hw_),
        cmdq_lock_(sim->engine, std::move(lock_name), HomeNode(sim)),
        llq_(sim->engine, HomeNode(sim)),
        shared_lock_(sim->engine, HomeNode(sim)),
        valid_map_(sim->engine, HomeNode(sim)) {
    sim->Register(&cmdq_lock_);
  }

  // arm_smmu_iotlb_sync() -> arm_smmu_tlb_inv_range_domain() over the gather
  // (nothing for an empty one): __arm_smmu_tlb_inv_range() batches its TLBI
  // commands CMDQ_BATCH_ENTRIES at a time, the last batch with CMD_SYNC.
  // CMDQ_MAX_TLBI_OPS: past it an SMMU without range invalidation gets one
  // ASID-wide TLBI rather than a soft lockup's worth of commands.
  // A plain function while every batch goes through without waiting.
  Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                             uint64_t granule) override {
    return InvalidateRangeThen(cpu, tlb, pfn, npages, granule, nullptr);
  }
  Task<void> InvalidateRangeThen(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                 uint64_t granule, const AfterIotlbSync& after) override {
    return InvalidateRangeThen(cpu, tlb, pfn, npages, granule, &after);
  }

  // `after` (may be null): run once the range is complete. The last batch's
  // lock-free issue, when it waits, ends with the IOTLB's invalidation and
  // `after` itself, so that wait needs no frame of this function's or the
  // caller's.
  Task<void> InvalidateRangeThen(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                 uint64_t granule, const AfterIotlbSync* after) {
    if (npages == 0) return RunAfter({}, after, cpu);
    const Model& m = sim_->m();
    const uint64_t commands = TlbiCommands(m, npages, granule);
    if (m.smmu_max_tlbi_ops > 0 && !(m.smmu_range_inv && m.smmu_ril) &&
        commands >= static_cast<uint64_t>(m.smmu_max_tlbi_ops)) {
      return RunAfter(InvalidateDomain(cpu, tlb), after, cpu);
    }
    ++sim_->counters.inv_range;
    sim_->counters.tlbi_va += commands;
    for (uint64_t left = commands; left > 0;) {
      const int n = BatchSize(left);
      left -= n;
      const Then then{&tlb, pfn, npages, after};
      Task<void> issue =
          IssueCmdlist(cpu, n, left == 0, n * m.smmu_tlbi, left == 0 ? &then : nullptr);
      if (!issue.ready()) {
        if (left == 0 && sim_->m().cmdq != CmdqKind::kSpinlock) return issue;
        return RunAfter(InvalidateRangeWait(cpu, tlb, pfn, npages, std::move(issue), left), after,
                        cpu);
      }
    }
    tlb.InvalidateRange(pfn, npages);
    return RunAfter({}, after, cpu);
  }

  // InvalidateRange's rest once a batch waits: `issue` not yet awaited,
  // `left` commands after it.
  Task<void> InvalidateRangeWait(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                 Task<void> issue, uint64_t left) {
    co_await issue;
    while (left > 0) {
      const int n = BatchSize(left);
      left -= n;
      co_await IssueCmdlist(cpu, n, left == 0, n * sim_->m().smmu_tlbi);
    }
    tlb.InvalidateRange(pfn, npages);
  }

  // At most CMDQ_BATCH_ENTRIES commands of `left` in one cmdlist.
  int BatchSize(uint64_t left) const {
    return static_cast<int>(std::min<uint64_t>(left, static_cast<uint64_t>(sim_->m().cmdq_batch)));
  }

  // arm_smmu_tlb_inv_walk(): the same, leaf=false, at the 4 KiB granule.
  Task<void> FlushWalk(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) override {
    ++sim_->counters.tlb_flush_walks;
    co_await InvalidateRange(cpu, tlb, pfn, npages, 1);
  }

  // arm_smmu_tlb_inv_context(): TLBI_NH_ASID + CMD_SYNC.
  Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) override {
    ++sim_->counters.inv_domain;
    co_await IssueCmdlist(cpu, 1, true, sim_->m().smmu_tlbi);
    tlb.InvalidateAll();
  }

  //! How many TLBI_NH_VA commands __arm_smmu_tlb_inv_range() builds for
  //! npages 4 KiB pages gathered at `granule` pages each. With range
  //! invalidation each command covers num * 2^scale pages, num 1..31 taken
  //! from the lowest set bits of the remaining count ("on each iteration we
  //! move up in size by at least 5 bits"); without, one command per granule.
  static uint64_t TlbiCommands(const Model& m, uint64_t npages, uint64_t granule) {
    if (!(m.smmu_range_inv && m.smmu_ril)) return (npages + granule - 1) / granule;
    constexpr uint64_t kRangeNumMax = 31;  // CMDQ_TLBI_RANGE_NUM_MAX
    uint64_t commands = 0;
    for (uint64_t left = npages; left != 0; ++commands) {
      const int scale = std::countr_zero(left);
      left -= ((left >> scale) & kRangeNumMax) << scale;
    }
    return commands;
  }

 private:
  struct Batch;
  struct Member {
    Batch* batch = nullptr;
    Time hw_ns = 0;  // its command slots and TLBI work, CMD_SYNC excluded
    bool sync = false;
    Time completion = 0;
    Time wait_from = 0;  // when its CMD_SYNC poll began, if it blocked
    bool done = false;
    bool waiting = false;
  };
  struct Batch {
    std::vector<int> members;  // engine CPU indices, in slot order
    int unvalidated = 0;
    Time valid_max = 0;
    Cpu* owner = nullptr;
    bool owner_waiting = false;
    bool dispatched = false;
    Cpu* successor = nullptr;  // next owner waiting for our PROD write
  };

  // struct arm_smmu_device (cmdq->q.llq, cmdq->lock, valid_map) is allocated
  // on the SMMU's node (iommu.node; past the platform's last node: its last).
  static int HomeNode(Sim* sim) {
    int nodes = sim->engine->topology().num_nodes();
    return std::max(0, std::min(sim->m().iommu_node, nodes - 1));
  }

  Member& MemberOf(Cpu& cpu) {
    if (static_cast<size_t>(cpu.index()) >= members_.size()) members_.resize(cpu.index() + 1);
    return members_[cpu.index()];
  }
  Batch* NewBatch() {
    if (free_batches_.empty()) {
      batches_.push_back(std::make_unique<Batch>());
      batches_.back()->members.reserve(256);
      return batches_.back().get();
    }
    Batch* b = free_batches_.back();
    free_batches_.pop_back();
    b->members.clear();
    b->unvalidated = 0;
    b->valid_max = 0;
    b->owner = nullptr;
    b->owner_waiting = false;
    b->dispatched = false;
    b->successor = nullptr;
    return b;
  }

  // What InvalidateRangeThen does once its last cmdlist is complete: the
  // model's IOTLB invalidation, then the caller's `after` (when not null).
  struct Then {
    Iotlb* tlb;
    uint64_t pfn;
    uint64_t npages;
    const AfterIotlbSync* after;
  };
  // A Then kept by a waiting issue's frame.
  struct ThenCopy {
    Iotlb* tlb = nullptr;
    uint64_t pfn = 0;
    uint64_t npages = 0;
    AfterIotlbSync after{};  // after.run null: none
  };

  // `then` (may be null): the lock-free issue, when it waits, does it at its
  // end (when it does not wait, the caller does); the locked one ignores it.
  Task<void> IssueCmdlist(Cpu& cpu, int n, bool sync, Time hw_work, const Then* then = nullptr) {
    sim_->counters.cmdq_commands += n + (sync ? 1 : 0);
    if (sync) ++sim_->counters.syncs;
    if (sim_->m().cmdq == CmdqKind::kSpinlock) return IssueLocked(cpu, n, sync, hw_work);
    return IssueLockfree(cpu, n, sync, hw_work, then);
  }

  // Before 587e6c10a7ce: arm_smmu_cmdq_issue_cmd() per command, then
  // arm_smmu_cmdq_issue_sync(). Each takes smmu->cmdq.lock on its own, so
  // other CPUs' commands can slip in between.
  Task<void> IssueLocked(Cpu& cpu, int n, bool sync, Time hw_work) {
    const Model& m = sim_->m();
    for (int i = 0; i < n; ++i) co_await IssueCmd(cpu, m.smmu_cmd + hw_work / n);
    if (sync) co_await IssueSync(cpu);
  }

  // arm_smmu_cmdq_issue_cmd(): arm_smmu_cmdq_insert_cmd() under the lock,
  // queue_insert_raw() and a PROD register write.
  Task<void> IssueCmd(Cpu& cpu, Time hw_ns) {
    const Model& m = sim_->m();
    co_await cmdq_lock_.Lock(cpu, Sym::kCmdqIssue);
    cpu.Charge(Sym::kCmdqIssue, m.cmd_write + m.mmio_write);
    hw_.Submit(cpu.now(), hw_ns);
    cmdq_lock_.Unlock(cpu, 1);
  }

  // __arm_smmu_cmdq_issue_sync(): the CMD_SYNC inserted and CONS polled
  // (queue_poll_cons) with the lock held.
  Task<void> IssueSync(Cpu& cpu) {
    const Model& m = sim_->m();
    co_await cmdq_lock_.Lock(cpu, Sym::kCmdqIssue);
    cpu.Charge(Sym::kCmdqIssue, m.cmd_write + m.mmio_write);
    Time done = hw_.Submit(cpu.now(), m.smmu_cmd + m.smmu_sync);
    cpu.SpinUntil(done + m.poll, Sym::kCmdqIssue);
    cmdq_lock_.Unlock(cpu, 1);
  }

  // 587e6c10a7ce and later: arm_smmu_cmdq_issue_cmdlist(). Every access to
  // the shared queue state comes after a Sync(). IssueLockfree runs as plain
  // code for as long as each Sync() finds this CPU the earliest (one CPU
  // alone on the queue never waits) and hands the rest to IssueLockfreeWait,
  // the same sequence as a coroutine, at the first Sync() that would suspend
  // or the first Block(): a frame only when something waits, and the engine
  // sees the same calls in the same order either way. The work between two
  // waits is in the small functions below, which both run.
  enum class Resume : uint8_t {
    kReserve,         // the Sync() before the first load of cmdq->q.llq.val
    kCmpxchg,         // before one cmpxchg attempt
    kReload,          // before a failed attempt's returned word
    kSharedLock,      // before arm_smmu_cmdq_shared_lock()
    kValidMap,        // before arm_smmu_cmdq_set_valid_map()
    kOwnerWait,       // before the look at the previous owner
    kPrevOwnerBlock,  // the Block() for the previous owner's PROD write
    kCloseBatch,      // before atomic_fetch_andnot(CMDQ_PROD_OWNED_FLAG)
    kValidMapBlock,   // the Block() of arm_smmu_cmdq_poll_valid_map()
    kValidMapLoad,    // before the one read of an already valid bitmap
    kDispatch,        // before the PROD write's effect
    kSyncBlock,       // the Block() of arm_smmu_cmdq_poll_until_sync()
    kTryUnlock,       // before arm_smmu_cmdq_shared_tryunlock()
    kPublishCons,     // before the last reader's WRITE_ONCE(llq.cons)
    kSharedUnlock,    // before arm_smmu_cmdq_shared_unlock()
  };
  // The kernel function's locals.
  struct Issue {
    int n;
    bool sync;
    Time hw_work;
    int slots;
    Member* me;
    const Then* then;  // not the kernel's: the caller's next step, see IssueCmdlist
    uint64_t observed = 0;
    bool owner = false;
    Batch* b = nullptr;
  };

  Task<void> IssueLockfree(Cpu& cpu, int n, bool sync, Time hw_work, const Then* then) {
    Issue is{n, sync, hw_work, n + (sync ? 1 : 0), &MemberOf(cpu), then};
    // 1. Reserve slots: cmpxchg loop on cmdq->q.llq.val.
    if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kReserve);
    Observe(cpu, is);
    for (;;) {
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kCmpxchg);
      if (Cmpxchg(cpu, is)) break;
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kReload);
      Reload(cpu, is);
    }
    Gather(cpu, is);
    if (is.sync) {
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kSharedLock);
      SharedLock(cpu);
    }
    if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kValidMap);
    SetValidMap(cpu, is);
    if (is.owner) {
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kOwnerWait);
      if (PrevOwnerPending(cpu)) return Wait(cpu, is, Resume::kPrevOwnerBlock);
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kCloseBatch);
      if (CloseBatch(cpu, is)) return Wait(cpu, is, Resume::kValidMapBlock);
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kValidMapLoad);
      valid_map_.Load(cpu, Sym::kCmdqPollValid);
      cpu.Charge(Sym::kCmdqIssue, sim_->m().mmio_write);  // 5d. writel_relaxed(prod)
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kDispatch);
      Dispatch(cpu, is.b);
    }
    if (!is.sync) return {};
    if (SyncPending(cpu, is)) return Wait(cpu, is, Resume::kSyncBlock);
    if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kTryUnlock);
    if (TryUnlock(cpu)) {
      if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kPublishCons);
      llq_.Modify(cpu, Sym::kCmdqIssue);
    }
    if (!cpu.TrySyncNow()) return Wait(cpu, is, Resume::kSharedUnlock);
    SharedUnlock(cpu);
    return {};
  }

  // IssueLockfreeWait, its `then` copied into the frame.
  Task<void> Wait(Cpu& cpu, Issue is, Resume from) {
    ThenCopy then;
    if (is.then != nullptr) {
      then = {is.then->tlb, is.then->pfn, is.then->npages, {}};
      if (is.then->after != nullptr) then.after = *is.then->after;
      is.then = nullptr;  // the caller's, gone once the plain code returns
    }
    return IssueLockfreeWait(cpu, is, from, then);
  }

  // IssueLockfree from `from`: its labels mark where the plain code can stop.
  // A stop at a Sync() means TrySyncNow() said no, so the CPU parks with
  // SyncSlow() (the engine is not asked twice); a stop at a Block() blocks.
  Task<void> IssueLockfreeWait(Cpu& cpu, Issue is, Resume from, ThenCopy then) {
    // One line per label, read as a table.
    // clang-format off
    switch (from) {
      case Resume::kPrevOwnerBlock: goto prev_owner_block;
      case Resume::kValidMapBlock: goto valid_map_block;
      case Resume::kSyncBlock: goto sync_block;
      default: break;
    }
    co_await cpu.SyncSlow();
    switch (from) {
      case Resume::kReserve: goto reserve;
      case Resume::kCmpxchg: goto cmpxchg;
      case Resume::kReload: goto reload;
      case Resume::kSharedLock: goto shared_lock;
      case Resume::kValidMap: goto valid_map;
      case Resume::kOwnerWait: goto owner_wait;
      case Resume::kCloseBatch: goto close_batch;
      case Resume::kValidMapLoad: goto valid_map_load;
      case Resume::kDispatch: goto dispatch;
      case Resume::kTryUnlock: goto try_unlock;
      case Resume::kPublishCons: goto publish_cons;
      default: goto shared_unlock;
    }
    // clang-format on
  reserve:
    Observe(cpu, is);
    for (;;) {
      co_await cpu.Sync();
    cmpxchg:
      if (Cmpxchg(cpu, is)) break;
      co_await cpu.Sync();
    reload:
      Reload(cpu, is);
    }
    Gather(cpu, is);
    if (is.sync) {
      co_await cpu.Sync();
    shared_lock:
      SharedLock(cpu);
    }
    co_await cpu.Sync();
  valid_map:
    SetValidMap(cpu, is);
    if (is.owner) {
      co_await cpu.Sync();
    owner_wait:
      if (PrevOwnerPending(cpu)) {
      prev_owner_block:
        co_await cpu.Block(Sym::kCmdqIssue);
      }
      co_await cpu.Sync();
    close_batch:
      if (CloseBatch(cpu, is)) {
      valid_map_block:
        co_await cpu.Block(Sym::kCmdqPollValid);
      } else {
        co_await cpu.Sync();
      valid_map_load:
        valid_map_.Load(cpu, Sym::kCmdqPollValid);
      }
      cpu.Charge(Sym::kCmdqIssue, sim_->m().mmio_write);  // 5d. writel_relaxed(prod)
      co_await cpu.Sync();
    dispatch:
      Dispatch(cpu, is.b);
    }
    if (!is.sync) {
      co_await RunThen(then, cpu);
      co_return;
    }
    if (SyncPending(cpu, is)) {
    sync_block:
      co_await cpu.Block(Sym::kCmdqIssue);
    }
    co_await cpu.Sync();
  try_unlock:
    if (TryUnlock(cpu)) {
      co_await cpu.Sync();
    publish_cons:
      llq_.Modify(cpu, Sym::kCmdqIssue);
    }
    co_await cpu.Sync();
  shared_unlock:
    SharedUnlock(cpu);
    co_await RunThen(then, cpu);
  }

  // A waiting issue's last step: the IOTLB model's invalidation, then the
  // caller's `after` (a Task that is usually complete).
  static Task<void> RunThen(const ThenCopy& then, Cpu& cpu) {
    if (then.tlb != nullptr) then.tlb->InvalidateRange(then.pfn, then.npages);
    if (then.after.run != nullptr) return then.after.run(then.after, cpu);
    return {};
  }

  // READ_ONCE(cmdq->q.llq.val), then the first queue_has_space().
  [[gnu::always_inline]] void Observe(Cpu& cpu, Issue& is) {
    is.observed = llq_.Observe(cpu, Sym::kCmdqIssue);
    cpu.Charge(Sym::kCmdqIssue, 2);  // queue_has_space(), queue_inc_prod_n()
  }
  [[gnu::always_inline]] bool Cmpxchg(Cpu& cpu, Issue& is) {
    ++sim_->counters.cmdq_cmpxchg_attempts;
    if (llq_.TryCmpxchg(cpu, is.observed, Sym::kCmdqIssue)) return true;
    ++sim_->counters.cmdq_cmpxchg_failures;
    return false;
  }
  // cmpxchg_relaxed() returns the word as the home held it when the attempt
  // executed, after the wait behind the RMWs queued there, and the loop
  // retries with it (llq.val = old). The engine decides the compare at issue;
  // taking the value at issue would leave a retrier's view older by its whole
  // queue wait than a newcomer's fresh load, so a retrier on a busy home
  // would lose to every newcomer for as long as newcomers keep coming.
  [[gnu::always_inline]] void Reload(Cpu& cpu, Issue& is) {
    is.observed = llq_.Current();
    cpu.Charge(Sym::kCmdqIssue, 2);
  }

  // owner = !(llq.prod & CMDQ_PROD_OWNED_FLAG); 2. arm_smmu_cmdq_write_entries().
  [[gnu::always_inline]] void Gather(Cpu& cpu, Issue& is) {
    const Model& m = sim_->m();
    is.owner = open_ == nullptr;
    if (is.owner) {
      open_ = NewBatch();
      open_->owner = &cpu;
    }
    Batch* b = is.b = open_;
    b->members.push_back(cpu.index());
    ++b->unvalidated;
    Member& me = *is.me;
    me.batch = b;
    me.hw_ns = is.slots * m.smmu_cmd + is.hw_work;
    me.sync = is.sync;
    me.done = false;
    me.waiting = false;
    // Private queue memory writes.
    cpu.Charge(Sym::kCmdqIssue, is.slots * m.cmd_write);
  }

  // 3. arm_smmu_cmdq_shared_lock() for a CMD_SYNC.
  [[gnu::always_inline]] void SharedLock(Cpu& cpu) {
    shared_lock_.Rmw(cpu, Sym::kCmdqIssue);
    ++shared_holders_;
  }

  // 4. arm_smmu_cmdq_set_valid_map(): atomic xor into the bitmap.
  [[gnu::always_inline]] void SetValidMap(Cpu& cpu, Issue& is) {
    Batch* b = is.b;
    valid_map_.Rmw(cpu, Sym::kCmdqPollValid);
    b->valid_max = std::max(b->valid_max, cpu.now());
    if (--b->unvalidated == 0 && b->owner_waiting) {
      b->owner_waiting = false;
      cpu.engine().Wake(*b->owner, cpu.now() + sim_->m().poll);
    }
  }

  // 5a. Wait for the previous owner to publish PROD (cmdq->owner_prod): true
  // when this CPU must block until it does.
  [[gnu::always_inline]] bool PrevOwnerPending(Cpu& cpu) {
    if (last_closed_ && !last_closed_->dispatched) {
      last_closed_->successor = &cpu;
      return true;
    }
    cpu.SpinUntil(last_prod_write_ + sim_->m().poll, Sym::kCmdqIssue);
    return false;
  }

  // 5b. atomic_fetch_andnot(CMDQ_PROD_OWNED_FLAG): stop gathering; 5c. true
  // when arm_smmu_cmdq_poll_valid_map() must block for a slot still invalid.
  [[gnu::always_inline]] bool CloseBatch(Cpu& cpu, Issue& is) {
    Batch* b = is.b;
    llq_.Modify(cpu, Sym::kCmdqIssue);
    open_ = nullptr;
    last_closed_ = b;
    if (b->unvalidated > 0) {
      b->owner_waiting = true;
      return true;
    }
    // Every slot is already valid: atomic_long_cond_read_relaxed() is one
    // read of the bitmap word, no spin. It costs what the line's state
    // dictates: a fetch from the home node after other CPUs' far xors, an
    // L1 hit when this CPU alone set the bits.
    cpu.SpinUntil(b->valid_max, Sym::kCmdqPollValid);
    return false;
  }

  // 6. arm_smmu_cmdq_poll_until_sync(): true when this CPU must block until
  // the SMMU consumes its CMD_SYNC.
  [[gnu::always_inline]] bool SyncPending(Cpu& cpu, Issue& is) {
    if (!is.me->done) {
      is.me->waiting = true;
      is.me->wait_from = cpu.now();
      return true;
    }
    cpu.SpinUntil(SyncSeen(cpu.now(), is.me->completion), Sym::kCmdqIssue);
    return false;
  }

  // When a CMD_SYNC issuer that starts polling at `from` sees its CMD_SYNC,
  // complete at `done`. __arm_smmu_cmdq_poll_until_msi(): the SMMU's MSI
  // write lands in the issuer's cache line, seen one poll later.
  // __arm_smmu_cmdq_poll_until_consumed() (busy polling): queue_poll() (9
  // cpu_relax()es, then udelay(1), 2, 4 ... us), then readl(CONS) each round;
  // a read sees CONS as the SMMU holds it halfway through the read. Without
  // ARM_SMMU_FEAT_SEV, as here: with it queue_poll() is a wfe(), and a
  // CS_NONE CMD_SYNC sends no event to end it.
  [[gnu::always_inline]] Time SyncSeen(Time from, Time done) const {
    if (!busy_polling_) return done + sim_->m().poll;
    return ConsSeen(from, done);
  }
  Time ConsSeen(Time from, Time done) const {
    const Model& m = sim_->m();
    constexpr int kSpinCount = 10;  // ARM_SMMU_POLL_SPIN_COUNT
    Time t = from;
    Time delay = kNsPerUs;
    for (int spin = 1;; ++spin) {
      if (spin < kSpinCount) {
        t += m.poll;
      } else {
        t += delay;
        delay *= 2;
        spin = 0;
      }
      t += m.mmio_read;
      if (t - m.mmio_read / 2 >= done) return t;
    }
  }

  // arm_smmu_cmdq_shared_tryunlock(): atomic_read(&cmdq->lock) == 1 means
  // this is the last reader, which then publishes the consumer index it
  // polled: WRITE_ONCE(cmdq->q.llq.cons, llq.cons). That store changes the
  // llq word, so every reserver's expected value goes stale and its next
  // cmpxchg fails, exactly like a competing reservation. True: the last.
  [[gnu::always_inline]] bool TryUnlock(Cpu& cpu) {
    shared_lock_.Load(cpu, Sym::kCmdqIssue);
    return shared_holders_ == 1;
  }

  // arm_smmu_cmdq_shared_unlock().
  [[gnu::always_inline]] void SharedUnlock(Cpu& cpu) {
    shared_lock_.Rmw(cpu, Sym::kCmdqIssue);
    --shared_holders_;
  }

  // The SMMU consumes the gathered batch in slot order.
  void Dispatch(Cpu& cpu, Batch* b) {
    if (sim_->m().smmu_sync_per_batch) {
      DispatchSyncPerBatch(cpu, b);
    } else {
      DispatchSyncPerCommand(cpu, b);
    }
  }

  // Every CMD_SYNC is a hw.smmu_sync_ns of the consumer, in slot order.
  void DispatchSyncPerCommand(Cpu& cpu, Batch* b) {
    const Model& m = sim_->m();
    Time t = hw_.Start(cpu.now(), 0);
    for (int idx : b->members) {
      Member& mb = members_[idx];
      t += mb.hw_ns + (mb.sync ? m.smmu_sync : 0);
      Complete(cpu, idx, t);
    }
    hw_.Submit(t, 0);
    Dispatched(cpu, b);
  }

  // smmu.sync_per_batch: the consumer performs the batch's commands and TLBIs
  // (the command slots this PROD write published), then one CMD_SYNC
  // handshake covers them all: each CMD_SYNC of the batch waits only for
  // commands before it, all of which are complete once the last is. The
  // handshake stalls this queue (its CONS cannot pass an incomplete CMD_SYNC)
  // but not the consumer, which takes other queues' commands meanwhile.
  void DispatchSyncPerBatch(Cpu& cpu, Batch* b) {
    const Model& m = sim_->m();
    Time work = 0;
    bool sync = false;
    for (int idx : b->members) {
      work += members_[idx].hw_ns;
      sync |= members_[idx].sync;
    }
    Time t = hw_.Start(std::max(cpu.now(), queue_stalled_until_), work);
    const Time synced = t + work + (sync ? m.smmu_sync : 0);
    for (int idx : b->members) {
      Member& mb = members_[idx];
      t += mb.hw_ns;
      Complete(cpu, idx, mb.sync ? synced : t);
    }
    queue_stalled_until_ = synced;
    Dispatched(cpu, b);
  }

  // Member `idx`'s commands are complete at `t`: wake it if it waits.
  [[gnu::always_inline]] void Complete(Cpu& cpu, int idx, Time t) {
    Member& mb = members_[idx];
    mb.completion = t;
    mb.done = true;
    if (mb.waiting) {
      Engine& eng = cpu.engine();
      mb.waiting = false;
      eng.Wake(*eng.cpus()[idx], SyncSeen(mb.wait_from, t));
    }
  }

  // The PROD write's effect on the software side: the batch is published.
  [[gnu::always_inline]] void Dispatched(Cpu& cpu, Batch* b) {
    const Model& m = sim_->m();
    Engine& eng = cpu.engine();
    last_prod_write_ = cpu.now();
    b->dispatched = true;
    ++sim_->counters.cmdq_batches;
    if (b->successor) eng.Wake(*b->successor, cpu.now() + m.poll);
    if (last_closed_ == b) last_closed_ = nullptr;
    free_batches_.push_back(b);
  }

  Sim* sim_;
  bool busy_polling_;   // arm_smmu_cmdq_needs_busy_polling()
  DeviceQueue own_hw_;  // the consumer when no other queue shares it
  DeviceQueue& hw_;     // the SMMU's command consumer, in dispatch order
  SpinLock cmdq_lock_;
  CmpxchgWord llq_;         // cmdq->q.llq (prod, cons, OWNED flag)
  AtomicLine shared_lock_;  // cmdq->lock (shared/exclusive counter)
  int shared_holders_ = 0;  // its value: CMD_SYNC issuers holding it shared
  AtomicLine valid_map_;    // cmdq->valid_map word
  // A deque: growing it keeps references held by suspended issuers valid.
  std::deque<Member> members_;
  std::vector<std::unique_ptr<Batch>> batches_;
  std::vector<Batch*> free_batches_;
  Batch* open_ = nullptr;
  Batch* last_closed_ = nullptr;
  Time last_prod_write_ = 0;
  Time queue_stalled_until_ = 0;  // this queue's last CMD_SYNC handshake ends
};

// ---------------------------------------------------------------------------
// NVIDIA Tegra241 CMDQV (tegra241-cmdqv.c, 918eb5c856f6): the kernel's VINTF0
// owns num_lvcmdqs_per_vintf logical VCMDQs, each an arm_smmu_cmdq of its own
// (own llq word, shared lock, valid bitmap, owner hand-off), and
// tegra241_cmdqv_get_cmdq() picks one by smp_processor_id() % that number, so
// only CPUs that share a queue contend on its cmpxchg. The hypervisor-owned
// VINTF accepts every command, so TLBI and CMD_SYNC never fall back to the
// SMMU's own cmdq. The queues are front ends of one SMMU ("multiple VCMDQ
// interfaces to supplement the architected SMMU_CMDQ in an effort to reduce
// contention", the series' v1): every VCMDQ's batches reserve its one command
// consumer, in the order their owners write PROD. A VCMDQ's CMD_SYNC is
// CS_NONE, so its issuer busy-polls CONS (arm_smmu_cmdq_needs_busy_polling(),
// ARM_SMMU_OPT_TEGRA241_CMDQV, same series). What two queues save: the
// software contention of one queue and, with smmu.sync_per_batch, one queue's
// CMD_SYNC handshake overlapping the other's commands.
class Tegra241Cmdqv final : public ArmInvalidator {
 public:
  Tegra241Cmdqv(Sim* sim, int num_vcmdqs) {
    for (int i = 0; i < num_vcmdqs; ++i) {
      vcmdqs_.push_back(std::make_unique<SmmuV3Cmdq>(
          sim, "vcmdq" + std::to_string(i) + "->cmdq.lock", &smmu_consumer_, true));
    }
  }

  Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                             uint64_t granule) override {
    return GetCmdq(cpu).InvalidateRange(cpu, tlb, pfn, npages, granule);
  }
  Task<void> InvalidateRangeThen(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                 uint64_t granule, const AfterIotlbSync& after) override {
    return GetCmdq(cpu).InvalidateRangeThen(cpu, tlb, pfn, npages, granule, after);
  }
  Task<void> FlushWalk(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) override {
    return GetCmdq(cpu).FlushWalk(cpu, tlb, pfn, npages);
  }
  Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) override {
    return GetCmdq(cpu).InvalidateDomain(cpu, tlb);
  }

 private:
  // tegra241_cmdqv_get_cmdq(): lidx = smp_processor_id() % num_lvcmdqs_per_vintf.
  SmmuV3Cmdq& GetCmdq(const Cpu& cpu) {
    return *vcmdqs_[static_cast<size_t>(cpu.index()) % vcmdqs_.size()];
  }

  DeviceQueue smmu_consumer_;  // before vcmdqs_: it outlives the queues that use it
  std::vector<std::unique_ptr<SmmuV3Cmdq>> vcmdqs_;
};

// ---------------------------------------------------------------------------
// Arm MMU-500 (SMMUv2) TLB maintenance.
class Mmu500Tlb final : public ArmInvalidator {
 public:
  explicit Mmu500Tlb(Sim* sim) : sim_(sim), cb_lock_(sim->engine, "smmu_domain->cb_lock") {
    sim->Register(&cb_lock_);
  }

  // arm_smmu_iotlb_sync() after __arm_lpae_unmap() called
  // arm_smmu_tlb_add_page_s1() per leaf entry: one TLBIVAL register write per
  // granule (a 2 MiB block is one write), then arm_smmu_tlb_sync_context().
  // The sync runs even for an empty gather.
  Task<void> InvalidateRange(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                             uint64_t granule) override {
    ++sim_->counters.inv_range;
    co_await cpu.Sync();
    TlbInvRangeS1(cpu, (npages + granule - 1) / granule);
    co_await TlbSync(cpu);
    tlb.InvalidateRange(pfn, npages);
  }

  // arm_smmu_tlb_inv_walk_s1(): a TLBIVA write for every 4 KiB of the freed
  // table's range, then the context sync, before the table is freed. (v4.x
  // did the same through tlb_add_flush(leaf=false) and tlb_sync.)
  Task<void> FlushWalk(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages) override {
    ++sim_->counters.tlb_flush_walks;
    co_await cpu.Sync();
    TlbInvRangeS1(cpu, npages);
    co_await TlbSync(cpu);
    tlb.InvalidateRange(pfn, npages);
  }

  // arm_smmu_tlb_inv_context_s1(): TLBIASID + sync.
  Task<void> InvalidateDomain(Cpu& cpu, Iotlb& tlb) override {
    const Model& m = sim_->m();
    ++sim_->counters.inv_domain;
    co_await cpu.Sync();
    cpu.Charge(Sym::kArmSmmuTlbInv, m.mmio_write);
    hw_.Submit(cpu.now(), m.mmu500_tlbi);
    co_await TlbSync(cpu);
    tlb.InvalidateAll();
  }

 private:
  // arm_smmu_tlb_inv_range_s1(): `writes` posted register writes to the
  // context bank, each one TLB invalidation for the SMMU to perform.
  void TlbInvRangeS1(Cpu& cpu, uint64_t writes) {
    const Model& m = sim_->m();
    for (uint64_t i = 0; i < writes; ++i) {
      cpu.Charge(Sym::kArmSmmuTlbInv, m.mmio_write);
      hw_.Submit(cpu.now(), m.mmu500_tlbi);
    }
    sim_->counters.tlbi_va += writes;
  }

  // __arm_smmu_tlb_sync(): write TLBSYNC, then poll TLBSTATUS TLB_SPIN_COUNT
  // times per round with udelay(delay), delay doubling, up to
  // TLB_LOOP_TIMEOUT (1 s) before "TLB sync timed out". v4.14's
  // arm_smmu_tlb_sync_context() polls the context bank's registers under
  // smmu_domain->cb_lock; before, the global sTLBGSYNC was written and
  // polled with no lock (mmu500.tlb_sync).
  Task<void> TlbSync(Cpu& cpu) {
    const Model& m = sim_->m();
    constexpr int kSpinCount = 10;
    constexpr Time kLoopTimeoutUs = 1000000;
    const bool locked = m.mmu500_tlb_sync == Mmu500TlbSync::kContext;
    if (locked) {
      co_await cb_lock_.Lock(cpu, Sym::kArmSmmuTlbSync);
    } else {
      co_await cpu.Sync();
    }
    cpu.Charge(Sym::kArmSmmuTlbSync, m.mmio_write);
    Time done = hw_.Submit(cpu.now(), m.mmu500_sync);
    ++sim_->counters.syncs;
    Time t = cpu.now();
    bool ok = false;
    for (Time delay = 1; delay < kLoopTimeoutUs && !ok; delay *= 2) {
      for (int spin = 0; spin < kSpinCount; ++spin) {
        t += m.mmio_read;
        ++sim_->counters.tlb_sync_polls;
        if (t >= done) {
          ok = true;
          break;
        }
      }
      if (!ok) t += delay * kNsPerUs;  // udelay(delay)
    }
    if (!ok) ++sim_->counters.tlb_sync_timeouts;
    cpu.SpinUntil(t, Sym::kArmSmmuTlbSync);
    if (locked) cb_lock_.Unlock(cpu, 0);
  }

  Sim* sim_;
  SpinLock cb_lock_;
  DeviceQueue hw_;
};

}  // namespace

Task<void> Invalidator::InvalidateRangeThen(Cpu& cpu, Iotlb& tlb, uint64_t pfn, uint64_t npages,
                                            uint64_t granule, const AfterIotlbSync& after) {
  return RunAfter(InvalidateRange(cpu, tlb, pfn, npages, granule), &after, cpu);
}

std::unique_ptr<Invalidator> MakeInvalidator(Sim* sim, int max_cpus) {
  switch (sim->m().iommu_type) {
    case IommuType::kVtd:
      return std::make_unique<VtdQi>(sim);
    case IommuType::kSmmuV3:
      // arm_smmu_get_cmdq(): the CMDQV's queues when the driver supports them
      // and the SMMU has them, else the one SMMU cmdq.
      if (sim->m().tegra241_cmdqv && sim->m().smmu_vcmdqs > 0) {
        return std::make_unique<Tegra241Cmdqv>(sim, sim->m().smmu_vcmdqs);
      }
      return std::make_unique<SmmuV3Cmdq>(sim);
    case IommuType::kMmu500:
      return std::make_unique<Mmu500Tlb>(sim);
    case IommuType::kAmd:
      return std::make_unique<AmdIommu>(sim);
  }
  return nullptr;
}

}  // namespace farm::emu
