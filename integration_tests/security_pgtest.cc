// The secure control plane over real TLS on loopback: farm-scheduler
// in-process with mTLS (certificates made by scripts/farm-certs) and a real
// PostgreSQL. Bad transports never reach a handler; every RPC x every role
// gets allowed / PERMISSION_DENIED / UNAUTHENTICATED as the table says; an
// agent cannot touch another agent's lease or take over its name; revoked
// tokens stop working; insecure exposure and a second server on a used port
// are refused at start; user strings are escaped in the log.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/metrics/metrics.h"
#include "lib/service/tls.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "scheduler/authz.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"
#include "testing/service_harness.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;
using scheduler::Role;

const char* const kCatalog = R"(
catalog: sec-test
commits:
  - id: v5.10
    subject: "Linux 5.10"
  - id: v5.11
    subject: "Linux 5.11"
)";

const char* const kSpec = R"(
name: sec-test
catalog: sec-test
platform: intel-vtd-2s12c
commits: v5.10..v5.11
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.01}
repeats: 2
executor: emulator
)";

std::string Slurp(const std::string& path) { return testing::ReadFileOrEmpty(path); }

int Sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Who may call what, written out by hand (not read from RpcRoleTable(),
// which is what the test holds to it). Admin may call everything; an agent
// only the AgentService; reads are for viewers, submitters and admins.
struct Expected {
  const char* rpc;
  std::set<Role> allowed;
};
const Role kV = Role::kViewer, kS = Role::kSubmitter, kA = Role::kAgent, kD = Role::kAdmin;
const std::vector<Expected>& ExpectedRoles() {
  static const std::vector<Expected>* const kTable = new std::vector<Expected>{
      {"JobService/SubmitMatrix", {kS, kD}},
      {"JobService/GetMatrix", {kV, kS, kD}},
      {"JobService/ListMatrices", {kV, kS, kD}},
      {"JobService/WatchMatrix", {kV, kS, kD}},
      {"JobService/CancelMatrix", {kS, kD}},
      {"JobService/GetResults", {kV, kS, kD}},
      {"JobService/GetRawOutput", {kV, kS, kD}},
      {"JobService/ListAgents", {kV, kS, kD}},
      {"JobService/ListCatalogs", {kV, kS, kD}},
      {"JobService/GetCatalog", {kV, kS, kD}},
      {"JobService/LoadCatalog", {kD}},
      {"JobService/ImportGitCatalog", {kD}},
      {"AgentService/Register", {kA, kD}},
      {"AgentService/Heartbeat", {kA, kD}},
      {"AgentService/LeaseJobs", {kA, kD}},
      {"AgentService/ReportResult", {kA, kD}},
      {"AgentService/ReportResults", {kA, kD}},
      {"AgentService/ReportFailure", {kA, kD}},
      {"AgentService/ReleaseLeases", {kA, kD}},
      {"AnalysisService/ListRegressions", {kV, kS, kD}},
      {"AnalysisService/GetRegression", {kV, kS, kD}},
      {"AnalysisService/GetBisect", {kV, kS, kD}},
      {"AnalysisService/UpdateRegression", {kS, kD}},
      {"AccessService/CreateToken", {kD}},
      {"AccessService/ListTokens", {kD}},
      {"AccessService/RevokeToken", {kD}},
      {"RetentionService/Prune", {kD}},
  };
  return *kTable;
}

class SecurityPgTest : public testing::MtlsFarmTest {
 protected:
  // Loads the catalog and submits the spec (as admin); returns the matrix id.
  int64_t SubmitMatrix() {
    LoadCatalog(kCatalog);
    return Submit(kSpec, Client("admin1"));
  }
};

TEST_F(SecurityPgTest, BadTransportsNeverReachAHandler) {
  StartServer();
  pb::ListMatricesRequest req;
  const std::string method = "/iommufarm.v1.JobService/ListMatrices";
  // TLS without a client certificate.
  client::ClientOptions no_cert = Client("");
  EXPECT_EQ(Call(no_cert, method, req).error_code(), grpc::StatusCode::UNAVAILABLE);
  // A client certificate from another CA.
  client::ClientOptions foreign = Client("");
  foreign.tls = ClientPem("mallory", "other");
  EXPECT_EQ(Call(foreign, method, req).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Plaintext, with the admin token even.
  client::ClientOptions plain;
  plain.server = server_->address();
  plain.token = "bootstrap-s3cret";
  EXPECT_EQ(Call(plain, method, req).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server_->authorizer().calls(), 0);
  // The same call with the farm's certificate reaches the handler.
  grpc::Status ok = Call(Client("viewer1"), method, req);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(server_->authorizer().calls(), 1);
}

TEST_F(SecurityPgTest, EveryRpcEveryRole) {
  StartServer();
  SubmitMatrix();
  // Token principals of each role (names distinct from the certificates').
  std::map<Role, std::string> tokens = {
      {Role::kViewer, CreateToken("tok-viewer", "viewer")},
      {Role::kSubmitter, CreateToken("tok-submitter", "submitter")},
      {Role::kAgent, CreateToken("tok-agent", "agent")},
      {Role::kAdmin, CreateToken("tok-admin", "admin")},
  };
  // The agent principals register first so that their agent calls carry their
  // own agent id.
  const int64_t agent_cert_id = Register(Client("agent-a"), "agent-a").agent_id();
  const int64_t agent_tok_id =
      Register(Client("norole", tokens[Role::kAgent]), "tok-agent").agent_id();

  struct Caller {
    std::string label;
    client::ClientOptions options;
    Role role;  // kNone: UNAUTHENTICATED expected when `unknown_token`
    bool unknown_token = false;
    std::string agent_name = "";
    int64_t agent_id = 0;
  };
  std::vector<Caller> callers = {
      {.label = "cert viewer", .options = Client("viewer1"), .role = Role::kViewer},
      {.label = "cert submitter", .options = Client("submitter1"), .role = Role::kSubmitter},
      {.label = "cert agent",
       .options = Client("agent-a"),
       .role = Role::kAgent,
       .agent_name = "agent-a",
       .agent_id = agent_cert_id},
      {.label = "cert admin",
       .options = Client("admin1"),
       .role = Role::kAdmin,
       .agent_name = "admin-reg",
       .agent_id = agent_cert_id},
      {.label = "cert without role", .options = Client("norole"), .role = Role::kNone},
      {.label = "unknown token",
       .options = Client("admin1", "farm_not-a-token"),
       .role = Role::kNone,
       .unknown_token = true},
      {.label = "token viewer",
       .options = Client("norole", tokens[Role::kViewer]),
       .role = Role::kViewer},
      {.label = "token submitter",
       .options = Client("norole", tokens[Role::kSubmitter]),
       .role = Role::kSubmitter},
      {.label = "token agent",
       .options = Client("norole", tokens[Role::kAgent]),
       .role = Role::kAgent,
       .agent_name = "tok-agent",
       .agent_id = agent_tok_id},
      {.label = "token admin",
       .options = Client("norole", tokens[Role::kAdmin]),
       .role = Role::kAdmin,
       .agent_name = "admin-reg2",
       .agent_id = agent_tok_id},
  };

  const std::map<std::string, std::string> service_of = {
      {"JobService", "iommufarm.v1.JobService"},
      {"AgentService", "iommufarm.v1.AgentService"},
      {"AnalysisService", "iommufarm.v1.AnalysisService"},
      {"AccessService", "iommufarm.v1.AccessService"},
      {"RetentionService", "iommufarm.v1.RetentionService"},
  };
  // The expectation covers every method of every service, once.
  std::set<std::string> expected_rpcs;
  for (const Expected& e : ExpectedRoles()) {
    EXPECT_TRUE(expected_rpcs.insert(e.rpc).second) << e.rpc << " twice";
  }
  int methods = 0;
  for (const auto& [short_name, full] : service_of) {
    const google::protobuf::ServiceDescriptor* sd =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(full);
    ASSERT_NE(sd, nullptr) << full;
    for (int i = 0; i < sd->method_count(); ++i, ++methods) {
      EXPECT_EQ(expected_rpcs.count(short_name + "/" + sd->method(i)->name()), 1)
          << short_name << "/" << sd->method(i)->name() << " has no row in ExpectedRoles()";
    }
  }
  EXPECT_EQ(methods, static_cast<int>(expected_rpcs.size()));

  int allowed = 0, denied = 0, unauthenticated = 0;
  for (const Expected& rule : ExpectedRoles()) {
    const std::string rpc(rule.rpc);
    const std::string service = rpc.substr(0, rpc.find('/'));
    const std::string method_name = rpc.substr(rpc.find('/') + 1);
    const std::string method = "/" + service_of.at(service) + "/" + method_name;
    for (const Caller& c : callers) {
      // Requests a permitted caller may make: agents with their own name and id.
      std::unique_ptr<google::protobuf::Message> req;
      const google::protobuf::MethodDescriptor* md =
          google::protobuf::DescriptorPool::generated_pool()
              ->FindServiceByName(service_of.at(service))
              ->FindMethodByName(method_name);
      req.reset(google::protobuf::MessageFactory::generated_factory()
                    ->GetPrototype(md->input_type())
                    ->New());
      if (method_name == "Register") {
        static_cast<pb::RegisterRequest*>(req.get())->set_name(c.agent_name.empty() ? "someone"
                                                                                    : c.agent_name);
      } else if (method_name == "RevokeToken") {
        static_cast<pb::RevokeTokenRequest*>(req.get())->set_name("no-such-token");
      } else if (service == "AgentService") {
        const google::protobuf::FieldDescriptor* f = md->input_type()->FindFieldByName("agent_id");
        if (f != nullptr) req->GetReflection()->SetInt64(req.get(), f, c.agent_id);
      }
      const grpc::Status st = Call(c.options, method, *req);
      if (c.unknown_token) {
        EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << rpc << " by " << c.label << ": " << st.error_message();
        ++unauthenticated;
      } else if (rule.allowed.count(c.role) > 0) {
        EXPECT_NE(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << rpc << " by " << c.label << ": " << st.error_message();
        EXPECT_NE(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << rpc << " by " << c.label << ": " << st.error_message();
        ++allowed;
      } else {
        EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << rpc << " by " << c.label << ": " << st.error_message();
        ++denied;
      }
    }
  }
  std::cout << "rpc x caller: " << allowed << " allowed, " << denied << " denied, "
            << unauthenticated << " unauthenticated\n";
  EXPECT_GT(allowed, 0);
  EXPECT_GT(denied, 0);
}

// gRPC prints this subject "CN=evil,O=admin,O=viewer": a role read from
// that string would be admin. Read from the certificate's fields it names
// nobody, and a CN with a comma is refused outright.
TEST_F(SecurityPgTest, ACertificateSpelledToLookLikeAdminIsRefused) {
  ASSERT_TRUE(MakeClientCertificate("evil", "/O=viewer/CN=evil,O=admin"));
  ASSERT_TRUE(MakeClientCertificate("twoorgs", "/CN=twoorgs/O=viewer/O=admin"));
  StartServer();
  pb::CreateTokenRequest req;
  req.set_name("minted");
  req.set_role("admin");
  for (const char* cert : {"evil", "twoorgs"}) {
    const grpc::Status st = Call(Client(cert), "/iommufarm.v1.AccessService/CreateToken", req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << cert << ": " << st.error_message();
    const grpc::Status list =
        Call(Client(cert), "/iommufarm.v1.JobService/ListMatrices", pb::ListMatricesRequest());
    EXPECT_EQ(list.error_code(), grpc::StatusCode::UNAUTHENTICATED) << cert;
  }
  EXPECT_EQ(Sql("SELECT count(*) FROM api_tokens"), 0);
}

// One stale lease (another agent's) in an mTLS agent's heartbeat costs it
// nothing: its own lease is extended, the other answered as revoked, and
// the other agent's lease is untouched.
TEST_F(SecurityPgTest, AStaleLeaseInAHeartbeatDoesNotCostTheOthers) {
  StartServer();
  ASSERT_GT(SubmitMatrix(), 0);
  client::ClientOptions a = Client("agent-a"), b = Client("agent-b");
  const pb::RegisterResponse ra = Register(a, "agent-a");
  const pb::RegisterResponse rb = Register(b, "agent-b");
  auto lease_one = [](const client::ClientOptions& c, const pb::RegisterResponse& r) {
    auto stub = pb::AgentService::NewStub(client::MakeChannel(c));
    pb::LeaseJobsRequest lr;
    lr.set_agent_id(r.agent_id());
    lr.set_session(r.session());
    lr.set_max_jobs(1);
    pb::LeaseJobsResponse out;
    auto ctx = client::NewContext(c, absl::Seconds(10));
    EXPECT_TRUE(stub->LeaseJobs(ctx.get(), lr, &out).ok());
    EXPECT_EQ(out.leases_size(), 1);
    return out.leases_size() > 0 ? out.leases(0).lease() : pb::LeaseRef();
  };
  const pb::LeaseRef mine = lease_one(b, rb), theirs = lease_one(a, ra);
  ASSERT_NE(mine.job_id(), theirs.job_id());
  auto heartbeat = [](const client::ClientOptions& c, const pb::RegisterResponse& r,
                      const std::vector<pb::LeaseRef>& leases, pb::HeartbeatResponse* out) {
    auto stub = pb::AgentService::NewStub(client::MakeChannel(c));
    pb::HeartbeatRequest hr;
    hr.set_agent_id(r.agent_id());
    hr.set_session(r.session());
    for (const pb::LeaseRef& l : leases) *hr.add_leases() = l;
    auto ctx = client::NewContext(c, absl::Seconds(10));
    return stub->Heartbeat(ctx.get(), hr, out);
  };
  pb::HeartbeatResponse hb;
  const grpc::Status st = heartbeat(b, rb, {mine, theirs}, &hb);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(hb.extended_size(), 1);
  EXPECT_EQ(hb.extended(0).job_id(), mine.job_id());
  ASSERT_EQ(hb.revoked_size(), 1);
  EXPECT_EQ(hb.revoked(0).job_id(), theirs.job_id());
  pb::HeartbeatResponse ha;
  ASSERT_TRUE(heartbeat(a, ra, {theirs}, &ha).ok());
  ASSERT_EQ(ha.extended_size(), 1);
  EXPECT_EQ(ha.extended(0).job_id(), theirs.job_id());
}

// With every main-pool connection stuck behind a lock, an agent that
// authenticates by token still renews its lease: the token and its agent id
// are looked up through the lease connections.
TEST_F(SecurityPgTest, HeartbeatsAuthenticateThroughTheLeasePath) {
  StartServer(kBootstrapToken, [](scheduler::ServerOptions& o) {
    o.db_connections = 2;
    o.worker_threads = 4;
    o.token_cache_ttl = absl::ZeroDuration();  // every call looks its token up
  });
  const std::string token = CreateToken("tok-agent", "agent");
  client::ClientOptions agent = Client("norole", token);
  const pb::RegisterResponse r = Register(agent, "tok-agent");
  pqxx::connection c(db_uri_);
  pqxx::work lock(c);
  lock.exec("LOCK TABLE matrices IN ACCESS EXCLUSIVE MODE");
  std::vector<std::future<grpc::Status>> stuck;
  for (int i = 0; i < 4; ++i) {
    stuck.push_back(std::async(std::launch::async, [&] {
      return Call(Client("viewer1"), "/iommufarm.v1.JobService/ListMatrices",
                  pb::ListMatricesRequest());
    }));
  }
  absl::SleepFor(absl::Milliseconds(800));  // the main pool's two connections wait on the lock
  pb::HeartbeatRequest hr;
  hr.set_agent_id(r.agent_id());
  hr.set_session(r.session());
  auto stub = pb::AgentService::NewStub(client::MakeChannel(agent));
  pb::HeartbeatResponse resp;
  auto ctx = client::NewContext(agent, absl::Seconds(5));
  const grpc::Status st = stub->Heartbeat(ctx.get(), hr, &resp);
  EXPECT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  lock.commit();
  for (auto& f : stuck) EXPECT_TRUE(f.get().ok());
}

TEST_F(SecurityPgTest, AgentCannotTouchAnotherAgentsLease) {
  StartServer();
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  client::ClientOptions a = Client("agent-a"), b = Client("agent-b");
  const pb::RegisterResponse ra = Register(a, "agent-a");
  const pb::RegisterResponse rb = Register(b, "agent-b");
  auto stub_a = pb::AgentService::NewStub(client::MakeChannel(a));
  auto stub_b = pb::AgentService::NewStub(client::MakeChannel(b));
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(ra.agent_id());
  lr.set_session(ra.session());
  lr.set_max_jobs(1);
  pb::LeaseJobsResponse leases;
  auto ctx = client::NewContext(a, absl::Seconds(10));
  ASSERT_TRUE(stub_a->LeaseJobs(ctx.get(), lr, &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);
  const pb::LeaseRef lease = leases.leases(0).lease();

  // B with its own agent id and A's lease, and B posing as A's agent id.
  for (int64_t agent_id : {rb.agent_id(), ra.agent_id()}) {
    pb::ReportResultRequest rr;
    rr.set_agent_id(agent_id);
    *rr.mutable_lease() = lease;
    rr.add_samples()->set_metric("x");
    pb::ReportResultResponse rresp;
    auto c1 = client::NewContext(b, absl::Seconds(10));
    EXPECT_EQ(stub_b->ReportResult(c1.get(), rr, &rresp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    pb::ReportFailureRequest fr;
    fr.set_agent_id(agent_id);
    *fr.mutable_lease() = lease;
    fr.set_reason("not mine");
    pb::ReportFailureResponse fresp;
    auto c2 = client::NewContext(b, absl::Seconds(10));
    EXPECT_EQ(stub_b->ReportFailure(c2.get(), fr, &fresp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    pb::HeartbeatRequest hr;
    hr.set_agent_id(agent_id);
    hr.set_session(agent_id == rb.agent_id() ? rb.session() : ra.session());
    *hr.add_leases() = lease;
    pb::HeartbeatResponse hresp;
    auto c3 = client::NewContext(b, absl::Seconds(10));
    const grpc::Status hst = stub_b->Heartbeat(c3.get(), hr, &hresp);
    if (agent_id == ra.agent_id()) {
      EXPECT_EQ(hst.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    } else {
      // Its own heartbeat: A's lease comes back revoked in its slot.
      ASSERT_TRUE(hst.ok()) << hst.error_message();
      EXPECT_EQ(hresp.extended_size(), 0);
      ASSERT_EQ(hresp.revoked_size(), 1);
      EXPECT_EQ(hresp.revoked(0).job_id(), lease.job_id());
    }
  }
  // Batched: B's own agent id passes, A's lease is refused in its slot by
  // the queue's report statement; posing as A's agent id refuses the call.
  {
    pb::ReportResultsRequest batch;
    pb::ReportResultRequest* item = batch.add_results();
    item->set_agent_id(rb.agent_id());
    *item->mutable_lease() = lease;
    item->add_samples()->set_metric("x");
    pb::ReportResultsResponse bresp;
    auto c5 = client::NewContext(b, absl::Seconds(10));
    grpc::Status bst = stub_b->ReportResults(c5.get(), batch, &bresp);
    ASSERT_TRUE(bst.ok()) << bst.error_message();
    ASSERT_EQ(bresp.results_size(), 1);
    EXPECT_EQ(bresp.results(0).error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << bresp.results(0).error_message();
    EXPECT_FALSE(bresp.results(0).accepted());
    EXPECT_NE(bresp.results(0).error_message().find("agent-b"), std::string::npos)
        << bresp.results(0).error_message();
    item->set_agent_id(ra.agent_id());
    auto c6 = client::NewContext(b, absl::Seconds(10));
    EXPECT_EQ(stub_b->ReportResults(c6.get(), batch, &bresp).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Sql("SELECT count(*) FROM results"), 0);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE state = 2 AND lease_agent = " +
                std::to_string(ra.agent_id())),
            1);
  // A itself still reports its lease.
  pb::ReportResultRequest mine;
  mine.set_agent_id(ra.agent_id());
  *mine.mutable_lease() = lease;
  mine.add_samples()->set_metric("x");
  pb::ReportResultResponse ok;
  auto c4 = client::NewContext(a, absl::Seconds(10));
  grpc::Status st = stub_a->ReportResult(c4.get(), mine, &ok);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(ok.accepted());
  EXPECT_EQ(Sql("SELECT count(*) FROM results"), 1);
}

// A matrix records the principal that submitted it: the certificate's CN,
// or the API token's name.
TEST_F(SecurityPgTest, MatrixRecordsItsSubmitter) {
  StartServer();
  const int64_t by_cert = SubmitMatrix();
  ASSERT_GT(by_cert, 0);
  const std::string token = CreateToken("ci-bot", "submitter");
  ASSERT_FALSE(token.empty());
  client::ClientOptions bot = Client("norole", token);
  auto jobs = pb::JobService::NewStub(client::MakeChannel(bot));
  pb::SubmitMatrixRequest sm;
  sm.set_spec_yaml(kSpec);
  sm.set_idempotency_key("ci-bot-1");
  pb::SubmitMatrixResponse sr;
  auto c1 = client::NewContext(bot, absl::Seconds(10));
  grpc::Status st = jobs->SubmitMatrix(c1.get(), sm, &sr);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(sr.matrix().submitted_by(), "ci-bot");
  pb::ListMatricesRequest lr;
  pb::ListMatricesResponse list;
  auto c2 = client::NewContext(bot, absl::Seconds(10));
  st = jobs->ListMatrices(c2.get(), lr, &list);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::map<int64_t, std::string> by;
  for (const pb::Matrix& m : list.matrices()) by[m.id()] = m.submitted_by();
  EXPECT_EQ(by[by_cert], "admin1");
  EXPECT_EQ(by[sr.matrix().id()], "ci-bot");
}

// A cancel by another submitter is refused naming the caller and changes
// nothing; the owner cancels its own and an admin anyone's, the analyzer's
// matrices included.
TEST_F(SecurityPgTest, OnlyTheOwnerOrAnAdminCancelsAMatrix) {
  StartServer();
  const int64_t mine = SubmitMatrix();  // admin1's
  const client::ClientOptions submitter = Client("submitter1");
  const client::ClientOptions analyzer = Client("norole", CreateToken("analyzer", "submitter"));
  const int64_t own = Submit(kSpec, submitter);
  const int64_t analyzers = Submit(kSpec, analyzer);
  ASSERT_GT(mine, 0);
  ASSERT_GT(own, 0);
  ASSERT_GT(analyzers, 0);
  const std::string method = "/iommufarm.v1.JobService/CancelMatrix";
  auto cancel = [&](const client::ClientOptions& c, int64_t id) {
    pb::CancelMatrixRequest req;
    req.set_matrix_id(id);
    return Call(c, method, req);
  };
  auto cancelled_jobs = [&](int64_t id) {
    return Sql("SELECT count(*) FROM jobs WHERE state = 5 AND matrix_id = " + std::to_string(id));
  };
  for (int64_t other : {mine, analyzers}) {
    const grpc::Status st = cancel(submitter, other);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    EXPECT_NE(st.error_message().find("\"submitter1\""), std::string::npos) << st.error_message();
    EXPECT_EQ(cancelled_jobs(other), 0);
  }
  grpc::Status st = cancel(submitter, own);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(cancelled_jobs(own), 0);
  st = cancel(Client("admin1"), analyzers);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(cancelled_jobs(analyzers), 0);
}

// A lab host's principal runs jobs and nothing else: it cannot submit,
// cancel, triage or read; and a submitter cannot act as an agent.
TEST_F(SecurityPgTest, AgentsAndSubmittersStayInTheirLanes) {
  StartServer();
  const int64_t matrix = SubmitMatrix();
  ASSERT_GT(matrix, 0);
  for (const client::ClientOptions& agent :
       {Client("agent-a"), Client("norole", CreateToken("tok-agent", "agent"))}) {
    pb::SubmitMatrixRequest sm;
    sm.set_spec_yaml(kSpec);
    grpc::Status st = Call(agent, "/iommufarm.v1.JobService/SubmitMatrix", sm);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    pb::CancelMatrixRequest cm;
    cm.set_matrix_id(matrix);
    st = Call(agent, "/iommufarm.v1.JobService/CancelMatrix", cm);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    pb::GetMatrixRequest gm;
    gm.set_matrix_id(matrix);
    st = Call(agent, "/iommufarm.v1.JobService/GetMatrix", gm);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  }
  EXPECT_EQ(Sql("SELECT count(*) FROM matrices"), 1);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE state = 5"), 0);
  grpc::Status st;
  Register(Client("submitter1"), "submitter1", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(Sql("SELECT count(*) FROM agents"), 0);
}

// Triage belongs to the submitter of the matrix the regression was found
// in, and to admins.
TEST_F(SecurityPgTest, OnlyTheOwnerOrAnAdminTriagesARegression) {
  StartServer();
  LoadCatalog(kCatalog);
  const client::ClientOptions owner = Client("submitter1");
  const int64_t matrix = Submit(kSpec, owner);
  ASSERT_GT(matrix, 0);
  // A regression found in that matrix, recorded as the analyzer records it.
  storage::PgPool pool(storage::PgPoolOptions{db_uri_, 1, 5});
  std::unique_ptr<storage::AnalyzerStore> store = storage::NewPgAnalyzerStore(&pool);
  storage::NewRegression found;
  found.finding.platform = "intel-vtd-2s12c";
  found.finding.workload = "dma-map-bench";
  found.finding.metric = "throughput";
  found.finding.mode = "strict";
  found.finding.last_good = "v5.10";
  found.finding.first_bad_index = 1;
  found.finding.first_bad = "v5.11";
  found.finding.magnitude = -0.2;
  found.series_key = "sec-test/key";
  found.bisect_state_json = "{}";
  ASSERT_TRUE(store->RecordAnalysis(matrix, "sec-test", {found}, {}).ok());
  const int64_t regression = Sql("SELECT id FROM regressions");
  ASSERT_GT(regression, 0);

  const std::string method = "/iommufarm.v1.AnalysisService/UpdateRegression";
  auto triage = [&](const client::ClientOptions& c, pb::RegressionState state) {
    pb::UpdateRegressionRequest req;
    req.set_regression_id(regression);
    req.set_state(state);
    return Call(c, method, req);
  };
  auto state = [&] {
    return Sql("SELECT state FROM regressions WHERE id = " + std::to_string(regression));
  };
  const int64_t before = state();
  const client::ClientOptions other = Client("norole", CreateToken("ci", "submitter"));
  grpc::Status st = triage(other, pb::REGRESSION_STATE_IGNORED);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("\"ci\""), std::string::npos) << st.error_message();
  EXPECT_EQ(state(), before);
  st = triage(owner, pb::REGRESSION_STATE_ACKNOWLEDGED);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(state(), static_cast<int64_t>(pb::REGRESSION_STATE_ACKNOWLEDGED));
  st = triage(Client("admin1"), pb::REGRESSION_STATE_FIXED);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(state(), static_cast<int64_t>(pb::REGRESSION_STATE_FIXED));
}

TEST_F(SecurityPgTest, NameTakeoverRefused) {
  StartServer();
  SubmitMatrix();
  client::ClientOptions a = Client("agent-a");
  const pb::RegisterResponse ra = Register(a, "agent-a");
  auto stub_a = pb::AgentService::NewStub(client::MakeChannel(a));
  pb::LeaseJobsRequest lr;
  lr.set_agent_id(ra.agent_id());
  lr.set_session(ra.session());
  lr.set_max_jobs(1);
  pb::LeaseJobsResponse leases;
  auto ctx = client::NewContext(a, absl::Seconds(10));
  ASSERT_TRUE(stub_a->LeaseJobs(ctx.get(), lr, &leases).ok());
  ASSERT_EQ(leases.leases_size(), 1);

  // Another agent certificate, and an admin, try A's name.
  grpc::Status st;
  Register(Client("agent-b"), "agent-a", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  Register(Client("admin1"), "agent-a", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  // A's session and lease are intact.
  EXPECT_EQ(Sql("SELECT count(*) FROM agents WHERE name = 'agent-a' AND session = '" +
                ra.session() + "'"),
            1);
  EXPECT_EQ(Sql("SELECT count(*) FROM jobs WHERE state = 2 AND lease_agent = " +
                std::to_string(ra.agent_id())),
            1);
  // A re-registers itself fine.
  Register(a, "agent-a", &st);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(SecurityPgTest, RevokedTokenFailsOnItsNextCall) {
  StartServer();
  const std::string token = CreateToken("short-lived", "viewer");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(Sql("SELECT count(*) FROM api_tokens WHERE token_sha256 = '" + token + "'"), 0)
      << "the secret itself must not be stored";
  client::ClientOptions c = Client("norole", token);
  pb::ListMatricesRequest req;
  const std::string method = "/iommufarm.v1.JobService/ListMatrices";
  grpc::Status st = Call(c, method, req);
  EXPECT_TRUE(st.ok()) << st.error_message();
  pb::RevokeTokenRequest rv;
  rv.set_name("short-lived");
  grpc::Status revoked = Call(Client("admin1"), "/iommufarm.v1.AccessService/RevokeToken", rv);
  EXPECT_TRUE(revoked.ok()) << revoked.error_message();
  EXPECT_EQ(Call(c, method, req).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// farmctl against the mTLS scheduler with each TLS mistake a user makes: the
// hint names the TLS setup, not a missing scheduler; a closed port still
// asks whether one listens.
TEST_F(SecurityPgTest, FarmctlNamesAFailedTlsHandshake) {
  StartServer();
  const std::string addr = "127.0.0.1:" + std::to_string(server_->port());
  const std::string ca = CertDir() + "/ca", other = CertDir() + "/other";
  const auto farmctl = [&](const std::string& name, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {FARMCTL_BIN, "--server", addr};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("status");
    const std::string out = CertDir() + "/farmctl-" + name + ".out";
    testing::ChildProcess p(argv, out);
    const int st = p.Wait();
    return std::pair{WIFEXITED(st) ? WEXITSTATUS(st) : -1, Slurp(out)};
  };
  const std::string cert = ca + "/viewer1.pem", key = ca + "/viewer1.key";
  const std::vector<std::string> good = {"--tls-ca", ca + "/ca.pem", "--tls-cert",
                                         cert,       "--tls-key",    key};
  auto [rc, text] = farmctl("ok", good);
  ASSERT_EQ(rc, 0) << text;
  struct Case {
    std::string name;
    std::vector<std::string> flags;
    std::string hint;
  };
  const std::vector<Case> cases = {
      {"plaintext", {}, "a farm with TLS refuses plaintext clients"},
      {"wrong-ca",
       {"--tls-ca", other + "/ca.pem", "--tls-cert", cert, "--tls-key", key},
       "the TLS handshake with " + addr + " failed"},
      {"no-client-cert", {"--tls-ca", ca + "/ca.pem"}, "it wants a client certificate of its CA"},
      {"foreign-client-cert",
       {"--tls-ca", ca + "/ca.pem", "--tls-cert", other + "/mallory.pem", "--tls-key",
        other + "/mallory.key"},
       "it wants a client certificate of its CA"},
  };
  for (const Case& c : cases) {
    std::tie(rc, text) = farmctl(c.name, c.flags);
    EXPECT_EQ(rc, 1) << c.name << ": " << text;
    EXPECT_NE(text.find("UNAVAILABLE"), std::string::npos) << c.name << ": " << text;
    EXPECT_NE(text.find(c.hint), std::string::npos) << c.name << ": " << text;
    EXPECT_EQ(text.find("is a farm-scheduler listening"), std::string::npos)
        << c.name << ": " << text;
  }
  server_->Shutdown(absl::Seconds(2));
  server_.reset();
  std::tie(rc, text) = farmctl("closed", good);
  EXPECT_EQ(rc, 1) << text;
  EXPECT_NE(text.find("is a farm-scheduler listening on " + addr), std::string::npos) << text;
}

TEST_F(SecurityPgTest, InsecureNonLoopbackStartRefused) {
  scheduler::ServerOptions o;
  o.listen = "0.0.0.0:0";
  o.db_uri = db_uri_;
  auto s = scheduler::SchedulerServer::Start(o, &registry_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  // The binary: exit status 2 and a message saying how to fix it.
  const std::string out = CertDir() + "/insecure.out";
  testing::ChildProcess p(
      {FARM_SCHEDULER_BIN, "--listen", "0.0.0.0:0", "--db", db_uri_, "--metrics", "127.0.0.1:0"},
      out);
  const int status = p.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string err = Slurp(out);
  EXPECT_NE(err.find("--tls-cert"), std::string::npos) << err;
  EXPECT_NE(err.find("--insecure"), std::string::npos) << err;
  // TLS without any authentication is refused off loopback too.
  o.tls.cert_chain = Slurp(CertDir() + "/ca/server.pem");
  o.tls.private_key = Slurp(CertDir() + "/ca/server.key");
  auto t = scheduler::SchedulerServer::Start(o, &registry_);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--tls-ca"), std::string::npos) << t.status();
}

TEST_F(SecurityPgTest, SecondSchedulerOnTheSamePortFails) {
  StartServer();
  scheduler::ServerOptions o;
  o.listen = "127.0.0.1:" + std::to_string(server_->port());
  o.db_uri = db_uri_;
  metrics::MetricsRegistry registry;
  auto second = scheduler::SchedulerServer::Start(o, &registry);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen"), std::string::npos) << second.status();
}

TEST_F(SecurityPgTest, ReflectionOnlyWhereEveryCallerHasAPrincipal) {
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  pb::ListMatricesRequest empty;  // any bytes: only UNIMPLEMENTED or not matters
  StartServer();                  // mTLS: every connection has a certificate principal
  EXPECT_NE(Call(Client("viewer1"), method, empty).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  server_->Shutdown(absl::Seconds(2));
  // A token-only farm cannot check a token on reflection: not served.
  scheduler::ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.db_uri = db_uri_;
  o.token = "bootstrap-s3cret";
  metrics::MetricsRegistry registry;
  auto s = scheduler::SchedulerServer::Start(o, &registry);
  ASSERT_TRUE(s.ok()) << s.status();
  client::ClientOptions plain;
  plain.server = (*s)->address();
  plain.token = "bootstrap-s3cret";
  EXPECT_EQ(Call(plain, method, empty).error_code(), grpc::StatusCode::UNIMPLEMENTED);
  (*s)->Shutdown(absl::Seconds(2));
}

// A name that reaches the log cannot forge a log line: an agent's name is
// refused outright (host-name characters only), and so is a matrix's with a
// control character (names are printed on terminals and in logs).
TEST_F(SecurityPgTest, ANewlineInANameNeverForgesALogLine) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("sec-test", sink));
  StartServer();
  grpc::Status registered;
  Register(Client("admin1"), "evil\n[error] forged agent", &registered);
  EXPECT_EQ(registered.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << registered.error_message();
  LoadCatalog(kCatalog);
  std::string spec = kSpec;
  spec.replace(spec.find("name: sec-test"), 14, "name: \"evil\\n[error] forged matrix\"");
  auto jobs = pb::JobService::NewStub(client::MakeChannel(Client("admin1")));
  pb::SubmitMatrixRequest submit;
  submit.set_spec_yaml(spec);
  pb::SubmitMatrixResponse submitted;
  auto ctx = client::NewContext(Client("admin1"), absl::Seconds(10));
  const grpc::Status st = jobs->SubmitMatrix(ctx.get(), submit, &submitted);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("name: contains a control character"), std::string::npos)
      << st.error_message();
  server_->Shutdown(absl::Seconds(2));
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  EXPECT_EQ(text.find("evil\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace farm
