#include "emu/engine/engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "lib/base/check.h"

namespace farm::emu {

std::string_view SymName(Sym s) {
  switch (s) {
    case Sym::kApp:
      return "[app]";
    case Sym::kNdelay:
      return "ndelay";
    case Sym::kMemset:
      return "memset";
    case Sym::kBenchStats:
      return "map_benchmark_thread";
    case Sym::kSpinLockIrqsave:
      return "_raw_spin_lock_irqsave";
    case Sym::kSpinUnlockIrqrestore:
      return "_raw_spin_unlock_irqrestore";
    case Sym::kAllocIova:
      return "alloc_iova";
    case Sym::kFreeIova:
      return "__free_iova";
    case Sym::kFindIova:
      return "find_iova";
    case Sym::kRcacheGet:
      return "iova_rcache_get";
    case Sym::kRcacheInsert:
      return "iova_rcache_insert";
    case Sym::kMagazineFreePfns:
      return "iova_magazine_free_pfns";
    case Sym::kKmemCache:
      return "kmem_cache_alloc";
    case Sym::kDmaDirectMap:
      return "dma_direct_map_page";
    case Sym::kDmaDirectUnmap:
      return "dma_direct_unmap_page";
    case Sym::kIommuDmaMapPage:
      return "iommu_dma_map_page";
    case Sym::kIommuDmaUnmapPage:
      return "iommu_dma_unmap_page";
    case Sym::kIommuDmaMapSg:
      return "iommu_dma_map_sg";
    case Sym::kIntelMapPage:
      return "intel_map_page";
    case Sym::kIntelUnmap:
      return "intel_unmap";
    case Sym::kIntelMapSg:
      return "intel_map_sg";
    case Sym::kIommuMap:
      return "__iommu_map";
    case Sym::kDomainMapping:
      return "__domain_mapping";
    case Sym::kDmaPteClear:
      return "dma_pte_clear_range";
    case Sym::kClflush:
      return "clflush_cache_range";
    case Sym::kFlushWriteBuffer:
      return "iommu_flush_write_buffer";
    case Sym::kQiSubmitSync:
      return "qi_submit_sync";
    case Sym::kCacheTagFlush:
      return "cache_tag_flush_range";
    case Sym::kArmLpaeMap:
      return "__arm_lpae_map";
    case Sym::kArmLpaeUnmap:
      return "__arm_lpae_unmap";
    case Sym::kCmdqIssue:
      return "arm_smmu_cmdq_issue_cmdlist";
    case Sym::kCmdqPollValid:
      return "__arm_smmu_cmdq_poll_set_valid_map";
    case Sym::kArmSmmuTlbSync:
      return "arm_smmu_tlb_sync_context";
    case Sym::kArmSmmuTlbInv:
      return "arm_smmu_tlb_inv_range_s1";
    case Sym::kQueueIova:
      return "queue_iova";
    case Sym::kFqFlush:
      return "fq_flush_iotlb";
    case Sym::kAddUnmap:
      return "add_unmap";
    case Sym::kFlushUnmaps:
      return "flush_unmaps";
    case Sym::kPgtableAlloc:
      return "alloc_pgtable_page";
    case Sym::kAmdV1Map:
      return "iommu_v1_map_pages";
    case Sym::kAmdV1Unmap:
      return "iommu_v1_unmap_pages";
    case Sym::kAmdQueueCommand:
      return "iommu_queue_command_sync";
    case Sym::kAmdCompletionWait:
      return "iommu_completion_wait";
    case Sym::kArmLpaeFreePgtable:
      return "__arm_lpae_free_pgtable";
    case Sym::kOther:
      return "[other]";
    case Sym::kCount:
      break;
  }
  return "?";
}

namespace {
uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = SplitMix(x);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Normal() {
  double u1 = Uniform();
  double u2 = Uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::vector<int> Topology::CpusOfNode(int node) const {
  std::vector<int> out;
  for (int c = 0; c < num_cpus; ++c) {
    if (node < 0 || cpu_node[c] == node) out.push_back(c);
  }
  return out;
}

namespace {

// The engine-owned coroutine that runs one CPU's program and, when it
// returns, hands the host thread to the next runnable CPU.
struct RootTask {
  struct promise_type : internal::PromiseBase {
    Engine* engine;
    Cpu* cpu;
    promise_type(Engine* e, Cpu* c, Task<void>&) : engine(e), cpu(c) {}
    RootTask get_return_object() {
      return RootTask{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    void return_void() {}
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        Engine* e = h.promise().engine;
        e->Finished(*h.promise().cpu);
        return e->Next();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
  };
  std::coroutine_handle<promise_type> h;
};

RootTask Drive(Engine* e, Cpu* c, Task<void> program) { co_await program; }

}  // namespace

Engine::Engine(Topology topo, LineCosts costs, uint64_t seed)
    : topo_(std::move(topo)), costs_(costs), seed_(seed) {}

Engine::~Engine() {
  for (auto& c : cpus_) {
    if (c->root_) c->root_.destroy();
  }
}

Cpu& Engine::AddCpu(int cpu, bool daemon) {
  int node = (cpu >= 0 && cpu < topo_.num_cpus) ? topo_.cpu_node[cpu] : 0;
  int index = static_cast<int>(cpus_.size());
  uint64_t s = seed_ * 0x100000001b3ULL + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL;
  if (index >> kIndexBits != 0) {
    base::CheckFailed(__FILE__, __LINE__, "index < 2^kIndexBits", "too many CPUs for a run key");
  }
  cpus_.push_back(std::unique_ptr<Cpu>(new Cpu(this, index, cpu, node, daemon, s)));
  by_index_.push_back(cpus_.back().get());
  run_queue_.Reserve(cpus_.size());
  return *cpus_.back();
}

void Engine::Start(Cpu& cpu, Task<void> program) {
  FARM_DCHECK(cpu.engine_ == this, "Start() of another engine's Cpu");
  FARM_DCHECK(!cpu.root_, "Start() called twice for one Cpu");
  FARM_DCHECK(!ran_, "Start() after Run()");
  RootTask r = Drive(this, &cpu, std::move(program));
  cpu.root_ = r.h;
  cpu.resume_ = r.h;
  if (!cpu.daemon_) ++live_;
  Push(&cpu);
}

absl::Status Engine::Run() {
  ran_ = true;
  while (live_ > 0) {
    if (run_queue_.empty()) {
      int blocked = 0;
      for (auto& c : cpus_) blocked += (c->blocked_ && !c->daemon_) ? 1 : 0;
      return absl::InternalError(
          absl::StrCat("engine deadlock: ", blocked, " CPUs blocked, none runnable"));
    }
    Cpu* c = Pop();
    current_ = std::max(current_, c->now_);
    ++switches_;
    c->resume_.resume();
    if (stopped_) {
      // Freed now, while the model objects their frames point into are
      // alive (they may be destroyed before the Engine).
      for (auto& cpu : cpus_) {
        if (cpu->root_) cpu->root_.destroy();
        cpu->root_ = nullptr;
      }
      return absl::AbortedError(absl::StrCat("engine stopped by its stop check after ", events_,
                                             " events, at virtual time ", current_, " ns"));
    }
  }
  return absl::OkStatus();
}

void Engine::CheckKeyTime(const Cpu& c) {
  // Unsigned, so a negative clock fails too. Not a FARM_DCHECK: Release
  // builds must not misorder either.
  if (static_cast<uint64_t>(c.now_) > static_cast<uint64_t>(kMaxKeyTime)) [[unlikely]] {
    base::CheckFailed(__FILE__, __LINE__, "0 <= now <= kMaxKeyTime",
                      "virtual clock out of the run key's range");
  }
}

void Engine::Push(Cpu* c) {
  CheckKeyTime(*c);
  run_queue_.Push(KeyOf(*c));
}

Cpu* Engine::Pop() { return CpuOf(run_queue_.Pop()); }

Cpu* Engine::ReplaceFront(Cpu* c) {
  CheckKeyTime(*c);
  return CpuOf(run_queue_.ReplaceFront(KeyOf(*c)));
}

std::coroutine_handle<> Engine::Yield(Cpu& cpu, std::coroutine_handle<> h) {
  cpu.resume_ = h;
  if (StopRequested()) {
    Push(&cpu);
    return std::noop_coroutine();
  }
  // The front is earlier than `cpu` (IsEarliest said so): it leaves the
  // queue as `cpu` enters it.
  return SwitchTo(ReplaceFront(&cpu));
}

bool Engine::StopRequested() {
  // Programs hand control to each other directly (symmetric transfer), so
  // Run's loop may not see a switch for the whole run: the check is here.
  if ((switches_ % kStopCheckSwitches) == 0 && stop_check_ && switches_ > 0 && stop_check_()) {
    stopped_ = true;
    return true;
  }
  return false;
}

std::coroutine_handle<> Engine::SwitchTo(Cpu* n) {
  current_ = std::max(current_, n->now_);
  ++switches_;
  return n->resume_;
}

std::coroutine_handle<> Engine::SwitchToEarliest() {
  if (StopRequested()) return std::noop_coroutine();
  return SwitchTo(Pop());
}

std::coroutine_handle<> Engine::BlockCurrent(Cpu& cpu, std::coroutine_handle<> h) {
  cpu.resume_ = h;
  cpu.blocked_ = true;
  cpu.block_start_ = cpu.now_;
  return Next();
}

std::coroutine_handle<> Engine::Next() {
  if (live_ == 0 || run_queue_.empty()) return std::noop_coroutine();
  return SwitchToEarliest();
}

void Engine::Finished(Cpu& cpu) {
  cpu.finished_ = true;
  if (!cpu.daemon_) --live_;
}

void Engine::Wake(Cpu& cpu, Time t) {
  if (!cpu.blocked_) return;
  cpu.blocked_ = false;
  Time w = std::max(t, current_);
  if (w > cpu.now_) cpu.now_ = w;
  Push(&cpu);
}

std::coroutine_handle<> Cpu::BlockAwaiter::await_suspend(std::coroutine_handle<> h) noexcept {
  return cpu->engine_->BlockCurrent(*cpu, h);
}

void Cpu::BlockAwaiter::await_resume() noexcept {
  Time waited = cpu->now_ - cpu->block_start_;
  if (idle) {
    cpu->idle_ += waited;
  } else {
    cpu->profile_[static_cast<int>(sym)] += waited;
  }
}

// ---- SpinLock: queued spinlock (kernel/locking/qspinlock.c) in virtual time.

void SpinLock::Take(Cpu& cpu, Sym data_sym) {
  const LineCosts& lc = engine_->line_costs();
  Time t = cpu.now();
  Time start = std::max(t, free_at_);
  Time handoff = lc.lock;
  if (last_index_ >= 0 && last_index_ != cpu.index()) {
    handoff += LineMove(last_node_, cpu.node());
  }
  ++stats_.acquisitions;
  if (start > t) {
    ++stats_.contended;
    stats_.wait_ns += start - t;
  }
  cpu.Charge(Sym::kSpinLockIrqsave, start - t + handoff);
  if (last_index_ >= 0 && last_index_ != cpu.index() && dirty_lines_ > 0) {
    cpu.Charge(data_sym, dirty_lines_ * LineMove(last_node_, cpu.node()));
  }
  holder_ = &cpu;
}

Time SpinLock::LineMove(int from, int to) const {
  // Far atomics route a hand-off through the home node, unless holder and
  // taker share a node: the home sees that node as the one holder and the
  // line moves through the node's shared cache.
  if (home_node_ >= 0 && engine_->line_costs().atomic_far > 0 && from != to) {
    return engine_->Transfer(to, home_node_);
  }
  return engine_->Transfer(from, to);
}

bool SpinLock::TryAcquireNow(Cpu& cpu, Sym data_sym) {
  if (!engine_->IsEarliest(cpu) || holder_ != nullptr) return false;
  Take(cpu, data_sym);
  return true;
}

Task<void> SpinLock::AcquireSlow(Cpu& cpu, Sym data_sym) {
  co_await cpu.Sync();
  if (holder_ == nullptr) {
    Take(cpu, data_sym);
    co_return;
  }
  // Held by a CPU that is itself waiting on something: join the MCS queue.
  ++stats_.acquisitions;
  ++stats_.contended;
  Time arrived = cpu.now();
  cpu.next_waiter = nullptr;
  if (wait_tail_) {
    wait_tail_->next_waiter = &cpu;
  } else {
    wait_head_ = &cpu;
  }
  wait_tail_ = &cpu;
  co_await cpu.Block(Sym::kSpinLockIrqsave);
  // Unlock() made us the holder and woke us after the hand-off.
  stats_.wait_ns += cpu.now() - arrived;
  if (last_index_ != cpu.index() && dirty_lines_ > 0) {
    cpu.Charge(data_sym, dirty_lines_ * LineMove(last_node_, cpu.node()));
  }
}

void SpinLock::Unlock(Cpu& cpu, int dirty_lines) {
  cpu.Charge(Sym::kSpinUnlockIrqrestore, engine_->line_costs().unlock);
  last_index_ = cpu.index();
  last_node_ = cpu.node();
  dirty_lines_ = dirty_lines;
  if (Cpu* w = wait_head_) {
    wait_head_ = w->next_waiter;
    if (!wait_head_) wait_tail_ = nullptr;
    w->next_waiter = nullptr;
    holder_ = w;
    // MCS hand-off: the releaser writes the next waiter's node.
    Time grant = std::max(w->now(), cpu.now()) + LineMove(cpu.node(), w->node()) +
                 engine_->line_costs().lock;
    engine_->Wake(*w, grant);
    return;
  }
  holder_ = nullptr;
  free_at_ = cpu.now();
}

// ---- AtomicLine.

AtomicLine::AtomicLine(Engine* e, int home_node) : engine_(e), home_node_(home_node) {
  const int nodes = e->topology().num_nodes();
  for (int n = 0; n < std::max(nodes, 1); ++n) home_rtt_.push_back(e->Transfer(n, home_node));
  if (e->line_costs().atomic_far > 0 && nodes <= kSnoopTableNodes) {
    for (uint64_t others = 0; others < (uint64_t{1} << nodes); ++others) {
      snoop_.push_back(SnoopOf(others));
    }
  }
}

AtomicLine::Snoop AtomicLine::SnoopOf(uint64_t others) const {
  Snoop s;
  for (; others != 0; others &= others - 1) {
    s.snoops += engine_->line_costs().atomic_far;
    s.ack = std::max(s.ack, engine_->Transfer(home_node_, std::countr_zero(others)));
  }
  return s;
}

void AtomicLine::RmwNotUnique(Cpu& cpu, Sym sym) {
  Time t = cpu.now();
  if (Time far = engine_->line_costs().atomic_far; far > 0) {
    if (unique_ >= 0 && unique_node_ == cpu.node()) {
      // The only copies are on this CPU's node: the home still sees the node
      // as the one holder, so the line moves between the node's cores
      // through its shared cache (a same-node transfer), one owner at a time.
      RmwWithinNode(cpu, sym);
      return;
    }
    // The home invalidates every cached copy before it executes the RMW.
    unique_ = kAtHome;
    // The request travels to the home node, waits for the ops ahead of it,
    // executes there and the result travels back.
    Time rtt = HomeRoundTrip(cpu.node());
    Time arrive = t + rtt / 2;
    Time start = std::max(arrive, free_at_);
    // Contenders spin on the line (cmpxchg loops, atomic_cond_read): every
    // node with one queued since the line was last idle holds a copy. The
    // home node tracks one remote holder exactly; once copies span several
    // remote nodes it must snoop each (but the requester's) and wait for the
    // farthest acknowledgement before executing the RMW.
    sharers_ = (arrive >= free_at_ ? 0 : sharers_) | NodeBit(cpu.node());
    const uint64_t remote = sharers_ & ~NodeBit(home_node_);
    Snoop s;
    if ((remote & (remote - 1)) != 0) {  // two or more remote nodes
      const uint64_t others = remote & ~NodeBit(cpu.node());
      s = others < snoop_.size() ? snoop_[others] : SnoopOf(others);
    }
    const Time snoops = s.snoops, ack = s.ack;
    // Snoops out one by one, the farthest acknowledgement back, then the
    // atomic itself; the line is busy at the home node throughout.
    free_at_ = start + snoops + ack + far;
    wait_ns_ += start - arrive;
    ++rmws_;
    last_index_ = cpu.index();
    last_node_ = cpu.node();
    cpu.SpinUntil(free_at_ + (rtt - rtt / 2), sym);
    return;
  }
  Time start = std::max(t, free_at_);
  Time cost = (last_index_ == cpu.index()) ? engine_->line_costs().local
                                           : engine_->Transfer(last_node_, cpu.node());
  if (last_index_ < 0) cost = engine_->line_costs().local;
  free_at_ = start + cost;
  wait_ns_ += start - t;
  ++rmws_;
  last_index_ = cpu.index();
  last_node_ = cpu.node();
  cpu.SpinUntil(free_at_, sym);
}

void AtomicLine::RmwWithinNode(Cpu& cpu, Sym sym) {
  const Time start = std::max(cpu.now(), free_at_);
  free_at_ = start + engine_->Transfer(unique_node_, cpu.node());
  wait_ns_ += start - cpu.now();
  ++rmws_;
  unique_ = cpu.index();
  last_index_ = cpu.index();
  last_node_ = cpu.node();
  cpu.SpinUntil(free_at_, sym);
}

void AtomicLine::Load(Cpu& cpu, Sym sym) {
  FARM_DCHECK(cpu.synced(), "atomic load without `co_await cpu.Sync()` immediately before");
  if (engine_->line_costs().atomic_far > 0) {
    if (unique_ == cpu.index()) {
      cpu.Charge(sym, 1);
      return;
    }
    if (unique_ >= 0 && unique_node_ == cpu.node()) {
      // A sibling core on this node holds the line: its copy comes through
      // the node's shared cache, and the node keeps the only copies.
      const Time start = std::max(cpu.now(), free_at_);
      unique_ = cpu.index();
      cpu.SpinUntil(start + engine_->Transfer(unique_node_, cpu.node()), sym);
      return;
    }
    // Far atomics leave the line at the home node: a load fetches a copy,
    // unique when nobody else caches one and no RMW is queued at the home
    // when the request arrives (a contended line is handed out shared).
    const bool idle = cpu.now() + HomeRoundTrip(cpu.node()) / 2 >= free_at_;
    unique_ = unique_ == kAtHome && idle ? cpu.index() : kShared;
    unique_node_ = cpu.node();
    sharers_ |= NodeBit(cpu.node());
    cpu.Charge(sym, last_index_ >= 0 ? HomeRoundTrip(cpu.node()) : 1);
    return;
  }
  if (last_index_ < 0 || last_index_ == cpu.index()) {
    cpu.Charge(sym, 1);
    return;
  }
  Time t = cpu.now();
  Time start = std::max(t, free_at_);
  cpu.SpinUntil(start + engine_->Transfer(last_node_, cpu.node()), sym);
}

}  // namespace farm::emu
