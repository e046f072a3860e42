#include "agent/report_batcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/base/check.h"
#include "lib/client/retry.h"

namespace farm::agent {

namespace pb = ::iommufarm::v1;

std::optional<ReportBatcher::Answer> ReportBatcher::Send(pb::ReportResultRequest& request,
                                                         CancelToken& cancel) {
  Outgoing me;
  me.request = &request;
  me.bytes = request.ByteSizeLong();
  absl::MutexLock lock(&mu_);
  outbox_.push_back(&me);
  while (!me.done) {
    if (!sending_) {
      std::vector<Outgoing*> batch = TakeBatchLocked();
      sending_ = true;
      mu_.Unlock();
      SendBatch(batch);
      mu_.Lock();
      for (Outgoing* o : batch) o->done = true;
      sending_ = false;
      done_cv_.SignalAll();
      continue;
    }
    if (!me.taken && cancel.cancelled()) {
      outbox_.erase(std::find(outbox_.begin(), outbox_.end(), &me));
      return std::nullopt;
    }
    // The timeout only bounds how late a cancellation is noticed.
    done_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
  }
  return std::make_pair(std::move(me.status), std::move(me.response));
}

std::vector<ReportBatcher::Outgoing*> ReportBatcher::TakeBatchLocked() {
  FARM_DCHECK(!outbox_.empty(), "a sender always has its own result waiting");
  std::vector<Outgoing*> batch;
  size_t bytes = 0;
  while (!outbox_.empty() && static_cast<int>(batch.size()) < kMaxBatch &&
         (batch.empty() || bytes + outbox_.front()->bytes <= kMaxBytes)) {
    bytes += outbox_.front()->bytes;
    outbox_.front()->taken = true;
    batch.push_back(outbox_.front());
    outbox_.pop_front();
  }
  return batch;
}

void ReportBatcher::SendBatch(const std::vector<Outgoing*>& batch) {
  if (single_reports_left_.load() <= 0 && SendResults(batch)) return;
  for (Outgoing* o : batch) {
    single_reports_left_.fetch_sub(1);
    auto ctx = client::NewContext(options_, rpc_timeout_);
    calls_.fetch_add(1);
    o->status = stub_->ReportResult(ctx.get(), *o->request, &o->response);
  }
}

bool ReportBatcher::SendResults(const std::vector<Outgoing*>& batch) {
  pb::ReportResultsRequest request;
  // Swapped in and back out: a result's raw output is not copied.
  for (Outgoing* o : batch) request.add_results()->Swap(o->request);
  pb::ReportResultsResponse response;
  auto ctx = client::NewContext(options_, rpc_timeout_);
  calls_.fetch_add(1);
  grpc::Status status = stub_->ReportResults(ctx.get(), request, &response);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->request->Swap(request.mutable_results(static_cast<int>(i)));
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // gRPC answers UNIMPLEMENTED both for a method the server lacks and for
    // a request it cannot parse; either way the results go singly for a while.
    spdlog::warn("ReportResults: {}; the next {} results go one by one", client::Describe(status),
                 std::max<int>(kSingleReports, static_cast<int>(batch.size())));
    single_reports_left_.store(std::max<int>(kSingleReports, static_cast<int>(batch.size())));
    return false;
  }
  if (status.ok() && response.results_size() != static_cast<int>(batch.size())) {
    status = grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("ReportResults answered ", response.results_size(),
                                       " items for ", batch.size(), " results"));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Outgoing& o = *batch[i];
    if (!status.ok()) {
      o.status = status;
      continue;
    }
    pb::ReportResultResponse& item = *response.mutable_results(static_cast<int>(i));
    o.status =
        item.error_code() == 0
            ? grpc::Status::OK
            : grpc::Status(static_cast<grpc::StatusCode>(item.error_code()), item.error_message());
    o.response = std::move(item);
  }
  return true;
}

}  // namespace farm::agent
