// MtlsFarmTest: a gtest fixture base for the control plane as deployed --
// farm-scheduler in-process behind mTLS (certificates made by
// scripts/farm-certs, as docs/security.md sets a farm up), a bootstrap admin
// token, and a real PostgreSQL with a fresh database per test.
//
// The suite's certificate directory holds the farm CA ("ca") with a server
// pair and one client per role -- viewer1, submitter1, agent-a, agent-b
// (role agent), admin1 -- plus norole (no O attribute), and a second CA
// ("other") whose client mallory (O=admin) the farm must not trust.
// MakeClientCertificate() adds hand-made subjects to the farm CA.
//
// Thread-safety: a fixture is used by its test's thread; Call() and the
// other client helpers may also run on threads the test starts, once the
// server is up. Ownership: the fixture owns the server it starts
// (Shutdown in TearDown); PostgreSQL and the certificates live for the suite.
#ifndef TESTING_MTLS_FARM_H_
#define TESTING_MTLS_FARM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/metrics/metrics.h"
#include "lib/service/tls.h"
#include "scheduler/server.h"
#include "testing/service_harness.h"

namespace farm::testing {

class MtlsFarmTest : public ::testing::Test {
 public:
  static constexpr const char* kBootstrapToken = "bootstrap-s3cret";

 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  void TearDown() override;

  // The suite's certificate directory (subfolders "ca" and "other").
  static const std::string& CertDir() { return *dir_; }
  // The server's pair and the farm CA (client certificates required).
  static service::TlsPem ServerPem();
  // A client of `ca` ("ca" or "other") presenting certificate `name`
  // (empty: none); it verifies the server against the farm CA.
  static service::TlsPem ClientPem(const std::string& name, const std::string& ca = "ca");
  // Signs a client certificate `name` with the farm CA for an arbitrary
  // OpenSSL -subj string ("/CN=x/O=viewer"); false if openssl failed.
  static bool MakeClientCertificate(const std::string& name, const std::string& subject);

  // Starts the scheduler on a free loopback port with mTLS, the admin token
  // `admin_token` and a 10 s lease TTL; `adjust` may change any option first.
  void StartServer(const std::string& admin_token = kBootstrapToken,
                   const std::function<void(scheduler::ServerOptions&)>& adjust = {});
  // Options of a client presenting `cert` (and `token` when not empty).
  client::ClientOptions Client(const std::string& cert, const std::string& token = "") const;

  // The status of calling `method` ("/pkg.Service/Method") with `request`;
  // the answer goes to `response` when given.
  static grpc::Status Call(const client::ClientOptions& c, const std::string& method,
                           const google::protobuf::Message& request,
                           google::protobuf::Message* response = nullptr);
  // An API token of `role` made by admin1 with the bootstrap token.
  std::string CreateToken(const std::string& name, const std::string& role);
  // Loads `catalog_yaml` as admin1; then submits `spec_yaml` as `submitter`
  // and returns the matrix id (0 on failure, with a test failure).
  void LoadCatalog(const std::string& catalog_yaml);
  int64_t Submit(const std::string& spec_yaml, const client::ClientOptions& submitter);
  // Registers agent `name` (one slot, the emulator) over `c`; the status
  // goes to `status` when given, else a failure is a test failure.
  ::iommufarm::v1::RegisterResponse Register(const client::ClientOptions& c,
                                             const std::string& name,
                                             grpc::Status* status = nullptr);
  // The first column of the first row of `query`, on this test's database.
  int64_t Sql(const std::string& query) const;

  static PostgresInstance* pg_;
  static std::string* dir_;
  std::string db_uri_;
  metrics::MetricsRegistry registry_;
  std::unique_ptr<scheduler::SchedulerServer> server_;
};

}  // namespace farm::testing

#endif  // TESTING_MTLS_FARM_H_
