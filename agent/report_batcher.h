// farm::agent::ReportBatcher: sends finished jobs' results to the scheduler,
// several in one ReportResults call when they finish close together.
//
// A result goes out at once when no report call is in flight; otherwise it
// joins the next call with every other result ready by then, oldest first,
// at most kMaxBatch results / kMaxBytes per call (one oversized result still
// goes, alone). So a lone job waits for nothing and a busy agent sends one
// call per round trip. Each result is settled from its own item of the
// reply; a failed call fails every result in it, and the caller retries its
// own result (results are idempotent per (job, attempt)). A ReportResults
// call answered UNIMPLEMENTED -- a scheduler without the method, or one
// whose gRPC layer could not parse the request -- is resent as ReportResult
// calls, one per result, and so are the next results up to kSingleReports
// in all; then batching is tried again, so one bad call does not cost the
// agent its batching for the rest of its life.
//
// Thread-safety: Send() is called concurrently by the agent's workers; the
// worker that finds no call in flight sends the next call for everyone
// waiting. Ownership: the stub is not owned and must outlive the batcher.
#ifndef AGENT_REPORT_BATCHER_H_
#define AGENT_REPORT_BATCHER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"

namespace farm::agent {

class ReportBatcher {
 public:
  // Bounds of one ReportResults call (the scheduler takes up to 1000 items
  // and 64 MiB messages; these keep one call's memory and retry cost small).
  static constexpr int kMaxBatch = 64;
  static constexpr size_t kMaxBytes = 8 << 20;
  // Results sent one by one after ReportResults answered UNIMPLEMENTED.
  static constexpr int kSingleReports = 8;

  // This result's answer: the call's status if the call failed, else its
  // item's error (or OK) and response.
  using Answer = std::pair<grpc::Status, iommufarm::v1::ReportResultResponse>;

  ReportBatcher(iommufarm::v1::AgentService::StubInterface* stub, client::ClientOptions options,
                absl::Duration rpc_timeout)
      : stub_(stub), options_(std::move(options)), rpc_timeout_(rpc_timeout) {}
  ReportBatcher(const ReportBatcher&) = delete;
  ReportBatcher& operator=(const ReportBatcher&) = delete;

  // Sends `request` in the next report call and returns its answer; nullopt
  // if `cancel` fired before the result went out. `request` is borrowed for
  // the call (swapped into it and back, never copied).
  std::optional<Answer> Send(iommufarm::v1::ReportResultRequest& request, CancelToken& cancel)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ReportResults / ReportResult RPCs sent so far.
  int64_t calls() const { return calls_.load(); }

 private:
  // One result waiting for, or inside, a report call.
  struct Outgoing {
    iommufarm::v1::ReportResultRequest* request;
    size_t bytes = 0;
    bool taken = false;  // in the call being sent
    bool done = false;   // status / response hold the answer
    grpc::Status status;
    iommufarm::v1::ReportResultResponse response;
  };

  // Takes the results ready now for one call (at least one, within bounds).
  std::vector<Outgoing*> TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One call for `batch`; fills each item's status and response.
  void SendBatch(const std::vector<Outgoing*>& batch) ABSL_LOCKS_EXCLUDED(mu_);
  // ReportResults for `batch`; false if the scheduler does not have it.
  bool SendResults(const std::vector<Outgoing*>& batch);

  iommufarm::v1::AgentService::StubInterface* const stub_;
  const client::ClientOptions options_;
  const absl::Duration rpc_timeout_;

  absl::Mutex mu_;
  absl::CondVar done_cv_;  // a report call returned
  std::deque<Outgoing*> outbox_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  // Results still to send one by one (ReportResults answered UNIMPLEMENTED).
  std::atomic<int> single_reports_left_{0};
  std::atomic<int64_t> calls_{0};
};

}  // namespace farm::agent

#endif  // AGENT_REPORT_BATCHER_H_
