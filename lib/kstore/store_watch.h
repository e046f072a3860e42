// store_watch: a kernel store's listing (kernel_store.h ReadStore), read
// again only when the store changed, for callers that ask for it often (an
// agent computes its kernel offers at every lease).
//
// A change is seen from the file system alone, without reading manifests or
// configs: the store's stamp is the identity (inode, size, modification
// time) of the store directory, of each build directory in it and of each
// file directly in one. Adding, removing or swapping a build (the builder's
// rename and RENAME_EXCHANGE, ImportDeb's rename) and editing a manifest or
// config in place all change it. Times within kRacyWindow of the read are
// not trusted (a second write in the same clock tick would leave the stamp
// alone): such a listing is read again at the next call, as git treats a
// racily clean index.
//
// Thread-safety: Current() may be called from any thread; a re-read happens
// under the watch's lock, so concurrent callers read the store once.
#ifndef LIB_KSTORE_STORE_WATCH_H_
#define LIB_KSTORE_STORE_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lib/kstore/kernel_store.h"

namespace farm::kstore {

class StoreWatch {
 public:
  static constexpr absl::Duration kRacyWindow = absl::Seconds(2);

  struct Snapshot {
    // ReadStore(dir) as of the last change; never null.
    std::shared_ptr<const absl::StatusOr<StoreListing>> listing;
    // Bumped by every read of the store: equal generations, equal listings.
    std::uint64_t generation = 0;
  };

  // `now` is the clock the racy window is measured on (tests move it).
  explicit StoreWatch(std::string dir, std::function<absl::Time()> now = absl::Now);
  StoreWatch(const StoreWatch&) = delete;
  StoreWatch& operator=(const StoreWatch&) = delete;

  // The listing, read again when the stamp changed since the last read or
  // that read was racy.
  Snapshot Current() ABSL_LOCKS_EXCLUDED(mu_);

  // How many times the store was read.
  std::uint64_t reads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string dir_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  std::string stamp_ ABSL_GUARDED_BY(mu_);
  bool racy_ ABSL_GUARDED_BY(mu_) = true;
  Snapshot current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace farm::kstore

#endif  // LIB_KSTORE_STORE_WATCH_H_
