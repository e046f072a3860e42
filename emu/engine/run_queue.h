// emu/engine/run_queue.h: the engine's runnable CPUs, least run key first.
//
// A run key is one 64-bit word, the CPU's clock above kIdBits bits of its
// index (Engine::KeyOf), so keys are unique and the order (clock, index) is
// the order of the words. RunQueue is a winner (tournament) tree: every
// runnable CPU's key sits in a leaf slot, and every inner node holds the least
// key below it, so the front is the root. The slots are not tied to CPUs: a
// CPU that replaces the front (Engine::Yield) takes the front's slot, so a
// switch rewrites one leaf-to-root path, a load, a compare and a conditional
// move per level with no branch on the keys, where a binary heap's sift took
// a data-dependent branch per level and two compares. Pop empties the front's
// slot and Push fills a free one, one path each. Keys are unique, so the
// order they leave in is the same as any priority queue's.
//
// Thread-safety: none (the engine's thread only). Ownership: a value type.
#ifndef EMU_ENGINE_RUN_QUEUE_H_
#define EMU_ENGINE_RUN_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/base/check.h"

namespace farm::emu {

class RunQueue {
 public:
  using Key = uint64_t;
  //! The low bits of a key that name its CPU (ids below 2^kIdBits).
  static constexpr int kIdBits = 16;
  //! An empty slot, and front() of an empty queue.
  static constexpr Key kNone = ~Key{0};

  RunQueue() : tree_(2, kNone), free_{0} {}

  //! Makes room for ids below `ids`, each runnable at most once at a time.
  void Reserve(size_t ids);
  bool empty() const { return tree_[1] == kNone; }
  //! The least key; kNone when empty.
  Key front() const { return tree_[1]; }
  //! REQUIRES: k's id is below Reserve()'s bound and not queued; k != kNone.
  void Push(Key k);
  //! Removes and returns the least key. REQUIRES: !empty().
  Key Pop();
  //! Pop() then Push(k) in one path: k takes the front's slot.
  //! REQUIRES: !empty() and k > front() (k runs after the front).
  Key ReplaceFront(Key k);

 private:
  static size_t IdOf(Key k) { return static_cast<size_t>(k & ((Key{1} << kIdBits) - 1)); }
  // Writes `k` into leaf `slot` and recomputes the path to the root.
  void Set(size_t slot, Key k) {
    Key* t = tree_.data();
    size_t i = leaves_ + slot;
    t[i] = k;
    for (; i > 1; i >>= 1) {
      const Key sibling = t[i ^ 1];
      k = sibling < k ? sibling : k;
      t[i >> 1] = k;
    }
  }

  // Slot s is tree_[leaves_ + s], and node i's children are 2i and 2i + 1,
  // for any leaves_ (not only powers of two): every node's parent chain ends
  // at the root, tree_[1], so with 129 CPUs most paths are 7 levels, not 8.
  size_t leaves_ = 1;
  std::vector<Key> tree_;
  std::vector<uint32_t> free_;     // empty slots
  std::vector<uint32_t> slot_of_;  // by id: the slot of a queued key
};

inline void RunQueue::Push(Key k) {
  FARM_DCHECK(k != kNone && IdOf(k) < slot_of_.size(), "run key outside Reserve()'s bound");
  FARM_DCHECK(!free_.empty(), "more queued keys than slots");
  const uint32_t slot = free_.back();
  free_.pop_back();
  slot_of_[IdOf(k)] = slot;
  Set(slot, k);
}

inline RunQueue::Key RunQueue::Pop() {
  FARM_DCHECK(!empty(), "Pop() of an empty run queue");
  const Key front = tree_[1];
  const uint32_t slot = slot_of_[IdOf(front)];
  Set(slot, kNone);
  free_.push_back(slot);
  return front;
}

inline RunQueue::Key RunQueue::ReplaceFront(Key k) {
  FARM_DCHECK(!empty() && k > tree_[1], "ReplaceFront() by a key not after the front");
  FARM_DCHECK(IdOf(k) < slot_of_.size(), "run key outside Reserve()'s bound");
  const Key front = tree_[1];
  const uint32_t slot = slot_of_[IdOf(front)];
  slot_of_[IdOf(k)] = slot;
  Set(slot, k);
  return front;
}

}  // namespace farm::emu

#endif  // EMU_ENGINE_RUN_QUEUE_H_
