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

// A client of `port` whose source address is `from` (any 127/8 address is
// this host's loopback).
int ConnectFrom(int port, const char* from) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, from, &src.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

int Connect(int port) { return ConnectFrom(port, "127.0.0.1"); }

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

// Everything the listener has queued, accepted through the interposer.
std::vector<int> AcceptAll(int listener) {
  std::vector<int> out;
  pollfd p{listener, POLLIN, 0};
  while (poll(&p, 1, 200) == 1) {
    const int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) break;
    out.push_back(c);
  }
  return out;
}

// One address cannot take every slot: its third connection is closed at
// accept while another address is still served; a slot it frees is its
// again.
TEST(AcceptLimitTest, OnePeerAddressHoldsAtMostThePerPeerLimit) {
  int port = 0;
  const int listener = Listen(&port);
  ASSERT_GE(listener, 0);
  SetAcceptPeerLimit(2);
  const int64_t refused_before = AcceptRefusals();
  std::vector<int> flood;
  for (int i = 0; i < 3; ++i) flood.push_back(ConnectFrom(port, "127.0.0.2"));
  const int other = ConnectFrom(port, "127.0.0.3");
  ASSERT_GE(other, 0);
  for (int fd : flood) ASSERT_GE(fd, 0);
  std::vector<int> accepted = AcceptAll(listener);
  EXPECT_EQ(accepted.size(), 3u);  // two of the flood, and the other address
  EXPECT_EQ(AcceptRefusals() - refused_before, 1);
  EXPECT_TRUE(ClosedByPeer(flood[2]));
  // A closed connection's slot is free again (found when next counted).
  close(accepted[0]);
  const int again = ConnectFrom(port, "127.0.0.2");
  ASSERT_GE(again, 0);
  std::vector<int> more = AcceptAll(listener);
  EXPECT_EQ(more.size(), 1u);
  EXPECT_EQ(AcceptRefusals() - refused_before, 1);
  SetAcceptPeerLimit(0);
  for (size_t i = 1; i < accepted.size(); ++i) close(accepted[i]);
  for (int fd : more) close(fd);
  for (int fd : flood) close(fd);
  close(other);
  close(again);
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
