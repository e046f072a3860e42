#include "lib/service/accept_limit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

namespace farm::service {
namespace {

// A non-blocking loopback listener; its port goes to `port`.
int Listen(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

// The lowest free descriptor number.
int LowestFreeFd() {
  const int fd = dup(0);
  close(fd);
  return fd;
}

bool ClosedByPeer(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 10000) <= 0) return false;
  char c;
  return read(fd, &c, 1) <= 0;
}

TEST(AcceptLimitTest, ConnectionsAtOrAboveTheLimitAreClosedAndTheListenerLives) {
  int port = 0;
  const int listener = Listen(&port);
  ASSERT_GE(listener, 0);
  std::vector<int> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(Connect(port));
    ASSERT_GE(clients.back(), 0);
  }
  const int64_t refused_before = AcceptRefusals();
  // Only the lowest free descriptor is below the limit.
  SetAcceptFdLimit(LowestFreeFd() + 1);
  std::vector<int> accepted;
  for (int c; (c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) accepted.push_back(c);
  const int err = errno;
  EXPECT_EQ(err, EAGAIN);
  EXPECT_EQ(accepted.size(), 1u);
  EXPECT_EQ(AcceptRefusals() - refused_before, 4);
  // The four refused peers see their connection closed.
  for (int i = 1; i < 5; ++i) EXPECT_TRUE(ClosedByPeer(clients[i])) << "client " << i;

  // With a descriptor below the limit free again, the listener accepts.
  for (int c : accepted) close(c);
  const int more = Connect(port);
  ASSERT_GE(more, 0);
  SetAcceptFdLimit(LowestFreeFd() + 1);
  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(c, 0);
  SetAcceptFdLimit(0);
  for (int fd : clients) close(fd);
  close(more);
  close(c);
  close(listener);
}

TEST(AcceptLimitTest, WithoutALimitAcceptIsGlibcs) {
  SetAcceptFdLimit(0);
  int port = 0;
  const int listener = Listen(&port);
  ASSERT_GE(listener, 0);
  EXPECT_EQ(accept4(listener, nullptr, nullptr, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  const int client = Connect(port);
  pollfd p{listener, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  EXPECT_GE(c, 0);
  close(c);
  close(client);
  close(listener);
}

TEST(AcceptLimitTest, LimitKeepsAReserveBelowTheOpenFileLimit) {
  EXPECT_EQ(AcceptFdLimitFor(65536), 65536 - 256);
  EXPECT_EQ(AcceptFdLimitFor(1024, 100), 924);
  // A small table keeps half for everything else.
  EXPECT_EQ(AcceptFdLimitFor(256), 128);
}

}  // namespace
}  // namespace farm::service
