// The deployed scheduler (mTLS) against connections that never start TLS:
// gRPC closes each once the handshake timeout passes, so they hold no
// descriptor for long, and a real mTLS agent registers and heartbeats while
// they are open and after they are gone; and more of them than the
// process has descriptors never stop the listener (the accept limit); a
// flood of connections that finish TLS with a farm certificate (no role)
// from one peer address holds at most the per-peer cap, is closed when idle,
// and leaves other peers' calls answered and the scheduler up; and a request
// over the message limit is refused before any handler.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "absl/strings/str_cat.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "testing/binaries.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

class ConnectionsPgTest : public testing::MtlsFarmTest {};

// True once the server has closed `fd` (EOF or reset), waiting up to `wait`.
bool ClosedByServer(int fd, absl::Duration wait) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return false;
  char c;
  return read(fd, &c, 1) <= 0;
}

// A TCP connection from `source` (a loopback address other than the farm's
// own clients', so the per-peer cap sees another host) to 127.0.0.1:port,
// with receive and send timeouts; -1 on failure.
int ConnectFrom(const char* source, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A TCP connection to 127.0.0.1:port that sends nothing; -1 on failure.
int Connect(int port) { return ConnectFrom("127.0.0.1", port); }

// A connection that finishes mTLS (ALPN h2) and sends HTTP/2's client
// preface and an empty SETTINGS frame, then never calls: what an attacker
// with any certificate of the farm's CA can hold open.
class HeldTlsConnection {
 public:
  static std::unique_ptr<HeldTlsConnection> Open(SSL_CTX* ctx, const char* source, int port) {
    const int fd = ConnectFrom(source, port);
    if (fd < 0) return nullptr;
    std::unique_ptr<HeldTlsConnection> c(new HeldTlsConnection(fd, SSL_new(ctx)));
    SSL_set_fd(c->ssl_, fd);
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    static const unsigned char kSettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    if (SSL_connect(c->ssl_) != 1 || SSL_write(c->ssl_, kPreface, sizeof kPreface - 1) <= 0 ||
        SSL_write(c->ssl_, kSettings, sizeof kSettings) <= 0) {
      ERR_clear_error();
      return nullptr;
    }
    return c;
  }
  ~HeldTlsConnection() {
    SSL_free(ssl_);
    close(fd_);
  }
  int fd() const { return fd_; }
  // True once the server closed the connection, reading what it sent
  // (its SETTINGS, pings) until then, for up to `wait`.
  bool ClosedByServer(absl::Duration wait) {
    const absl::Time until = absl::Now() + wait;
    char buf[4096];
    while (absl::Now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (SSL_pending(ssl_) == 0 && poll(&p, 1, 200) <= 0) continue;
      if (SSL_read(ssl_, buf, sizeof buf) <= 0) {
        const int err = SSL_get_error(ssl_, -1);
        ERR_clear_error();
        if (err != SSL_ERROR_WANT_READ) return true;
      }
    }
    return false;
  }

 private:
  HeldTlsConnection(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  const int fd_;
  SSL* const ssl_;
};

TEST_F(ConnectionsPgTest, ConnectionsThatNeverStartTlsAreClosedAndAgentsGoOn) {
  StartServer(kBootstrapToken,
              [](scheduler::ServerOptions& o) { o.handshake_timeout = absl::Seconds(2); });
  const client::ClientOptions agent = Client("agent-a");
  const pb::RegisterResponse reg = Register(agent, "agent-a");
  ASSERT_GT(reg.agent_id(), 0);

  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = Connect(server_->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  // While they are open a new mTLS connection registers and heartbeats.
  const pb::RegisterResponse again = Register(agent, "agent-a");
  pb::HeartbeatRequest hb;
  hb.set_agent_id(again.agent_id());
  hb.set_session(again.session());
  pb::HeartbeatResponse resp;
  EXPECT_TRUE(Call(agent, "/iommufarm.v1.AgentService/Heartbeat", hb, &resp).ok());

  // gRPC's default handshake timeout is 120 s: each is closed after 2 s.
  int closed = 0;
  for (int fd : idle) closed += ClosedByServer(fd, absl::Seconds(30)) ? 1 : 0;
  EXPECT_EQ(closed, static_cast<int>(idle.size()));
  for (int fd : idle) close(fd);
  EXPECT_TRUE(Call(agent, "/iommufarm.v1.AgentService/Heartbeat", hb, &resp).ok());
}

// gRPC 1.51 gives its listener up at the first EMFILE from accept4. A real
// farm-scheduler in a 320-descriptor table meets 600 connections that never
// start TLS; once they are gone an mTLS agent must still get in.
TEST_F(ConnectionsPgTest, MoreIdleConnectionsThanDescriptorsNeverStopTheListener) {
  const int port = testing::PickFreePort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto scheduler = testing::SpawnLogged(
      {"/usr/bin/prlimit", "--nofile=320:320", "--",
       testing::BinaryPath("FARM_SCHEDULER_BIN", FARM_SCHEDULER_BIN), "--listen", address, "--db",
       db_uri_, "--metrics", "127.0.0.1:0", "--catalog-dir", FARM_SOURCE_DIR "/emu/model/catalogs",
       "--tls-cert", CertDir() + "/ca/server.pem", "--tls-key", CertDir() + "/ca/server.key",
       "--tls-ca", CertDir() + "/ca/ca.pem"},
      CertDir() + "/fd-limited-scheduler");
  absl::Status up = scheduler->WaitFor("listening on", false, absl::Seconds(60));
  ASSERT_TRUE(up.ok()) << up << "\n" << scheduler->Err();

  std::vector<int> idle;
  for (int i = 0; i < 600; ++i) {
    const int fd = Connect(port);
    if (fd >= 0) idle.push_back(fd);
  }
  EXPECT_EQ(idle.size(), 600u);
  // Past the limit the scheduler closes a connection at once.
  int closed_at_once = 0;
  for (int fd : idle) closed_at_once += ClosedByServer(fd, absl::Milliseconds(1)) ? 1 : 0;
  for (int fd : idle) close(fd);

  client::ClientOptions agent;
  agent.server = address;
  agent.tls = ClientPem("agent-a");
  grpc::Status st;
  pb::RegisterResponse reg;
  for (int attempt = 0; attempt < 30 && reg.agent_id() == 0; ++attempt) {
    reg = Register(agent, "agent-a", &st);
    if (reg.agent_id() == 0) absl::SleepFor(absl::Seconds(1));
  }
  EXPECT_GT(reg.agent_id(), 0) << st.error_message() << "\n" << scheduler->Err();
  EXPECT_GT(closed_at_once, 0);
  EXPECT_EQ(scheduler->Err().find("Too many open files"), std::string::npos) << scheduler->Err();
  std::cout << "idle connections: " << idle.size() << ", closed at once: " << closed_at_once
            << "\n";
}

// The flood that once took a 1,024-descriptor scheduler down: 754
// connections that finish TLS with a role-less farm certificate from one
// host. The per-peer cap closes all but its limit at accept, the idle
// timeout closes those, and meanwhile another host's agent registers and
// heartbeats and the listener probe (every second here, so three misses
// would end the process within seconds) never gives up.
TEST_F(ConnectionsPgTest, AnAuthenticatedFloodFromOneHostLeavesOtherCallsAnswered) {
  const int port = testing::PickFreePort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const int per_peer = 128;
  auto scheduler =
      testing::SpawnLogged({"/usr/bin/prlimit",
                            "--nofile=1024:1024",
                            "--",
                            testing::BinaryPath("FARM_SCHEDULER_BIN", FARM_SCHEDULER_BIN),
                            "--listen",
                            address,
                            "--db",
                            db_uri_,
                            "--metrics",
                            "127.0.0.1:0",
                            "--catalog-dir",
                            FARM_SOURCE_DIR "/emu/model/catalogs",
                            "--tls-cert",
                            CertDir() + "/ca/server.pem",
                            "--tls-key",
                            CertDir() + "/ca/server.key",
                            "--tls-ca",
                            CertDir() + "/ca/ca.pem",
                            "--max-connections-per-peer",
                            std::to_string(per_peer),
                            "--connection-idle",
                            "5s",
                            "--listener-probe-interval",
                            "1s"},
                           CertDir() + "/flooded-scheduler");
  absl::Status up = scheduler->WaitFor("listening on", false, absl::Seconds(60));
  ASSERT_TRUE(up.ok()) << up << "\n" << scheduler->Err();

  // A write to a connection the cap closed would end the test process.
  signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  const std::string dir = CertDir() + "/ca";
  ASSERT_EQ(SSL_CTX_use_certificate_chain_file(ctx.get(), (dir + "/norole.pem").c_str()), 1);
  ASSERT_EQ(SSL_CTX_use_PrivateKey_file(ctx.get(), (dir + "/norole.key").c_str(), SSL_FILETYPE_PEM),
            1);
  static const unsigned char kAlpn[] = {2, 'h', '2'};
  ASSERT_EQ(SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof kAlpn), 0);
  std::vector<std::unique_ptr<HeldTlsConnection>> held;
  for (int i = 0; i < 754; ++i) {
    auto c = HeldTlsConnection::Open(ctx.get(), "127.0.0.2", port);
    if (c != nullptr) held.push_back(std::move(c));
  }
  std::cout << "flood: " << held.size() << " of 754 connections finished TLS\n";
  EXPECT_GT(held.size(), 0u) << "no flood connection got in: the test attacks nothing";
  EXPECT_LE(held.size(), static_cast<size_t>(per_peer));

  // Another host's agent, for longer than three probe intervals.
  client::ClientOptions agent;
  agent.server = address;
  agent.tls = ClientPem("agent-a");
  int answered = 0;
  for (int round = 0; round < 8; ++round) {
    grpc::Status st;
    const pb::RegisterResponse reg = Register(agent, "agent-a", &st);
    EXPECT_GT(reg.agent_id(), 0) << "round " << round << ": " << st.error_message();
    answered += reg.agent_id() > 0 ? 1 : 0;
    absl::SleepFor(absl::Seconds(1));
  }
  EXPECT_EQ(answered, 8);
  int closed = 0;
  for (auto& c : held) closed += c->ClosedByServer(absl::Seconds(30)) ? 1 : 0;
  EXPECT_EQ(closed, static_cast<int>(held.size())) << "idle connections are closed";
  EXPECT_TRUE(scheduler->Alive()) << scheduler->Err();
  EXPECT_EQ(scheduler->Err().find("listener probe: no answer"), std::string::npos)
      << scheduler->Err();
}

// A request's size is bounded for every caller before any handler runs: a
// viewer's 17 MiB request is refused by gRPC (RESOURCE_EXHAUSTED), one of
// 13 MiB gets through to the role check, and the scheduler serves on.
TEST_F(ConnectionsPgTest, RequestsOverTheMessageLimitAreRefusedBeforeAnyHandler) {
  StartServer();
  const client::ClientOptions viewer = Client("viewer1");
  pb::SubmitMatrixRequest big;
  big.set_spec_yaml(std::string(size_t{17} << 20, '#'));
  grpc::Status st = Call(viewer, "/iommufarm.v1.JobService/SubmitMatrix", big);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  pb::SubmitMatrixRequest within;
  within.set_spec_yaml(std::string(size_t{13} << 20, '#'));
  st = Call(viewer, "/iommufarm.v1.JobService/SubmitMatrix", within);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  pb::ListCatalogsResponse catalogs;
  st = Call(viewer, "/iommufarm.v1.JobService/ListCatalogs", pb::ListCatalogsRequest(), &catalogs);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

}  // namespace
}  // namespace farm
