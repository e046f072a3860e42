// LabRecoveryTest: the fixture of LabRecovery's tests (lab_recovery_test.cc,
// lab_bmc_test.cc): an in-memory store whose one job was leased by an agent,
// held through its reboot and reaped when the hold passed, which is the
// lease LabRecovery is handed, and the job's reason afterwards.
//
// Thread-safety: a test's own thread; the store is thread-safe. Ownership:
// the fixture owns the store and a temporary directory for the commands.
#ifndef SCHEDULER_LAB_RECOVERY_TEST_FIXTURE_H_
#define SCHEDULER_LAB_RECOVERY_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "lib/process/scoped_temp_dir.h"
#include "lib/storage/contract/test_rows.h"
#include "lib/storage/memory/memory_store.h"
#include "scheduler/lab_recovery.h"

namespace farm::scheduler {

// One job leased by `agent`, held through its reboot, and reaped when the
// hold passed: the lease LabRecovery is handed.
class LabRecoveryTest : public ::testing::Test {
 protected:
  storage::UnbootedLease Unbooted(const std::string& agent) {
    auto m = store_.CreateMatrix(storage::testrows::Matrix(
        1, 3, 0, ::iommufarm::v1::EXECUTOR_EMULATOR, ::iommufarm::v1::JOB_KIND_BULK));
    EXPECT_TRUE(m.ok()) << m.status();
    auto a = store_.RegisterAgent(storage::testrows::Registration(agent, "emulator"), {});
    EXPECT_TRUE(a.ok()) << a.status();
    auto ls = store_.LeaseJobs(
        a->agent_id(), a->session(), 1, absl::Seconds(30),
        [](const ::iommufarm::v1::Job&, const storage::AgentView&) { return true; });
    EXPECT_TRUE(ls.ok() && ls->size() == 1u);
    ::iommufarm::v1::HeartbeatRequest hb;
    hb.set_agent_id(a->agent_id());
    hb.set_session(a->session());
    *hb.add_leases() = (*ls)[0].lease();
    hb.mutable_hold_for()->set_seconds(60);
    EXPECT_TRUE(store_.Heartbeat(hb, absl::Seconds(30), absl::Minutes(5)).ok());
    store_.db().Write([&](storage::MemoryDatabase::Tables& t, storage::MemoryDatabase::Changes&) {
      for (auto& [id, j] : t.jobs) j.lease_expires_at = store_.db().Now() - absl::Seconds(1);
      return 0;
    });
    auto reaped = store_.ReapExpired({}, 10);
    EXPECT_TRUE(reaped.ok() && reaped->unbooted.size() == 1u);
    return reaped->unbooted.at(0);
  }
  std::string Reason(int64_t job) {
    return store_.db().Read([&](const storage::MemoryDatabase::Tables& t) {
      return t.jobs.at(job).job.failure_reason();
    });
  }
  static void WaitFor(const LabRecovery& r, int64_t n) {
    for (int i = 0; i < 1000 && r.finished() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(r.finished(), n);
  }

  storage::MemoryStore store_;
  process::ScopedTempDir dir_ =
      *process::ScopedTempDir::Create(std::filesystem::temp_directory_path(), "lab-recovery-");
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_LAB_RECOVERY_TEST_FIXTURE_H_
