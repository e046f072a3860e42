#include "emu/engine/run_queue.h"

#include <algorithm>

namespace farm::emu {

void RunQueue::Reserve(size_t ids) {
  if (ids > slot_of_.size()) slot_of_.resize(ids, 0);
  if (ids <= leaves_) return;
  const size_t leaves = ids;
  std::vector<Key> tree(2 * leaves, kNone);
  for (size_t s = 0; s < leaves_; ++s) tree[leaves + s] = tree_[leaves_ + s];
  for (size_t i = leaves - 1; i >= 1; --i) tree[i] = std::min(tree[2 * i], tree[2 * i + 1]);
  // The lowest new slot on top of the free stack: low slots have the short
  // paths. Which slot a key takes does not change the order keys leave in.
  for (size_t s = leaves; s > leaves_; --s) free_.push_back(static_cast<uint32_t>(s - 1));
  tree_ = std::move(tree);
  leaves_ = leaves;
}

}  // namespace farm::emu
