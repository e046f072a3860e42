// The scheduler's service logic as plain C++ classes: JobService (users),
// AgentService (agents) and AnalysisService (regression triage). They take
// and return the API's protobuf messages and absl::Status; they know
// nothing of gRPC (grpc_services.h adapts them) and hold no authority in
// memory: every decision is made by the repositories in SQL, so any number
// of schedulers may serve one database.
//
// Contract: thread-safe; the stores and metrics passed in are not owned and
// must outlive the service. Errors follow repositories.h: kUnavailable
// (database away: retry), kNotFound, kFailedPrecondition (stale lease),
// kInvalidArgument (bad request, message names the field),
// kResourceExhausted (caps), kPermissionDenied (the caller does not own
// what it would change, roles.h CheckOwner). The adapters have checked the
// caller's role already; a method that takes a Principal checks ownership.
#ifndef SCHEDULER_SCHEDULER_SERVICE_H_
#define SCHEDULER_SCHEDULER_SERVICE_H_

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/base/background_loop.h"
#include "lib/metrics/metrics.h"
#include "lib/service/reconnect.h"
#include "lib/spec/matrix_spec.h"
#include "lib/storage/repositories.h"
#include "scheduler/kernel_builds.h"
#include "scheduler/roles.h"
#include "scheduler/spec.h"

namespace farm::scheduler {

struct SchedulerConfig {
  absl::Duration lease_ttl = absl::Seconds(30);
  // Cap on a heartbeat's hold_for (a lease held through a kexec reboot);
  // zero: no holds.
  absl::Duration max_boot_timeout = absl::Minutes(15);
  int max_attempts = 3;
  spec::SpecLimits limits;
  storage::RetryPolicy retry;
  // What a lease claim selects on: real runs only on matching hosts, never
  // more than the agent's free slots.
  storage::ClaimRules claim{.match_real_run_hosts = true, .within_free_slots = true};
  // A real or build job that no registered agent can run fails after this
  // long (JobQueue::FailBlockedJobs) instead of waiting forever; submit
  // names such jobs at once.
  absl::Duration unrunnable_wait = absl::Hours(1);
  // The kernel configs of lab hosts (farm-scheduler --lab-hosts
  // kernel_config), by agent name: a real matrix on a host's platform that
  // names no kernel_config is built with its host's (kernel_builds.h
  // LabKernelConfig).
  std::map<std::string, pb::KernelConfig> lab_kernel_configs;
  // Heartbeat interval handed to agents.
  absl::Duration heartbeat_interval() const { return lease_ttl / 3; }
  // An agent counts as connected with a heartbeat this recent.
  absl::Duration liveness() const { return lease_ttl; }
  // How long the reaper expires nothing after a start or a pause: one TTL,
  // plus the longest an agent's channel waits before it tries again
  // (lib/service/reconnect.h) and one heartbeat interval for its next
  // heartbeat to come.
  absl::Duration reaper_grace() const {
    return lease_ttl + service::kReconnectBound + heartbeat_interval();
  }
};

class JobService final {
 public:
  JobService(storage::CatalogStore* catalogs, storage::MatrixStore* matrices,
             storage::JobQueue* queue, metrics::SchedulerMetrics* metrics,
             const SchedulerConfig& config)
      : catalogs_(catalogs),
        matrices_(matrices),
        queue_(queue),
        metrics_(metrics),
        config_(config) {}
  JobService(const JobService&) = delete;
  JobService& operator=(const JobService&) = delete;

  absl::StatusOr<pb::SubmitMatrixResponse> SubmitMatrix(const pb::SubmitMatrixRequest& req,
                                                        const std::string& submitted_by);
  absl::StatusOr<pb::Matrix> GetMatrix(const pb::GetMatrixRequest& req);
  absl::StatusOr<pb::ListMatricesResponse> ListMatrices(const pb::ListMatricesRequest& req);
  // Only the matrix's submitter or an admin may cancel it.
  absl::StatusOr<pb::CancelMatrixResponse> CancelMatrix(const pb::CancelMatrixRequest& req,
                                                        const Principal& who);
  // One page of GetResults (jobs with id > after_job_id): at most `limit`
  // results and, with raw output, at most max_raw_bytes of it (but at least
  // one result); see storage::MatrixStore::ListResults.
  absl::StatusOr<std::vector<pb::Result>> ResultsPage(int64_t matrix_id, int64_t after_job_id,
                                                      int limit, bool include_raw,
                                                      int64_t max_raw_bytes = kResultsPageRawBytes);
  // The raw-output bound of a GetResults page. The scheduler holds a few
  // copies of a page (rows, messages, the write in flight), so the bound
  // keeps it small: scheduler_memory_pgtest measures 24 MiB of growth over
  // 40 x 4 MiB raw outputs with this bound, 40 MiB with 8 MiB, 324 MiB
  // with none.
  static constexpr int64_t kResultsPageRawBytes = 4 << 20;
  // One GetRawOutput chunk: characters [from_char, from_char +
  // kRawChunkChars) of result (job_id, attempt)'s raw output.
  absl::StatusOr<storage::RawOutputSlice> RawOutputChunk(int64_t job_id, int attempt,
                                                         int64_t from_char);
  // At most 4 bytes a character in UTF-8: a chunk is at most 1 MiB.
  static constexpr int64_t kRawChunkChars = 256 << 10;
  absl::StatusOr<pb::ListAgentsResponse> ListAgents(const pb::ListAgentsRequest& req);
  absl::StatusOr<pb::ListCatalogsResponse> ListCatalogs(const pb::ListCatalogsRequest& req);
  absl::StatusOr<pb::Catalog> GetCatalog(const pb::GetCatalogRequest& req);
  absl::StatusOr<pb::LoadCatalogResponse> LoadCatalog(const pb::LoadCatalogRequest& req);
  absl::StatusOr<pb::ImportGitCatalogResponse> ImportGitCatalog(
      const pb::ImportGitCatalogRequest& req);

  // Loads every *.yaml in `dir` whose catalog is not in the database yet
  // (source "builtin" for files of the default dir, else "file:<name>").
  // Returns the names loaded; files that fail to parse are errors.
  absl::StatusOr<std::vector<std::string>> LoadCatalogDir(const std::string& dir,
                                                          const std::string& source_prefix);

 private:
  // Every registered agent, connected or not.
  absl::StatusOr<std::vector<pb::Agent>> AllAgents();
  // A real matrix without a kernel_config on a lab host's platform takes
  // the host's (config_.lab_kernel_configs, kernel_builds.h
  // LabKernelConfig) before its jobs are made, and the response says so.
  absl::Status ApplyLabKernelConfig(spec::MatrixSpec* spec, pb::SubmitMatrixResponse* resp);
  // The kernel builds nm's real jobs wait for (kernel_builds.h): live build
  // jobs of another matrix are shared, missing ones become a build matrix;
  // sets the jobs' waits_for_job and the response's build fields and
  // warnings. A dry run only says what would be built.
  // `spec`'s patch goes with the build job of its try commit, its kernel
  // config with every build job.
  absl::Status AttachKernelBuilds(const pb::SubmitMatrixRequest& req, const spec::MatrixSpec& spec,
                                  storage::NewMatrix* nm, pb::SubmitMatrixResponse* resp);
  absl::StatusOr<pb::Matrix> CreateBuildMatrix(const pb::SubmitMatrixRequest& req,
                                               const storage::NewMatrix& nm,
                                               const std::vector<proto::BuildKey>& keys,
                                               const spec::MatrixSpec& spec);

  storage::CatalogStore* const catalogs_;
  storage::MatrixStore* const matrices_;
  storage::JobQueue* const queue_;
  metrics::SchedulerMetrics* const metrics_;
  const SchedulerConfig config_;
  const std::function<void(const storage::UnbootedLease&)> on_unbooted_;
};

class AgentService final {
 public:
  AgentService(storage::JobQueue* queue, metrics::SchedulerMetrics* metrics,
               const SchedulerConfig& config, storage::JobPredicate eligible = {})
      : queue_(queue), metrics_(metrics), config_(config), eligible_(std::move(eligible)) {}
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  absl::StatusOr<pb::RegisterResponse> Register(const pb::RegisterRequest& req);
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& req);
  // `caller_gone` (may be empty) is asked before claiming and after: leases
  // taken for a caller that left go back to the queue unspent (ReleaseLeases)
  // and the call answers kCancelled.
  absl::StatusOr<pb::LeaseJobsResponse> LeaseJobs(const pb::LeaseJobsRequest& req,
                                                  const std::function<bool()>& caller_gone = {});
  absl::StatusOr<pb::ReportResultResponse> ReportResult(const pb::ReportResultRequest& req);
  // Each item as ReportResult would answer it (its error in the item); the
  // call fails only when the database does or the batch is too large.
  absl::StatusOr<pb::ReportResultsResponse> ReportResults(const pb::ReportResultsRequest& req);
  absl::StatusOr<pb::ReportFailureResponse> ReportFailure(const pb::ReportFailureRequest& req);
  absl::StatusOr<pb::ReleaseLeasesResponse> ReleaseLeases(const pb::ReleaseLeasesRequest& req);

  static constexpr int kMaxLeaseBatch = 1000;
  static constexpr int kMaxReportBatch = 1000;

 private:
  storage::JobQueue* const queue_;
  metrics::SchedulerMetrics* const metrics_;
  const SchedulerConfig config_;
  const std::function<void(const storage::UnbootedLease&)> on_unbooted_;
  // An extra filter over the claimed jobs (config_.claim already matches
  // real runs to hosts inside the claim); empty = none.
  const storage::JobPredicate eligible_;
};

class AnalysisService final {
 public:
  // `matrices` names a regression's owner: the submitter of its matrix.
  AnalysisService(storage::AnalysisStore* store, storage::MatrixStore* matrices)
      : store_(store), matrices_(matrices) {}
  AnalysisService(const AnalysisService&) = delete;
  AnalysisService& operator=(const AnalysisService&) = delete;

  absl::StatusOr<pb::ListRegressionsResponse> ListRegressions(
      const pb::ListRegressionsRequest& req);
  absl::StatusOr<pb::Regression> GetRegression(const pb::GetRegressionRequest& req);
  absl::StatusOr<pb::Bisect> GetBisect(const pb::GetBisectRequest& req);
  // Triage: only the owner of the matrix the regression was found in
  // (Regression.matrix_id) or an admin.
  absl::StatusOr<pb::Regression> UpdateRegression(const pb::UpdateRegressionRequest& req,
                                                  const Principal& who);

 private:
  // OK for an admin or the submitter of r's matrix.
  absl::Status CheckRegressionOwner(const pb::Regression& r, const Principal& who);

  storage::AnalysisStore* const store_;
  storage::MatrixStore* const matrices_;
};

// Periodic housekeeping, one thread (a BackgroundLoop): requeues expired
// leases (every ttl/4, clamped to 100 ms .. 5 s) and refreshes the
// queue/agent gauges. Safe to run in every scheduler at once (the reap is
// SKIP LOCKED and idempotent). Start() and Stop() from any thread but the
// reaper's; RunOnce() from any thread.
//
// Grace: the loop expires nothing for config.reaper_grace() (a TTL, an
// agent's bounded reconnect wait and a heartbeat interval) after Start() and
// after a pause of this process (a gap on the boot-time clock, which counts
// SIGSTOP and suspend, well beyond the loop's own period). Agents could not
// reach a stopped or not-yet-started scheduler, so their leases ran out
// through no fault of theirs; the grace lets every healthy agent reconnect
// and heartbeat before anything is reaped. RunOnce() reaps regardless.
class Reaper final {
 public:
  // `on_unbooted` (may be empty) gets every lease a pass failed because its
  // host did not come back from a reboot into the job's kernel, on the
  // reaper's thread: it must return at once (LabRecovery::Recover queues).
  Reaper(storage::JobQueue* queue, metrics::SchedulerMetrics* metrics,
         const SchedulerConfig& config,
         std::function<void(const storage::UnbootedLease&)> on_unbooted = {});
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper();  // stops the thread

  void Start();
  void Stop() { loop_.Stop(); }
  // One pass (reap until nothing is left, refresh gauges), on the caller's thread.
  absl::StatusOr<storage::ReapOutcome> RunOnce();
  // Passes of the loop that skipped reaping for grace (start or pause).
  int64_t grace_passes() const { return grace_passes_.load(); }
  int64_t pauses_detected() const { return pauses_detected_.load(); }

 private:
  // One pass of the loop; returns the pause before the next.
  absl::Duration Tick();
  // The gauges alone (no reaping).
  void RefreshGauges();

  storage::JobQueue* const queue_;
  metrics::SchedulerMetrics* const metrics_;
  const SchedulerConfig config_;
  const std::function<void(const storage::UnbootedLease&)> on_unbooted_;
  // Loop-thread state (Start() resets it before the thread runs).
  absl::Duration grace_until_;  // boot-time clock
  absl::Duration last_pass_end_;
  absl::Duration last_pause_;
  std::atomic<int64_t> grace_passes_{0};
  std::atomic<int64_t> pauses_detected_{0};
  base::BackgroundLoop loop_;  // last: stopped before the fields it uses go
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_SCHEDULER_SERVICE_H_
