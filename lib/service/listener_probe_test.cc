#include "lib/service/listener_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "lib/service/testing_pem.h"
#include "lib/service/tls.h"

namespace farm::service {
namespace {

// A gRPC server with no services on a free loopback port: the transport is
// what the probe talks to.
struct Server {
  std::unique_ptr<grpc::CallbackGenericService> generic =
      std::make_unique<grpc::CallbackGenericService>();
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

Server StartServer(const std::shared_ptr<grpc::ServerCredentials>& creds) {
  Server s;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", creds, &s.port);
  builder.RegisterCallbackGenericService(s.generic.get());  // a server needs one service
  s.server = builder.BuildAndStart();
  return s;
}

// A socket that listens but never accepts: the kernel completes connects
// from its backlog, as it does for a listener gRPC has given up on.
struct NeverAccepts {
  int fd = -1;
  int port = 0;
  NeverAccepts() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    bind(fd, reinterpret_cast<sockaddr*>(&a), len);
    listen(fd, 16);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~NeverAccepts() { close(fd); }
};

TEST(ListenerProbeTest, APlaintextGrpcServerAnswers) {
  Server s = StartServer(grpc::InsecureServerCredentials());
  ASSERT_GT(s.port, 0);
  absl::Status st = ProbeGrpcListener("127.0.0.1", s.port, false, absl::Seconds(5));
  EXPECT_TRUE(st.ok()) << st;
  st = ProbeGrpcListener("0.0.0.0", s.port, false, absl::Seconds(5));  // a wildcard listen
  EXPECT_TRUE(st.ok()) << st;
  s.server->Shutdown();
}

// Client certificates required, and the probe presents none: the server's
// first handshake flight is the answer.
TEST(ListenerProbeTest, AnMtlsGrpcServerAnswersAProbeWithoutACertificate) {
  KeyPem key = NewKey();
  TlsPem pem;
  pem.cert_chain = SelfSigned(key.key.get(), absl::ZeroDuration(), absl::Hours(1));
  pem.private_key = key.pem;
  pem.root_certs = pem.cert_chain;
  Server s = StartServer(MakeServerCredentials(pem));
  ASSERT_GT(s.port, 0);
  absl::Status st = ProbeGrpcListener("127.0.0.1", s.port, true, absl::Seconds(5));
  EXPECT_TRUE(st.ok()) << st;
  // Plaintext bytes to a TLS port are not an HTTP/2 answer.
  EXPECT_FALSE(ProbeGrpcListener("127.0.0.1", s.port, false, absl::Seconds(2)).ok());
  s.server->Shutdown();
}

// What a TCP connect probe cannot tell: connected, but nobody accepts.
TEST(ListenerProbeTest, AListenerThatNeverAcceptsFails) {
  NeverAccepts wedged;
  for (bool tls : {false, true}) {
    absl::Status st = ProbeGrpcListener("127.0.0.1", wedged.port, tls, absl::Milliseconds(300));
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
    EXPECT_NE(st.message().find("no answer"), std::string::npos) << st;
  }
}

TEST(ListenerProbeTest, NothingListeningFails) {
  int port;
  {
    NeverAccepts gone;
    port = gone.port;
  }
  absl::Status st = ProbeGrpcListener("127.0.0.1", port, false, absl::Seconds(1));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

// Three failures in a row, not three in all, call on_wedged.
TEST(ListenerProbeTest, TheWatchdogActsOnFailuresInARowOnly) {
  std::atomic<int> probes{0};
  std::atomic<int> wedged{0};
  ListenerWatchdogOptions o;
  o.interval = absl::Milliseconds(1);
  o.failures = 3;
  // fail, fail, ok, fail, fail, fail, then ok for ever
  o.probe = [&probes]() -> absl::Status {
    const int n = probes.fetch_add(1);
    const bool fail = n == 0 || n == 1 || (n >= 3 && n <= 5);
    return fail ? absl::DeadlineExceededError("no answer") : absl::OkStatus();
  };
  ListenerWatchdog dog(o, [&wedged](const absl::Status& st) {
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
    wedged.fetch_add(1);
  });
  dog.Start();
  while (probes.load() < 20) absl::SleepFor(absl::Milliseconds(1));
  dog.Stop();
  EXPECT_EQ(wedged.load(), 1);
}

// A probe closed by a connection cap while the listener is accepting (the
// refusal count grew during it) is a server at its caps, not a wedged one.
TEST(ListenerProbeTest, AProbeRefusedAtTheCapsIsNotAWedgedListener) {
  std::atomic<int> probes{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int> wedged{0};
  ListenerWatchdogOptions o;
  o.interval = absl::Milliseconds(1);
  o.failures = 2;
  // Probes 0..9 fail while refusals grow (a flood at the caps); 10.. fail
  // with no refusal (wedged).
  std::atomic<int> wedged_during_flood{-1};
  o.probe = [&]() -> absl::Status {
    const int n = probes.fetch_add(1);
    // The passes of probes 0..9 have all ended when probe 10 starts.
    if (n == 10) wedged_during_flood = wedged.load();
    if (n < 10) refused.fetch_add(5);
    return absl::DeadlineExceededError("closed");
  };
  o.refusals = [&] { return refused.load(); };
  ListenerWatchdog dog(o, [&](const absl::Status&) { wedged.fetch_add(1); });
  dog.Start();
  while (probes.load() < 14) absl::SleepFor(absl::Milliseconds(1));
  dog.Stop();
  EXPECT_EQ(wedged_during_flood.load(), 0) << "a listener at its caps was taken for wedged";
  EXPECT_GE(wedged.load(), 1);
}

}  // namespace
}  // namespace farm::service
