#include "lib/service/listener_probe.h"

#include <netdb.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace farm::service {
namespace {

// The client connection preface (RFC 9113 3.4) and an empty SETTINGS frame.
constexpr char kHttp2Preface[] =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
constexpr size_t kHttp2PrefaceBytes = sizeof kHttp2Preface - 1;
constexpr unsigned char kFrameSettings = 0x04;

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

std::string ProbeHost(const std::string& host) {
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::" || host == "[::]") return "::1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

// Every blocking send, receive and connect of `fd` gives up after `timeout`.
void SetTimeouts(int fd, absl::Duration timeout) {
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

absl::StatusOr<std::unique_ptr<Socket>> Connect(const std::string& host, int port,
                                                absl::Duration timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = absl::StrCat(host, ":", port);
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  auto s = std::make_unique<Socket>(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s->fd() < 0) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  SetTimeouts(s->fd(), timeout);
  if (connect(s->fd(), found->ai_addr, found->ai_addrlen) != 0) {
    return absl::UnavailableError(absl::StrCat("connect ", where, ": ", strerror(errno)));
  }
  return s;
}

absl::Status SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Reads until `want` bytes or the peer closes; a timeout or an error before
// any byte came is the failure the probe exists to see.
absl::StatusOr<std::string> ReceiveAtLeast(int fd, size_t want) {
  std::string got;
  char buf[512];
  while (got.size() < want) {
    const ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r == 0) break;
    if (r < 0) {
      if (!got.empty()) break;
      return absl::DeadlineExceededError(absl::StrCat(
          "no answer from the server: ", errno == EAGAIN ? "timed out" : strerror(errno)));
    }
    got.append(buf, static_cast<size_t>(r));
  }
  if (got.empty()) return absl::UnavailableError("the server closed the connection unanswered");
  return got;
}

absl::Status ProbePlaintext(int fd) {
  if (absl::Status st = SendAll(fd, kHttp2Preface, kHttp2PrefaceBytes); !st.ok()) return st;
  absl::StatusOr<std::string> got = ReceiveAtLeast(fd, 9);  // one frame header
  if (!got.ok()) return got.status();
  if (got->size() < 9 || static_cast<unsigned char>((*got)[3]) != kFrameSettings) {
    return absl::UnavailableError("the server's first bytes are not an HTTP/2 SETTINGS frame");
  }
  return absl::OkStatus();
}

// The ClientHello comes from OpenSSL over memory BIOs; the answer is only
// waited for, not parsed: any handshake bytes show the server accepted.
absl::Status ProbeTls(int fd, const std::string& host) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError("SSL_CTX_new failed");
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  if (ssl == nullptr) return absl::InternalError("SSL_new failed");
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out);  // owned by ssl now
  SSL_set_tlsext_host_name(ssl.get(), host.c_str());
  SSL_set_connect_state(ssl.get());
  SSL_do_handshake(ssl.get());  // wants the server's answer; the hello is in `out`
  char* hello = nullptr;
  const long n = BIO_get_mem_data(out, &hello);
  if (n <= 0) return absl::InternalError("OpenSSL wrote no ClientHello");
  if (absl::Status st = SendAll(fd, hello, static_cast<size_t>(n)); !st.ok()) return st;
  absl::StatusOr<std::string> got = ReceiveAtLeast(fd, 5);  // one TLS record header
  if (!got.ok()) return got.status();
  if (static_cast<unsigned char>((*got)[0]) != 0x16 &&
      static_cast<unsigned char>((*got)[0]) != 0x15) {
    return absl::UnavailableError("the server's first bytes are not a TLS record");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProbeGrpcListener(const std::string& host, int port, bool tls,
                               absl::Duration timeout) {
  const std::string target = ProbeHost(host);
  absl::StatusOr<std::unique_ptr<Socket>> s = Connect(target, port, timeout);
  if (!s.ok()) return s.status();
  absl::Status st = tls ? ProbeTls((*s)->fd(), target) : ProbePlaintext((*s)->fd());
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat(target, ":", port, " (", tls ? "TLS" : "plaintext",
                                                "): ", st.message()));
  }
  return absl::OkStatus();
}

ListenerWatchdog::ListenerWatchdog(ListenerWatchdogOptions options,
                                   std::function<void(const absl::Status&)> on_wedged)
    : options_(std::move(options)),
      on_wedged_(std::move(on_wedged)),
      loop_([this] { return Pass(); }) {}

absl::Duration ListenerWatchdog::Pass() {
  const int64_t refused_before = options_.refusals ? options_.refusals() : 0;
  const absl::Status st = options_.probe ? options_.probe()
                                         : ProbeGrpcListener(options_.host, options_.port,
                                                             options_.tls, options_.timeout);
  const int64_t refused_after = options_.refusals ? options_.refusals() : 0;
  if (!st.ok() && refused_after > refused_before) {
    // The listener accepts: the probe was one of the connections a cap
    // closed. A server held at its caps by a flood is not a wedged one, and
    // restarting it would only hand the flood a fresh table.
    spdlog::warn(
        "listener probe refused at the connection caps ({} connections refused since "
        "the last probe): the listener is accepting; not counted",
        refused_after - refusals_seen_);
    refusals_seen_ = refused_after;
    return options_.interval;
  }
  refusals_seen_ = refused_after;
  if (st.ok()) {
    if (failed_in_a_row_ > 0) spdlog::info("listener probe: answered again");
    failed_in_a_row_ = 0;
    return options_.interval;
  }
  ++failed_in_a_row_;
  spdlog::warn("listener probe {} of {} failed: {}", failed_in_a_row_, options_.failures,
               std::string(st.message()));
  if (failed_in_a_row_ >= options_.failures) {
    failed_in_a_row_ = 0;
    on_wedged_(st);
  }
  return options_.interval;
}

}  // namespace farm::service
