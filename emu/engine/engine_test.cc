// Tests of the discrete-event engine and its shared resources.
#include "emu/engine/engine.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace farm::emu {
namespace {

Topology TwoNodes(int per_node) {
  Topology t;
  t.num_cpus = 2 * per_node;
  t.node_socket = {0, 1};
  for (int c = 0; c < t.num_cpus; ++c) t.cpu_node.push_back(c / per_node);
  return t;
}

LineCosts Costs() {
  LineCosts lc;
  lc.local = 5;
  lc.node = 50;
  lc.socket = 90;
  lc.remote = 200;
  lc.lock = 10;
  lc.unlock = 5;
  return lc;
}

TEST(Engine, PrivateWorkNeedsNoEvents) {
  Engine e(TwoNodes(1), Costs(), 1);
  Cpu& c = e.AddCpu(0);
  auto prog = [](Cpu& cpu) -> Task<void> {
    for (int i = 0; i < 1000; ++i) cpu.Charge(Sym::kApp, 10);
    co_return;
  };
  e.Start(c, prog(c));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(c.now(), 10000);
  EXPECT_EQ(e.events(), 0u);
}

// Two programs that never end: the stop check ends the run, on the switch
// it is asked at, and the engine frees the suspended programs.
TEST(Engine, StopCheckEndsARunThatWouldNotEnd) {
  Engine e(TwoNodes(1), Costs(), 1);
  auto forever = [](Cpu& cpu) -> Task<void> {
    for (;;) {
      cpu.Charge(Sym::kApp, 1);
      co_await cpu.Sync();
    }
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(1);
  e.Start(a, forever(a));
  e.Start(b, forever(b));
  int asked = 0;
  e.SetStopCheck([&asked] { return ++asked == 3; });
  absl::Status st = e.Run();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(e.switches(), 3 * Engine::kStopCheckSwitches);
}

// A plain caller's TrySyncNow() + SyncSlow() is co_await Sync(): the same
// order of shared accesses, the same events and switches.
struct SyncRun {
  std::vector<std::pair<Time, int>> log;
  uint64_t events = 0;
  uint64_t switches = 0;
};
SyncRun RunSyncs(bool split) {
  Engine e(TwoNodes(4), Costs(), 1);
  SyncRun r;
  auto prog = [&r, split](Cpu& cpu, Time step) -> Task<void> {
    for (int i = 0; i < 50; ++i) {
      cpu.Charge(Sym::kApp, step + (i % 3));
      if (!split) {
        co_await cpu.Sync();
      } else if (!cpu.TrySyncNow()) {
        co_await cpu.SyncSlow();
      }
      EXPECT_TRUE(cpu.synced());
      r.log.emplace_back(cpu.now(), cpu.index());
    }
  };
  for (int c = 0; c < 8; ++c) {
    Cpu& cpu = e.AddCpu(c);
    e.Start(cpu, prog(cpu, 3 + c % 4));
  }
  EXPECT_TRUE(e.Run().ok());
  r.events = e.events();
  r.switches = e.switches();
  return r;
}

TEST(Engine, TrySyncNowThenSyncSlowIsSync) {
  const SyncRun whole = RunSyncs(false);
  const SyncRun split = RunSyncs(true);
  EXPECT_EQ(split.log, whole.log);
  EXPECT_EQ(split.events, whole.events);
  EXPECT_EQ(split.switches, whole.switches);
  EXPECT_EQ(whole.events, 8u * 50u);
  EXPECT_GT(whole.switches, 8u);
}

// The run queue orders by (clock, index): among many CPUs at equal clocks
// the lower index runs first, and the accesses never go back in time.
TEST(Engine, ManyCpusRunByClockThenIndex) {
  Topology t;
  t.num_cpus = 100;
  t.node_socket = {0};
  t.cpu_node.assign(100, 0);
  Engine e(t, Costs(), 1);
  std::vector<std::pair<Time, int>> log;
  auto prog = [&log](Cpu& cpu, Time step) -> Task<void> {
    for (int i = 0; i < 20; ++i) {
      cpu.Charge(Sym::kApp, step);
      co_await cpu.Sync();
      log.emplace_back(cpu.now(), cpu.index());
    }
  };
  for (int c = 0; c < 100; ++c) {
    Cpu& cpu = e.AddCpu(c);
    e.Start(cpu, prog(cpu, 10 + 10 * (c % 3)));
  }
  ASSERT_TRUE(e.Run().ok());
  ASSERT_EQ(log.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(log.begin(), log.end()));
}

TEST(Engine, SharedAccessIsInGlobalTimeOrder) {
  Engine e(TwoNodes(2), Costs(), 1);
  std::vector<std::pair<Time, int>> log;
  auto prog = [&log](Cpu& cpu, Time step) -> Task<void> {
    for (int i = 0; i < 5; ++i) {
      cpu.Charge(Sym::kApp, step);
      co_await cpu.Sync();
      log.emplace_back(cpu.now(), cpu.index());
    }
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(3);
  e.Start(a, prog(a, 7));
  e.Start(b, prog(b, 3));
  ASSERT_TRUE(e.Run().ok());
  ASSERT_EQ(log.size(), 10u);
  for (size_t i = 1; i < log.size(); ++i) EXPECT_LE(log[i - 1].first, log[i].first);
}

TEST(SpinLock, HandOffCostsDependOnDistanceAndWaitsAreCounted) {
  Engine e(TwoNodes(2), Costs(), 1);
  SpinLock lock(&e, "l");
  auto prog = [&lock](Cpu& cpu) -> Task<void> {
    for (int i = 0; i < 100; ++i) {
      co_await lock.Lock(cpu, Sym::kAllocIova);
      cpu.Charge(Sym::kAllocIova, 100);  // critical section
      lock.Unlock(cpu, 2);
    }
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(3);  // other socket
  e.Start(a, prog(a));
  e.Start(b, prog(b));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(lock.stats().acquisitions, 200u);
  EXPECT_GT(lock.stats().contended, 100u);
  // Alternating hand-offs across sockets: each critical section pays at
  // least the transfer of the lock and of the two dirty lines.
  Time per_cs = (a.now() + b.now()) / 200;
  EXPECT_GT(per_cs, 100 + 200);
  EXPECT_GT(a.profile()[static_cast<int>(Sym::kSpinLockIrqsave)], 0);
}

TEST(SpinLock, HolderSuspendedInsideCriticalSectionQueuesOthers) {
  Engine e(TwoNodes(2), Costs(), 1);
  SpinLock outer(&e, "outer");
  AtomicLine line(&e);
  int inside = 0, max_inside = 0;
  auto prog = [&](Cpu& cpu) -> Task<void> {
    for (int i = 0; i < 50; ++i) {
      co_await outer.Lock(cpu, Sym::kOther);
      ++inside;
      max_inside = std::max(max_inside, inside);
      co_await cpu.Sync();  // shared access while holding the lock
      line.Rmw(cpu, Sym::kOther);
      cpu.Charge(Sym::kOther, 20);
      --inside;
      outer.Unlock(cpu, 1);
    }
  };
  std::vector<Cpu*> cpus;
  for (int c = 0; c < 4; ++c) cpus.push_back(&e.AddCpu(c));
  for (Cpu* c : cpus) e.Start(*c, prog(*c));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(max_inside, 1);
  EXPECT_EQ(outer.stats().acquisitions, 200u);
}

// 16 CPUs on two nodes each do 50 cmpxchg updates of one word, retrying from
// a fresh observation on failure (the SMMUv3 llq reservation loop).
struct CmpxchgRun {
  uint64_t successes = 0;
  uint64_t failures = 0;
  Time elapsed = 0;  // virtual time until the last CPU finished
};

CmpxchgRun RunContendedCmpxchg(const LineCosts& lc) {
  Engine e(TwoNodes(8), lc, 1);
  CmpxchgWord word(&e);
  CmpxchgRun run;
  auto prog = [&](Cpu& cpu) -> Task<void> {
    for (int i = 0; i < 50; ++i) {
      co_await cpu.Sync();
      uint64_t seen = word.Observe(cpu, Sym::kCmdqIssue);
      for (;;) {
        cpu.Charge(Sym::kCmdqIssue, 2);
        co_await cpu.Sync();
        if (word.TryCmpxchg(cpu, seen, Sym::kCmdqIssue)) break;
      }
      ++run.successes;
      cpu.Charge(Sym::kApp, 50);
    }
  };
  std::vector<Cpu*> cpus;
  for (int c = 0; c < 16; ++c) cpus.push_back(&e.AddCpu(c));
  for (Cpu* c : cpus) e.Start(*c, prog(*c));
  EXPECT_TRUE(e.Run().ok());
  for (Cpu* c : cpus) run.elapsed = std::max(run.elapsed, c->now());
  run.failures = word.failures();
  return run;
}

TEST(CmpxchgWord, RetriesEmergeUnderContention) {
  CmpxchgRun run = RunContendedCmpxchg(Costs());
  EXPECT_EQ(run.successes, 800u);
  EXPECT_GT(run.failures, 800u);  // far more than one failure per success
}

// Far (LSE) atomics: the same contention, but every CAS executes at the home
// node for a short occupancy and the line never migrates, so the retry storm
// costs far less virtual time than with near atomics that pull the line
// across nodes for every attempt.
TEST(CmpxchgWord, FarAtomicsServeRetriesAtTheHomeNode) {
  LineCosts near_costs = Costs();
  near_costs.atomic_far = 0;
  LineCosts far_costs = Costs();
  far_costs.atomic_far = 10;
  CmpxchgRun near_run = RunContendedCmpxchg(near_costs);
  CmpxchgRun far_run = RunContendedCmpxchg(far_costs);
  EXPECT_EQ(near_run.successes, 800u);
  EXPECT_EQ(far_run.successes, 800u);
  EXPECT_GT(far_run.failures, 0u);  // contention still makes CAS fail
  EXPECT_LT(far_run.elapsed * 2, near_run.elapsed);
}

// Far atomics, one CPU alone on a line homed on the other node: the first
// load fetches the only copy, after which its RMWs and loads hit its own L1
// (near), until a second CPU touches the line and the RMWs go far again.
TEST(AtomicLine, FarAtomicsRunNearOnTheOnlyCopy) {
  LineCosts lc = Costs();
  lc.atomic_far = 10;
  Engine e(TwoNodes(1), lc, 1);
  AtomicLine line(&e, /*home_node=*/1);
  Time first_rmw = 0, alone = 0, after_other = 0;
  auto solo = [&](Cpu& cpu) -> Task<void> {
    co_await cpu.Sync();
    Time t0 = cpu.now();
    line.Rmw(cpu, Sym::kOther);  // at the home: a round trip
    first_rmw = cpu.now() - t0;
    co_await cpu.Sync();
    line.Load(cpu, Sym::kOther);  // fetches the only copy
    t0 = cpu.now();
    for (int i = 0; i < 4; ++i) {
      co_await cpu.Sync();
      line.Rmw(cpu, Sym::kOther);
      co_await cpu.Sync();
      line.Load(cpu, Sym::kOther);
    }
    alone = cpu.now() - t0;
    cpu.Idle(10000);  // the other CPU's RMW lands meanwhile
    co_await cpu.Sync();
    t0 = cpu.now();
    line.Rmw(cpu, Sym::kOther);
    after_other = cpu.now() - t0;
  };
  auto other = [&](Cpu& cpu) -> Task<void> {
    cpu.Idle(5000);
    co_await cpu.Sync();
    line.Rmw(cpu, Sym::kOther);
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(1);
  e.Start(a, solo(a));
  e.Start(b, other(b));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_EQ(first_rmw, lc.remote + lc.atomic_far);
  EXPECT_EQ(alone, 4 * (lc.local + 1));
  EXPECT_EQ(after_other, lc.remote + lc.atomic_far);
}

// A lock homed on node 1, taken by CPU 0 (node 0), then by `taker_cpu`: the
// second take's hand-off cost.
Time HomedLockHandoff(Time atomic_far, int taker_cpu) {
  LineCosts lc = Costs();
  lc.atomic_far = atomic_far;
  Engine e(TwoNodes(2), lc, 1);
  SpinLock lock(&e, "homed", /*home_node=*/1);
  Time second_take = 0;
  auto first = [&](Cpu& cpu) -> Task<void> {
    co_await lock.Lock(cpu, Sym::kOther);
    lock.Unlock(cpu, 0);
  };
  auto second = [&](Cpu& cpu) -> Task<void> {
    cpu.Idle(1000);
    Time t0 = cpu.now();
    co_await lock.Lock(cpu, Sym::kOther);
    second_take = cpu.now() - t0;
    lock.Unlock(cpu, 0);
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(taker_cpu);
  e.Start(a, first(a));
  e.Start(b, second(b));
  EXPECT_TRUE(e.Run().ok());
  return second_take;
}

TEST(SpinLock, HandOffGoesThroughTheHomeWithFarAtomicsUnlessBothCpusShareANode) {
  // CPUs 0 and 1 on node 0, the lock homed on node 1: the line moves within
  // node 0 either way (with far atomics the home sees node 0 as its holder).
  EXPECT_EQ(HomedLockHandoff(0, 1), Costs().lock + Costs().node);
  EXPECT_EQ(HomedLockHandoff(10, 1), Costs().lock + Costs().node);
  // CPU 2 on node 1, the home: near atomics pull the line across from node
  // 0; far ones take it at the home, the taker's own node.
  EXPECT_EQ(HomedLockHandoff(0, 2), Costs().lock + Costs().remote);
  EXPECT_EQ(HomedLockHandoff(10, 2), Costs().lock + Costs().node);
}

TEST(Engine, BlockAndWake) {
  Engine e(TwoNodes(1), Costs(), 1);
  Cpu* waiter = nullptr;
  bool woke = false;
  auto sleeper = [&](Cpu& cpu) -> Task<void> {
    waiter = &cpu;
    co_await cpu.Block(Sym::kCmdqIssue);
    woke = true;
  };
  auto waker = [&](Cpu& cpu) -> Task<void> {
    cpu.Charge(Sym::kApp, 1000);
    co_await cpu.Sync();
    cpu.engine().Wake(*waiter, 1500);
  };
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(1);
  e.Start(a, sleeper(a));
  e.Start(b, waker(b));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_TRUE(woke);
  EXPECT_EQ(a.now(), 1500);
  EXPECT_EQ(a.profile()[static_cast<int>(Sym::kCmdqIssue)], 1500);
}

TEST(Engine, DeadlockIsReported) {
  Engine e(TwoNodes(1), Costs(), 1);
  auto sleeper = [](Cpu& cpu) -> Task<void> { co_await cpu.Block(Sym::kOther); };
  Cpu& a = e.AddCpu(0);
  e.Start(a, sleeper(a));
  EXPECT_FALSE(e.Run().ok());
}

// The preconditions of engine.h are FARM_DCHECKs, live in test builds.
TEST(EngineDeathTest, SharedAccessAfterChargeWithoutSyncAborts) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  auto run = [](bool sync_again) {
    Engine e(TwoNodes(1), Costs(), 1);
    AtomicLine line(&e);
    auto prog = [&](Cpu& cpu) -> Task<void> {
      co_await cpu.Sync();
      line.Rmw(cpu, Sym::kOther);   // synced: fine
      cpu.Charge(Sym::kOther, 10);  // the clock moved: another CPU may be earlier
      if (sync_again) co_await cpu.Sync();
      line.Rmw(cpu, Sym::kOther);
    };
    Cpu& a = e.AddCpu(0);
    e.Start(a, prog(a));
    return e.Run().ok();
  };
  EXPECT_TRUE(run(/*sync_again=*/true));
  EXPECT_DEATH(run(/*sync_again=*/false),
               "precondition failed: cpu.synced\\(\\): atomic RMW without");
}

TEST(EngineDeathTest, CmpxchgObserveWithoutSyncAborts) {
  ASSERT_TRUE(FARM_INVARIANTS);
  auto run = [] {
    Engine e(TwoNodes(1), Costs(), 1);
    CmpxchgWord word(&e);
    auto prog = [&](Cpu& cpu) -> Task<void> {
      cpu.Charge(Sym::kOther, 1);  // never synced
      word.Observe(cpu, Sym::kOther);
      co_return;
    };
    Cpu& a = e.AddCpu(0);
    e.Start(a, prog(a));
    (void)e.Run();
  };
  EXPECT_DEATH(run(), "atomic load without `co_await cpu.Sync\\(\\)`");
}

TEST(EngineDeathTest, StartTwiceForOneCpuAborts) {
  ASSERT_TRUE(FARM_INVARIANTS);
  auto idle = [](Cpu& cpu) -> Task<void> { co_return; };
  Engine e(TwoNodes(1), Costs(), 1);
  Cpu& a = e.AddCpu(0);
  e.Start(a, idle(a));
  EXPECT_DEATH(e.Start(a, idle(a)), "Start\\(\\) called twice for one Cpu");
}

TEST(EngineDeathTest, StartAfterRunAborts) {
  ASSERT_TRUE(FARM_INVARIANTS);
  auto idle = [](Cpu& cpu) -> Task<void> { co_return; };
  Engine e(TwoNodes(1), Costs(), 1);
  Cpu& a = e.AddCpu(0);
  Cpu& b = e.AddCpu(1);
  e.Start(a, idle(a));
  ASSERT_TRUE(e.Run().ok());
  EXPECT_DEATH(e.Start(b, idle(b)), "Start\\(\\) after Run\\(\\)");
}

TEST(EngineDeathTest, StartOfAnotherEnginesCpuAborts) {
  ASSERT_TRUE(FARM_INVARIANTS);
  auto idle = [](Cpu& cpu) -> Task<void> { co_return; };
  Engine e(TwoNodes(1), Costs(), 1);
  Engine other(TwoNodes(1), Costs(), 1);
  Cpu& a = other.AddCpu(0);
  EXPECT_DEATH(e.Start(a, idle(a)), "Start\\(\\) of another engine's Cpu");
}

TEST(DeviceQueue, ConsumesInArrivalOrderAtItsPace) {
  DeviceQueue q;
  EXPECT_EQ(q.Submit(0, 100), 100);
  EXPECT_EQ(q.Submit(50, 100), 200);
  EXPECT_EQ(q.Submit(500, 10), 510);
}

}  // namespace
}  // namespace farm::emu
