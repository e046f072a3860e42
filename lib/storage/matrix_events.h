// MatrixEvents: change wake-ups per matrix, for streams that follow one.
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_MATRIX_EVENTS_H_
#define LIB_STORAGE_MATRIX_EVENTS_H_

#include <cstdint>
#include <functional>

namespace farm::storage {

// Wake-ups for readers that follow a matrix (WatchMatrix). A wake-up says
// "look again", never what changed: callers re-read the matrix. It may be
// spurious, and delivery is best effort (a notification can be lost while
// the database is away), so callers keep a slow fallback poll; after a
// reconnect every subscriber is woken once, since changes may have been
// missed meanwhile.
class MatrixEvents {
 public:
  using Handle = uint64_t;
  virtual ~MatrixEvents() = default;
  // `wake` runs on the events thread: it must be cheap and must not block
  // (post work elsewhere). It may run before Subscribe returns.
  virtual Handle Subscribe(int64_t matrix_id, std::function<void()> wake) = 0;
  // After this returns, `wake` of that subscription is not running and is
  // never called again.
  virtual void Unsubscribe(Handle handle) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MATRIX_EVENTS_H_
