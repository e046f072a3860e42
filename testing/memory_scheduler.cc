#include "testing/memory_scheduler.h"

#include "absl/strings/str_cat.h"
#include "scheduler/server.h"

namespace farm::testing {

namespace pb = ::iommufarm::v1;

// AgentService as the scheduler serves it, with FailNext()'s faults in front.
class MemoryScheduler::FaultyAgentService final : public pb::AgentService::CallbackService {
 public:
  explicit FaultyAgentService(MemoryScheduler* owner) : owner_(owner) {}

#define FARM_FORWARD(Rpc, Request, Response)                                          \
  grpc::ServerUnaryReactor* Rpc(grpc::CallbackServerContext* ctx, const Request* req, \
                                Response* resp) override {                            \
    if (grpc::ServerUnaryReactor* failed = Injected(ctx, #Rpc)) return failed;        \
    Seen(*req);                                                                       \
    return owner_->agent_grpc_.Rpc(ctx, req, resp);                                   \
  }
  FARM_FORWARD(Register, pb::RegisterRequest, pb::RegisterResponse)
  FARM_FORWARD(Heartbeat, pb::HeartbeatRequest, pb::HeartbeatResponse)
  FARM_FORWARD(LeaseJobs, pb::LeaseJobsRequest, pb::LeaseJobsResponse)
  FARM_FORWARD(ReportResult, pb::ReportResultRequest, pb::ReportResultResponse)
  FARM_FORWARD(ReportResults, pb::ReportResultsRequest, pb::ReportResultsResponse)
  FARM_FORWARD(ReportFailure, pb::ReportFailureRequest, pb::ReportFailureResponse)
  FARM_FORWARD(ReleaseLeases, pb::ReleaseLeasesRequest, pb::ReleaseLeasesResponse)
#undef FARM_FORWARD

 private:
  grpc::ServerUnaryReactor* Injected(grpc::CallbackServerContext* ctx, const char* rpc) {
    grpc::StatusCode code;
    {
      absl::MutexLock lock(&owner_->mu_);
      auto it = owner_->faults_.find(rpc);
      if (it == owner_->faults_.end() || it->second.left == 0) return nullptr;
      --it->second.left;
      code = it->second.code;
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(code, absl::StrCat("injected by the test for ", rpc)));
    return reactor;
  }
  // Records what a test asks about (the size of each ReportResults call).
  template <typename Request>
  void Seen(const Request&) {}
  void Seen(const pb::ReportResultsRequest& req) {
    absl::MutexLock lock(&owner_->mu_);
    owner_->report_batches_.push_back(req.results_size());
  }

  MemoryScheduler* const owner_;
};

MemoryScheduler::MemoryScheduler(MemorySchedulerOptions options)
    : store_(std::move(options.clock)),
      metrics_(registry_.registry()),
      jobs_(&store_, &store_, &store_, &metrics_, options.config),
      agents_(&store_, &metrics_, options.config),
      reaper_(&store_, &metrics_, options.config),
      authz_(scheduler::AuthzOptions{}, nullptr, &store_),
      pool_(4),
      job_grpc_(&jobs_, &pool_, &authz_, store_.events()),
      agent_grpc_(&agents_, &pool_, &authz_),
      faulty_(std::make_unique<FaultyAgentService>(this)) {}

absl::StatusOr<std::unique_ptr<MemoryScheduler>> MemoryScheduler::Start(
    MemorySchedulerOptions options) {
  std::unique_ptr<MemoryScheduler> s(new MemoryScheduler(std::move(options)));
  if (absl::Status st = s->Serve("127.0.0.1:0"); !st.ok()) return st;
  s->address_ = absl::StrCat("127.0.0.1:", s->port_);
  return s;
}

MemoryScheduler::~MemoryScheduler() {
  pool_.BeginStopping();
  Stop();
  pool_.Stop();
}

absl::Status MemoryScheduler::Serve(const std::string& listen) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&job_grpc_);
  builder.RegisterService(faulty_.get());
  // The deployed server's limits (scheduler/server.h).
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(scheduler::ServerOptions{}.max_receive_message_bytes));
  builder.SetMaxSendMessageSize(64 << 20);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  port_ = port;
  return absl::OkStatus();
}

void MemoryScheduler::Stop(absl::Duration deadline) {
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
  server_.reset();
}

absl::Status MemoryScheduler::Restart() {
  if (server_ != nullptr) return absl::OkStatus();
  return Serve(address_);
}

void MemoryScheduler::FailNext(const std::string& rpc, int n, grpc::StatusCode code) {
  absl::MutexLock lock(&mu_);
  faults_[rpc] = Fault{n, code};
}

std::vector<int> MemoryScheduler::report_batches() const {
  absl::MutexLock lock(&mu_);
  return report_batches_;
}

}  // namespace farm::testing
