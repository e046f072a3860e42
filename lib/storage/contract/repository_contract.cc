// The repository contract cases (repository_contract.h): what every
// implementation of lib/storage/repositories.h must do, from the lease
// fencing to the analysis reads. Each case gets a fresh, empty database.
#include "lib/storage/contract/repository_contract.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "lib/storage/contract/test_rows.h"
#include "lib/storage/run_eligibility.h"
#include "proto/failure_marks.h"

namespace farm::storage {

void RepositoryContractTest::SetUp() {
  backend_ = GetParam().make();
  ASSERT_NE(backend_, nullptr);
}

int64_t RepositoryContractTest::MakeMatrix(int n, int max_attempts, int prio, pb::Executor executor,
                                           pb::JobKind kind) {
  const NewMatrix m = testrows::Matrix(n, max_attempts, prio, executor, kind);
  auto c = matrices().CreateMatrix(m);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->matrix.id() : 0;
}

pb::RegisterResponse RepositoryContractTest::Register(const std::string& name,
                                                      const std::string& cap) {
  const pb::RegisterRequest r = testrows::Registration(name, cap);
  auto resp = queue().RegisterAgent(r, retry_);
  EXPECT_TRUE(resp.ok()) << resp.status();
  return resp.ok() ? *resp : pb::RegisterResponse();
}

std::vector<pb::JobLease> RepositoryContractTest::Lease(const pb::RegisterResponse& a, int n,
                                                        absl::Duration ttl) {
  auto l = queue().LeaseJobs(a.agent_id(), a.session(), n, ttl, {});
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : std::vector<pb::JobLease>{};
}

absl::StatusOr<ReportOutcome> RepositoryContractTest::Report(const pb::RegisterResponse& a,
                                                             const pb::LeaseRef& l, double value) {
  pb::ReportResultRequest r;
  r.set_agent_id(a.agent_id());
  *r.mutable_lease() = l;
  auto* s = r.add_samples();
  s->set_metric("throughput");
  s->set_value(value);
  s->set_unit("MB/s");
  r.set_raw_output("{\"raw\": true}");
  r.set_raw_format("emu-json");
  r.set_tool_version("emu 0.1");
  r.mutable_host()->set_kernel_release("6.1");
  r.mutable_wall_time()->set_nanos(5000);
  return queue().ReportResult(r);
}

absl::StatusOr<int> RepositoryContractTest::Release(const pb::RegisterResponse& a,
                                                    const pb::LeaseRef& l) {
  pb::ReleaseLeasesRequest rel;
  rel.set_agent_id(a.agent_id());
  rel.set_session(a.session());
  *rel.add_leases() = l;
  return queue().ReleaseLeases(rel);
}

absl::StatusOr<pb::HeartbeatResponse> RepositoryContractTest::HoldThroughReboot(
    const pb::RegisterResponse& a, const pb::LeaseRef& l) {
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = l;
  hb.mutable_hold_for()->set_seconds(60);
  return queue().Heartbeat(hb, absl::Seconds(30), absl::Minutes(5));
}

absl::StatusOr<pb::JobState> RepositoryContractTest::Fail(const pb::RegisterResponse& a,
                                                          const pb::LeaseRef& l,
                                                          const std::string& reason,
                                                          bool retryable) {
  pb::ReportFailureRequest f;
  f.set_agent_id(a.agent_id());
  *f.mutable_lease() = l;
  f.set_reason(reason);
  f.set_retryable(retryable);
  return queue().ReportFailure(f, retry_);
}

namespace {

// Loads of one new catalog at once: with replace each succeeds and one of
// them is what is stored; without, the others are told it exists. Never a
// database error.
TEST_P(RepositoryContractTest, ConcurrentLoadsOfANewCatalogNeverFail) {
  constexpr int kRounds = 12;
  constexpr int kLoaders = 4;
  for (int round = 0; round < kRounds; ++round) {
    for (bool replace : {true, false}) {
      const std::string name = absl::StrCat("race-", round, replace ? "-r" : "-n");
      std::vector<absl::Status> got(kLoaders);
      std::vector<std::thread> loaders;
      for (int i = 0; i < kLoaders; ++i) {
        loaders.emplace_back([&, i] {
          pb::Catalog c;
          c.set_name(name);
          c.set_source(absl::StrCat("loader ", i));
          for (int k = 0; k <= i; ++k) c.add_commits()->set_id(absl::StrCat("v", k));
          got[i] = catalogs().PutCatalog(c, replace).status();
        });
      }
      for (std::thread& t : loaders) t.join();
      int ok = 0;
      for (const absl::Status& st : got) {
        if (st.ok()) {
          ++ok;
        } else {
          EXPECT_FALSE(replace) << name << ": " << st;
          EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << name << ": " << st;
          EXPECT_EQ(st.message(),
                    absl::StrCat("catalog \"", name,
                                 "\" already exists (load with replace to overwrite)"));
        }
      }
      EXPECT_EQ(ok, replace ? kLoaders : 1) << name;
      auto stored = catalogs().GetCatalog(name);
      ASSERT_TRUE(stored.ok()) << stored.status();
      const int loader = std::stoi(stored->source().substr(7));
      EXPECT_EQ(stored->commits_size(), loader + 1) << name << " mixes two loads";
    }
  }
}

TEST_P(RepositoryContractTest, LeaseReportIdempotentAndStale) {
  const int64_t m = MakeMatrix(3);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].lease().attempt(), 1);
  EXPECT_LT(ls[0].job().id(), ls[1].job().id());
  EXPECT_EQ(ls[0].job().workload().params().at("tests"), "write,read");
  EXPECT_EQ(ls[0].job().seed(), 0xfedcba9876543210ULL);
  EXPECT_EQ(ls[0].job().state(), pb::JOB_STATE_LEASED);
  EXPECT_FALSE(ls[0].lease().lease_token().empty());
  EXPECT_NE(ls[0].lease().lease_token(), ls[1].lease().lease_token());

  auto r = Report(a, ls[0].lease());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted);
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(r->executor, pb::EXECUTOR_EMULATOR);
  // The same report again (a retry after a lost answer): duplicate, not stored twice.
  r = Report(a, ls[0].lease(), 2.0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->duplicate);
  // A wrong token for the other job: stale.
  pb::LeaseRef bad = ls[1].lease();
  bad.set_lease_token("00000000-0000-0000-0000-000000000000");
  r = Report(a, bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();

  auto results = matrices().ListResults(m, 0, 100, true);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pb::Result& res = (*results)[0];
  EXPECT_EQ(res.job_id(), ls[0].job().id());
  ASSERT_EQ(res.samples_size(), 1);
  EXPECT_EQ(res.samples(0).value(), 1.0);
  EXPECT_EQ(res.raw_output(), "{\"raw\": true}");
  EXPECT_EQ(res.agent(), "a1");
  EXPECT_EQ(res.host().kernel_release(), "6.1");
  EXPECT_EQ(res.job().state(), pb::JOB_STATE_SUCCEEDED);

  auto mat = matrices().GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->counts().total(), 3);
  EXPECT_EQ(mat->counts().succeeded(), 1);
  EXPECT_EQ(mat->counts().leased(), 1);
  EXPECT_EQ(mat->counts().queued(), 1);
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_RUNNING);
}

// Only the agent holding a lease reports it: another agent (or an agent id
// nobody has) with the right (job, attempt, token) is kPermissionDenied, not
// stale, and nothing is stored; the holder then reports as usual, and a
// retry of that accepted report by another agent is refused too.
TEST_P(RepositoryContractTest, ReportOfALeaseAnotherAgentHoldsIsDenied) {
  const int64_t m = MakeMatrix(2);
  pb::RegisterResponse a = Register("holder");
  pb::RegisterResponse b = Register("other");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  for (const pb::RegisterResponse& who : {b, pb::RegisterResponse()}) {
    pb::RegisterResponse caller = who;
    if (caller.agent_id() == 0) caller.set_agent_id(999999);
    auto r = Report(caller, ls[0].lease());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
    auto f = Fail(caller, ls[1].lease(), "not mine", true);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kPermissionDenied) << f.status();
  }
  pb::ReportResultRequest item;
  item.set_agent_id(b.agent_id());
  *item.mutable_lease() = ls[0].lease();
  item.add_samples()->set_metric("throughput");
  auto batch = queue().ReportResults({item});
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 1u);
  EXPECT_EQ((*batch)[0].status().code(), absl::StatusCode::kPermissionDenied)
      << (*batch)[0].status();
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_LEASED);
  EXPECT_EQ(backend().StateOf(ls[1].job().id()), pb::JOB_STATE_LEASED);
  auto none = matrices().ListResults(m, 0, 10, true);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  // A stale lease stays stale whoever reports it.
  pb::LeaseRef stale = ls[0].lease();
  stale.set_attempt(stale.attempt() + 1);
  EXPECT_EQ(Report(b, stale).status().code(), absl::StatusCode::kFailedPrecondition);

  auto mine = Report(a, ls[0].lease());
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_FALSE(mine->duplicate);
  EXPECT_EQ(Report(b, ls[0].lease()).status().code(), absl::StatusCode::kPermissionDenied);
  auto again = Report(a, ls[0].lease());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  auto st = Fail(a, ls[1].lease(), "mine", false);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(*st, pb::JOB_STATE_FAILED);
  auto one = matrices().ListResults(m, 0, 10, true);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].agent(), "holder");
}

TEST_P(RepositoryContractTest, HeartbeatExtendsAndReportsRevoked) {
  const int64_t m = MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2, absl::Seconds(5));
  ASSERT_EQ(ls.size(), 2u);
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = ls[0].lease();
  *hb.add_leases() = ls[1].lease();
  pb::LeaseRef junk;
  junk.set_job_id(ls[0].job().id());
  junk.set_attempt(1);
  junk.set_lease_token("not a token; DROP TABLE jobs");
  *hb.add_leases() = junk;
  auto r = queue().Heartbeat(hb, absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->extended_size(), 2);
  EXPECT_EQ(r->revoked_size(), 1);
  EXPECT_GT(r->lease_expires_at().seconds(), ls[0].expires_at().seconds() + 30);

  // Cancel revokes both leases; results for them are stale.
  auto c = matrices().CancelMatrix(m, "test");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->second, 2);
  EXPECT_EQ(c->first.state(), pb::MATRIX_STATE_CANCELLED);
  hb.mutable_leases()->RemoveLast();
  r = queue().Heartbeat(hb, absl::Seconds(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->extended_size(), 0);
  EXPECT_EQ(r->revoked_size(), 2);
  EXPECT_EQ(Report(a, ls[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);

  // Unknown session.
  hb.set_session("nope");
  EXPECT_EQ(queue().Heartbeat(hb, absl::Seconds(1)).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(RepositoryContractTest, ReaperRequeuesThenFailsAtMaxAttempts) {
  MakeMatrix(1, /*max_attempts=*/2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> first = Lease(a, 1);
  ASSERT_EQ(first.size(), 1u);
  const int64_t id = first[0].job().id();
  // Not expired yet: the reaper leaves it alone.
  auto reaped = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued + reaped->failed, 0);

  backend().ExpireAllLeases();
  reaped = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  EXPECT_EQ(backend().StateOf(id), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(backend().FailureReason(id), "attempt 1 of 2: lease expired (agent a1)");
  // The old lease is dead: heartbeat revokes it, its result is stale.
  EXPECT_EQ(Report(a, first[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);

  backend().ExpireAllLeases();  // clears the backoff
  std::vector<pb::JobLease> second = Lease(a, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].job().id(), id);
  EXPECT_EQ(second[0].lease().attempt(), 2);
  EXPECT_NE(second[0].lease().lease_token(), first[0].lease().lease_token());

  backend().ExpireAllLeases();
  reaped = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->failed, 1);
  EXPECT_EQ(backend().StateOf(id), pb::JOB_STATE_FAILED);
  auto m = matrices().GetMatrix(second[0].job().matrix_id());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state(), pb::MATRIX_STATE_FAILED);
  EXPECT_TRUE(m->has_finished_at());
  EXPECT_EQ(backend().FailureReason(id), "attempt 2 of 2: lease expired (agent a1)");
}

TEST_P(RepositoryContractTest, ReaperTakesAtMostTheLimit) {
  MakeMatrix(5);
  pb::RegisterResponse a = Register("a1");
  ASSERT_EQ(Lease(a, 5).size(), 5u);
  backend().ExpireAllLeases();
  auto reaped = queue().ReapExpired(retry_, 3);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 3);
  reaped = queue().ReapExpired(retry_, 3);
  ASSERT_TRUE(reaped.ok());
  EXPECT_EQ(reaped->requeued, 2);
}

TEST_P(RepositoryContractTest, BackoffDelaysTheRetry) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  ASSERT_EQ(Lease(a, 1).size(), 1u);
  backend().ExpireAllLeases();
  RetryPolicy slow{absl::Hours(1), absl::Hours(2)};
  ASSERT_TRUE(queue().ReapExpired(slow, 100).ok());
  EXPECT_TRUE(Lease(a, 1).empty());  // not_before is an hour away
}

TEST_P(RepositoryContractTest, ReleaseDoesNotSpendAnAttempt) {
  MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  auto n = Release(a, ls[0].lease());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  std::vector<pb::JobLease> again = Lease(a, 5);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].job().id(), ls[0].job().id());
  EXPECT_EQ(again[0].lease().attempt(), 1);
  EXPECT_EQ(Report(a, ls[0].lease()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Report(a, again[0].lease()).ok());
}

TEST_P(RepositoryContractTest, ReleaseOnlyTouchesTheCallersOwnLeases) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  pb::RegisterResponse b = Register("b1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  auto n = Release(b, ls[0].lease());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_LEASED);
  pb::RegisterResponse stale = b;
  stale.set_session("not-the-session");
  EXPECT_EQ(Release(stale, ls[0].lease()).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(RepositoryContractTest, ReportFailureRetryableAndNot) {
  MakeMatrix(2, /*max_attempts=*/3);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  auto s = Fail(a, ls[0].lease(), "emulator crashed", true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, pb::JOB_STATE_QUEUED);
  EXPECT_EQ(backend().FailureReason(ls[0].job().id()), "attempt 1 of 3: emulator crashed");
  s = Fail(a, ls[1].lease(), "unknown platform", false);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, pb::JOB_STATE_FAILED);
  // Again: stale.
  EXPECT_EQ(Fail(a, ls[1].lease(), "unknown platform", false).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(RepositoryContractTest, RetryableFailureFailsAtMaxAttempts) {
  MakeMatrix(1, /*max_attempts=*/2);
  pb::RegisterResponse a = Register("a1");
  for (int attempt = 1; attempt <= 2; ++attempt) {
    backend().ExpireAllLeases();  // past the backoff
    std::vector<pb::JobLease> ls = Lease(a, 1);
    ASSERT_EQ(ls.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(ls[0].lease().attempt(), attempt);
    auto s = Fail(a, ls[0].lease(), "flaky", true);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(*s, attempt < 2 ? pb::JOB_STATE_QUEUED : pb::JOB_STATE_FAILED);
  }
  backend().ExpireAllLeases();
  EXPECT_TRUE(Lease(a, 1).empty());
}

TEST_P(RepositoryContractTest, ExecutorMatchingAndPriorityOrder) {
  MakeMatrix(2, 3, /*prio=*/0, pb::EXECUTOR_EMULATOR);
  const int64_t fio = MakeMatrix(2, 3, /*prio=*/0, pb::EXECUTOR_FIO);
  const int64_t urgent = MakeMatrix(2, 3, /*prio=*/4000, pb::EXECUTOR_EMULATOR);
  pb::RegisterResponse f = Register("fio-host", "fio");
  std::vector<pb::JobLease> fl = Lease(f, 10);
  ASSERT_EQ(fl.size(), 2u);
  for (const auto& l : fl) EXPECT_EQ(l.job().matrix_id(), fio);
  pb::RegisterResponse e = Register("emu-host");
  std::vector<pb::JobLease> el = Lease(e, 2);
  ASSERT_EQ(el.size(), 2u);
  for (const auto& l : el) EXPECT_EQ(l.job().matrix_id(), urgent);
  // The eligibility hook can refuse jobs.
  auto none = queue().LeaseJobs(e.agent_id(), e.session(), 10, absl::Seconds(30),
                                [](const pb::Job&, const AgentView&) { return false; });
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(Lease(e, 10).size(), 2u);
  // An agent without a known executor gets nothing.
  pb::RegisterResponse odd = Register("odd-host", "qemu");
  EXPECT_TRUE(Lease(odd, 10).empty());
}

// The scheduler's priority bands (spec.cc JobPriority): bisect 4000 +
// priority, confirm 2000 + priority, bulk 0 + priority.
TEST_P(RepositoryContractTest, BisectThenConfirmThenBulk) {
  const int64_t bulk = MakeMatrix(2, 3, /*prio=*/999, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  const int64_t confirm = MakeMatrix(1, 3, 2000, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_CONFIRM);
  const int64_t bisect = MakeMatrix(1, 3, 4000 - 5, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BISECT);
  pb::RegisterResponse a = Register("a1");
  std::vector<int64_t> order;
  for (int i = 0; i < 4; ++i) {
    std::vector<pb::JobLease> ls = Lease(a, 1);
    ASSERT_EQ(ls.size(), 1u);
    order.push_back(ls[0].job().matrix_id());
  }
  EXPECT_EQ(order, (std::vector<int64_t>{bisect, confirm, bulk, bulk}));
  // One batch comes in the same order.
  MakeMatrix(1, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  const int64_t late_bisect = MakeMatrix(1, 3, 4000, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BISECT);
  std::vector<pb::JobLease> batch = Lease(a, 5);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].job().matrix_id(), late_bisect);
  EXPECT_EQ(batch[0].job().kind(), pb::JOB_KIND_BISECT);
}

// The hook sees the registered agent and the job; the claim takes the
// first max_jobs candidates in queue order and then applies the hook.
TEST_P(RepositoryContractTest, EligibilityHookSeesTheAgentAfterTheClaim) {
  MakeMatrix(4);
  pb::RegisterRequest r;
  r.set_name("real-host");
  r.add_capabilities()->set_name("emulator");
  r.mutable_capabilities(0)->set_version("0.9");
  r.mutable_host()->set_kernel_release("6.8.0");
  r.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_LAZY);
  auto a = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a.ok()) << a.status();
  std::mutex mu;
  std::vector<int> seen_commits;
  auto odd_commits_only = [&](const pb::Job& j, const AgentView& v) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(v.id, a->agent_id());
    EXPECT_EQ(v.name, "real-host");
    EXPECT_EQ(v.host.kernel_release(), "6.8.0");
    EXPECT_EQ(v.host.iommu_mode(), pb::IOMMU_MODE_LAZY);
    EXPECT_EQ(v.capabilities.size(), 1u);
    if (!v.capabilities.empty()) {
      EXPECT_EQ(v.capabilities[0].version(), "0.9");
    }
    EXPECT_EQ(j.state(), pb::JOB_STATE_QUEUED);
    seen_commits.push_back(j.commit_index());
    return j.commit_index() % 2 == 1;
  };
  auto got = queue().LeaseJobs(a->agent_id(), a->session(), 2, absl::Seconds(30), odd_commits_only);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job().commit_index(), 1);
  EXPECT_EQ(seen_commits, (std::vector<int>{0, 1}));
  got = queue().LeaseJobs(a->agent_id(), a->session(), 10, absl::Seconds(30), odd_commits_only);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job().commit_index(), 3);
}

// A real run no agent here can run sits ahead of runnable jobs (lower id,
// equal priority): the claim skips it instead of filling its LIMIT with it,
// so the first lease call already hands out the runnable ones. Kernel and
// mode matching in the claim follows CheckRealRun case by case.
TEST_P(RepositoryContractTest, UnrunnableJobsAheadDoNotBlockTheClaim) {
  pb::RegisterRequest r = testrows::Registration("real-host", "fio");
  r.add_capabilities()->set_name("emulator");
  r.mutable_host()->set_kernel_release("5.11.0-rc3-00012-gc588072bba6b");
  r.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  auto a = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a.ok()) << a.status();
  // Commit ids against the host's release, each in its own fio job; the
  // matrix helper's jobs want mode strict.
  const std::vector<std::string> ids = {"v5.12",
                                        "v5.11",
                                        "5.11.0-rc3",
                                        "5.110",
                                        "c588072bba6b",
                                        "c588072bba6bfe",
                                        "C588072B",
                                        "C588072BBA6B",
                                        "c588072bba6c",
                                        "v5.1",
                                        "",
                                        "5.11(",
                                        "g",
                                        "v5.11.0",
                                        "5.11.0-rc3-00",
                                        "c58807",
                                        "5.11.0-"};
  NewMatrix fio =
      testrows::Matrix(static_cast<int>(ids.size()), 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  const std::vector<pb::Capability> caps(r.capabilities().begin(), r.capabilities().end());
  std::set<std::string> runnable;
  for (size_t i = 0; i < ids.size(); ++i) {
    fio.jobs[i].set_commit_id(ids[i]);
    if (RealRunEligible(fio.jobs[i], caps, r.host())) runnable.insert(ids[i]);
  }
  // One job that matches the kernel but not the mode.
  fio.jobs.push_back(fio.jobs[1]);
  fio.jobs.back().set_mode(pb::IOMMU_MODE_LAZY);
  ASSERT_FALSE(RealRunEligible(fio.jobs.back(), caps, r.host()));
  ASSERT_EQ(runnable, (std::set<std::string>{"v5.11", "5.11.0-rc3", "c588072bba6b",
                                             "c588072bba6bfe", "C588072BBA6B", "v5.11.0"}));
  ASSERT_TRUE(matrices().CreateMatrix(fio).ok());
  const int64_t emu = MakeMatrix(2);
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto got = queue().LeaseJobs(a->agent_id(), a->session(), 100, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  std::set<std::string> leased_fio;
  int leased_emu = 0;
  for (const pb::JobLease& l : *got) {
    if (l.job().matrix_id() == emu) {
      ++leased_emu;
    } else {
      leased_fio.insert(l.job().commit_id());
      EXPECT_EQ(l.job().mode(), pb::IOMMU_MODE_STRICT);
    }
  }
  EXPECT_EQ(leased_fio, runnable);
  EXPECT_EQ(leased_emu, 2);
  // A host with no detected mode runs no real job, and the emulator jobs
  // behind them are still found in one call of one lease.
  pb::RegisterRequest bare = testrows::Registration("bare-host", "fio");
  bare.add_capabilities()->set_name("emulator");
  auto b = queue().RegisterAgent(bare, retry_);
  ASSERT_TRUE(b.ok());
  const int64_t emu2 = MakeMatrix(1);
  got = queue().LeaseJobs(b->agent_id(), b->session(), 1, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job().matrix_id(), emu2);
}

// A kernel store's offer names the commit it was built from: the claim
// leases jobs of that commit id, or of ids its release matches, and no
// others, exactly as CheckRealRun says.
TEST_P(RepositoryContractTest, StoreOffersMatchByCommitOrRelease) {
  pb::RegisterRequest r = testrows::Registration("store-host", "fio");
  r.mutable_host()->set_kernel_release("5.4.0-1-amd64");
  r.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  pb::KernelOffer* o = r.mutable_capabilities(0)->add_kernels();
  o->set_provider("vm");
  o->set_commit("kernel-a1");
  o->set_release("6.1.0-57-cloud-amd64");
  o->add_modes(pb::IOMMU_MODE_STRICT);
  auto a = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<std::string> ids = {
      "kernel-a1",     "6.1.0-57-cloud-amd64", "v6.1.0", "kernel-a", "kernel-a12",
      "5.4.0-1-amd64", "6.1.0-50-cloud-amd64"};
  NewMatrix fio =
      testrows::Matrix(static_cast<int>(ids.size()), 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  const std::vector<pb::Capability> caps(r.capabilities().begin(), r.capabilities().end());
  std::set<std::string> runnable;
  for (size_t i = 0; i < ids.size(); ++i) {
    fio.jobs[i].set_commit_id(ids[i]);
    if (RealRunEligible(fio.jobs[i], caps, r.host())) runnable.insert(ids[i]);
  }
  ASSERT_EQ(runnable, (std::set<std::string>{"kernel-a1", "6.1.0-57-cloud-amd64", "v6.1.0"}));
  ASSERT_TRUE(matrices().CreateMatrix(fio).ok());
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto got = queue().LeaseJobs(a->agent_id(), a->session(), 100, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  std::set<std::string> leased;
  for (const pb::JobLease& l : *got) leased.insert(l.job().commit_id());
  EXPECT_EQ(leased, runnable);
  // The offer, commit included, survives the agents row.
  auto listed = queue().ListAgentsPage(absl::Minutes(1), "", 100);
  ASSERT_TRUE(listed.ok()) << listed.status();
  bool found = false;
  for (const pb::Agent& ag : *listed) {
    for (const pb::Capability& c : ag.capabilities()) {
      for (const pb::KernelOffer& k : c.kernels()) {
        if (k.commit() == "kernel-a1") found = true;
      }
    }
  }
  EXPECT_TRUE(found);
}

// A job on a VM platform waits for a vm offer of that platform's machine
// model (OfferRuns): a host whose own kernel and mode match takes none, nor
// does a vm offer of another machine model.
TEST_P(RepositoryContractTest, VmPlatformJobsGoOnlyToAVmOfferOfTheirMachineModel) {
  auto register_host = [&](const std::string& name, const std::string& provider,
                           const std::string& machine_model) {
    pb::RegisterRequest r =
        testrows::StrictHost(name, "6.1.0-57-cloud-arm64", provider, machine_model);
    auto a = queue().RegisterAgent(r, retry_);
    EXPECT_TRUE(a.ok()) << a.status();
    return std::make_pair(r, a.ok() ? *a : pb::RegisterResponse{});
  };
  const auto host_only = register_host("host-only", "", "");
  const auto other_vm = register_host("q35-guests", "vm", "q35+intel-iommu");
  const auto smmu_vm = register_host("virt-guests", "vm", "virt+smmuv3");
  NewMatrix fio = testrows::Matrix(1, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  for (pb::Job& j : fio.jobs) {
    j.set_commit_id("v6.1");
    j.set_mode(pb::IOMMU_MODE_STRICT);
    j.set_platform("virt-smmuv3");
  }
  ASSERT_TRUE(matrices().CreateMatrix(fio).ok());
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  for (const auto* agent : {&host_only, &other_vm, &smmu_vm}) {
    const std::vector<pb::Capability> caps(agent->first.capabilities().begin(),
                                           agent->first.capabilities().end());
    const bool eligible = RealRunEligible(fio.jobs[0], caps, agent->first.host());
    auto got = queue().LeaseJobs(agent->second.agent_id(), agent->second.session(), 100,
                                 absl::Seconds(30), {}, rules);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->size(), eligible ? fio.jobs.size() : 0u) << agent->first.name();
    EXPECT_EQ(eligible, agent == &smmu_vm) << agent->first.name();
  }
}

// A job whose spec asked for an accelerator (param accel, OfferRuns) goes
// only to an agent offering a kernel under it: an agent whose guests run
// under plain tcg takes none of a tcg-icount matrix, and still takes a
// matrix that names no accelerator.
TEST_P(RepositoryContractTest, AJobThatAsksForAnAccelGoesOnlyToAnOfferUnderIt) {
  auto register_vm = [&](const std::string& name, const std::string& accel) {
    pb::RegisterRequest r =
        testrows::StrictHost(name, "6.1.0-57-cloud-amd64", "vm", "q35+intel-iommu");
    r.mutable_capabilities(0)->mutable_kernels(0)->set_accel(accel);
    auto a = queue().RegisterAgent(r, retry_);
    EXPECT_TRUE(a.ok()) << a.status();
    return std::make_pair(r, a.ok() ? *a : pb::RegisterResponse{});
  };
  const auto tcg = register_vm("tcg-guests", "tcg");
  const auto icount = register_vm("icount-guests", "tcg-icount");
  auto fio_matrix = [](const std::string& accel) {
    NewMatrix m = testrows::Matrix(1, 2, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
    for (pb::Job& j : m.jobs) {
      j.set_commit_id("v6.1");
      j.set_mode(pb::IOMMU_MODE_STRICT);
      j.set_platform("q35-intel-iommu");
      if (!accel.empty()) (*j.mutable_workload()->mutable_params())["accel"] = accel;
    }
    return m;
  };
  const NewMatrix timed = fio_matrix("tcg-icount");
  ASSERT_TRUE(matrices().CreateMatrix(timed).ok());
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto lease = [&](const std::pair<pb::RegisterRequest, pb::RegisterResponse>& agent) {
    auto got = queue().LeaseJobs(agent.second.agent_id(), agent.second.session(), 100,
                                 absl::Seconds(30), {}, rules);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : std::vector<pb::JobLease>{};
  };
  const std::vector<pb::Capability> tcg_caps(tcg.first.capabilities().begin(),
                                             tcg.first.capabilities().end());
  EXPECT_FALSE(RealRunEligible(timed.jobs[0], tcg_caps, tcg.first.host()));
  EXPECT_TRUE(lease(tcg).empty());
  const std::vector<pb::JobLease> timed_leases = lease(icount);
  ASSERT_EQ(timed_leases.size(), timed.jobs.size());
  EXPECT_EQ(timed_leases[0].job().workload().params().at("accel"), "tcg-icount");
  // A matrix that names no accelerator runs under whichever is offered.
  ASSERT_TRUE(matrices().CreateMatrix(fio_matrix("")).ok());
  EXPECT_EQ(lease(tcg).size(), timed.jobs.size());
}

// Agent labels choose the hosts of real runs (lib/storage/run_eligibility.h):
// a host platform's jobs go to agents of that "platform" label holding the
// matrix's labels, whatever their offers; an agent whose health job failed
// takes nothing until it registers healthy. The claim follows AgentLabelsHold
// agent by agent.
TEST_P(RepositoryContractTest, LabelsAndHealthChooseTheAgentsOfRealRuns) {
  auto registration = [](const std::string& name, std::map<std::string, std::string> labels,
                         const std::string& provider) {
    pb::RegisterRequest r = testrows::StrictHost(name, "6.1.0-57-amd64", provider);
    r.mutable_host()->clear_labels();
    r.mutable_host()->mutable_labels()->insert(labels.begin(), labels.end());
    return r;
  };
  std::vector<pb::RegisterRequest> regs = {
      registration("lab-a", {{"platform", "spr"}, {"nic", "cx6"}}, ""),
      registration("lab-b", {{"platform", "spr"}, {"nic", "e810"}}, "kexec"),
      registration("lab-c", {{"platform", "genoa"}, {"nic", "cx6"}}, ""),
      registration("guests", {{"platform", "spr-guests"}, {"nic", "cx6"}}, "vm"),
      registration("unlabelled", {}, "")};
  pb::RegisterRequest sick = registration("lab-d", {{"platform", "spr"}, {"nic", "cx6"}}, "");
  sick.mutable_health()->set_checked(true);
  sick.mutable_health()->set_detail("fio: INTERNAL: no space left on device");
  regs.push_back(sick);
  std::map<std::string, pb::RegisterResponse> ids;
  for (const pb::RegisterRequest& r : regs) {
    auto a = queue().RegisterAgent(r, retry_);
    ASSERT_TRUE(a.ok()) << a.status();
    ids[r.name()] = *a;
  }
  NewMatrix cx6 = testrows::Matrix(2, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  cx6.labels = {{"nic", "cx6"}};
  for (pb::Job& j : cx6.jobs) {
    j.set_commit_id("v6.1");
    j.set_platform("spr");
    (*j.mutable_labels())["nic"] = "cx6";
  }
  ASSERT_TRUE(matrices().CreateMatrix(cx6).ok());
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  std::set<std::string> took;
  for (const pb::RegisterRequest& r : regs) {
    const std::vector<pb::Capability> caps(r.capabilities().begin(), r.capabilities().end());
    const bool eligible = RealRunEligible(cx6.jobs[0], caps, r.host()) && AgentHealthy(r.health());
    auto got = queue().LeaseJobs(ids[r.name()].agent_id(), ids[r.name()].session(), 1,
                                 absl::Seconds(30), {}, rules);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->size(), eligible ? 1u : 0u) << r.name();
    if (!got->empty()) took.insert(r.name());
  }
  EXPECT_EQ(took, (std::set<std::string>{"lab-a"}));
  // lab-b holds the platform but not the label, as the reason says.
  EXPECT_EQ(AgentLabelsHold(cx6.jobs[0], regs[1].host()).message(),
            "the agent lacks the labels nic=cx6");
  // The failed agent, registered again after its health job passed, takes
  // the job left.
  sick.mutable_health()->set_ok(true);
  auto again = queue().RegisterAgent(sick, retry_);
  ASSERT_TRUE(again.ok()) << again.status();
  auto got =
      queue().LeaseJobs(again->agent_id(), again->session(), 5, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);
  // The health and the labels read back with the agent.
  auto listed = queue().ListAgentsPage(absl::Minutes(1), "", 100);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const pb::Agent& a : *listed) {
    if (a.name() == "lab-d") {
      EXPECT_TRUE(a.health().checked() && a.health().ok()) << a.health().ShortDebugString();
    }
    if (a.name() == "lab-a") {
      EXPECT_EQ(a.host().labels().at("nic"), "cx6");
    }
  }
}

// The claim never hands an agent more leases than its free slots.
TEST_P(RepositoryContractTest, ClaimStaysWithinTheAgentsFreeSlots) {
  MakeMatrix(10);
  pb::RegisterResponse a = Register("four-slots");  // 4 slots
  ClaimRules rules;
  rules.within_free_slots = true;
  auto lease = [&](int n) {
    auto l = queue().LeaseJobs(a.agent_id(), a.session(), n, absl::Seconds(30), {}, rules);
    EXPECT_TRUE(l.ok()) << l.status();
    return l.ok() ? *l : std::vector<pb::JobLease>{};
  };
  std::vector<pb::JobLease> first = lease(3);
  ASSERT_EQ(first.size(), 3u);
  std::vector<pb::JobLease> second = lease(10);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(lease(10).empty());
  ASSERT_TRUE(Report(a, first[0].lease()).ok());
  ASSERT_TRUE(Release(a, first[1].lease()).ok());
  EXPECT_EQ(lease(10).size(), 2u);
  EXPECT_TRUE(lease(10).empty());
  // Without the rule the same agent may take more (the repository default):
  // the 5 still queued.
  EXPECT_EQ(Lease(a, 10).size(), 5u);
}

// At equal priority the claim goes round robin across matrices: a small
// matrix submitted after a large one is not queued behind all of it.
TEST_P(RepositoryContractTest, SmallMatrixIsNotStarvedBehindALargeOne) {
  const int64_t big = MakeMatrix(500);
  pb::RegisterResponse a = Register("a1");
  ASSERT_EQ(Lease(a, 4).size(), 4u);  // the big matrix has started
  const int64_t small = MakeMatrix(3);
  std::vector<pb::JobLease> ls = Lease(a, 6);
  ASSERT_EQ(ls.size(), 6u);
  std::vector<int64_t> order;
  for (const auto& l : ls) order.push_back(l.job().matrix_id());
  EXPECT_EQ(order, (std::vector<int64_t>{small, small, small, big, big, big}));
  // Within a matrix the order stays commit order.
  EXPECT_EQ(ls[0].job().commit_index(), 0);
  EXPECT_EQ(ls[2].job().commit_index(), 2);
  EXPECT_EQ(ls[3].job().commit_index(), 4);
  // Priority still comes first.
  const int64_t urgent = MakeMatrix(1, 3, 4000);
  ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0].job().matrix_id(), urgent);
}

// A batch of reports: every fresh one stored once, a copy inside the batch
// and a retry of an earlier report are duplicates, a stale one is refused,
// each answered in its own slot.
TEST_P(RepositoryContractTest, ReportResultsSettlesEachItemLikeReportResult) {
  const int64_t m = MakeMatrix(5);
  pb::RegisterResponse a = Register("batcher");
  std::vector<pb::JobLease> ls = Lease(a, 4);
  ASSERT_EQ(ls.size(), 4u);
  ASSERT_TRUE(Report(a, ls[0].lease()).ok());
  auto req = [&](const pb::LeaseRef& l, const std::string& raw) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l;
    pb::Sample* s = r.add_samples();
    s->set_metric("throughput");
    s->set_value(7.5);
    r.set_raw_output(raw);
    r.set_raw_format("emu-json");
    r.mutable_host()->set_kernel_release("6.1");
    r.mutable_wall_time()->set_seconds(2);
    return r;
  };
  pb::LeaseRef stale = ls[3].lease();
  stale.set_attempt(7);
  const std::string tricky = "{\"q\": \"a \\\"quoted\\\" \\\\ back\"}, {x}";
  std::vector<pb::ReportResultRequest> batch = {
      req(ls[1].lease(), tricky), req(ls[2].lease(), "r2"), req(ls[1].lease(), "copy"),
      req(ls[0].lease(), "retry"), req(stale, "stale")};
  auto out = queue().ReportResults(batch);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 5u);
  for (int i : {0, 1}) {
    ASSERT_TRUE((*out)[i].ok()) << i << ": " << (*out)[i].status();
    EXPECT_TRUE((*out)[i]->accepted);
    EXPECT_FALSE((*out)[i]->duplicate) << i;
    EXPECT_EQ((*out)[i]->executor, pb::EXECUTOR_EMULATOR);
  }
  for (int i : {2, 3}) {
    ASSERT_TRUE((*out)[i].ok()) << i << ": " << (*out)[i].status();
    EXPECT_TRUE((*out)[i]->duplicate) << i;
  }
  EXPECT_EQ((*out)[4].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend().StateOf(ls[1].job().id()), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(backend().StateOf(ls[2].job().id()), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(backend().StateOf(ls[3].job().id()), pb::JOB_STATE_LEASED);
  auto page = matrices().ListResults(m, 0, 100, true);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 3u);
  for (const pb::Result& r : *page) {
    if (r.job_id() == ls[1].job().id()) {
      EXPECT_EQ(r.raw_output(), tricky);
      ASSERT_EQ(r.samples_size(), 1);
      EXPECT_EQ(r.samples(0).value(), 7.5);
      EXPECT_EQ(r.agent(), "batcher");
    }
  }
  auto empty = queue().ReportResults(std::vector<pb::ReportResultRequest>{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// A copy of a lease with a wrong token ahead of the real report in one
// batch: the copy is refused as stale, the real one is stored (and not
// answered as a duplicate of the copy).
TEST_P(RepositoryContractTest, ReportResultsTellsAWrongTokenCopyFromTheLease) {
  const int64_t m = MakeMatrix(1);
  pb::RegisterResponse a = Register("batcher");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  auto req = [&](const pb::LeaseRef& l, const std::string& raw) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l;
    pb::Sample* s = r.add_samples();
    s->set_metric("throughput");
    s->set_value(1.5);
    r.set_raw_output(raw);
    r.set_raw_format("emu-json");
    return r;
  };
  pb::LeaseRef forged = ls[0].lease();
  forged.set_lease_token("00000000-0000-0000-0000-000000000000");
  auto out = queue().ReportResults({req(forged, "forged"), req(ls[0].lease(), "real")});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*out)[1].ok()) << (*out)[1].status();
  EXPECT_TRUE((*out)[1]->accepted);
  EXPECT_FALSE((*out)[1]->duplicate);
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_SUCCEEDED);
  auto page = matrices().ListResults(m, 0, 10, true);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].raw_output(), "real");
}

TEST_P(RepositoryContractTest, ReRegisterExpiresOldSessionLeases) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  pb::RegisterResponse a2 = Register("a1");
  EXPECT_EQ(a2.agent_id(), a.agent_id());
  EXPECT_NE(a2.session(), a.session());
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(backend().FailureReason(ls[0].job().id()),
            "attempt 1 of 3: agent re-registered while holding the lease (agent a1)");
  EXPECT_EQ(queue().LeaseJobs(a.agent_id(), a.session(), 1, absl::Seconds(1), {}).status().code(),
            absl::StatusCode::kNotFound);
  backend().ExpireAllLeases();
  std::vector<pb::JobLease> again = Lease(a2, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].lease().attempt(), 2);
}

// A lease held through its agent's reboot (kexec): the hold is capped,
// outlives the session and moves to the registration that resumes it; a
// lease that was not held is expired as before.
TEST_P(RepositoryContractTest, HeldLeaseMovesToTheResumingSession) {
  MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = ls[0].lease();
  hb.mutable_hold_for()->set_seconds(600);
  // A scheduler that holds nothing answers like a plain heartbeat.
  auto plain = queue().Heartbeat(hb, absl::Seconds(30));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->has_held_until());
  auto held = queue().Heartbeat(hb, absl::Seconds(30), absl::Minutes(5));
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->extended_size(), 1);
  ASSERT_TRUE(held->has_held_until());
  // Capped at max_hold: 5 min from the same now() as the 30 s TTL.
  EXPECT_EQ(held->held_until().seconds() - held->lease_expires_at().seconds(), 270);
  // A plain heartbeat afterwards keeps the hold.
  hb.clear_hold_for();
  auto again = queue().Heartbeat(hb, absl::Seconds(30), absl::Minutes(5));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->extended_size(), 1);

  pb::RegisterRequest r = testrows::Registration("a1", "emulator");
  *r.add_resumes() = ls[0].lease();
  *r.add_resumes() = ls[1].lease();  // never held: expired as before
  auto a2 = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a2.ok()) << a2.status();
  EXPECT_EQ(a2->agent_id(), a.agent_id());
  ASSERT_EQ(a2->resumed_size(), 1);
  EXPECT_EQ(a2->resumed(0).job_id(), ls[0].job().id());
  EXPECT_EQ(a2->resumed(0).lease_token(), ls[0].lease().lease_token());
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_LEASED);
  EXPECT_EQ(backend().StateOf(ls[1].job().id()), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(backend().FailureReason(ls[1].job().id()),
            "attempt 1 of 3: agent re-registered while holding the lease (agent a1)");
  // The new session heartbeats and reports the resumed lease.
  pb::HeartbeatRequest hb2;
  hb2.set_agent_id(a2->agent_id());
  hb2.set_session(a2->session());
  *hb2.add_leases() = ls[0].lease();
  auto h2 = queue().Heartbeat(hb2, absl::Seconds(30), absl::Minutes(5));
  ASSERT_TRUE(h2.ok()) << h2.status();
  EXPECT_EQ(h2->extended_size(), 1);
  auto done = Report(*a2, ls[0].lease());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->accepted);
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_SUCCEEDED);
  // Resumed once: the hold is gone, a second resume keeps nothing.
  auto a3 = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a3.ok()) << a3.status();
  EXPECT_EQ(a3->resumed_size(), 0);
}

// A held lease whose agent does not come back within the hold: a boot of the
// job's kernel that did not come back on that host. The reaper names the
// lease each time, so the host's power can be cycled, and the console's tail
// can be added to that attempt's reason. The first such boot requeues the
// job (a device that did not survive the kexec hangs a kernel that boots);
// at RetryPolicy::boot_attempts of them the job fails at once, its reason
// carrying the mark a bisect skips on.
TEST_P(RepositoryContractTest, HeldLeaseExpiriesFailTheJobAsNotBootingAtTheLastBoot) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  // Leases the job, holds its lease through a reboot that never ends.
  const auto boot_that_hangs = [&](int attempt) -> pb::LeaseRef {
    std::vector<pb::JobLease> ls = Lease(a, 1);
    if (ls.size() != 1u) {
      ADD_FAILURE() << "no lease at attempt " << attempt;
      return pb::LeaseRef();
    }
    EXPECT_EQ(ls[0].lease().attempt(), attempt);
    auto held = HoldThroughReboot(a, ls[0].lease());
    EXPECT_TRUE(held.ok() && held->has_held_until()) << held.status();
    backend().ExpireAllLeases();
    return ls[0].lease();
  };
  ASSERT_EQ(retry_.boot_attempts, 2);
  const int64_t job = boot_that_hangs(1).job_id();
  ASSERT_NE(job, 0);
  auto first = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->requeued, 1);
  EXPECT_EQ(first->failed, 0);
  EXPECT_EQ(first->unbooted, (std::vector<UnbootedLease>{{job, 1, "a1"}}));
  EXPECT_EQ(backend().StateOf(job), pb::JOB_STATE_QUEUED);
  const std::string once = backend().FailureReason(job);
  EXPECT_EQ(once,
            "attempt 1 of 3: lease held through the agent's reboot expired: the job's kernel did "
            "not come back within the boot timeout; it boots again before it is marked as not "
            "booting on this host (boot 1 of 2) (agent a1)");
  EXPECT_EQ(proto::UnmeasurableMark(once), "");
  // The console's tail goes with the attempt whose boot hung, and only with it.
  auto wrong = queue().AnnotateFailure(job, 2, "console: not this attempt");
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_FALSE(*wrong);
  auto noted = queue().AnnotateFailure(job, 1, "console (last line):\nnvme nvme0: I/O timeout");
  ASSERT_TRUE(noted.ok()) << noted.status();
  EXPECT_TRUE(*noted);
  EXPECT_EQ(backend().FailureReason(job), once + "\nconsole (last line):\nnvme nvme0: I/O timeout");

  backend().ExpireAllLeases();
  const pb::LeaseRef last = boot_that_hangs(2);
  ASSERT_EQ(last.job_id(), job);
  auto second = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->requeued, 0);
  EXPECT_EQ(second->failed, 1);
  EXPECT_EQ(second->unbooted, (std::vector<UnbootedLease>{{job, 2, "a1"}}));
  EXPECT_EQ(backend().StateOf(job), pb::JOB_STATE_FAILED);
  const std::string reason = backend().FailureReason(job);
  EXPECT_EQ(reason,
            "attempt 2 of 3: lease held through the agent's reboot expired: the job's kernel did "
            "not come back within the boot timeout, so it does not boot on this host (agent a1)");
  EXPECT_EQ(proto::UnmeasurableMark(reason), proto::kDoesNotBootMark);
  auto noted_again = queue().AnnotateFailure(job, 2, "console (last line):\nKernel panic");
  ASSERT_TRUE(noted_again.ok()) << noted_again.status();
  EXPECT_TRUE(*noted_again);
  // Coming back late resumes nothing.
  pb::RegisterRequest r = testrows::Registration("a1", "emulator");
  *r.add_resumes() = last;
  auto a2 = queue().RegisterAgent(r, retry_);
  ASSERT_TRUE(a2.ok()) << a2.status();
  EXPECT_EQ(a2->resumed_size(), 0);
}

// With one boot allowed, the first boot that does not come back marks the job.
TEST_P(RepositoryContractTest, OneBootAllowedFailsTheJobAtTheFirstHeldLeaseExpiry) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  ASSERT_TRUE(HoldThroughReboot(a, ls[0].lease()).ok());
  backend().ExpireAllLeases();
  RetryPolicy once = retry_;
  once.boot_attempts = 1;
  auto reaped = queue().ReapExpired(once, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->failed, 1);
  EXPECT_EQ(reaped->unbooted.size(), 1u);
  EXPECT_EQ(backend().StateOf(ls[0].job().id()), pb::JOB_STATE_FAILED);
  EXPECT_EQ(proto::UnmeasurableMark(backend().FailureReason(ls[0].job().id())),
            proto::kDoesNotBootMark);
}

// A lease that was not held expires under the attempt rules and names no
// host to power-cycle; a held lease its agent re-registers without naming
// (the agent came back, the kernel booted) is retried too and counts no boot.
TEST_P(RepositoryContractTest, OnlyAnExpiredHoldCountsAsABootThatDidNotComeBack) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  const int64_t job = ls[0].job().id();
  backend().ExpireAllLeases();
  auto reaped = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->requeued, 1);
  EXPECT_TRUE(reaped->unbooted.empty());
  EXPECT_EQ(backend().FailureReason(job), "attempt 1 of 3: lease expired (agent a1)");
  backend().ExpireAllLeases();
  std::vector<pb::JobLease> next = Lease(a, 1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].lease().attempt(), 2);
  ASSERT_TRUE(HoldThroughReboot(a, next[0].lease()).ok());
  const pb::RegisterResponse again = Register("a1");
  EXPECT_EQ(backend().StateOf(job), pb::JOB_STATE_QUEUED);
  EXPECT_EQ(backend().FailureReason(job),
            "attempt 2 of 3: agent re-registered without resuming the lease it held through "
            "its reboot (agent a1)");
  // Neither counted as a boot that did not come back: the next held expiry,
  // at attempt 3 of 3, is out of attempts and so carries the mark.
  backend().ExpireAllLeases();
  std::vector<pb::JobLease> third = Lease(again, 1);
  ASSERT_EQ(third.size(), 1u);
  ASSERT_TRUE(HoldThroughReboot(again, third[0].lease()).ok());
  backend().ExpireAllLeases();
  auto final_reap = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(final_reap.ok()) << final_reap.status();
  EXPECT_EQ(final_reap->failed, 1);
  EXPECT_EQ(proto::UnmeasurableMark(backend().FailureReason(job)), proto::kDoesNotBootMark);
}

TEST_P(RepositoryContractTest, StaleAttemptsAndUnknownIdsAreRefused) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> first = Lease(a, 1);
  ASSERT_EQ(first.size(), 1u);
  backend().ExpireAllLeases();
  ASSERT_TRUE(queue().ReapExpired(retry_, 100).ok());
  backend().ExpireAllLeases();
  std::vector<pb::JobLease> second = Lease(a, 1);
  ASSERT_EQ(second.size(), 1u);
  // The current token with the previous attempt is not the lease.
  pb::LeaseRef mixed = second[0].lease();
  mixed.set_attempt(1);
  auto r = Report(a, mixed);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("at attempt 2"), std::string::npos) << r.status();
  EXPECT_EQ(Fail(a, mixed, "x", true).status().code(), absl::StatusCode::kFailedPrecondition);
  pb::HeartbeatRequest hb;
  hb.set_agent_id(a.agent_id());
  hb.set_session(a.session());
  *hb.add_leases() = mixed;
  *hb.add_leases() = second[0].lease();
  auto h = queue().Heartbeat(hb, absl::Seconds(30));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->revoked_size(), 1);
  EXPECT_EQ(h->revoked(0).attempt(), 1);
  ASSERT_EQ(h->extended_size(), 1);
  // Another agent's heartbeat does not extend this lease.
  pb::RegisterResponse b = Register("b1");
  hb.set_agent_id(b.agent_id());
  hb.set_session(b.session());
  h = queue().Heartbeat(hb, absl::Seconds(30));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->extended_size(), 0);
  EXPECT_EQ(h->revoked_size(), 2);
  // The right lease still reports, once.
  ASSERT_TRUE(Report(a, second[0].lease()).ok());
  EXPECT_EQ(Fail(a, second[0].lease(), "late", true).status().code(),
            absl::StatusCode::kFailedPrecondition);

  pb::LeaseRef ghost;
  ghost.set_job_id(999999);
  ghost.set_attempt(1);
  ghost.set_lease_token("00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(Report(a, ghost).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Fail(a, ghost, "x", true).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(queue().AgentName(999999).status().code(), absl::StatusCode::kNotFound);
  auto name = queue().AgentName(a.agent_id());
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "a1");
  EXPECT_EQ(queue().LeaseJobs(999999, "s", 1, absl::Seconds(1), {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(matrices().GetMatrix(999999).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(matrices().CancelMatrix(999999, "x").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(RepositoryContractTest, ConcurrentAgentsRunEveryJobExactlyOnce) {
  constexpr int kJobs = 600;
  const int64_t m = MakeMatrix(kJobs);
  std::mutex mu;
  std::map<int64_t, int> seen;
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      pb::RegisterResponse a = Register("c" + std::to_string(i));
      for (;;) {
        std::vector<pb::JobLease> ls = Lease(a, 16);
        if (ls.empty()) break;
        for (const auto& l : ls) {
          auto r = Report(a, l.lease());
          if (!r.ok() || r->duplicate) ++errors;
          std::lock_guard<std::mutex> lock(mu);
          ++seen[l.job().id()];
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(static_cast<int>(seen.size()), kJobs);
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "job " << id;
  auto mat = matrices().GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(mat->counts().succeeded(), kJobs);
  EXPECT_TRUE(mat->has_finished_at());
  int64_t results = 0, after = 0;
  for (;;) {
    auto page = matrices().ListResults(m, after, 250, false);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const pb::Result& r : *page) EXPECT_EQ(r.raw_output(), "");  // include_raw = false
    results += static_cast<int64_t>(page->size());
    after = page->back().job_id();
  }
  EXPECT_EQ(results, kJobs);
}

TEST_P(RepositoryContractTest, NonFiniteSamplesSurviveTheResultRow) {
  const int64_t m = MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  pb::ReportResultRequest r;
  r.set_agent_id(a.agent_id());
  *r.mutable_lease() = ls[0].lease();
  r.add_samples()->set_value(std::nan(""));
  r.add_samples()->set_value(-HUGE_VAL);
  r.mutable_samples(0)->set_metric("ratio");
  r.mutable_samples(1)->set_phase("read");
  r.mutable_wall_time()->set_seconds(3);
  r.mutable_wall_time()->set_nanos(7);
  ASSERT_TRUE(queue().ReportResult(r).ok());
  auto results = matrices().ListResults(m, 0, 10, true);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 1u);
  const pb::Result& res = (*results)[0];
  ASSERT_EQ(res.samples_size(), 2);
  EXPECT_TRUE(std::isnan(res.samples(0).value()));
  EXPECT_EQ(res.samples(0).metric(), "ratio");
  EXPECT_EQ(res.samples(1).value(), -HUGE_VAL);
  EXPECT_EQ(res.samples(1).phase(), "read");
  EXPECT_EQ(res.wall_time().seconds(), 3);
  EXPECT_EQ(res.wall_time().nanos(), 7);
  EXPECT_EQ(res.attempt(), 1);
  EXPECT_EQ(res.job().attempt(), 1);
  EXPECT_EQ(res.job().lease_owner(), "a1");
}

// A real run's monitors, reported singly and in a batch, read back whole;
// a result without them reads back without them.
TEST_P(RepositoryContractTest, MonitorsSurviveTheResultRow) {
  const int64_t m = MakeMatrix(3);
  pb::RegisterResponse a = Register("mon");
  std::vector<pb::JobLease> ls = Lease(a, 3);
  ASSERT_EQ(ls.size(), 3u);
  pb::Monitors mon;
  mon.set_where("guest");
  mon.add_cpus("CPU0");
  mon.add_cpus("CPU1");
  pb::InterruptDelta* irq = mon.add_interrupts();
  irq->set_irq("26");
  irq->set_source("nvme0q1");
  irq->set_description("IR-PCI-MSIX-0000:00:04.0 1-edge nvme0q1");
  irq->add_per_cpu(250);
  irq->add_per_cpu(0);
  irq->set_total(250);
  (*mon.mutable_vmstat())["pgfault"] = 800;
  (*mon.mutable_vmstat())["nr_free_pages"] = -1000;
  pb::IommuCounter* c = mon.add_iommu();
  c->set_name("dmar_perf_latency/dmar0/inv_iotlb/1us-10us");
  c->set_delta(1200);
  c->set_after(1500);
  mon.set_iommu_note("debugfs iommu/: intel/dmar_perf_latency");
  pb::PerfSymbol* p = mon.add_perf();
  p->set_symbol("iommu_dma_map_page");
  p->set_share(13.5);
  p->set_kernel(true);
  mon.set_perf_note("perf record -a");
  auto req = [&](const pb::LeaseRef& l) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l;
    r.add_samples()->set_value(1);
    *r.mutable_monitors() = mon;
    return r;
  };
  ASSERT_TRUE(queue().ReportResult(req(ls[0].lease())).ok());
  auto batch = queue().ReportResults(std::vector<pb::ReportResultRequest>{req(ls[1].lease())});
  ASSERT_TRUE(batch.ok() && (*batch)[0].ok());
  ASSERT_TRUE(Report(a, ls[2].lease()).ok());
  auto results = matrices().ListResults(m, 0, 10, false);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  for (const pb::Result& r : *results) {
    if (r.job_id() == ls[2].job().id()) {
      EXPECT_FALSE(r.has_monitors()) << r.monitors().DebugString();
      continue;
    }
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(r.monitors(), mon))
        << r.monitors().DebugString();
  }
}

TEST_P(RepositoryContractTest, MatrixStateFollowsItsJobs) {
  const int64_t m = MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  ASSERT_TRUE(Report(a, ls[0].lease()).ok());
  auto mat = matrices().GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_RUNNING);
  EXPECT_FALSE(mat->has_finished_at());
  EXPECT_EQ(mat->name(), "m");
  EXPECT_EQ(mat->spec_yaml(), "name: m");
  EXPECT_EQ(mat->catalog(), "c");
  EXPECT_EQ(mat->executor(), pb::EXECUTOR_EMULATOR);
  EXPECT_GT(mat->created_at().seconds(), 0);
  ASSERT_TRUE(Fail(a, ls[1].lease(), "no", false).ok());
  mat = matrices().GetMatrix(m);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_FAILED);
  EXPECT_TRUE(mat->has_finished_at());
  // Cancelling a finished matrix cancels nothing; a matrix without jobs is
  // complete at once.
  auto c = matrices().CancelMatrix(m, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->second, 0);
  EXPECT_EQ(c->first.state(), pb::MATRIX_STATE_CANCELLED);
  const int64_t empty = MakeMatrix(0);
  mat = matrices().GetMatrix(empty);
  ASSERT_TRUE(mat.ok());
  EXPECT_EQ(mat->state(), pb::MATRIX_STATE_COMPLETED);
  EXPECT_EQ(mat->counts().total(), 0);
  // A cancelled job carries the reason.
  const int64_t q = MakeMatrix(1);
  ASSERT_TRUE(matrices().CancelMatrix(q, "changed my mind").ok());
  auto page = matrices().GetMatrix(q);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->counts().cancelled(), 1);
}

// Why jobs ended without a result, grouped: most jobs first, each group
// with its first job; cancelled jobs apart from failed ones.
TEST_P(RepositoryContractTest, FailuresAreGroupedByStateAndReason) {
  const int64_t m = MakeMatrix(5, /*max_attempts=*/1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 4);
  ASSERT_EQ(ls.size(), 4u);
  ASSERT_TRUE(Fail(a, ls[2].lease(), "no such device", false).ok());
  ASSERT_TRUE(Fail(a, ls[0].lease(), "the kernel did not boot", false).ok());
  ASSERT_TRUE(Fail(a, ls[1].lease(), "the kernel did not boot", false).ok());
  ASSERT_TRUE(Report(a, ls[3].lease()).ok());
  ASSERT_TRUE(matrices().CancelMatrix(m, "enough").ok());  // the fifth, queued
  absl::StatusOr<std::vector<pb::JobFailure>> f = matrices().ListFailures(m, 10);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ((*f)[0].state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ((*f)[0].jobs(), 2);
  EXPECT_EQ((*f)[0].reason(), backend().FailureReason(ls[0].job().id()));
  EXPECT_NE((*f)[0].reason().find("the kernel did not boot"), std::string::npos);
  EXPECT_EQ((*f)[0].first_job_id(), std::min(ls[0].job().id(), ls[1].job().id()));
  // One job each: the earlier first job first.
  EXPECT_EQ((*f)[1].jobs(), 1);
  EXPECT_LT((*f)[1].first_job_id(), (*f)[2].first_job_id());
  for (const pb::JobFailure& g : {(*f)[1], (*f)[2]}) {
    if (g.state() == pb::JOB_STATE_CANCELLED) {
      EXPECT_EQ(g.reason(), "cancelled: enough");
    } else {
      EXPECT_NE(g.reason().find("no such device"), std::string::npos) << g.reason();
    }
  }
  f = matrices().ListFailures(m, 1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 1u);
  EXPECT_TRUE(matrices().ListFailures(MakeMatrix(1), 10)->empty());
}

TEST_P(RepositoryContractTest, QueueCountsFollowEveryTransition) {
  const int64_t m1 = MakeMatrix(12, /*max_attempts=*/1);
  // fio jobs, which the emulator agent below does not lease.
  const int64_t m2 = MakeMatrix(5, 3, /*prio=*/-1, pb::EXECUTOR_FIO);
  auto counts = queue().QueueCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts, (std::array<int64_t, 6>{0, 17, 0, 0, 0, 0}));
  auto queued = queue().QueuedByExecutor();
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(*queued, (std::map<int, int64_t>{{pb::EXECUTOR_EMULATOR, 12}, {pb::EXECUTOR_FIO, 5}}));
  pb::RegisterResponse a = Register("counts-agent");
  std::vector<pb::JobLease> ls = Lease(a, 10);
  ASSERT_EQ(ls.size(), 10u);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Report(a, ls[i].lease()).ok());
  ASSERT_TRUE(Report(a, ls[0].lease()).ok());  // duplicate: no double count
  ASSERT_TRUE(Fail(a, ls[4].lease(), "boom", false).ok());
  counts = queue().QueueCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::array<int64_t, 6>{0, 7, 5, 4, 1, 0}));
  EXPECT_EQ(*queue().QueuedByExecutor(),
            (std::map<int, int64_t>{{pb::EXECUTOR_EMULATOR, 2}, {pb::EXECUTOR_FIO, 5}}));
  backend().ExpireAllLeases();
  auto reaped = queue().ReapExpired(retry_, 100);
  ASSERT_TRUE(reaped.ok()) << reaped.status();
  EXPECT_EQ(reaped->failed, 5);  // max_attempts = 1
  ASSERT_TRUE(matrices().CancelMatrix(m2, "test").ok());
  ASSERT_TRUE(matrices().CancelMatrix(m1, "test").ok());
  counts = queue().QueueCounts();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(*counts, (std::array<int64_t, 6>{0, 0, 0, 4, 6, 7}));
  EXPECT_TRUE(queue().QueuedByExecutor()->empty());
}

TEST_P(RepositoryContractTest, ListAgentsShowsRunningJobsAndLiveness) {
  MakeMatrix(3);
  pb::RegisterResponse b = Register("b-agent");
  pb::RegisterResponse a = Register("a-agent", "fio");
  ASSERT_EQ(Lease(b, 2).size(), 2u);
  auto agents = queue().ListAgentsPage(absl::Minutes(5), "", 100);
  ASSERT_TRUE(agents.ok()) << agents.status();
  ASSERT_EQ(agents->size(), 2u);
  EXPECT_EQ((*agents)[0].name(), "a-agent");  // by name
  EXPECT_EQ((*agents)[0].agent_id(), a.agent_id());
  EXPECT_EQ((*agents)[0].running_jobs(), 0);
  EXPECT_EQ((*agents)[1].running_jobs(), 2);
  EXPECT_EQ((*agents)[1].slots(), 4);
  EXPECT_EQ((*agents)[1].host().hostname(), "h-b-agent");
  ASSERT_EQ((*agents)[1].capabilities_size(), 1);
  EXPECT_EQ((*agents)[1].capabilities(0).name(), "emulator");
  EXPECT_TRUE((*agents)[1].connected());
  EXPECT_GT((*agents)[1].registered_at().seconds(), 0);
  agents = queue().ListAgentsPage(absl::ZeroDuration(), "", 100);
  ASSERT_TRUE(agents.ok());
  EXPECT_FALSE((*agents)[0].connected());
}

// ListAgentsPage: keyset pages in byte order of names (upper case before
// lower, '-' before letters, whatever the database's locale), each agent on
// exactly one page, running jobs counted on the page too.
TEST_P(RepositoryContractTest, ListAgentsPagesByNameInByteOrder) {
  MakeMatrix(2);
  const std::vector<std::string> names = {"b-2", "a", "B", "b1", "a-z", "Zed", "b-10"};
  std::map<std::string, pb::RegisterResponse> reg;
  for (const std::string& n : names) reg[n] = Register(n);
  ASSERT_EQ(Lease(reg["b1"], 2).size(), 2u);
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());  // bytewise: B, Zed, a, a-z, b-10, b-2, b1
  std::vector<std::string> seen;
  std::string after;
  int pages = 0;
  for (;;) {
    auto page = queue().ListAgentsPage(absl::Minutes(5), after, 3);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_LE(page->size(), 3u);
    if (page->empty()) break;
    ++pages;
    for (const pb::Agent& a : *page) {
      seen.push_back(a.name());
      EXPECT_EQ(a.agent_id(), reg[a.name()].agent_id()) << a.name();
      EXPECT_EQ(a.running_jobs(), a.name() == "b1" ? 2 : 0) << a.name();
      EXPECT_TRUE(a.connected());
    }
    after = page->back().name();
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(seen, sorted);
  EXPECT_EQ(pages, 3);  // 3 + 3 + 1
  auto tail = queue().ListAgentsPage(absl::Minutes(5), "b-10", 100);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].name(), "b-2");
  EXPECT_EQ((*tail)[1].name(), "b1");
  auto none = queue().ListAgentsPage(absl::Minutes(5), "", 0);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  // The gauge's count agrees with the pages' `connected`.
  auto connected = queue().CountConnectedAgents(absl::Minutes(5));
  ASSERT_TRUE(connected.ok()) << connected.status();
  EXPECT_EQ(*connected, static_cast<int64_t>(names.size()));
  auto stale = queue().CountConnectedAgents(absl::ZeroDuration());
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(*stale, 0) << "no heartbeat is newer than now";
  auto none_connected = queue().ListAgentsPage(absl::ZeroDuration(), "", 100);
  ASSERT_TRUE(none_connected.ok()) << none_connected.status();
  for (const pb::Agent& a : *none_connected) EXPECT_FALSE(a.connected()) << a.name();
}

TEST_P(RepositoryContractTest, CatalogsPutAppendGet) {
  pb::Catalog c;
  c.set_name("linux-iommu");
  c.set_source("builtin");
  for (const char* id : {"v1", "v2", "v3"}) {
    auto* cc = c.add_commits();
    cc->set_id(id);
    cc->set_subject(std::string("subject ") + id);
    (*cc->mutable_set())["k"] = id;
  }
  c.mutable_commits(1)->set_author("A U Thor <author@example.org>");
  ASSERT_TRUE(catalogs().PutCatalog(c, false).ok());
  EXPECT_EQ(catalogs().PutCatalog(c, false).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(catalogs().PutCatalog(c, true).ok());
  std::vector<pb::CatalogCommit> more(2);
  more[0].set_id("v3");
  more[1].set_id("v4");
  more[1].set_author("B Author <b@example.org>");
  auto ap = catalogs().AppendCommits("linux-iommu", "git:v3..v4", more);
  ASSERT_TRUE(ap.ok()) << ap.status();
  EXPECT_EQ(ap->second, 1);
  EXPECT_EQ(ap->first.source(), "builtin");  // the existing catalog keeps its source
  auto got = catalogs().GetCatalog("linux-iommu");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->commits_size(), 4);
  EXPECT_EQ(got->commits(3).id(), "v4");
  EXPECT_EQ(got->commits(3).index(), 3);
  EXPECT_EQ(got->commits(1).set().at("k"), "v2");
  EXPECT_EQ(got->commits(1).subject(), "subject v2");
  EXPECT_EQ(got->commits(1).author(), "A U Thor <author@example.org>");
  EXPECT_EQ(got->commits(0).author(), "");
  EXPECT_EQ(got->commits(3).author(), "B Author <b@example.org>");
  EXPECT_EQ(catalogs().GetCatalog("nope").status().code(), absl::StatusCode::kNotFound);
  auto list = catalogs().ListCatalogs();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
  // Appending to a catalog that does not exist creates it.
  ap = catalogs().AppendCommits("fresh", "git:a..b", more);
  ASSERT_TRUE(ap.ok()) << ap.status();
  EXPECT_EQ(ap->second, 2);
  EXPECT_EQ(ap->first.source(), "git:a..b");
  list = catalogs().ListCatalogs();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "fresh");  // by name
  EXPECT_EQ((*list)[0].commits_size(), 0);
}

TEST_P(RepositoryContractTest, IdempotencyKeyReturnsTheFirstMatrix) {
  NewMatrix m;
  m.matrix.set_name("x");
  m.matrix.set_spec_yaml("y");
  m.idempotency_key = "k1";
  pb::Job j;
  j.set_commit_id("c");
  j.set_platform("p");
  j.mutable_workload()->set_name("w");
  j.set_mode(pb::IOMMU_MODE_OFF);
  j.set_executor(pb::EXECUTOR_EMULATOR);
  j.set_max_attempts(3);
  m.jobs = {j, j};
  auto a = matrices().CreateMatrix(m);
  auto b = matrices().CreateMatrix(m);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->matrix.id(), b->matrix.id());
  EXPECT_FALSE(a->existing);
  EXPECT_EQ(a->jobs_created, 2);
  EXPECT_TRUE(b->existing);
  EXPECT_EQ(b->jobs_created, 0);
  EXPECT_EQ(b->matrix.counts().total(), 2);
  m.idempotency_key = "k2";
  auto c = matrices().CreateMatrix(m);
  ASSERT_TRUE(c.ok());
  auto list = matrices().ListMatrices(10, 0);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id(), c->matrix.id());  // newest first
  EXPECT_EQ((*list)[1].counts().total(), 2);
  EXPECT_EQ((*list)[1].state(), pb::MATRIX_STATE_RUNNING);
  list = matrices().ListMatrices(10, c->matrix.id());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id(), a->matrix.id());
  list = matrices().ListMatrices(1, 0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id(), c->matrix.id());
}

// A bisect whose range held two changes: both culprits, in commit order,
// on the bisect and on every read of its regression.
TEST_P(RepositoryContractTest, EveryCulpritOfASplitBisect) {
  pb::Bisect b;
  b.set_id(5);
  b.set_regression_id(9);
  b.set_state("done");
  b.set_culprit_id("c588072bba6b");
  pb::Culprit* c1 = b.add_culprits();
  c1->set_commit_id("c062db039f40");
  c1->set_subject("iommu/vt-d: Update domain geometry");
  c1->set_last_good("a1");
  c1->set_relative_change(-0.098);
  c1->set_share(0.43);
  c1->set_commit_index(3);
  pb::Culprit* c2 = b.add_culprits();
  c2->set_commit_id("c588072bba6b");
  c2->set_last_good("c062db039f40");
  c2->set_relative_change(-0.129);
  c2->set_share(0.57);
  c2->set_commit_index(6);
  pb::Regression g;
  g.set_id(9);
  g.set_state(pb::REGRESSION_STATE_CONFIRMED);
  g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
  g.set_platform("p");
  g.set_workload("w");
  g.set_metric("throughput");
  g.set_bisect_id(5);
  g.set_culprit_id("c588072bba6b");
  backend().PutRegression(g);
  pb::Regression unbisected = g;
  unbisected.set_id(10);
  unbisected.set_bisect_id(0);
  backend().PutRegression(unbisected);
  backend().PutBisect(b);  // after its regression (bisects.regression_id references it)

  auto check = [](const google::protobuf::RepeatedPtrField<pb::Culprit>& cs) {
    ASSERT_EQ(cs.size(), 2);
    EXPECT_EQ(cs[0].commit_id(), "c062db039f40");
    EXPECT_EQ(cs[0].subject(), "iommu/vt-d: Update domain geometry");
    EXPECT_EQ(cs[0].last_good(), "a1");
    EXPECT_DOUBLE_EQ(cs[0].relative_change(), -0.098);
    EXPECT_DOUBLE_EQ(cs[0].share(), 0.43);
    EXPECT_EQ(cs[0].commit_index(), 3);
    EXPECT_EQ(cs[1].commit_id(), "c588072bba6b");
    EXPECT_EQ(cs[1].last_good(), "c062db039f40");
    EXPECT_DOUBLE_EQ(cs[1].share(), 0.57);
  };
  auto bis = analysis().GetBisect(0, 9);
  ASSERT_TRUE(bis.ok()) << bis.status();
  check(bis->culprits());
  auto reg = analysis().GetRegression(9);
  ASSERT_TRUE(reg.ok()) << reg.status();
  check(reg->culprits());
  auto regs = analysis().ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(regs.ok()) << regs.status();
  ASSERT_EQ(regs->size(), 2u);
  check((*regs)[0].culprits());
  EXPECT_EQ((*regs)[1].culprits_size(), 0);
  auto u = analysis().UpdateRegression(9, pb::REGRESSION_STATE_ACKNOWLEDGED, "");
  ASSERT_TRUE(u.ok()) << u.status();
  check(u->culprits());
}

// Jobs carry their own model_set under the matrix's shared one: both read
// back merged (the shared key wins), while the shared keys are stored once.
TEST_P(RepositoryContractTest, SharedModelSetReadsBackOverEveryJob) {
  NewMatrix m = testrows::Matrix(4, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  for (pb::Job& j : m.jobs) {
    (*j.mutable_model_set())["iova.allocator"] = absl::StrCat("commit", j.commit_index() % 2);
    (*j.mutable_model_set())["fq.kind"] = "global";
  }
  // A second job of commit 0 with a set of its own: kept, not the first one's.
  pb::Job odd = m.jobs[0];
  odd.set_repeat(1);
  (*odd.mutable_model_set())["fq.size"] = "128";
  m.jobs.push_back(odd);
  // And one of commit 1 with none: it gets the shared keys alone.
  pb::Job bare = m.jobs[1];
  bare.set_repeat(2);
  bare.clear_model_set();
  m.jobs.push_back(bare);
  m.model_set = {{"fq.kind", "percpu"}, {"agent.pad", std::string(1000, 'x')}};
  auto created = matrices().CreateMatrix(m);
  ASSERT_TRUE(created.ok()) << created.status();
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 6);
  ASSERT_EQ(ls.size(), 6u);
  for (const pb::JobLease& l : ls) {
    const auto& set = l.job().model_set();
    EXPECT_EQ(set.at("fq.kind"), "percpu") << l.job().id();  // the shared key over the job's
    EXPECT_EQ(set.at("agent.pad").size(), 1000u);
    if (l.job().repeat() == 2) {
      EXPECT_EQ(set.size(), 2u) << l.job().id();
      continue;
    }
    EXPECT_EQ(set.at("iova.allocator"), absl::StrCat("commit", l.job().commit_index() % 2));
    const bool is_odd = l.job().commit_index() == 0 && l.job().repeat() == 1;
    EXPECT_EQ(set.count("fq.size"), is_odd ? 1u : 0u) << l.job().id();
    EXPECT_EQ(set.size(), is_odd ? 4u : 3u);
  }
}

// ListResults ends a page with raw output at the byte bound, never before
// its first result, and says how large each raw output is.
TEST_P(RepositoryContractTest, ResultPagesAreBoundedByRawBytes) {
  const int64_t m = MakeMatrix(4);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 4);
  ASSERT_EQ(ls.size(), 4u);
  for (size_t i = 0; i < ls.size(); ++i) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = ls[i].lease();
    r.set_raw_output(std::string(1000 * (i + 1), 'r'));  // 1000, 2000, 3000, 4000 bytes
    ASSERT_TRUE(queue().ReportResult(r).ok());
  }
  auto page = matrices().ListResults(m, 0, 100, true, 3000);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);  // 1000 + 2000; the third would make 6000
  EXPECT_EQ((*page)[1].raw_output().size(), 2000u);
  page = matrices().ListResults(m, (*page)[1].job_id(), 100, true, 1000);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 1u);  // alone past the bound: a page is never empty
  EXPECT_EQ((*page)[0].raw_output().size(), 3000u);
  // Without raw output the bound does not apply; raw_size is there anyway.
  page = matrices().ListResults(m, 0, 100, false, 1000);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 4u);
  for (size_t i = 0; i < page->size(); ++i) {
    EXPECT_TRUE((*page)[i].raw_output().empty());
    EXPECT_EQ((*page)[i].raw_size(), static_cast<int64_t>(1000 * (i + 1)));
  }
}

// ReadRawOutput returns a result's raw output a slice of characters at a
// time (a multi-byte character is never split), with the whole output's
// size in bytes; attempt 0 reads the job's latest result; a missing result
// is kNotFound.
TEST_P(RepositoryContractTest, RawOutputIsReadInCharacterSlices) {
  MakeMatrix(1);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 1);
  ASSERT_EQ(ls.size(), 1u);
  // 2-, 3- and 4-byte characters between ASCII ones.
  const std::string raw =
      "ab\xc3\xa9"
      "c\xe2\x82\xac"
      "d\xf0\x9f\x98\x80"
      "e";
  pb::ReportResultRequest r;
  r.set_agent_id(a.agent_id());
  *r.mutable_lease() = ls[0].lease();
  r.set_raw_output(raw);
  r.set_raw_format("emu-json");
  ASSERT_TRUE(queue().ReportResult(r).ok());
  const int64_t job = ls[0].job().id();
  const int attempt = ls[0].lease().attempt();
  std::string joined;
  for (int64_t from = 0;; from += 3) {
    auto slice = matrices().ReadRawOutput(job, attempt, from, 3);
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(slice->total_bytes, static_cast<int64_t>(raw.size()));
    EXPECT_EQ(slice->raw_format, "emu-json");
    if (slice->data.empty()) break;
    joined += slice->data;
    ASSERT_LT(from, 100);
  }
  EXPECT_EQ(joined, raw);
  auto middle = matrices().ReadRawOutput(job, attempt, 2, 3);
  ASSERT_TRUE(middle.ok()) << middle.status();
  EXPECT_EQ(middle->data,
            "\xc3\xa9"
            "c\xe2\x82\xac");
  EXPECT_EQ(middle->attempt, attempt);
  auto latest = matrices().ReadRawOutput(job, 0, 0, 100);  // attempt 0: the latest result
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->data, raw);
  EXPECT_EQ(latest->attempt, attempt);
  EXPECT_EQ(matrices().ReadRawOutput(job, attempt + 1, 0, 3).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(matrices().ReadRawOutput(job + 1000, 0, 0, 3).status().code(),
            absl::StatusCode::kNotFound);
}

// A long raw output (a PostgreSQL store keeps it out of the result row,
// once for results that report the same) reads back whole and in
// character slices, with its size, for each result that reported it.
TEST_P(RepositoryContractTest, LongRawOutputsReadBackForEveryResult) {
  const int64_t m = MakeMatrix(2);
  pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls = Lease(a, 2);
  ASSERT_EQ(ls.size(), 2u);
  std::string raw;
  for (int i = 0; raw.size() < 20000; ++i) {
    raw += "line " + std::to_string(i) + ": caf\xc3\xa9 \xe2\x82\xac\n";
  }
  for (const pb::JobLease& l : ls) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l.lease();
    r.set_raw_output(raw);
    r.set_raw_format("emu-text");
    ASSERT_TRUE(queue().ReportResult(r).ok());
  }
  auto page = matrices().ListResults(m, 0, 100, true, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  for (const pb::Result& r : *page) {
    EXPECT_EQ(r.raw_output(), raw);
    EXPECT_EQ(r.raw_size(), static_cast<int64_t>(raw.size()));
  }
  for (const pb::JobLease& l : ls) {
    std::string joined;
    for (int64_t from = 0;; from += 4096) {
      auto slice = matrices().ReadRawOutput(l.job().id(), 0, from, 4096);
      ASSERT_TRUE(slice.ok()) << slice.status();
      EXPECT_EQ(slice->total_bytes, static_cast<int64_t>(raw.size()));
      EXPECT_EQ(slice->raw_format, "emu-text");
      if (slice->data.empty()) break;
      joined += slice->data;
      ASSERT_LT(from, 40000);
    }
    EXPECT_EQ(joined, raw);
  }
}

// ListRegressions pages by id: page_size of them after page_token.
TEST_P(RepositoryContractTest, RegressionsArePagedById) {
  for (int64_t id : {3, 5, 8, 13, 21}) {
    pb::Regression g;
    g.set_id(id);
    g.set_state(pb::REGRESSION_STATE_SUSPECTED);
    g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
    g.set_platform("p");
    g.set_workload("w");
    g.set_metric("throughput");
    g.set_mode(pb::IOMMU_MODE_STRICT);
    backend().PutRegression(g);
  }
  std::vector<int64_t> seen;
  pb::ListRegressionsRequest req;
  req.set_page_size(2);
  std::vector<size_t> sizes;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = analysis().ListRegressions(req);
    ASSERT_TRUE(page.ok()) << page.status();
    sizes.push_back(page->size());
    if (page->empty()) break;
    for (const pb::Regression& g : *page) seen.push_back(g.id());
    req.set_page_token(absl::StrCat(page->back().id()));
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{3, 5, 8, 13, 21}));
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 0}));
  req.set_page_token("8");
  req.set_page_size(0);  // no bound
  auto rest = analysis().ListRegressions(req);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].id(), 13);
}

TEST_P(RepositoryContractTest, AnalysisTablesReadAndUpdate) {
  pb::Regression g;
  g.set_id(7);
  g.set_state(pb::REGRESSION_STATE_SUSPECTED);
  g.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
  g.set_platform("p");
  g.set_workload("w");
  g.set_metric("throughput");
  g.set_mode(pb::IOMMU_MODE_STRICT);
  g.set_last_good("a");
  g.set_first_bad("b");
  g.set_magnitude(-0.19);
  g.set_p_value(1);
  pb::ModeEffect* e = g.add_per_mode();
  e->set_mode(pb::IOMMU_MODE_STRICT);
  e->set_before(10);
  e->set_after(8.1);
  backend().PutRegression(g);
  pb::Bisect b;
  b.set_id(3);
  b.set_regression_id(7);
  b.set_state("done");
  b.set_culprit_id("c588072bba6b");
  pb::BisectStep* s1 = b.add_steps();
  s1->set_step(1);
  s1->set_commit_id("x");
  s1->set_verdict("bad");
  pb::BisectStep* s0 = b.add_steps();
  s0->set_step(0);
  s0->set_commit_id("y");
  s0->set_verdict("good");
  backend().PutBisect(b);
  g.set_bisect_id(3);
  g.set_id(8);
  g.set_direction(pb::CHANGE_DIRECTION_IMPROVEMENT);
  backend().PutRegression(g);

  pb::ListRegressionsRequest lr;
  auto regs = analysis().ListRegressions(lr);
  ASSERT_TRUE(regs.ok()) << regs.status();
  ASSERT_EQ(regs->size(), 1u);
  EXPECT_EQ((*regs)[0].id(), 7);
  EXPECT_DOUBLE_EQ((*regs)[0].magnitude(), -0.19);
  ASSERT_EQ((*regs)[0].per_mode_size(), 1);
  EXPECT_DOUBLE_EQ((*regs)[0].per_mode(0).after(), 8.1);
  lr.set_include_improvements(true);
  regs = analysis().ListRegressions(lr);
  ASSERT_TRUE(regs.ok());
  ASSERT_EQ(regs->size(), 2u);
  EXPECT_EQ((*regs)[1].bisect_id(), 3);
  auto bis = analysis().GetBisect(0, 7);
  ASSERT_TRUE(bis.ok()) << bis.status();
  EXPECT_EQ(bis->culprit_id(), "c588072bba6b");
  ASSERT_EQ(bis->steps_size(), 2);
  EXPECT_EQ(bis->steps(0).verdict(), "good");
  bis = analysis().GetBisect(3, 0);
  ASSERT_TRUE(bis.ok()) << bis.status();
  EXPECT_EQ(bis->regression_id(), 7);
  EXPECT_EQ(analysis().GetBisect(4, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(analysis().GetBisect(0, 8).status().code(), absl::StatusCode::kNotFound);
  auto u = analysis().UpdateRegression(7, pb::REGRESSION_STATE_FIXED, "fixed in v6.2");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->state(), pb::REGRESSION_STATE_FIXED);
  EXPECT_EQ(u->note(), "fixed in v6.2");
  // Unspecified state and an empty note leave both as they are.
  u = analysis().UpdateRegression(7, pb::REGRESSION_STATE_UNSPECIFIED, "");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->state(), pb::REGRESSION_STATE_FIXED);
  EXPECT_EQ(u->note(), "fixed in v6.2");
  regs = analysis().ListRegressions(pb::ListRegressionsRequest());
  ASSERT_TRUE(regs.ok());
  EXPECT_TRUE(regs->empty());  // closed ones hidden by default
  EXPECT_EQ(analysis().GetRegression(99).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(analysis().UpdateRegression(99, pb::REGRESSION_STATE_FIXED, "").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_P(RepositoryContractTest, MetricRankSurvivesATriageNote) {
  pb::Regression g;
  g.set_id(2);
  g.set_workload("iozone-nfsrdma");
  g.set_metric("latency_us");
  g.set_metric_rank("secondary");
  g.add_primary_metrics("throughput_kb_s");
  g.add_primary_metrics("odd, name");
  g.set_note("secondary metric");
  g.set_matrix_id(42);
  backend().PutRegression(g);
  pb::Regression plain;
  plain.set_id(3);
  plain.set_metric("throughput");
  backend().PutRegression(plain);
  auto u = analysis().UpdateRegression(2, pb::REGRESSION_STATE_ACKNOWLEDGED, "known, tracked");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->note(), "known, tracked");
  EXPECT_EQ(u->metric_rank(), "secondary");
  ASSERT_EQ(u->primary_metrics_size(), 2);
  EXPECT_EQ(u->primary_metrics(1), "odd, name");
  auto got = analysis().GetRegression(3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->metric_rank(), "primary");  // the column default
  EXPECT_EQ(got->primary_metrics_size(), 0);
  pb::ListRegressionsRequest by_matrix;
  by_matrix.set_matrix_id(42);
  auto regs = analysis().ListRegressions(by_matrix);
  ASSERT_TRUE(regs.ok());
  ASSERT_EQ(regs->size(), 1u);
  EXPECT_EQ((*regs)[0].id(), 2);
}

}  // namespace
}  // namespace farm::storage
