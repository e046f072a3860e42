// A spec's problems through the real transport: the scheduler's gRPC adapter
// (JobServiceGrpc over the in-memory store, in-process on a loopback port)
// answers farmctl's own client code (cli::Commands). Every problem reaches
// farmctl's user whole: more than gRPC's default 8 KiB of trailer, and more
// than a line.
#include <memory>
#include <sstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "lib/metrics/metrics.h"
#include "lib/spec/field_errors.h"
#include "lib/spec/spec_check.h"
#include "lib/storage/memory/memory_store.h"
#include "scheduler/authz.h"
#include "scheduler/grpc_services.h"
#include "scheduler/scheduler_service.h"
#include "scheduler/worker_pool.h"

namespace farm {
namespace {

class SubmitErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&grpc_jobs_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override {
    pool_.BeginStopping();
    server_->Shutdown();
    pool_.Stop();
  }

  storage::MemoryStore store_;
  metrics::MetricsRegistry registry_;
  metrics::SchedulerMetrics metrics_{registry_.registry()};
  scheduler::JobService jobs_{&store_, &store_, &store_, &metrics_, scheduler::SchedulerConfig{}};
  scheduler::WorkerPool pool_{2};
  scheduler::Authorizer authz_{scheduler::AuthzOptions{}, nullptr, &store_};
  scheduler::JobServiceGrpc grpc_jobs_{&jobs_, &pool_, &authz_};
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(SubmitErrorsTest, EveryProblemOfASpecReachesFarmctlWhole) {
  std::string yaml =
      "name: many-problems\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\n"
      "commits: v5.10..v5.12\nmodes: [off, off]\nworkloads:\n  - name: dma-map-bench\n"
      "set:\n";
  for (int i = 0; i < 200; ++i) {
    absl::StrAppend(&yaml, "  key.", std::string(200, 'k'), i, ": [", i, "]\n");
  }
  const absl::Status local = spec::ParseMatrixSpec(yaml, {}).status();
  ASSERT_EQ(local.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_GT(local.message().size(), 8u * 1024);  // past gRPC's default trailer size
  ASSERT_LT(local.message().size(), scheduler::kMaxClientMessageBytes);

  std::ostringstream out, err;
  client::ClientOptions options;
  options.server = absl::StrCat("127.0.0.1:", port_);
  cli::Commands commands(options, out, err);
  const absl::StatusOr<iommufarm::v1::SubmitMatrixResponse> answer =
      commands.SubmitSpec(yaml, /*dry_run=*/true);
  ASSERT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument) << answer.status();
  EXPECT_EQ(answer.status().message(), local.message());
  // The mapping's problems come first (the set's keys), then a count of the
  // rest: the other keys and the duplicate mode.
  EXPECT_EQ(answer.status().message().rfind("set.key.", 0), 0u);
  EXPECT_NE(answer.status().message().find(absl::StrCat(
                "\n... and ", 201 - spec::FieldErrors::kMaxReported, " more problems")),
            std::string::npos);
}

}  // namespace
}  // namespace farm
