#include "lib/client/client.h"

#include <gtest/gtest.h>

namespace farm::client {
namespace {

TEST(ChannelTargetTest, OneAddressIsKeptAsItIs) {
  EXPECT_EQ(*ChannelTarget("127.0.0.1:7070"), "127.0.0.1:7070");
  EXPECT_EQ(*ChannelTarget("farm.lab:7070"), "farm.lab:7070");
  EXPECT_EQ(*ChannelTarget("dns:///farm.lab:7070"), "dns:///farm.lab:7070");
}

TEST(ChannelTargetTest, SeveralAddressesBecomeAnAddressList) {
  EXPECT_EQ(*ChannelTarget("127.0.0.1:7070,10.0.0.2:7071"), "ipv4:127.0.0.1:7070,10.0.0.2:7071");
  EXPECT_EQ(*ChannelTarget("[::1]:7070,[fd00::2]:7071"), "ipv6:[::1]:7070,[fd00::2]:7071");
}

TEST(ChannelTargetTest, BadListsAreRefusedNamingTheEntry) {
  auto names = ChannelTarget("127.0.0.1:7070,farm.lab:7070");
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(names.status().message().find("farm.lab:7070"), std::string::npos);
  EXPECT_FALSE(ChannelTarget("127.0.0.1:7070,").ok());
  EXPECT_FALSE(ChannelTarget("").ok());
  EXPECT_FALSE(ChannelTarget("127.0.0.1:7070,127.0.0.2").ok());
  EXPECT_FALSE(ChannelTarget("127.0.0.1:7070,[::1]:7070").ok());
}

TEST(ApplySecurityTest, EveryAddressOfAListMustBeLoopbackForPlaintext) {
  SecurityFlags flags;
  ClientOptions options;
  options.server = "127.0.0.1:7070,127.0.0.2:7070";
  EXPECT_TRUE(ApplySecurity(flags, &options).ok());
  options.server = "127.0.0.1:7070,10.0.0.2:7070";
  absl::Status st = ApplySecurity(flags, &options);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("10.0.0.2:7070"), std::string::npos);
  flags.tls.insecure = true;
  EXPECT_TRUE(ApplySecurity(flags, &options).ok());
}

}  // namespace
}  // namespace farm::client
