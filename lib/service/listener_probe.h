// farm::service listener probe: proves that a gRPC server accepts and
// answers on its port, which a TCP connect (a Kubernetes tcpSocket probe)
// cannot: the kernel completes a connect from the listen backlog whether or
// not the process ever accepts it, so a listener gRPC has given up on still
// "passes".
//
// ProbeGrpcListener opens a connection and sends the first bytes a client
// would: plaintext, the HTTP/2 preface and an empty SETTINGS frame, and the
// server's SETTINGS frame must come back; TLS, a ClientHello (OpenSSL), and
// the server's first handshake bytes must come back. The probe then closes
// without a certificate, so it needs none, and never gets to make a call.
//
// ListenerWatchdog runs the probe every `interval` on its own thread and
// calls `on_wedged` once `failures` probes in a row have failed; farm-
// scheduler then exits, so systemd's Restart= or a container restart brings
// it back, as a process that stays up with a dead listener never would be.
//
// Thread-safety: ProbeGrpcListener is a free function (thread-safe). The
// watchdog's Start/Stop are not to be called concurrently; `on_wedged` runs
// on the watchdog's thread.
#ifndef LIB_SERVICE_LISTENER_PROBE_H_
#define LIB_SERVICE_LISTENER_PROBE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/base/background_loop.h"

namespace farm::service {

// `host` is a numeric address or a name; a wildcard listen address
// (0.0.0.0, ::) is probed on the matching loopback address.
absl::Status ProbeGrpcListener(const std::string& host, int port, bool tls, absl::Duration timeout);

struct ListenerWatchdogOptions {
  std::string host;
  int port = 0;
  bool tls = false;
  absl::Duration interval = absl::Seconds(10);
  absl::Duration timeout = absl::Seconds(10);
  int failures = 3;  // in a row
  // Overrides ProbeGrpcListener (tests).
  std::function<absl::Status()> probe;
  // Connections refused at the server's caps so far (AcceptRefusals of
  // lib/service/accept_limit.h). A failed probe while this grew was refused
  // by a cap of a listener that is accepting: logged, not counted toward
  // `failures`. Unset: every failed probe counts.
  std::function<int64_t()> refusals;
};

class ListenerWatchdog {
 public:
  // `on_wedged` gets the last probe's error.
  ListenerWatchdog(ListenerWatchdogOptions options,
                   std::function<void(const absl::Status&)> on_wedged);
  ListenerWatchdog(const ListenerWatchdog&) = delete;
  ListenerWatchdog& operator=(const ListenerWatchdog&) = delete;

  void Start() { loop_.Start(); }
  void Stop() { loop_.Stop(); }

 private:
  absl::Duration Pass();

  const ListenerWatchdogOptions options_;
  const std::function<void(const absl::Status&)> on_wedged_;
  int failed_in_a_row_ = 0;    // the loop thread's own
  int64_t refusals_seen_ = 0;  // the loop thread's own
  base::BackgroundLoop loop_;
};

}  // namespace farm::service

#endif  // LIB_SERVICE_LISTENER_PROBE_H_
