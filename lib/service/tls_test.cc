#include "lib/service/tls.h"

#include <stdlib.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "lib/service/testing_pem.h"

namespace farm::service {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/tls_test_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(TlsTest, KeyOfAnotherCertificateIsNamedAsSuch) {
  KeyPem mine = NewKey(), other = NewKey();
  TlsPem pem;
  pem.cert_chain = SelfSigned(mine.key.get(), -absl::Hours(1), absl::Hours(24));
  pem.private_key = mine.pem;
  EXPECT_TRUE(CheckPair(pem).ok()) << CheckPair(pem);
  pem.private_key = other.pem;
  absl::Status st = CheckPair(pem);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--tls-key does not belong to --tls-cert"), std::string::npos) << st;

  // What main loads: the files are named, and nothing says "address in use".
  TlsFlags f;
  f.cert = TempFile("pair.pem", pem.cert_chain);
  f.key = TempFile("other.key", other.pem);
  for (bool server : {true, false}) {
    absl::StatusOr<TlsPem> loaded = LoadTls(f, server);
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.status().message().find("--tls-key \"" + f.key + "\" does not belong"),
              std::string::npos)
        << loaded.status();
  }
  f.key = TempFile("mine.key", mine.pem);
  EXPECT_TRUE(LoadTls(f, true).ok()) << LoadTls(f, true).status();
}

TEST(TlsTest, ServerCertificateOutsideItsDatesIsRefusedWithThem) {
  KeyPem k = NewKey();
  TlsPem expired;
  expired.cert_chain = SelfSigned(k.key.get(), -absl::Hours(72), -absl::Hours(24));
  expired.private_key = k.pem;
  absl::Status st = CheckValidity(expired, absl::Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("has expired"), std::string::npos) << st;
  EXPECT_NE(st.message().find(" UTC"), std::string::npos) << st;
  EXPECT_TRUE(CheckValidity(expired, absl::Now() - absl::Hours(48)).ok());

  TlsPem early;
  early.cert_chain = SelfSigned(k.key.get(), absl::Hours(24), absl::Hours(72));
  early.private_key = k.pem;
  st = CheckValidity(early, absl::Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not valid yet"), std::string::npos) << st;

  TlsFlags f;
  f.cert = TempFile("expired.pem", expired.cert_chain);
  f.key = TempFile("expired.key", k.pem);
  absl::StatusOr<TlsPem> server = LoadTls(f, true);
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("has expired"), std::string::npos) << server.status();
  // A client's own certificate is the server's to judge.
  EXPECT_TRUE(LoadTls(f, false).ok());
}

TEST(TlsTest, ServerReadsOnlyItsOwnEnvironment) {
  ::setenv("FARM_TLS_CERT", "/client/cert.pem", 1);
  ::setenv("FARM_TLS_KEY", "/client/cert.key", 1);
  ::setenv("FARM_INSECURE", "1", 1);
  ::unsetenv("FARM_SCHEDULER_TLS_CERT");
  ::unsetenv("FARM_SCHEDULER_TLS_KEY");
  ::unsetenv("FARM_SCHEDULER_INSECURE");
  const char* argv[] = {"prog"};
  TlsFlags server_flags, client_flags;
  {
    CLI::App app;
    AddTlsOptions(app, &server_flags, /*server=*/true);
    app.parse(1, argv);
  }
  EXPECT_EQ(server_flags.cert, "");
  EXPECT_EQ(server_flags.key, "");
  EXPECT_FALSE(server_flags.insecure);
  {
    CLI::App app;
    AddTlsOptions(app, &client_flags, /*server=*/false);
    app.parse(1, argv);
  }
  EXPECT_EQ(client_flags.cert, "/client/cert.pem");
  EXPECT_TRUE(client_flags.insecure);
  ::setenv("FARM_SCHEDULER_TLS_CERT", "/server/server.pem", 1);
  {
    TlsFlags f;
    CLI::App app;
    AddTlsOptions(app, &f, /*server=*/true);
    app.parse(1, argv);
    EXPECT_EQ(f.cert, "/server/server.pem");
  }
  for (const char* v :
       {"FARM_TLS_CERT", "FARM_TLS_KEY", "FARM_INSECURE", "FARM_SCHEDULER_TLS_CERT"}) {
    ::unsetenv(v);
  }
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
