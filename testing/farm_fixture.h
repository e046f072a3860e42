// FarmTest: the one gtest fixture base the integration tests get their farm
// from. A suite gets a private PostgreSQL (started in SetUpTestSuite) and
// every test a fresh database on it; the test then asks for the parts it
// needs:
//  - the scheduler, in-process (StartScheduler) or as the farm-scheduler
//    binary in a child process (StartSchedulerProcess) where the test
//    freezes or kills it, either plaintext or as deployed (FarmMode);
//  - farm-agent children of any kind (emulator, fio/iozone, vm, kbuild: the
//    AgentSpec's capabilities and flags), each waited for until it has
//    registered;
//  - the guest root the vm and kbuild agents boot (BuildGuestRoot);
//  - clients of the scheduler with the credentials of a role.
// The deployed mode is docs/security.md's configuration: mTLS with the
// certificates scripts/farm-certs makes (a farm CA and server pair, one
// client certificate per role, one agent certificate per agent name), and a
// bootstrap admin token. The suite's certificate directory holds the farm CA
// ("ca") with clients viewer1, submitter1, agent-a, agent-b (role agent) and
// admin1, plus norole (no O attribute), and a second CA ("other") whose
// client mallory (O=admin) the farm must not trust. It is made on first use
// (MtlsFarmTest: in SetUpTestSuite) and kept for the suite.
//
// Thread-safety: a fixture is used by its test's thread; Call(), Client()
// and the other client helpers may also run on threads the test starts once
// the scheduler is up. Start children and servers from the test's main
// thread: their parent-death signal follows the starting thread.
// Ownership: the fixture owns the in-process scheduler and the child
// scheduler it started (both stopped in TearDown) and the test's directory;
// the caller owns the agents StartAgent returns. PostgreSQL and the
// certificates live for the suite.
#ifndef TESTING_FARM_FIXTURE_H_
#define TESTING_FARM_FIXTURE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/metrics/metrics.h"
#include "lib/service/tls.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/service_harness.h"

namespace farm::testing {

// How the scheduler and its clients talk: plaintext loopback, or as
// deployed (mTLS, agent certificates, role certificates and tokens).
enum class FarmMode { kPlaintext, kDeployed };

// A farm-agent child: the flags every agent kind is started with. Flags
// left at their zero value are not passed (the agent's default applies).
struct AgentSpec {
  std::string name;
  int slots = 1;                          // --slots
  std::string capabilities = "emulator";  // --capabilities, comma-separated
  bool metrics = false;                   // --metrics 127.0.0.1:0
  absl::Duration drain_timeout = {};      // --drain-timeout
  std::vector<std::string> labels = {};   // one --label k=v each
  std::vector<std::string> flags = {};    // further flags, as given (--allow-dir, --vm-kernels..)
  std::string scheduler = {};             // --scheduler; empty: the fixture's scheduler
  bool wait_registered = true;            // return once "registered as NAME" is logged
  absl::Duration register_timeout = absl::Seconds(60);
};

class FarmTest : public ::testing::Test {
 public:
  static constexpr const char* kBootstrapToken = "bootstrap-s3cret";

 protected:
  // `mode` is what clients and agents use until a scheduler is started
  // (each start sets it).
  explicit FarmTest(FarmMode mode = FarmMode::kPlaintext) : farm_mode_(mode) {}

  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  void TearDown() override;

  // ------------------------------------------------------------ PostgreSQL
  // The suite's server: tests may Stop/Restart/Kill it (fault tests).
  static PostgresInstance& Postgres() { return *pg_; }
  // This test's database.
  const std::string& DbUri() const { return db_uri_; }
  // The first column of the first row of `query`, on this test's database.
  int64_t Sql(const std::string& query) const;
  std::string SqlText(const std::string& query) const;
  // Every row of `query`, on this test's database.
  pqxx::result SqlRows(const std::string& query) const;
  // A directory of this test's own (logs, stores, allowed dirs), removed
  // after the test when it passed, else with the suite.
  const std::string& TestDir() const { return test_dir_; }

  // ------------------------------------------------------------- scheduler
  // The scheduler in-process on a free loopback port over this test's
  // database. Deployed: mTLS with the farm's server pair, `admin_token` as
  // the bootstrap token, a 10 s lease TTL and 4 connections and workers.
  // `adjust` may change any option first.
  void StartScheduler(FarmMode mode,
                      const std::function<void(scheduler::ServerOptions&)>& adjust = {},
                      const std::string& admin_token = kBootstrapToken);
  // StartScheduler(kDeployed, adjust, admin_token), in the argument order
  // the security tests read best.
  void StartServer(const std::string& admin_token = kBootstrapToken,
                   const std::function<void(scheduler::ServerOptions&)>& adjust = {});
  // farm-scheduler as a child process, on the fixture's port (picked at the
  // first start and kept, so a restarted scheduler is found again), with
  // --listen and --db, the deployed TLS flags and an --admin-token-file
  // holding kBootstrapToken, then `flags`; waits until it listens. A
  // running one is replaced (killed first).
  ChildProcess& StartSchedulerProcess(FarmMode mode, const std::vector<std::string>& flags = {});
  // Another farm-scheduler child like the last StartSchedulerProcess, on
  // `port` (a second scheduler over the same database); the caller owns it.
  std::unique_ptr<ChildProcess> SpawnSchedulerProcess(int port);
  ChildProcess& SchedulerProcess() { return *scheduler_process_; }
  // host:port of the running scheduler (in-process or child).
  std::string SchedulerAddress() const;
  FarmMode mode() const { return farm_mode_; }

  // ---------------------------------------------------------------- agents
  // farm-agent as a child with stdout and stderr in TestDir()/NAME-N.log.
  // Deployed: with an agent certificate for its name (made on first use).
  // Whether it registered goes to `registered` when given, else a failure
  // to register is a test failure.
  std::unique_ptr<ChildProcess> StartAgent(const AgentSpec& spec,
                                           absl::Status* registered = nullptr);

  // ------------------------------------------------------------ guest root
  // scripts/build-guest-root [--arch ARCH] --out `out_dir` (a cache: quick
  // when built); the initramfs path it prints.
  static absl::StatusOr<std::string> BuildGuestRoot(const std::string& out_dir,
                                                    const std::string& arch = "",
                                                    absl::Duration timeout = absl::Minutes(2));

  // --------------------------------------------------------------- clients
  // Options of a client of the scheduler. Plaintext: the address only.
  // Deployed: presenting certificate `cert` of the farm CA (empty: none) and
  // `token` when not empty.
  client::ClientOptions Client(const std::string& cert = "", const std::string& token = "") const;
  // A client of `role` (viewer, submitter, agent, admin): deployed, with the
  // suite's certificate of that role; the admin also carries the bootstrap
  // token. Plaintext: Client().
  client::ClientOptions RoleClient(const std::string& role) const;
  // A stub of `Service` over `c`'s channel.
  template <typename Service>
  static std::unique_ptr<typename Service::Stub> Stub(const client::ClientOptions& c) {
    return Service::NewStub(client::MakeChannel(c));
  }
  // The status of calling `method` ("/pkg.Service/Method") with `request`;
  // the answer goes to `response` when given.
  static grpc::Status Call(const client::ClientOptions& c, const std::string& method,
                           const google::protobuf::Message& request,
                           google::protobuf::Message* response = nullptr);
  // Loads `catalog_yaml` as the admin; then submits `spec_yaml` as
  // `submitter` and returns the matrix id (0 on failure, with a test
  // failure).
  void LoadCatalog(const std::string& catalog_yaml);
  int64_t Submit(const std::string& spec_yaml, const client::ClientOptions& submitter);
  // An API token of `role` made by admin1 with the bootstrap token.
  std::string CreateToken(const std::string& name, const std::string& role);
  // Registers agent `name` (one slot, the emulator) over `c`; the status
  // goes to `status` when given, else a failure is a test failure.
  ::iommufarm::v1::RegisterResponse Register(const client::ClientOptions& c,
                                             const std::string& name,
                                             grpc::Status* status = nullptr);

  // ---------------------------------------------------------- certificates
  // The suite's certificate directory (subfolders "ca" and "other"), made
  // on first use.
  static const std::string& CertDir();
  // The server's pair and the farm CA (client certificates required).
  static service::TlsPem ServerPem();
  // A client of `ca` ("ca" or "other") presenting certificate `name`
  // (empty: none); it verifies the server against the farm CA.
  static service::TlsPem ClientPem(const std::string& name, const std::string& ca = "ca");
  // Signs a client certificate `name` with the farm CA for an arbitrary
  // OpenSSL -subj string ("/CN=x/O=viewer"); false if openssl failed.
  static bool MakeClientCertificate(const std::string& name, const std::string& subject);
  // Makes the suite's certificates unless made (ASSERTs on failure).
  static void EnsureCertificates();

  std::string db_uri_;
  metrics::MetricsRegistry registry_;
  std::unique_ptr<scheduler::SchedulerServer> server_;

 private:
  static PostgresInstance* pg_;
  static std::string* suite_dir_;
  static std::string* cert_dir_;

  FarmMode farm_mode_ = FarmMode::kPlaintext;
  std::string test_dir_;
  int scheduler_port_ = 0;
  std::vector<std::string> scheduler_flags_;
  int scheduler_starts_ = 0;
  int agent_starts_ = 0;
  std::unique_ptr<ChildProcess> scheduler_process_;
};

// FarmTest for value-parameterized suites (TEST_P).
template <typename T>
class FarmTestWithParam : public FarmTest, public ::testing::WithParamInterface<T> {};

// The deployed mode from the suite's start: the certificates are made in
// SetUpTestSuite, so static helpers (ClientPem, CertDir) work before any
// scheduler starts.
class MtlsFarmTest : public FarmTest {
 protected:
  MtlsFarmTest() : FarmTest(FarmMode::kDeployed) {}
  static void SetUpTestSuite();
};

}  // namespace farm::testing

#endif  // TESTING_FARM_FIXTURE_H_
