#include "lib/service/accept_limit.h"

#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace farm::service {
namespace {

std::atomic<int> g_limit{0};
std::atomic<int> g_peer_limit{0};
std::atomic<int64_t> g_refusals{0};

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

Accept4Fn GlibcAccept4() {
  static const Accept4Fn fn = reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return fn;
}

// A connection's peer: the address bytes (the table's key) and the port,
// which tells a live entry from a descriptor number since reused.
struct Peer {
  std::string address;
  uint16_t port = 0;
};

bool PeerOf(int fd, Peer* out) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    out->address.assign(reinterpret_cast<const char*>(&a->sin_addr), 4);
    out->port = a->sin_port;
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    const char* bytes = reinterpret_cast<const char*>(&a->sin6_addr);
    out->address =
        IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) ? std::string(bytes + 12, 4) : std::string(bytes, 16);
    out->port = a->sin6_port;
    return true;
  }
  return false;  // a Unix socket: no address to count by
}

// The accepted connections per peer address. An entry is live while its
// descriptor still names a connection to the same address and port; the
// table never sees close(), so stale entries are dropped when counted.
class PeerTable {
 public:
  // Records `fd` and returns true when its address holds fewer than
  // `limit` live connections; false (nothing recorded) otherwise.
  bool Admit(int fd, int limit) {
    Peer peer;
    if (!PeerOf(fd, &peer)) return true;
    absl::MutexLock lock(&mu_);
    if (by_address_.size() > kSweepAbove) Sweep();
    std::vector<std::pair<int, uint16_t>>& open = by_address_[peer.address];
    Prune(peer.address, open);
    if (static_cast<int>(open.size()) >= limit) return false;
    open.emplace_back(fd, peer.port);
    return true;
  }

 private:
  static constexpr size_t kSweepAbove = 4096;

  static void Prune(const std::string& address, std::vector<std::pair<int, uint16_t>>& open) {
    std::erase_if(open, [&](const std::pair<int, uint16_t>& e) {
      Peer now;
      return !PeerOf(e.first, &now) || now.address != address || now.port != e.second;
    });
  }
  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = by_address_.begin(); it != by_address_.end();) {
      Prune(it->first, it->second);
      it = it->second.empty() ? by_address_.erase(it) : std::next(it);
    }
  }

  absl::Mutex mu_;
  std::unordered_map<std::string, std::vector<std::pair<int, uint16_t>>> by_address_
      ABSL_GUARDED_BY(mu_);
};

PeerTable& Peers() {
  static PeerTable* const table = new PeerTable;
  return *table;
}

}  // namespace

void SetAcceptFdLimit(int limit) { g_limit.store(std::max(limit, 0)); }
int AcceptFdLimit() { return g_limit.load(); }
void SetAcceptPeerLimit(int limit) { g_peer_limit.store(std::max(limit, 0)); }
int AcceptPeerLimit() { return g_peer_limit.load(); }
int64_t AcceptRefusals() { return g_refusals.load(); }

int AcceptFdLimitFor(int64_t open_file_limit, int reserve) {
  const int64_t kept = std::min<int64_t>(reserve, open_file_limit / 2);
  return static_cast<int>(std::clamp<int64_t>(open_file_limit - kept, 0, INT32_MAX));
}

}  // namespace farm::service

// Interposes glibc's accept4 (see the header).
extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  const farm::service::Accept4Fn real = farm::service::GlibcAccept4();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  for (;;) {
    const int c = real(fd, addr, len, flags);
    const int limit = farm::service::g_limit.load(std::memory_order_relaxed);
    const int per_peer = farm::service::g_peer_limit.load(std::memory_order_relaxed);
    if (limit <= 0 && per_peer <= 0) return c;
    if (c < 0) {
      if (limit > 0 && (errno == EMFILE || errno == ENFILE)) errno = EAGAIN;
      return -1;
    }
    if ((limit <= 0 || c < limit) && (per_peer <= 0 || farm::service::Peers().Admit(c, per_peer)))
      return c;
    close(c);
    farm::service::g_refusals.fetch_add(1, std::memory_order_relaxed);
  }
}
