// The deployed scheduler (mTLS) against connections that never start TLS:
// gRPC closes each once the handshake timeout passes, so they hold no
// descriptor for long, and a real mTLS agent registers and heartbeats while
// they are open and after they are gone; and more of them than the
// process has descriptors never stop the listener (the accept limit); and
// a request over the message limit is refused before any handler.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

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

// A TCP connection to 127.0.0.1:port that sends nothing; -1 on failure.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed `fd` (EOF or reset), waiting up to `wait`.
bool ClosedByServer(int fd, absl::Duration wait) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return false;
  char c;
  return read(fd, &c, 1) <= 0;
}

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
