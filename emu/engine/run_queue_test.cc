// Tests of RunQueue against an ordered set of the same keys.
#include "emu/engine/run_queue.h"

#include <cstdint>
#include <random>
#include <set>

#include "gtest/gtest.h"

namespace farm::emu {
namespace {

RunQueue::Key KeyOf(uint64_t clock, uint64_t id) { return (clock << RunQueue::kIdBits) | id; }

TEST(RunQueue, EmptyFrontIsNone) {
  RunQueue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.front(), RunQueue::kNone);
  q.Reserve(3);
  EXPECT_TRUE(q.empty());
}

TEST(RunQueue, EqualClocksLeaveByIndex) {
  RunQueue q;
  q.Reserve(4);
  q.Push(KeyOf(7, 3));
  q.Push(KeyOf(7, 1));
  q.Push(KeyOf(5, 2));
  q.Push(KeyOf(7, 0));
  EXPECT_EQ(q.Pop(), KeyOf(5, 2));
  EXPECT_EQ(q.Pop(), KeyOf(7, 0));
  EXPECT_EQ(q.ReplaceFront(KeyOf(8, 0)), KeyOf(7, 1));
  EXPECT_EQ(q.Pop(), KeyOf(7, 3));
  EXPECT_EQ(q.Pop(), KeyOf(8, 0));
  EXPECT_TRUE(q.empty());
}

// Random pushes, pops and replacements, with Reserve() growing the tree
// while keys are queued: the queue's front is always the set's least.
TEST(RunQueue, MatchesAnOrderedSet) {
  std::mt19937_64 rng(42);
  RunQueue q;
  std::set<RunQueue::Key> ref;
  std::vector<uint64_t> clock_of;  // by id; queued ids are in ref
  std::vector<bool> queued;
  uint64_t now = 0;
  for (int step = 0; step < 200000; ++step) {
    if (step % 20000 == 0 && clock_of.size() < 300) {
      const size_t ids = clock_of.size() + 1 + rng() % 70;
      q.Reserve(ids);
      clock_of.resize(ids, 0);
      queued.resize(ids, false);
    }
    const uint64_t id = rng() % clock_of.size();
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && !queued[id]) {
      const RunQueue::Key k = KeyOf(now + rng() % 64, id);
      q.Push(k);
      ref.insert(k);
      queued[id] = true;
    } else if (op == 1 && !ref.empty()) {
      ASSERT_EQ(q.Pop(), *ref.begin());
      queued[*ref.begin() & 0xffff] = false;
      now = *ref.begin() >> RunQueue::kIdBits;
      ref.erase(ref.begin());
    } else if (op == 2 && !ref.empty() && !queued[id]) {
      const RunQueue::Key k = KeyOf((*ref.begin() >> RunQueue::kIdBits) + 1 + rng() % 64, id);
      ASSERT_EQ(q.ReplaceFront(k), *ref.begin());
      queued[*ref.begin() & 0xffff] = false;
      ref.erase(ref.begin());
      ref.insert(k);
      queued[id] = true;
    }
    ASSERT_EQ(q.front(), ref.empty() ? RunQueue::kNone : *ref.begin());
  }
}

}  // namespace
}  // namespace farm::emu
