#include "testing/mtls_farm.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <future>

#include <grpcpp/generic/generic_stub.h>
#include <pqxx/pqxx>

#include "lib/base/file.h"
#include "testing/farm_certs.h"

namespace farm::testing {
namespace {

namespace pb = ::iommufarm::v1;

int Sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Slurp(const std::string& path) { return base::ReadFileOrEmpty(path); }

}  // namespace

PostgresInstance* MtlsFarmTest::pg_ = nullptr;
std::string* MtlsFarmTest::dir_ = nullptr;

void MtlsFarmTest::SetUpTestSuite() {
  auto pg = PostgresInstance::Start();
  ASSERT_TRUE(pg.ok()) << pg.status();
  pg_ = pg->release();
  std::string tmpl = HarnessTempBase() + "/farm-mtls-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  dir_ = new std::string(tmpl);
  const std::string ca = *dir_ + "/ca";
  ASSERT_TRUE(MakeFarmCa(ca).ok());
  for (const auto& [name, role] : {std::pair{"viewer1", "viewer"},
                                   {"submitter1", "submitter"},
                                   {"agent-a", "agent"},
                                   {"agent-b", "agent"},
                                   {"admin1", "admin"}}) {
    absl::Status st = MakeFarmClientCertificate(ca, name, role);
    ASSERT_TRUE(st.ok()) << st;
  }
  // farm-certs only writes the four roles: a role-less certificate by hand.
  ASSERT_TRUE(MakeClientCertificate("norole", "/CN=norole"));
  ASSERT_TRUE(MakeFarmCa(*dir_ + "/other").ok());
  ASSERT_TRUE(MakeFarmClientCertificate(*dir_ + "/other", "mallory", "admin").ok());
}

void MtlsFarmTest::TearDownTestSuite() {
  delete pg_;
  pg_ = nullptr;
  if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
  delete dir_;
  dir_ = nullptr;
}

void MtlsFarmTest::SetUp() {
  static int n = 0;
  auto uri = pg_->CreateDatabase("mtls_" + std::to_string(++n));
  ASSERT_TRUE(uri.ok()) << uri.status();
  db_uri_ = *uri;
}

void MtlsFarmTest::TearDown() {
  if (server_) server_->Shutdown(absl::Seconds(2));
}

bool MtlsFarmTest::MakeClientCertificate(const std::string& name, const std::string& subject) {
  const std::string ca = *dir_ + "/ca";
  return Sh("cd " + ca + " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 " +
            "-nodes -keyout '" + name + ".key' -out '" + name + ".csr' -subj '" + subject +
            "' 2>/dev/null && openssl x509 -req -in '" + name +
            ".csr' -CA ca.pem -CAkey ca.key -CAcreateserial -out '" + name +
            ".pem' -days 2 2>/dev/null") == 0;
}

service::TlsPem MtlsFarmTest::ServerPem() {
  const std::string ca = *dir_ + "/ca";
  service::TlsPem p;
  p.cert_chain = Slurp(FarmServerCertPath(ca));
  p.private_key = Slurp(FarmServerKeyPath(ca));
  p.root_certs = Slurp(FarmCaPath(ca));
  return p;
}

service::TlsPem MtlsFarmTest::ClientPem(const std::string& name, const std::string& ca) {
  // The server is always verified against the farm CA, whoever signed the
  // client's pair.
  service::TlsPem p = FarmClientPem(*dir_ + "/" + ca, name);
  p.root_certs = Slurp(FarmCaPath(*dir_ + "/ca"));
  return p;
}

void MtlsFarmTest::StartServer(const std::string& admin_token,
                               const std::function<void(scheduler::ServerOptions&)>& adjust) {
  scheduler::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_uri = db_uri_;
  o.token = admin_token;
  o.tls = ServerPem();
  o.config.lease_ttl = absl::Seconds(10);
  o.db_connections = 4;
  o.worker_threads = 4;
  if (adjust) adjust(o);
  auto s = scheduler::SchedulerServer::Start(o, &registry_);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
}

client::ClientOptions MtlsFarmTest::Client(const std::string& cert,
                                           const std::string& token) const {
  client::ClientOptions c;
  c.server = server_->address();
  c.tls = ClientPem(cert);
  c.token = token;
  return c;
}

grpc::Status MtlsFarmTest::Call(const client::ClientOptions& c, const std::string& method,
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

std::string MtlsFarmTest::CreateToken(const std::string& name, const std::string& role) {
  pb::CreateTokenRequest req;
  req.set_name(name);
  req.set_role(role);
  pb::CreateTokenResponse resp;
  client::ClientOptions admin = Client("admin1", kBootstrapToken);
  auto stub = pb::AccessService::NewStub(client::MakeChannel(admin));
  auto ctx = client::NewContext(admin, absl::Seconds(10));
  grpc::Status st = stub->CreateToken(ctx.get(), req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.token();
}

void MtlsFarmTest::LoadCatalog(const std::string& catalog_yaml) {
  client::ClientOptions admin = Client("admin1");
  auto jobs = pb::JobService::NewStub(client::MakeChannel(admin));
  pb::LoadCatalogRequest lc;
  lc.set_yaml(catalog_yaml);
  pb::LoadCatalogResponse lr;
  auto ctx = client::NewContext(admin, absl::Seconds(10));
  grpc::Status st = jobs->LoadCatalog(ctx.get(), lc, &lr);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

int64_t MtlsFarmTest::Submit(const std::string& spec_yaml, const client::ClientOptions& submitter) {
  auto jobs = pb::JobService::NewStub(client::MakeChannel(submitter));
  pb::SubmitMatrixRequest sm;
  sm.set_spec_yaml(spec_yaml);
  pb::SubmitMatrixResponse sr;
  auto ctx = client::NewContext(submitter, absl::Seconds(10));
  grpc::Status st = jobs->SubmitMatrix(ctx.get(), sm, &sr);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return st.ok() ? sr.matrix().id() : 0;
}

pb::RegisterResponse MtlsFarmTest::Register(const client::ClientOptions& c, const std::string& name,
                                            grpc::Status* status) {
  auto agents = pb::AgentService::NewStub(client::MakeChannel(c));
  pb::RegisterRequest req;
  req.set_name(name);
  req.set_slots(1);
  req.add_capabilities()->set_name("emulator");
  pb::RegisterResponse resp;
  auto ctx = client::NewContext(c, absl::Seconds(10));
  grpc::Status st = agents->Register(ctx.get(), req, &resp);
  if (status != nullptr) {
    *status = st;
  } else {
    EXPECT_TRUE(st.ok()) << name << ": " << st.error_message();
  }
  return resp;
}

int64_t MtlsFarmTest::Sql(const std::string& query) const {
  pqxx::connection c(db_uri_);
  pqxx::work w(c);
  return w.exec1(query)[0].as<int64_t>();
}

}  // namespace farm::testing
