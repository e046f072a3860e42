// WatchHub: one reader per watched matrix, shared by every WatchMatrix
// stream of it. A stream joins the hub for a matrix and is handed each read
// of it (a WatchUpdate); the hub reads the matrix when its change events say
// so (at most once per min_interval) and otherwise every fallback_poll, so N
// streams of one matrix cost one read per tick, not N. The hub also admits
// streams: at most max_streams in all and max_streams_per_principal for one
// principal; beyond either, Join is refused with kResourceExhausted.
//
// What a stream makes of an update (whether the counts changed, its rate and
// ETA, when to write) is the stream's business: the hub knows nothing of
// gRPC. A read that fails with kUnavailable is retried sooner (the database
// is away, its notifications too); a matrix that is no longer running is not
// read again (its streams end), nor one whose read failed otherwise.
//
// Thread-safety: thread-safe. Reads run on `pool`; a sink runs on a pool
// thread or in Join, with the hub's lock for that matrix held, so it must be
// cheap, must not block and must not call Join or Leave (post work
// elsewhere). Ownership: reader, pool and events are not owned; the pool's
// tasks refer to the hub, so stop the pool (WorkerPool::Stop) before the hub
// goes. Every Join is paired with one Leave before the hub is destroyed.
#ifndef SCHEDULER_WATCH_HUB_H_
#define SCHEDULER_WATCH_HUB_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/storage/matrix_events.h"
#include "scheduler/worker_pool.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

// WatchMatrix pacing and admission. With change events, a matrix is read
// when notified (at most once per min_interval) and otherwise every
// fallback_poll, whose update streams send even unchanged (keep-alive, fresh
// rate/ETA). Without events the fallback poll is all there is. A cap of 0
// is no cap.
struct WatchOptions {
  absl::Duration fallback_poll = absl::Seconds(2);
  absl::Duration min_interval = absl::Milliseconds(100);
  int max_streams = 1000;
  int max_streams_per_principal = 100;
};

// Over the hub's life: why matrices were read (the first read of a matrix
// counts as a wake read) and streams refused by a cap; now: streams joined
// and matrices watched (one reader each).
struct WatchStats {
  std::atomic<int64_t> wake_reads{0};
  std::atomic<int64_t> fallback_reads{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> streams{0};
  std::atomic<int64_t> matrices{0};
};

// One read of a watched matrix, as every stream of it sees it.
struct WatchUpdate {
  absl::StatusOr<pb::Matrix> matrix;
  bool fallback = false;  // from the fallback poll: streams send it unchanged too
};

class WatchHub final {
 public:
  using Reader = std::function<absl::StatusOr<pb::Matrix>(int64_t matrix_id)>;
  using Sink = std::function<void(std::shared_ptr<const WatchUpdate>)>;
  using Handle = uint64_t;

  // `events` may be null (fallback polling only).
  WatchHub(Reader reader, WorkerPool* pool, storage::MatrixEvents* events, WatchOptions options)
      : reader_(std::move(reader)), pool_(pool), events_(events), options_(options) {}
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // `principal`'s stream of `matrix_id` from now on gets every read of it
  // through `sink`: the newest one at once (maybe before Join returns) if
  // the matrix is watched already, else its first read soon.
  // kResourceExhausted beyond a cap (the message names it), kUnavailable
  // once the pool is stopping.
  absl::StatusOr<Handle> Join(int64_t matrix_id, const std::string& principal, Sink sink)
      ABSL_LOCKS_EXCLUDED(mu_);
  // After this returns the handle's sink is not running and is never called
  // again. The last stream of a matrix stops its reads.
  void Leave(Handle handle) ABSL_LOCKS_EXCLUDED(mu_);

  const WatchStats& stats() const { return stats_; }
  const WatchOptions& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Cause { kWake, kFallback };

  // One watched matrix. Held by the hub while it has streams, and by the
  // reads and timers posted for it (timers cannot be cancelled: `closed`
  // and `timer_gen` make stale ones do nothing).
  struct Channel {
    explicit Channel(int64_t id) : matrix_id(id) {}
    const int64_t matrix_id;
    storage::MatrixEvents::Handle events = 0;  // set once, before the channel is shared
    absl::Mutex mu;
    std::map<Handle, Sink> sinks ABSL_GUARDED_BY(mu);
    bool busy ABSL_GUARDED_BY(mu) = false;    // a read is posted or running
    bool wake ABSL_GUARDED_BY(mu) = false;    // notified while busy
    bool closed ABSL_GUARDED_BY(mu) = false;  // its last stream left
    uint64_t timer_gen ABSL_GUARDED_BY(mu) = 0;
    Clock::time_point last_read ABSL_GUARDED_BY(mu) = {};
    std::shared_ptr<const WatchUpdate> last ABSL_GUARDED_BY(mu);  // newest good read
  };
  struct Watcher {
    int64_t matrix_id;
    std::string principal;
  };

  absl::Status AdmitLocked(const std::string& principal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<Channel> OpenChannelLocked(int64_t matrix_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Called by the events thread: never blocks.
  void Wake(const std::shared_ptr<Channel>& ch) ABSL_LOCKS_EXCLUDED(ch->mu);
  // A read soon, not sooner than min_interval after the previous one.
  void ScheduleReadLocked(const std::shared_ptr<Channel>& ch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ch->mu);
  void PostLocked(const std::shared_ptr<Channel>& ch, absl::Duration delay, Cause cause,
                  uint64_t gen) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ch->mu);
  void Run(const std::shared_ptr<Channel>& ch, Cause cause, uint64_t gen)
      ABSL_LOCKS_EXCLUDED(ch->mu);
  // Hands `update` to every stream, then plans the next read.
  void DeliverLocked(const std::shared_ptr<Channel>& ch, std::shared_ptr<const WatchUpdate> update)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ch->mu);

  const Reader reader_;
  WorkerPool* const pool_;
  storage::MatrixEvents* const events_;
  const WatchOptions options_;
  WatchStats stats_;

  // Lock order: mu_, then the events' own lock (Subscribe), then a
  // channel's mu.
  absl::Mutex mu_;
  absl::flat_hash_map<int64_t, std::shared_ptr<Channel>> channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Handle, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> per_principal_ ABSL_GUARDED_BY(mu_);
  Handle next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_WATCH_HUB_H_
