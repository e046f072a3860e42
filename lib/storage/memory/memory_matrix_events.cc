#include "lib/storage/memory/memory_matrix_events.h"

namespace farm::storage {

MemoryMatrixEvents::MemoryMatrixEvents(MemoryDatabase* db) : db_(db) {
  observer_ = db_->AddObserver([this](const MemoryDatabase::Changes& c) { Dispatch(c); });
}

MemoryMatrixEvents::~MemoryMatrixEvents() { db_->RemoveObserver(observer_); }

MatrixEvents::Handle MemoryMatrixEvents::Subscribe(int64_t matrix_id, std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  const Handle h = next_++;
  subs_.emplace(h, std::make_pair(matrix_id, std::move(wake)));
  return h;
}

void MemoryMatrixEvents::Unsubscribe(Handle handle) {
  absl::MutexLock lock(&mu_);
  subs_.erase(handle);
}

void MemoryMatrixEvents::Dispatch(const MemoryDatabase::Changes& changed) {
  absl::MutexLock lock(&mu_);
  for (const auto& [h, sub] : subs_) {
    if (changed.count(sub.first) != 0) sub.second();
  }
}

}  // namespace farm::storage
