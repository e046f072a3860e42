// The deployed scheduler (mTLS) against connections that never start TLS:
// gRPC closes each once the handshake timeout passes, so they hold no
// descriptor for long, and a real mTLS agent registers and heartbeats while
// they are open and after they are gone.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "testing/mtls_farm.h"

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

}  // namespace
}  // namespace farm
