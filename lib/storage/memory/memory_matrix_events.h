// MemoryMatrixEvents: MatrixEvents fed by a MemoryDatabase's change
// reports, the in-memory stand-in for PgMatrixListener. Every write that
// changes a job's state wakes the subscribers of that job's matrix, on the
// writing thread, after the write is visible. Nothing is ever lost, so
// there is no reconnect wake-all.
//
// Contract: thread-safe. `wake` runs with the subscriber table locked: it
// must be cheap, must not block and must not call Subscribe, Unsubscribe or
// any repository over the same database. Does not own the database, which
// must outlive it.
#ifndef LIB_STORAGE_MEMORY_MEMORY_MATRIX_EVENTS_H_
#define LIB_STORAGE_MEMORY_MEMORY_MATRIX_EVENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lib/storage/matrix_events.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryMatrixEvents final : public MatrixEvents {
 public:
  explicit MemoryMatrixEvents(MemoryDatabase* db);
  MemoryMatrixEvents(const MemoryMatrixEvents&) = delete;
  MemoryMatrixEvents& operator=(const MemoryMatrixEvents&) = delete;
  ~MemoryMatrixEvents() override;

  Handle Subscribe(int64_t matrix_id, std::function<void()> wake) override;
  void Unsubscribe(Handle handle) override;

 private:
  void Dispatch(const MemoryDatabase::Changes& changed);

  MemoryDatabase* const db_;  // not owned
  uint64_t observer_ = 0;     // set once in the constructor
  absl::Mutex mu_;
  std::map<Handle, std::pair<int64_t, std::function<void()>>> subs_ ABSL_GUARDED_BY(mu_);
  Handle next_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_MATRIX_EVENTS_H_
