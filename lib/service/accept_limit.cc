#include "lib/service/accept_limit.h"

#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace farm::service {
namespace {

std::atomic<int> g_limit{0};
std::atomic<int64_t> g_refusals{0};

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

Accept4Fn GlibcAccept4() {
  static const Accept4Fn fn = reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return fn;
}

}  // namespace

void SetAcceptFdLimit(int limit) { g_limit.store(std::max(limit, 0)); }
int AcceptFdLimit() { return g_limit.load(); }
int64_t AcceptRefusals() { return g_refusals.load(); }

int AcceptFdLimitFor(int64_t open_file_limit, int reserve) {
  const int64_t kept = std::min<int64_t>(reserve, open_file_limit / 2);
  return static_cast<int>(std::clamp<int64_t>(open_file_limit - kept, 0, INT32_MAX));
}

}  // namespace farm::service

// Interposes glibc's accept4 (see the header). Async-signal-safe, as
// accept4 is: atomics, dlsym resolved on first use, close().
extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  const farm::service::Accept4Fn real = farm::service::GlibcAccept4();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  for (;;) {
    const int c = real(fd, addr, len, flags);
    const int limit = farm::service::g_limit.load(std::memory_order_relaxed);
    if (limit <= 0) return c;
    if (c < 0) {
      if (errno == EMFILE || errno == ENFILE) errno = EAGAIN;
      return -1;
    }
    if (c < limit) return c;
    close(c);
    farm::service::g_refusals.fetch_add(1, std::memory_order_relaxed);
  }
}
