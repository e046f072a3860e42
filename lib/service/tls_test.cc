#include "lib/service/tls.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

namespace farm::service {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/tls_test_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TlsTest, LoopbackAddresses) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:7070"));
  EXPECT_TRUE(IsLoopbackAddress("127.3.2.1:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:7070"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:7070"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:7070"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:7070"));
  EXPECT_FALSE(IsLoopbackAddress("farm.lab:7070"));
}

TEST(TlsTest, PlaintextOffLoopbackNeedsInsecure) {
  TlsPem none;
  EXPECT_TRUE(CheckPlaintextAllowed("127.0.0.1:1", none, false, "--listen").ok());
  absl::Status st = CheckPlaintextAllowed("0.0.0.0:7070", none, false, "--listen");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("--tls-cert"), std::string::npos) << st;
  EXPECT_NE(st.message().find("--insecure"), std::string::npos) << st;
  EXPECT_TRUE(CheckPlaintextAllowed("0.0.0.0:7070", none, true, "--listen").ok());
  TlsPem tls;
  tls.cert_chain = "x";
  EXPECT_TRUE(CheckPlaintextAllowed("0.0.0.0:7070", tls, false, "--listen").ok());
}

TEST(TlsTest, LoadRejectsHalfPairsAndNonPem) {
  TlsFlags f;
  f.cert = TempFile("cert.pem", "-----BEGIN CERTIFICATE-----\n");
  EXPECT_EQ(LoadTls(f, true).status().code(), absl::StatusCode::kInvalidArgument);
  f.key = TempFile("junk.pem", "not pem");
  absl::StatusOr<TlsPem> junk = LoadTls(f, true);
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("--tls-key"), std::string::npos) << junk.status();
  TlsFlags ca_only;
  ca_only.ca = f.cert;
  EXPECT_FALSE(LoadTls(ca_only, true).ok());
  absl::StatusOr<TlsPem> client = LoadTls(ca_only, false);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE(client->enabled());
  EXPECT_FALSE(LoadTls(TlsFlags{}, true)->enabled());
}

TEST(TlsTest, SecretFileFirstLineTrimmed) {
  absl::StatusOr<std::string> s =
      ReadSecretFile(TempFile("tok", "abc123 \nrest\n"), "--token-file");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "abc123");
  EXPECT_FALSE(ReadSecretFile(TempFile("empty", "\n"), "--token-file").ok());
  EXPECT_FALSE(ReadSecretFile("/nonexistent/tok", "--token-file").ok());
}

}  // namespace
}  // namespace farm::service
