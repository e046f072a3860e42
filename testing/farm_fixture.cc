#include "testing/farm_fixture.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>

#include <grpcpp/generic/generic_stub.h>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/base/file.h"
#include "testing/binaries.h"
#include "testing/farm_certs.h"
#include "testing/harness_internal.h"

namespace farm::testing {
namespace {

namespace pb = ::iommufarm::v1;

int Sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Slurp(const std::string& path) { return base::ReadFileOrEmpty(path); }

// The suite's standard client certificate of each role.
std::string CertOfRole(const std::string& role) {
  if (role == "viewer") return "viewer1";
  if (role == "submitter") return "submitter1";
  if (role == "agent") return "agent-a";
  if (role == "admin") return "admin1";
  return "";
}

}  // namespace

PostgresInstance* FarmTest::pg_ = nullptr;
std::string* FarmTest::suite_dir_ = nullptr;
std::string* FarmTest::cert_dir_ = nullptr;

void FarmTest::SetUpTestSuite() {
  auto pg = PostgresInstance::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = pg->release();
  // A harness dir: a killed suite's leftovers are swept by the next start.
  auto dir = internal::MakeInstanceDir("farm", std::nullopt);
  ASSERT_TRUE(dir.ok()) << dir.status();
  suite_dir_ = new std::string(*dir);
}

void FarmTest::TearDownTestSuite() {
  delete pg_;
  pg_ = nullptr;
  if (suite_dir_ != nullptr) internal::RemoveInstanceDir(*suite_dir_);
  delete suite_dir_;
  suite_dir_ = nullptr;
  delete cert_dir_;  // inside the suite's dir
  cert_dir_ = nullptr;
}

void FarmTest::SetUp() {
  ASSERT_NE(pg_, nullptr) << "the suite's PostgreSQL did not start";
  // A fault test that failed while the server was down leaves it down.
  if (!pg_->running()) {
    absl::Status st = pg_->Restart();
    ASSERT_TRUE(st.ok()) << st;
  }
  static int n = 0;
  auto uri = pg_->CreateDatabase("test_" + std::to_string(++n));
  ASSERT_TRUE(uri.ok()) << uri.status();
  db_uri_ = *uri;
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? info->name() : "test";
  std::replace(name.begin(), name.end(), '/', '-');
  test_dir_ = absl::StrCat(*suite_dir_, "/", n, "-", name);
  std::error_code ec;
  std::filesystem::create_directories(test_dir_, ec);
  ASSERT_FALSE(ec) << test_dir_ << ": " << ec.message();
}

void FarmTest::TearDown() {
  if (server_) server_->Shutdown(absl::Seconds(2));
  scheduler_process_.reset();
  // A failed test's logs stay until the suite ends; a passed test's kernel
  // stores and guest files go now.
  if (!HasFailure()) internal::RemoveInstanceDir(test_dir_);
}

int64_t FarmTest::Sql(const std::string& query) const {
  pqxx::connection c(db_uri_);
  pqxx::work w(c);
  return w.exec1(query)[0].as<int64_t>();
}

std::string FarmTest::SqlText(const std::string& query) const {
  pqxx::connection c(db_uri_);
  pqxx::work w(c);
  return w.exec1(query)[0].as<std::string>();
}

pqxx::result FarmTest::SqlRows(const std::string& query) const {
  pqxx::connection c(db_uri_);
  pqxx::nontransaction n(c);
  return n.exec(query);
}

// ------------------------------------------------------------- scheduler

void FarmTest::StartScheduler(FarmMode mode,
                              const std::function<void(scheduler::ServerOptions&)>& adjust,
                              const std::string& admin_token) {
  farm_mode_ = mode;
  scheduler::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_uri = db_uri_;
  if (mode == FarmMode::kDeployed) {
    EnsureCertificates();
    o.token = admin_token;
    o.tls = ServerPem();
    o.config.lease_ttl = absl::Seconds(10);
    o.db_connections = 4;
    o.worker_threads = 4;
  }
  if (adjust) adjust(o);
  auto s = scheduler::SchedulerServer::Start(o, &registry_);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
}

void FarmTest::StartServer(const std::string& admin_token,
                           const std::function<void(scheduler::ServerOptions&)>& adjust) {
  StartScheduler(FarmMode::kDeployed, adjust, admin_token);
}

ChildProcess& FarmTest::StartSchedulerProcess(FarmMode mode,
                                              const std::vector<std::string>& flags) {
  farm_mode_ = mode;
  scheduler_flags_ = flags;
  if (scheduler_port_ == 0) scheduler_port_ = PickFreePort();
  EXPECT_GT(scheduler_port_, 0);
  scheduler_process_.reset();
  scheduler_process_ = SpawnSchedulerProcess(scheduler_port_);
  return *scheduler_process_;
}

std::unique_ptr<ChildProcess> FarmTest::SpawnSchedulerProcess(int port) {
  std::vector<std::string> argv = {BinaryPath("FARM_SCHEDULER_BIN", FARM_SCHEDULER_BIN), "--listen",
                                   absl::StrCat("127.0.0.1:", port), "--db", db_uri_};
  if (farm_mode_ == FarmMode::kDeployed) {
    EnsureCertificates();
    const std::string ca = CertDir() + "/ca";
    const std::string token_file = CertDir() + "/admin.token";
    absl::Status st =
        base::WriteFileAtomically(token_file, std::string(kBootstrapToken) + "\n", 0600);
    EXPECT_TRUE(st.ok()) << st;
    argv.insert(argv.end(),
                {"--tls-cert", FarmServerCertPath(ca), "--tls-key", FarmServerKeyPath(ca),
                 "--tls-ca", FarmCaPath(ca), "--admin-token-file", token_file});
  }
  argv.insert(argv.end(), scheduler_flags_.begin(), scheduler_flags_.end());
  auto scheduler = SpawnLogged(argv, absl::StrCat(test_dir_, "/scheduler", ++scheduler_starts_));
  absl::Status st = scheduler->WaitFor("listening on", false, absl::Seconds(60));
  EXPECT_TRUE(st.ok()) << st << "\n" << scheduler->Err();
  return scheduler;
}

std::string FarmTest::SchedulerAddress() const {
  if (server_) return server_->address();
  if (scheduler_process_) return absl::StrCat("127.0.0.1:", scheduler_port_);
  return "";
}

// ---------------------------------------------------------------- agents

std::unique_ptr<ChildProcess> FarmTest::StartAgent(const AgentSpec& spec,
                                                   absl::Status* registered) {
  std::vector<std::string> argv = {BinaryPath("FARM_AGENT_BIN", FARM_AGENT_BIN), "--scheduler",
                                   spec.scheduler.empty() ? SchedulerAddress() : spec.scheduler,
                                   "--name", spec.name};
  if (spec.slots > 0) argv.insert(argv.end(), {"--slots", std::to_string(spec.slots)});
  if (!spec.capabilities.empty()) argv.insert(argv.end(), {"--capabilities", spec.capabilities});
  if (spec.metrics) argv.insert(argv.end(), {"--metrics", "127.0.0.1:0"});
  if (spec.drain_timeout > absl::ZeroDuration()) {
    argv.insert(argv.end(), {"--drain-timeout", absl::FormatDuration(spec.drain_timeout)});
  }
  for (const std::string& l : spec.labels) argv.insert(argv.end(), {"--label", l});
  argv.insert(argv.end(), spec.flags.begin(), spec.flags.end());
  if (farm_mode_ == FarmMode::kDeployed) {
    // The scheduler binds an agent principal to its name: CN = --name.
    const std::string ca = CertDir() + "/ca";
    const std::string pair = ca + "/" + spec.name;
    if (!std::filesystem::exists(pair + ".pem")) {
      absl::Status st = MakeFarmClientCertificate(ca, spec.name, "agent");
      EXPECT_TRUE(st.ok()) << st;
    }
    argv.insert(argv.end(), {"--tls-cert", pair + ".pem", "--tls-key", pair + ".key", "--tls-ca",
                             FarmCaPath(ca)});
  }
  auto agent = std::make_unique<ChildProcess>(
      argv, absl::StrCat(test_dir_, "/", spec.name, "-", ++agent_starts_, ".log"));
  if (spec.wait_registered) {
    absl::Status st = agent->WaitFor("registered as " + spec.name, true, spec.register_timeout);
    if (registered != nullptr) {
      *registered = st;
    } else {
      EXPECT_TRUE(st.ok()) << st << "\n" << agent->Err();
    }
  }
  return agent;
}

// ------------------------------------------------------------ guest root

absl::StatusOr<std::string> FarmTest::BuildGuestRoot(const std::string& out_dir,
                                                     const std::string& arch,
                                                     absl::Duration timeout) {
  std::vector<std::string> argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root"};
  if (!arch.empty()) argv.insert(argv.end(), {"--arch", arch});
  argv.insert(argv.end(), {"--out", out_dir});
  static int builds = 0;
  const std::string log = absl::StrCat(*suite_dir_, "/build-guest-root-", ++builds);
  ChildProcess build(argv, log + ".out", log + ".err");
  absl::StatusOr<int> status = build.Wait(timeout);
  if (!status.ok()) return status.status();
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::InternalError(absl::StrCat("build-guest-root: ", build.Err()));
  }
  return std::string(absl::StripAsciiWhitespace(build.Out()));
}

// --------------------------------------------------------------- clients

client::ClientOptions FarmTest::Client(const std::string& cert, const std::string& token) const {
  client::ClientOptions c;
  c.server = SchedulerAddress();
  if (farm_mode_ == FarmMode::kDeployed) c.tls = ClientPem(cert);
  c.token = token;
  return c;
}

client::ClientOptions FarmTest::RoleClient(const std::string& role) const {
  if (farm_mode_ != FarmMode::kDeployed) return Client();
  return Client(CertOfRole(role), role == "admin" ? kBootstrapToken : "");
}

grpc::Status FarmTest::Call(const client::ClientOptions& c, const std::string& method,
                            const google::protobuf::Message& request,
                            google::protobuf::Message* response) {
  grpc::GenericStub stub(client::MakeChannel(c));
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1), resp;
  std::promise<grpc::Status> done;
  auto ctx = client::NewContext(c, absl::Seconds(10));
  stub.UnaryCall(ctx.get(), method, grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status st = done.get_future().get();
  if (st.ok() && response != nullptr) {
    std::vector<grpc::Slice> slices;
    (void)resp.Dump(&slices);
    std::string out;
    for (const grpc::Slice& s : slices) {
      out.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    if (!response->ParseFromString(out)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "unparsable answer");
    }
  }
  return st;
}

std::string FarmTest::CreateToken(const std::string& name, const std::string& role) {
  pb::CreateTokenRequest req;
  req.set_name(name);
  req.set_role(role);
  pb::CreateTokenResponse resp;
  client::ClientOptions admin = Client("admin1", kBootstrapToken);
  auto ctx = client::NewContext(admin, absl::Seconds(60));
  grpc::Status st = Stub<pb::AccessService>(admin)->CreateToken(ctx.get(), req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.token();
}

void FarmTest::LoadCatalog(const std::string& catalog_yaml) {
  client::ClientOptions admin = Client("admin1");
  pb::LoadCatalogRequest lc;
  lc.set_yaml(catalog_yaml);
  pb::LoadCatalogResponse lr;
  auto ctx = client::NewContext(admin, absl::Seconds(10));
  grpc::Status st = Stub<pb::JobService>(admin)->LoadCatalog(ctx.get(), lc, &lr);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

int64_t FarmTest::Submit(const std::string& spec_yaml, const client::ClientOptions& submitter) {
  pb::SubmitMatrixRequest sm;
  sm.set_spec_yaml(spec_yaml);
  pb::SubmitMatrixResponse sr;
  auto ctx = client::NewContext(submitter, absl::Seconds(10));
  grpc::Status st = Stub<pb::JobService>(submitter)->SubmitMatrix(ctx.get(), sm, &sr);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return st.ok() ? sr.matrix().id() : 0;
}

pb::RegisterResponse FarmTest::Register(const client::ClientOptions& c, const std::string& name,
                                        grpc::Status* status) {
  pb::RegisterRequest req;
  req.set_name(name);
  req.set_slots(1);
  req.add_capabilities()->set_name("emulator");
  pb::RegisterResponse resp;
  auto ctx = client::NewContext(c, absl::Seconds(10));
  grpc::Status st = Stub<pb::AgentService>(c)->Register(ctx.get(), req, &resp);
  if (status != nullptr) {
    *status = st;
  } else {
    EXPECT_TRUE(st.ok()) << name << ": " << st.error_message();
  }
  return resp;
}

// ---------------------------------------------------------- certificates

const std::string& FarmTest::CertDir() {
  EnsureCertificates();
  static const std::string kNone;
  return cert_dir_ != nullptr ? *cert_dir_ : kNone;
}

void FarmTest::EnsureCertificates() {
  if (cert_dir_ != nullptr || suite_dir_ == nullptr) return;
  const std::string dir = *suite_dir_ + "/certs";
  const std::string ca = dir + "/ca";
  ASSERT_TRUE(MakeFarmCa(ca).ok());
  for (const auto& [name, role] : {std::pair{"viewer1", "viewer"},
                                   {"submitter1", "submitter"},
                                   {"agent-a", "agent"},
                                   {"agent-b", "agent"},
                                   {"admin1", "admin"}}) {
    absl::Status st = MakeFarmClientCertificate(ca, name, role);
    ASSERT_TRUE(st.ok()) << st;
  }
  cert_dir_ = new std::string(dir);
  // farm-certs only writes the four roles: a role-less certificate by hand.
  ASSERT_TRUE(MakeClientCertificate("norole", "/CN=norole"));
  ASSERT_TRUE(MakeFarmCa(dir + "/other").ok());
  ASSERT_TRUE(MakeFarmClientCertificate(dir + "/other", "mallory", "admin").ok());
}

bool FarmTest::MakeClientCertificate(const std::string& name, const std::string& subject) {
  const std::string ca = CertDir() + "/ca";
  return Sh("cd " + ca + " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " +
            "-nodes -keyout '" + name + ".key' -out '" + name + ".csr' -subj '" + subject +
            "' 2>/dev/null && openssl x509 -req -in '" + name +
            ".csr' -CA ca.pem -CAkey ca.key -CAcreateserial -out '" + name +
            ".pem' -days 2 2>/dev/null") == 0;
}

service::TlsPem FarmTest::ServerPem() {
  const std::string ca = CertDir() + "/ca";
  service::TlsPem p;
  p.cert_chain = Slurp(FarmServerCertPath(ca));
  p.private_key = Slurp(FarmServerKeyPath(ca));
  p.root_certs = Slurp(FarmCaPath(ca));
  return p;
}

service::TlsPem FarmTest::ClientPem(const std::string& name, const std::string& ca) {
  // The server is always verified against the farm CA, whoever signed the
  // client's pair.
  service::TlsPem p = FarmClientPem(CertDir() + "/" + ca, name);
  p.root_certs = Slurp(FarmCaPath(CertDir() + "/ca"));
  return p;
}

void MtlsFarmTest::SetUpTestSuite() {
  FarmTest::SetUpTestSuite();
  if (::testing::Test::HasFatalFailure()) return;
  EnsureCertificates();
}

}  // namespace farm::testing
