// Repository contract cases for kernel build jobs (Job.waits_for_job,
// EXECUTOR_KBUILD): a real job is claimed only after its build succeeded,
// fails with the build's reason when the build fails, a job no agent can run
// fails after its wait, build jobs go to agents whose build offers name
// their catalog and architecture, and an agent's capabilities can change
// within its session. Run against every backend with the rest of the suite
// (repository_contract.h).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/storage/contract/repository_contract.h"
#include "lib/storage/contract/test_rows.h"

namespace farm::storage {
namespace {

// One build job of commit c0 for x86_64 in catalog "c".
NewMatrix BuildMatrix() {
  NewMatrix m = testrows::Matrix(1, 1, 6000, pb::EXECUTOR_KBUILD, pb::JOB_KIND_BUILD);
  m.matrix.set_name("kernel builds");
  m.jobs[0].set_platform("x86_64");
  m.jobs[0].mutable_workload()->set_name("kbuild");
  m.jobs[0].mutable_workload()->clear_params();
  return m;
}

// A kbuild agent building catalog `catalog` for x86_64.
pb::RegisterRequest Builder(const std::string& name, const std::string& catalog) {
  pb::RegisterRequest r = testrows::Registration(name, "kbuild");
  pb::BuildOffer* b = r.mutable_capabilities(0)->add_builds();
  b->set_catalog(catalog);
  b->set_tree("/src/linux");
  b->add_architectures("x86_64");
  return r;
}

// The build job's id, and the ids of `n` emulator jobs of a second matrix
// (`waiting_matrix`) waiting for it. Ids are handed out in order in a fresh
// database.
int64_t BuildWithWaiters(MatrixStore& matrices, int n, std::vector<int64_t>* waiters,
                         int64_t* waiting_matrix) {
  auto built = matrices.CreateMatrix(BuildMatrix());
  EXPECT_TRUE(built.ok()) << built.status();
  if (!built.ok()) return 0;
  auto live = matrices.LiveBuildJobs("c", {"c0"});
  EXPECT_TRUE(live.ok()) << live.status();
  if (!live.ok() || live->size() != 1) return 0;
  const int64_t build = (*live)[0].id();
  NewMatrix m = testrows::Matrix(n, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  for (pb::Job& j : m.jobs) j.set_waits_for_job(build);
  auto c = matrices.CreateMatrix(m);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return 0;
  *waiting_matrix = c->matrix.id();
  for (int64_t id = build + 1; id <= build + n; ++id) waiters->push_back(id);
  return build;
}

TEST_P(RepositoryContractTest, WaitingJobsAreClaimedOnlyAfterTheirBuildSucceeded) {
  std::vector<int64_t> waiters;
  int64_t waiting = 0;
  const int64_t build = BuildWithWaiters(matrices(), 2, &waiters, &waiting);
  ASSERT_NE(build, 0);
  pb::RegisterResponse emu = Register("emu");
  EXPECT_TRUE(Lease(emu, 10).empty());
  auto m = matrices().GetMatrix(waiting);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->counts().waiting_for_build(), 2);

  auto b = queue().RegisterAgent(Builder("builder", "c"), retry_);
  ASSERT_TRUE(b.ok()) << b.status();
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto got = queue().LeaseJobs(b->agent_id(), b->session(), 10, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job().id(), build);
  ASSERT_TRUE(Report(*b, (*got)[0].lease()).ok());

  std::vector<pb::JobLease> after = Lease(emu, 10);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].job().waits_for_job(), build);
  auto m2 = matrices().GetMatrix(waiting);
  ASSERT_TRUE(m2.ok()) << m2.status();
  EXPECT_EQ(m2->counts().waiting_for_build(), 0);
}

// A running build's progress, sent with its agent's heartbeat, is kept on
// the build job while its lease holds and read back for the matrix that
// waits for it and for the build matrix itself; a report for another
// attempt, or of an agent that does not hold the lease, is not kept.
TEST_P(RepositoryContractTest, ARunningBuildsProgressIsReadForTheMatricesItServes) {
  std::vector<int64_t> waiters;
  int64_t waiting = 0;
  const int64_t build = BuildWithWaiters(matrices(), 2, &waiters, &waiting);
  ASSERT_NE(build, 0);
  auto b = queue().RegisterAgent(Builder("builder", "c"), retry_);
  ASSERT_TRUE(b.ok()) << b.status();
  auto got = queue().LeaseJobs(b->agent_id(), b->session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  const pb::LeaseRef lease = (*got)[0].lease();
  EXPECT_TRUE(matrices().ListBuilding(waiting)->empty());  // nothing reported yet

  pb::HeartbeatRequest hb;
  hb.set_agent_id(b->agent_id());
  hb.set_session(b->session());
  *hb.add_leases() = lease;
  pb::JobProgress* p = hb.add_progress();
  p->set_job_id(build);
  p->set_attempt(lease.attempt() + 1);  // not the attempt it holds
  p->set_phase("compile");
  ASSERT_TRUE(queue().Heartbeat(hb, absl::Seconds(30)).ok());
  EXPECT_TRUE(matrices().ListBuilding(waiting)->empty());
  p->set_attempt(lease.attempt());
  p->set_objects(1234);
  p->set_expected_objects(2100);
  p->mutable_elapsed()->set_seconds(372);
  p->mutable_remaining()->set_seconds(240);
  ASSERT_TRUE(queue().Heartbeat(hb, absl::Seconds(30)).ok());

  auto live = matrices().LiveBuildJobs("c", {"c0"});
  ASSERT_TRUE(live.ok() && live->size() == 1u);
  const int64_t build_matrix = (*live)[0].matrix_id();
  for (int64_t matrix : {waiting, build_matrix}) {
    auto building = matrices().ListBuilding(matrix);
    ASSERT_TRUE(building.ok()) << building.status();
    ASSERT_EQ(building->size(), 1u) << matrix;
    const pb::JobProgress& r = (*building)[0];
    EXPECT_EQ(r.job_id(), build);
    EXPECT_EQ(r.phase(), "compile");
    EXPECT_EQ(r.objects(), 1234);
    EXPECT_EQ(r.expected_objects(), 2100);
    EXPECT_EQ(r.elapsed().seconds(), 372);
    EXPECT_EQ(r.remaining().seconds(), 240);
    EXPECT_EQ(r.commit_id(), "c0");
    EXPECT_EQ(r.platform(), "x86_64");
  }
  // Once the build is done, nothing runs for either.
  ASSERT_TRUE(Report(*b, lease).ok());
  EXPECT_TRUE(matrices().ListBuilding(waiting)->empty());
  EXPECT_TRUE(matrices().ListBuilding(build_matrix)->empty());
}

TEST_P(RepositoryContractTest, AFailedBuildFailsItsWaitersWithItsReason) {
  std::vector<int64_t> waiters;
  int64_t waiting = 0;
  const int64_t build = BuildWithWaiters(matrices(), 2, &waiters, &waiting);
  ASSERT_NE(build, 0);
  auto b = queue().RegisterAgent(Builder("builder", "c"), retry_);
  ASSERT_TRUE(b.ok()) << b.status();
  auto got = queue().LeaseJobs(b->agent_id(), b->session(), 1, absl::Seconds(30), {});
  ASSERT_TRUE(got.ok() && got->size() == 1u);
  const std::string why = "build failed at 8e5e892a1234: drivers/iommu/iova.c:1: error: x";
  ASSERT_TRUE(Fail(*b, (*got)[0].lease(), why, /*retryable=*/false).ok());
  EXPECT_TRUE(matrices().LiveBuildJobs("c", {"c0"})->empty());

  auto failed = queue().FailBlockedJobs(absl::Hours(1), 100);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(*failed, 2);
  for (int64_t id : waiters) {
    EXPECT_EQ(backend().StateOf(id), pb::JOB_STATE_FAILED);
    const std::string reason = backend().FailureReason(id);
    EXPECT_NE(reason.find("kernel build " + std::to_string(build) + " failed: "), std::string::npos)
        << reason;
    EXPECT_NE(reason.find(why), std::string::npos) << reason;
  }
  EXPECT_EQ(*queue().FailBlockedJobs(absl::Hours(1), 100), 0);
}

TEST_P(RepositoryContractTest, AJobNoAgentCanRunFailsAfterItsWait) {
  ASSERT_TRUE(matrices().CreateMatrix(BuildMatrix()).ok());
  auto live = matrices().LiveBuildJobs("c", {"c0"});
  ASSERT_TRUE(live.ok() && live->size() == 1u);
  const int64_t build = (*live)[0].id();
  NewMatrix fio = testrows::Matrix(1, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  fio.jobs[0].set_platform("q35-intel-iommu");
  ASSERT_TRUE(matrices().CreateMatrix(fio).ok());
  const int64_t fio_job = build + 1;
  // Not yet waited long enough: nothing fails.
  EXPECT_EQ(*queue().FailBlockedJobs(absl::Hours(1), 100), 0);
  // A builder of another catalog and an emulator agent run neither.
  ASSERT_TRUE(queue().RegisterAgent(Builder("builder", "other"), retry_).ok());
  Register("emu");
  auto failed = queue().FailBlockedJobs(absl::ZeroDuration(), 100);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(*failed, 2);
  const std::string fio_reason = backend().FailureReason(fio_job);
  EXPECT_NE(fio_reason.find("no agent offers kernel c0 for q35-intel-iommu in mode strict"),
            std::string::npos)
      << fio_reason;
  const std::string build_reason = backend().FailureReason(build);
  EXPECT_NE(build_reason.find("no agent builds catalog c for x86_64"), std::string::npos)
      << build_reason;
}

TEST_P(RepositoryContractTest, ASecondLiveBuildOfAKeyIsRefusedAndCreatesNothing) {
  auto first = matrices().CreateMatrix(BuildMatrix());
  ASSERT_TRUE(first.ok()) << first.status();
  // Another submit that found no build makes the same one.
  auto second = matrices().CreateMatrix(BuildMatrix());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
  auto listed = matrices().ListMatrices(10, 0);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 1u) << "the refused matrix was not created";
  // One matrix holding the key twice is refused too.
  NewMatrix twice = BuildMatrix();
  twice.jobs[0].set_platform("aarch64");
  twice.jobs.push_back(twice.jobs[0]);
  EXPECT_EQ(matrices().CreateMatrix(twice).status().code(), absl::StatusCode::kAlreadyExists);
  // Another architecture, or another catalog, is another key.
  NewMatrix arm = BuildMatrix();
  arm.jobs[0].set_platform("aarch64");
  EXPECT_TRUE(matrices().CreateMatrix(arm).ok());
  NewMatrix other = BuildMatrix();
  other.matrix.set_catalog("other");
  other.jobs[0].set_catalog("other");
  EXPECT_TRUE(matrices().CreateMatrix(other).ok());

  // A failed build is not live: the key can be built again.
  auto b = queue().RegisterAgent(Builder("builder", "c"), retry_);
  ASSERT_TRUE(b.ok()) << b.status();
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto got = queue().LeaseJobs(b->agent_id(), b->session(), 10, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  for (const pb::JobLease& l : *got) {
    if (l.job().platform() != "x86_64" || l.job().catalog() != "c") continue;
    ASSERT_TRUE(Fail(*b, l.lease(), "build failed at c0: x.c:1: error: y", false).ok());
  }
  EXPECT_TRUE(matrices().LiveBuildJobs("c", {"c0"})->size() == 1u) << "the aarch64 build";
  EXPECT_TRUE(matrices().CreateMatrix(BuildMatrix()).ok());
}

TEST_P(RepositoryContractTest, AJobAnAgentCanRunIsNotFailed) {
  ASSERT_TRUE(matrices().CreateMatrix(BuildMatrix()).ok());
  ASSERT_TRUE(queue().RegisterAgent(Builder("builder", "c"), retry_).ok());
  EXPECT_EQ(*queue().FailBlockedJobs(absl::ZeroDuration(), 100), 0);
  auto live = matrices().LiveBuildJobs("c", {"c0", "c9"});
  ASSERT_TRUE(live.ok() && live->size() == 1u);
  EXPECT_EQ(backend().StateOf((*live)[0].id()), pb::JOB_STATE_QUEUED);
  EXPECT_TRUE(matrices().LiveBuildJobs("c", {"c9"})->empty());
  EXPECT_TRUE(matrices().LiveBuildJobs("other", {"c0"})->empty());
}

TEST_P(RepositoryContractTest, UpdatedCapabilitiesAreWhatTheClaimSees) {
  ASSERT_TRUE(matrices().CreateMatrix(BuildMatrix()).ok());
  pb::RegisterResponse a = Register("grower", "fio");
  ClaimRules rules;
  rules.match_real_run_hosts = true;
  auto none = queue().LeaseJobs(a.agent_id(), a.session(), 10, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(none.ok() && none->empty());
  const pb::RegisterRequest builder = Builder("grower", "c");
  const std::vector<pb::Capability> caps(builder.capabilities().begin(),
                                         builder.capabilities().end());
  EXPECT_TRUE(absl::IsNotFound(queue().UpdateCapabilities(a.agent_id(), "stale-session", caps)));
  ASSERT_TRUE(queue().UpdateCapabilities(a.agent_id(), a.session(), caps).ok());
  auto got = queue().LeaseJobs(a.agent_id(), a.session(), 10, absl::Seconds(30), {}, rules);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);
  // The build offer survives the agents row.
  auto listed = queue().ListAgentsPage(absl::Minutes(1), "", 10);
  ASSERT_TRUE(listed.ok() && listed->size() == 1u);
  ASSERT_EQ((*listed)[0].capabilities_size(), 1);
  ASSERT_EQ((*listed)[0].capabilities(0).builds_size(), 1);
  EXPECT_EQ((*listed)[0].capabilities(0).builds(0).catalog(), "c");
  EXPECT_EQ((*listed)[0].capabilities(0).builds(0).architectures(0), "x86_64");
}

}  // namespace
}  // namespace farm::storage
