#include "scheduler/watch_hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace farm::scheduler {
namespace {

bool Running(const WatchUpdate& u) {
  return u.matrix.ok() && u.matrix->state() == pb::MATRIX_STATE_RUNNING;
}

}  // namespace

absl::Status WatchHub::AdmitLocked(const std::string& principal) {
  const int total = static_cast<int>(watchers_.size());
  if (options_.max_streams > 0 && total >= options_.max_streams) {
    stats_.refused.fetch_add(1);
    return absl::ResourceExhaustedError(
        absl::StrCat("watch streams: the scheduler serves its limit of ", options_.max_streams,
                     " already; retry later"));
  }
  auto it = per_principal_.find(principal);
  const int mine = it == per_principal_.end() ? 0 : it->second;
  if (options_.max_streams_per_principal > 0 && mine >= options_.max_streams_per_principal) {
    stats_.refused.fetch_add(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "watch streams: principal \"", absl::CEscape(principal), "\" has its limit of ",
        options_.max_streams_per_principal, " open already; close one first"));
  }
  return absl::OkStatus();
}

std::shared_ptr<WatchHub::Channel> WatchHub::OpenChannelLocked(int64_t matrix_id) {
  std::shared_ptr<Channel>& slot = channels_[matrix_id];
  if (slot != nullptr) return slot;
  slot = std::make_shared<Channel>(matrix_id);
  stats_.matrices.fetch_add(1);
  if (events_ != nullptr) {
    // The subscription must not keep the channel alive: it goes when its
    // last stream leaves, and Leave unsubscribes.
    std::weak_ptr<Channel> weak = slot;
    slot->events = events_->Subscribe(matrix_id, [this, weak] {
      if (std::shared_ptr<Channel> ch = weak.lock()) Wake(ch);
    });
  }
  return slot;
}

absl::StatusOr<WatchHub::Handle> WatchHub::Join(int64_t matrix_id, const std::string& principal,
                                                Sink sink) {
  if (pool_->stopping()) return absl::UnavailableError("server shutting down");
  absl::MutexLock lock(&mu_);
  absl::Status admitted = AdmitLocked(principal);
  if (!admitted.ok()) return admitted;
  const Handle handle = next_handle_++;
  watchers_[handle] = Watcher{matrix_id, principal};
  ++per_principal_[principal];
  stats_.streams.fetch_add(1);
  std::shared_ptr<Channel> ch = OpenChannelLocked(matrix_id);
  absl::MutexLock ch_lock(&ch->mu);
  Sink& mine = ch->sinks[handle] = std::move(sink);
  if (ch->last != nullptr) {
    mine(ch->last);  // what the matrix's other streams saw last
  } else if (!ch->busy) {
    ScheduleReadLocked(ch);  // a new matrix, or one whose reads stopped at an error
  }
  return handle;
}

void WatchHub::Leave(Handle handle) {
  std::shared_ptr<Channel> closed;
  {
    absl::MutexLock lock(&mu_);
    auto w = watchers_.find(handle);
    if (w == watchers_.end()) return;
    auto p = per_principal_.find(w->second.principal);
    if (--p->second == 0) per_principal_.erase(p);
    auto c = channels_.find(w->second.matrix_id);
    watchers_.erase(w);
    stats_.streams.fetch_sub(1);
    std::shared_ptr<Channel> ch = c->second;
    absl::MutexLock ch_lock(&ch->mu);
    ch->sinks.erase(handle);
    if (ch->sinks.empty()) {
      ch->closed = true;
      channels_.erase(c);
      stats_.matrices.fetch_sub(1);
      closed = std::move(ch);
    }
  }
  // Outside every lock of ours: the events thread holds its own while it
  // calls Wake, which takes the channel's.
  if (closed != nullptr && events_ != nullptr) events_->Unsubscribe(closed->events);
}

void WatchHub::Wake(const std::shared_ptr<Channel>& ch) {
  absl::MutexLock lock(&ch->mu);
  if (ch->closed) return;
  if (ch->last != nullptr && !Running(*ch->last)) return;  // finished: nothing changes
  if (ch->busy) {
    ch->wake = true;
    return;
  }
  ScheduleReadLocked(ch);
}

void WatchHub::ScheduleReadLocked(const std::shared_ptr<Channel>& ch) {
  ch->busy = true;
  ch->wake = false;
  ++ch->timer_gen;  // a fallback timer still pending is superseded
  const Clock::time_point earliest =
      ch->last_read + absl::ToChronoMilliseconds(options_.min_interval);
  const absl::Duration delay =
      std::max(absl::ZeroDuration(), absl::FromChrono(earliest - Clock::now()));
  PostLocked(ch, delay, Cause::kWake, 0);
}

void WatchHub::PostLocked(const std::shared_ptr<Channel>& ch, absl::Duration delay, Cause cause,
                          uint64_t gen) {
  if (pool_->PostAfter(absl::ToChronoMilliseconds(delay),
                       [this, ch, cause, gen] { Run(ch, cause, gen); })) {
    return;
  }
  // The pool stopped: no read will come, so the streams end now.
  ch->busy = false;
  auto update = std::make_shared<WatchUpdate>();
  update->matrix = absl::UnavailableError("server shutting down");
  for (auto& [handle, sink] : ch->sinks) sink(update);
}

void WatchHub::Run(const std::shared_ptr<Channel>& ch, Cause cause, uint64_t gen) {
  {
    absl::MutexLock lock(&ch->mu);
    if (ch->closed) return;
    if (cause == Cause::kFallback) {
      if (ch->busy || gen != ch->timer_gen) return;  // superseded by a wake-up
      ch->busy = true;
    }
    ch->wake = false;  // this read sees every change notified so far
    ch->last_read = Clock::now();
  }
  auto update = std::make_shared<WatchUpdate>();
  update->fallback = cause == Cause::kFallback;
  if (pool_->stopping()) {
    update->matrix = absl::UnavailableError("server shutting down");
  } else {
    (cause == Cause::kFallback ? stats_.fallback_reads : stats_.wake_reads).fetch_add(1);
    update->matrix = reader_(ch->matrix_id);
  }
  absl::MutexLock lock(&ch->mu);
  ch->busy = false;
  if (ch->closed) return;
  DeliverLocked(ch, std::move(update));
}

void WatchHub::DeliverLocked(const std::shared_ptr<Channel>& ch,
                             std::shared_ptr<const WatchUpdate> update) {
  if (update->matrix.ok()) ch->last = update;
  for (auto& [handle, sink] : ch->sinks) sink(update);
  if (pool_->stopping()) return;
  const absl::Status& st = update->matrix.status();
  // A finished matrix changes no more; a read refused for good (not found,
  // say) ends its streams, and a later stream reads again.
  if (st.ok() && !Running(*update)) return;
  if (!st.ok() && !absl::IsUnavailable(st)) return;
  if (ch->wake) {
    ScheduleReadLocked(ch);
    return;
  }
  // Notifications stop with the database too: look again soon.
  const absl::Duration next =
      st.ok() ? options_.fallback_poll : std::min(options_.fallback_poll, absl::Seconds(1));
  PostLocked(ch, next, Cause::kFallback, ++ch->timer_gen);
}

}  // namespace farm::scheduler
