// emu/engine/engine.h: the discrete-event engine: virtual CPUs, virtual time and the
// shared resources they contend for.
//
// Time is an integer count of virtual nanoseconds. Each virtual CPU (Cpu) runs
// one program, a Task<void>, as sequential code and keeps its own clock: work
// that touches only CPU-private state is charged with Cpu::Charge() and costs
// no scheduling at all. Before touching shared state a program executes
// `co_await cpu.Sync()`, which returns at once when this CPU's clock is the
// earliest of all runnable CPUs, and otherwise parks the CPU in a run queue
// ordered by (clock, index) and transfers control to the earliest one. Shared state is
// therefore always read and written in global time order (a conservative
// parallel-discrete-event schedule run on one host thread), and a run is a
// pure function of its inputs and seed: there is no wall clock in model logic.
//
// Shared resources:
//  - SpinLock: a queued spinlock (qspinlock/MCS order). Hand-off costs one
//    cache-line transfer whose price depends on the NUMA distance between the
//    releasing and the acquiring CPU; lines the holder dirtied move with it.
//  - AtomicLine / CmpxchgWord: a cache line updated by atomic read-modify-
//    write; requests are served one at a time in arrival order, and a cmpxchg
//    fails when another CPU changed the word since this CPU last observed it,
//    so retries under contention emerge (the SMMUv3 cmdq prod/cons word).
//  - DeviceQueue: a device consuming work at a rate (VT-d invalidation queue,
//    SMMU command processing), in arrival order.
//
// Thread-safety: an Engine and everything attached to it is single-threaded;
// run independent engines on independent threads. Ownership: the Engine owns
// its Cpus and their root coroutine frames; resources (SpinLock, ...) are
// owned by the model objects that embed them and must outlive Run().
#ifndef EMU_ENGINE_ENGINE_H_
#define EMU_ENGINE_ENGINE_H_

#include <array>
#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "emu/engine/run_queue.h"
#include "emu/engine/task.h"
#include "lib/base/check.h"

namespace farm::emu {

using Time = int64_t;  // virtual nanoseconds

inline constexpr Time kNsPerUs = 1000;
inline constexpr Time kNsPerMs = 1000 * 1000;
inline constexpr Time kNsPerSec = 1000 * 1000 * 1000;

//! Kernel symbols CPU time is charged to, as `perf top` would name them.
enum class Sym : uint8_t {
  kApp,                   // the workload's own user/kernel work
  kNdelay,                // ndelay() in map_benchmark_thread
  kMemset,                // buffer staining in map_benchmark_thread
  kBenchStats,            // atomic64_add of the benchmark's shared sums
  kSpinLockIrqsave,       // _raw_spin_lock_irqsave (incl. queued slowpath)
  kSpinUnlockIrqrestore,  // _raw_spin_unlock_irqrestore
  kAllocIova,             // alloc_iova / __alloc_and_insert_iova_range
  kFreeIova,              // __free_iova / remove_iova
  kFindIova,              // find_iova / private_find_iova
  kRcacheGet,             // iova_rcache_get (alloc_iova_fast fast path)
  kRcacheInsert,          // iova_rcache_insert (free_iova_fast fast path)
  kMagazineFreePfns,      // iova_magazine_free_pfns
  kKmemCache,             // kmem_cache_alloc/free, kmalloc/kfree
  kDmaDirectMap,          // dma_direct_map_page
  kDmaDirectUnmap,        // dma_direct_unmap_page
  kIommuDmaMapPage,       // iommu_dma_map_page
  kIommuDmaUnmapPage,     // iommu_dma_unmap_page / __iommu_dma_unmap
  kIommuDmaMapSg,         // iommu_dma_map_sg / __iommu_map_sg
  kIntelMapPage,          // intel_map_page / __intel_map_single
  kIntelUnmap,            // intel_unmap
  kIntelMapSg,            // intel_map_sg
  kIommuMap,              // __iommu_map / iommu_pgsize loop
  kDomainMapping,         // __domain_mapping / pfn_to_dma_pte
  kDmaPteClear,           // dma_pte_clear_range
  kClflush,               // clflush_cache_range
  kFlushWriteBuffer,      // iommu_flush_write_buffer
  kQiSubmitSync,          // qi_submit_sync
  kArmLpaeMap,            // __arm_lpae_map
  kArmLpaeUnmap,          // __arm_lpae_unmap
  kCmdqIssue,             // arm_smmu_cmdq_issue_cmdlist
  kCmdqPollValid,         // __arm_smmu_cmdq_poll_set_valid_map
  kArmSmmuTlbSync,        // arm_smmu_tlb_sync_context (MMU-500)
  kArmSmmuTlbInv,         // arm_smmu_tlb_inv_range_s1 (MMU-500 TLBIVA writes)
  kQueueIova,             // queue_iova
  kFqFlush,               // fq_flush_iotlb / fq_ring_free / fq_flush_timeout
  kAddUnmap,              // add_unmap (VT-d deferred flush, 2008 / v4.7)
  kFlushUnmaps,           // flush_unmaps
  kPgtableAlloc,          // alloc_pgtable_page / __arm_lpae_alloc_pages
  kAmdV1Map,              // iommu_v1_map_pages (AMD io_pgtable.c)
  kAmdV1Unmap,            // iommu_v1_unmap_pages
  kAmdQueueCommand,       // iommu_queue_command_sync (AMD command buffer)
  kAmdCompletionWait,     // iommu_completion_wait / wait_on_sem
  kCacheTagFlush,         // cache_tag_flush_range / cache_tag_flush_all (VT-d, v6.10+)
  kArmLpaeFreePgtable,    // __arm_lpae_free_pgtable (a leaf table freed by an unmap)
  kOther,
  kCount
};
inline constexpr int kNumSyms = static_cast<int>(Sym::kCount);

//! The perf-top name of a symbol.
std::string_view SymName(Sym s);

//! Small, fast, seedable PRNG (xoshiro256**). Deterministic for a seed.
class Rng {
 public:
  explicit Rng(uint64_t seed = 1);
  uint64_t Next();
  //! Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  //! Standard normal (Box-Muller).
  double Normal();

 private:
  uint64_t s_[4];
};

//! CPU/NUMA topology: which node each CPU sits on and which socket each node.
struct Topology {
  int num_cpus = 1;
  std::vector<int> cpu_node;     // size num_cpus
  std::vector<int> node_socket;  // size num_nodes
  int num_nodes() const { return static_cast<int>(node_socket.size()); }
  //! CPUs on `node`, in id order (all CPUs for node < 0).
  std::vector<int> CpusOfNode(int node) const;
};

//! Price of moving a cache line between CPUs, by distance class.
struct LineCosts {
  Time local = 5;     // RMW on a line this CPU already owns
  Time node = 50;     // transfer between CPUs of one NUMA node
  Time socket = 90;   // transfer between nodes of one socket
  Time remote = 180;  // transfer between sockets
  Time lock = 15;     // uncontended lock+irqsave on an owned line
  Time unlock = 5;    // unlock+irqrestore
  //! > 0: atomic RMWs (AtomicLine) execute at the line's home node (Armv8.1
  //! LSE "far" atomics): each occupies the home node this long and the
  //! requester pays the round trip; the line is never pulled exclusively.
  //! 0: near atomics, the line moves to the requester (x86 lock-prefixed ops).
  Time atomic_far = 0;
};

class Engine;

//! One virtual CPU. Created by Engine::AddCpu; owned by the Engine.
class Cpu {
 public:
  Cpu(const Cpu&) = delete;
  Cpu& operator=(const Cpu&) = delete;

  int index() const { return index_; }  // unique, stable
  int cpu() const { return cpu_; }      // topology CPU number
  int node() const { return node_; }
  bool daemon() const { return daemon_; }
  Time now() const { return now_; }
  Engine& engine() const { return *engine_; }
  Rng& rng() { return rng_; }

  //! Charge `ns` of busy CPU time to symbol `s` (private work, no event).
  void Charge(Sym s, Time ns) {
    now_ += ns;
    profile_[static_cast<int>(s)] += ns;
  }
  //! Spend `ns` idle (not busy: excluded from the profile percentages).
  void Idle(Time ns) {
    now_ += ns;
    idle_ += ns;
  }
  //! Spin (busy) until time t, charged to `s`.
  void SpinUntil(Time t, Sym s) {
    if (t > now_) Charge(s, t - now_);
  }

  struct SyncAwaiter {
    Cpu* cpu;
    bool await_ready() noexcept;
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() noexcept { cpu->synced_at_ = cpu->now_; }
  };
  //! Wait until this CPU is the earliest runnable one; required before any
  //! access to shared state.
  SyncAwaiter Sync() { return SyncAwaiter{this}; }
  //! Sync() in two halves, for a caller that is a plain function while it
  //! need not wait: TrySyncNow() is what `co_await Sync()` does when it does
  //! not suspend (true: this CPU is the earliest and synced). On false the
  //! caller must next, before charging anything, co_await SyncSlow(), which
  //! parks the CPU without asking the engine again, so the engine counts one
  //! event either way.
  bool TrySyncNow();
  struct YieldAwaiter {
    Cpu* cpu;
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() noexcept { cpu->synced_at_ = cpu->now_; }
  };
  YieldAwaiter SyncSlow() { return YieldAwaiter{this}; }
  //! True while the clock still reads what it read when `co_await Sync()`
  //! last returned: nothing was charged since, so this CPU is still the
  //! earliest and may touch shared state (what FARM_DCHECK checks).
  bool synced() const { return synced_at_ == now_; }

  struct BlockAwaiter {
    Cpu* cpu;
    Sym sym;
    bool idle;
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept;
    void await_resume() noexcept;
  };
  //! Leave the run queue until Engine::Wake(); the wait is charged to `sym`
  //! (spinning, busy) or, with idle=true, counted as idle time.
  BlockAwaiter Block(Sym sym, bool idle = false) { return BlockAwaiter{this, sym, idle}; }

  const std::array<Time, kNumSyms>& profile() const { return profile_; }
  Time idle_time() const { return idle_; }
  //! Forgets the busy profile and idle time so far: the start of a measured
  //! window after a warm-up.
  void ResetAccounting() {
    profile_.fill(0);
    idle_ = 0;
  }

  //! Intrusive link for FIFO wait lists (a CPU waits on one thing at a time).
  Cpu* next_waiter = nullptr;
  //! Scratch value a waker passes to a blocked CPU (e.g. a completion time).
  int64_t wait_arg = 0;

 private:
  friend class Engine;
  Cpu(Engine* e, int index, int cpu, int node, bool daemon, uint64_t seed)
      : engine_(e), index_(index), cpu_(cpu), node_(node), daemon_(daemon), rng_(seed) {}

  Engine* engine_;
  int index_;
  int cpu_;
  int node_;
  bool daemon_;
  Time now_ = 0;
  Time idle_ = 0;
  Time block_start_ = 0;
  Time synced_at_ = -1;  // now_ when Sync() last returned; never a clock value at first
  bool blocked_ = false;
  bool finished_ = false;
  std::coroutine_handle<> resume_;
  std::coroutine_handle<> root_;
  Rng rng_;
  std::array<Time, kNumSyms> profile_{};
};

//! The scheduler. See the file comment.
class Engine {
 public:
  Engine(Topology topo, LineCosts costs, uint64_t seed);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  //! Adds a virtual CPU on topology CPU `cpu`. Daemons (timer handlers) do not
  //! keep the run alive: Run() returns when every non-daemon program is done.
  Cpu& AddCpu(int cpu, bool daemon = false);
  //! Gives `cpu` (one of this engine's) its program. REQUIRES: called once
  //! per Cpu, before Run() (FARM_DCHECK).
  void Start(Cpu& cpu, Task<void> program);
  //! Runs until every non-daemon program has returned, or until the stop
  //! check says stop: then kAborted, with the programs left suspended (the
  //! Engine's destructor frees them).
  absl::Status Run();

  //! `stop` is asked every kStopCheckSwitches switches whether to end the
  //! run early (a wall-clock limit, a revoked lease). The check costs one
  //! branch per switch when unset; a run is still a pure function of its
  //! inputs up to the point it stops.
  static constexpr uint64_t kStopCheckSwitches = 16384;
  void SetStopCheck(std::function<bool()> stop) { stop_check_ = std::move(stop); }

  const Topology& topology() const { return topo_; }
  const LineCosts& line_costs() const { return costs_; }
  const std::vector<std::unique_ptr<Cpu>>& cpus() const { return cpus_; }

  //! Price of moving a cache line from a CPU on node `from` to one on `to`.
  Time Transfer(int from_node, int to_node) const {
    if (from_node == to_node) return costs_.node;
    if (topo_.node_socket[from_node] == topo_.node_socket[to_node]) return costs_.socket;
    return costs_.remote;
  }

  //! Makes a blocked CPU runnable at time max(t, its clock, current time).
  void Wake(Cpu& cpu, Time t);
  //! Time of the most recent ordered (synchronised) action.
  Time current_time() const { return current_; }
  uint64_t events() const { return events_; }
  uint64_t switches() const { return switches_; }

  // Used by the awaiters.
  bool IsEarliest(Cpu& cpu) {
    ++events_;
    if (run_queue_.empty() || KeyOf(cpu) < run_queue_.front()) {
      current_ = cpu.now_;
      return true;
    }
    return false;
  }
  //! REQUIRES: IsEarliest(cpu) just returned false (the queue's front runs first).
  std::coroutine_handle<> Yield(Cpu& cpu, std::coroutine_handle<> h);
  std::coroutine_handle<> BlockCurrent(Cpu& cpu, std::coroutine_handle<> h);
  std::coroutine_handle<> Next();
  void Finished(Cpu& cpu);

 private:
  // A runnable CPU's place in the order, (clock, index), packed into one
  // integer: the clock in the high bits, the index in the low kIndexBits.
  // The run queue then compares single words and never touches the Cpu
  // objects (a parked CPU's clock does not change until it is popped, so the
  // key stays exact). Clocks past kMaxKeyTime (2^47 ns, 39 hours of virtual
  // time) do not fit and end the process (CheckKeyTime) rather than misorder.
  using RunKey = RunQueue::Key;
  static constexpr int kIndexBits = RunQueue::kIdBits;
  static constexpr Time kMaxKeyTime = (Time{1} << (63 - kIndexBits)) - 1;
  static RunKey KeyOf(const Cpu& c) {
    return (static_cast<RunKey>(c.now_) << kIndexBits) | static_cast<RunKey>(c.index_);
  }
  Cpu* CpuOf(RunKey k) const { return by_index_[k & ((RunKey{1} << kIndexBits) - 1)]; }
  static void CheckKeyTime(const Cpu& c);
  void Push(Cpu* c);
  Cpu* Pop();
  // Pops the front and pushes `c` in one path (c runs after the front).
  Cpu* ReplaceFront(Cpu* c);
  // Advances the switch count and the ordered time to `n`'s clock.
  std::coroutine_handle<> SwitchTo(Cpu* n);
  // True when the stop check says to end the run now.
  bool StopRequested();
  // The earliest runnable CPU's coroutine, or noop (back to Run) when the
  // stop check fired.
  std::coroutine_handle<> SwitchToEarliest();

  Topology topo_;
  LineCosts costs_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Cpu>> cpus_;
  std::vector<Cpu*> by_index_;  // cpus_ by index, one load from a key
  // The runnable CPUs by (clock, index).
  RunQueue run_queue_;
  bool ran_ = false;  // Run() was called: Start() is too late
  int live_ = 0;
  Time current_ = 0;
  uint64_t events_ = 0;
  uint64_t switches_ = 0;
  std::function<bool()> stop_check_;
  bool stopped_ = false;
};

inline bool Cpu::SyncAwaiter::await_ready() noexcept { return cpu->engine_->IsEarliest(*cpu); }
inline std::coroutine_handle<> Cpu::SyncAwaiter::await_suspend(std::coroutine_handle<> h) noexcept {
  return cpu->engine_->Yield(*cpu, h);
}

inline bool Cpu::TrySyncNow() {
  if (!engine_->IsEarliest(*this)) return false;
  synced_at_ = now_;
  return true;
}
inline std::coroutine_handle<> Cpu::YieldAwaiter::await_suspend(
    std::coroutine_handle<> h) noexcept {
  return cpu->engine_->Yield(*cpu, h);
}

//! Per-resource contention statistics.
struct ContentionStats {
  uint64_t acquisitions = 0;
  uint64_t contended = 0;
  Time wait_ns = 0;  // time spent waiting for the holder (excl. hand-off)
};

//! A queued spinlock (spin_lock_irqsave on a qspinlock) in virtual time.
class SpinLock {
 public:
  //! `home_node` >= 0: the node the lock (and the data it protects) was
  //! allocated on. With far atomics (LineCosts::atomic_far > 0) a line that
  //! changes CPU then travels through its home node, as AtomicLine's do:
  //! the acquirer's cmpxchg misses its L1 and goes to the home, which
  //! fetches the line from the previous holder. < 0: the home is not
  //! modelled and a hand-off costs the distance between the two CPUs.
  SpinLock(Engine* e, std::string name, int home_node = -1)
      : engine_(e), name_(std::move(name)), home_node_(home_node) {}
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  class [[nodiscard]] Awaiter {
   public:
    Awaiter(SpinLock* l, Cpu* c, Sym data_sym) : lock_(l), cpu_(c), data_sym_(data_sym) {}
    bool await_ready() { return lock_->TryAcquireNow(*cpu_, data_sym_); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) {
      slow_ = lock_->AcquireSlow(*cpu_, data_sym_);
      return slow_.await_suspend(h);
    }
    void await_resume() {}

   private:
    SpinLock* lock_;
    Cpu* cpu_;
    Sym data_sym_;
    Task<void> slow_;
  };
  //! `co_await lock.Lock(cpu, sym)`: acquire. Lines the previous holder
  //! dirtied (see Unlock) are pulled over and charged to `data_sym`.
  Awaiter Lock(Cpu& cpu, Sym data_sym) { return Awaiter(this, &cpu, data_sym); }
  //! Release; `dirty_lines` protected lines were written while held and will
  //! follow the lock to the next holder. Never suspends.
  void Unlock(Cpu& cpu, int dirty_lines = 1);

  //! Lock() in two halves, for a caller that is a plain function while it
  //! need not wait: TryAcquireNow() takes the lock when this CPU is the
  //! earliest and the lock is free (what Lock()'s co_await does without
  //! suspending) and returns true; on false the caller must next, before
  //! charging anything, co_await AcquireSlow(), which is the rest of Lock().
  bool TryAcquireNow(Cpu& cpu, Sym data_sym);
  Task<void> AcquireSlow(Cpu& cpu, Sym data_sym);

  const std::string& name() const { return name_; }
  const ContentionStats& stats() const { return stats_; }
  void ResetStats() { stats_ = {}; }
  Cpu* holder() const { return holder_; }

 private:
  void Take(Cpu& cpu, Sym data_sym);
  //! Price of moving one of the lock's lines from a CPU on `from` to one on `to`.
  Time LineMove(int from, int to) const;

  Engine* engine_;
  std::string name_;
  int home_node_;
  Cpu* holder_ = nullptr;
  Time free_at_ = 0;
  int last_index_ = -1;
  int last_node_ = 0;
  int dirty_lines_ = 0;
  Cpu* wait_head_ = nullptr;
  Cpu* wait_tail_ = nullptr;
  ContentionStats stats_;
};

//! A cache line updated by atomic RMW (atomic_inc, fetch_andnot, xchg...).
//! Near atomics (LineCosts::atomic_far == 0): one RMW at a time in arrival
//! order, each pulling the line from the last writer. Far atomics: RMWs are
//! served one at a time at the home node (`home_node`, where the structure
//! was allocated), each occupying it atomic_far ns; the requester waits for
//! the round trip to the home node plus its turn. Every node that loaded the
//! line or queued an RMW on it since it was last idle holds a copy (its CPUs
//! spin on it). The home node tracks one remote holder exactly; once copies
//! span two or more nodes other than the home, each RMW first snoops every
//! such node but the requester's (atomic_far ns each), waits for the
//! farthest acknowledgement (the round trip to that node), then executes,
//! the line busy at the home throughout. So the home queue grows with the
//! number of distinct remote nodes contending, and each RMW costs more the
//! farther the other holders are. No cost key of its own: atomic_far and the
//! platform's node distances (cost.line_*_ns).
//! A far RMW leaves the line at the home node; a load brings a copy into the
//! loading CPU's cache, unique when no other CPU holds one and no RMW is
//! queued at the home as the request arrives. While a CPU holds the only
//! copy, its RMWs (cost.line_local_ns) and loads (1 ns) hit its own L1 and
//! execute near: the rule of the Arm Cortex-A76 TRM (developer.arm.com/docs/
//! 100798, "Atomic instructions": near when the atomic hits the L1 in a
//! unique state, far when it misses or the line is shared); HiSilicon's
//! TaiShan v110 core does not publish its policy. While the only copies are
//! on one node, the home sees that node as the one holder, and the node's
//! other CPUs get the line through the node's shared cache: a same-node
//! transfer (cost.line_*_ns for the distance 0), one RMW at a time, and the
//! line stays the node's (an assumption of the same kind: the node's L3
//! serving a line the home has granted to it). A CPU of another node ends
//! that: a load makes the line shared, a far RMW invalidates the copies
//! first. So the CPUs of one node alone on a line pay no home-node round
//! trips, one CPU alone not even a transfer.
//! REQUIRES: the caller executed `co_await cpu.Sync()` immediately before
//! (nothing charged in between: FARM_DCHECK(cpu.synced())).
class AtomicLine {
 public:
  AtomicLine(Engine* e, int home_node = 0);
  //! One RMW: waits for the line (FIFO), pulls it over, charges `sym`.
  void Rmw(Cpu& cpu, Sym sym) {
    FARM_DCHECK(cpu.synced(), "atomic RMW without `co_await cpu.Sync()` immediately before");
    // Only far atomics make a CPU the unique holder: its L1 has the only
    // copy, so the atomic is near and the home, which knows this CPU's node
    // as the one holder, does nothing. Inline: one CPU alone on the line.
    if (unique_ == cpu.index()) {
      sharers_ = NodeBit(cpu.node());
      ++rmws_;
      last_index_ = cpu.index();
      last_node_ = cpu.node();
      cpu.Charge(sym, engine_->line_costs().local);
      return;
    }
    RmwNotUnique(cpu, sym);
  }
  //! A plain load: pulls a shared copy when another CPU wrote it last.
  void Load(Cpu& cpu, Sym sym);
  uint64_t rmws() const { return rmws_; }
  Time wait_ns() const { return wait_ns_; }

 protected:
  //! Round trip between `node` and the home node (far atomics).
  Time HomeRoundTrip(int node) const { return home_rtt_[node]; }

  Engine* engine_;
  int home_node_;
  Time free_at_ = 0;
  int last_index_ = -1;
  int last_node_ = 0;
  //! Far atomics: nodes holding a copy since the line was last idle (bit per
  //! node; nodes >= 63 share the last bit).
  uint64_t sharers_ = 0;
  //! Far atomics: the CPU whose cache holds the only copy (an index), or
  //! kAtHome (no cached copy) or kShared (copies in several CPUs' caches).
  static constexpr int kAtHome = -1;
  static constexpr int kShared = -2;
  int unique_ = kAtHome;
  int unique_node_ = 0;  // the node of `unique_` (a CPU index)

 private:
  //! A sharer's bit in sharers_.
  static uint64_t NodeBit(int node) { return uint64_t{1} << (node < 63 ? node : 63); }
  //! Rmw() of a CPU that does not hold the only copy.
  void RmwNotUnique(Cpu& cpu, Sym sym);
  //! Far atomics: the RMW of a CPU whose node holds the only copies.
  void RmwWithinNode(Cpu& cpu, Sym sym);
  //! Far atomics: the snoops of the remote nodes in `others` (atomic_far
  //! each) and the farthest one's acknowledgement.
  struct Snoop {
    Time snoops = 0;
    Time ack = 0;
  };
  Snoop SnoopOf(uint64_t others) const;
  //! Topologies of at most kSnoopTableNodes nodes: SnoopOf by the set of
  //! nodes, so an RMW looks its snoops up instead of walking the set.
  static constexpr int kSnoopTableNodes = 8;
  std::vector<Snoop> snoop_;
  std::vector<Time> home_rtt_;  // by node: HomeRoundTrip
  uint64_t rmws_ = 0;
  Time wait_ns_ = 0;
};

//! A word updated with a cmpxchg loop. The value is abstracted to a version
//! number: a cmpxchg succeeds iff nobody changed the word since the caller
//! observed it (by a load or a previous attempt).
//! REQUIRES: the caller executed `co_await cpu.Sync()` immediately before
//! (checked by AtomicLine's Rmw and Load).
class CmpxchgWord : public AtomicLine {
 public:
  using AtomicLine::AtomicLine;
  //! READ_ONCE of the word.
  uint64_t Observe(Cpu& cpu, Sym sym) {
    Load(cpu, sym);
    return version_;
  }
  //! cmpxchg(&word, observed, new): on failure `observed` is refreshed.
  bool TryCmpxchg(Cpu& cpu, uint64_t& observed, Sym sym) {
    Rmw(cpu, sym);
    ++attempts_;
    if (observed == version_) {
      observed = ++version_;
      return true;
    }
    ++failures_;
    observed = version_;
    return false;
  }
  //! An unconditional RMW that changes the word (atomic_fetch_andnot).
  void Modify(Cpu& cpu, Sym sym) {
    Rmw(cpu, sym);
    ++version_;
  }
  //! The word now: what a failed cmpxchg hands back, read once the attempt's
  //! round trip is charged and the caller has synced again.
  uint64_t Current() const { return version_; }
  uint64_t attempts() const { return attempts_; }
  uint64_t failures() const { return failures_; }

 private:
  uint64_t version_ = 0;
  uint64_t attempts_ = 0;
  uint64_t failures_ = 0;
};

//! A device consuming work in arrival order at its own pace. Arrival order
//! is global time order only if every submitter synced (`co_await
//! cpu.Sync()`, or holds a SpinLock taken since) before Submit. Not checked:
//! Start and Submit see a time, not the submitting Cpu.
class DeviceQueue {
 public:
  //! Work of `ns` arrives at time t; returns when the device starts it.
  Time Start(Time t, Time ns) {
    Time s = t > busy_until_ ? t : busy_until_;
    busy_until_ = s + ns;
    busy_ns_ += ns;
    ++items_;
    return s;
  }
  //! As Start, returning the completion time.
  Time Submit(Time t, Time ns) { return Start(t, ns) + ns; }
  Time busy_until() const { return busy_until_; }
  Time busy_ns() const { return busy_ns_; }
  uint64_t items() const { return items_; }

 private:
  Time busy_until_ = 0;
  Time busy_ns_ = 0;
  uint64_t items_ = 0;
};

}  // namespace farm::emu

#endif  // EMU_ENGINE_ENGINE_H_
