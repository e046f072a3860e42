// run_eligibility: which agents may take a job. Every JobQueue claim applies
// this rule itself (PostgreSQL through kRunnableSql inside the claim
// statement, the memory fake through CheckRealRun), so a job no agent can
// run never sits ahead of one it can: the agent's executors must include
// the job's, and a real run (fio / iozone) lands only on an agent that
// offers the cell's kernel in the cell's IOMMU mode; the result then records
// what that kernel really was.
//
// The rule (proto/kernel_offers.h, which the agent also uses to pick the
// provider of a leased job): the agent's capability named like the job's
// executor ("fio", "iozone") has a kernel offer (Capability.kernels; in the
// agents.capabilities jsonb: [{name, kernels: [{provider, release, commit,
// modes}]}]) with offer.commit == job.commit_id (a kernel store's build) or
// KernelMatches(job.commit_id, offer.release), and job.mode among
// offer.modes. A capability without offers stands for its host kernel:
// release = host.kernel_release, modes = [host.iommu_mode] unless that is
// unspecified. A job whose workload params hold "kernel_params" never
// matches an offer with provider "host"; one whose params hold "accel"
// (the spec's `accel:`) only an offer with that accel. Emulator jobs always match: they
// run the emulated kernel and mode. A kernel build job (kbuild) matches a
// kbuild capability whose build offers name its catalog and architecture
// (BuildOfferRuns). A job no agent offers stays queued.
//
// The agent's labels (HostFacts.labels, proto/labels.h) come first
// (AgentLabelsHold): a real run lands only on an agent holding every label
// of its matrix (Job.labels; in SQL the matrices.labels column), and a run
// on a platform that is not a vm platform only on an agent whose "platform"
// label is that platform.
//
// Contract: pure functions of their arguments, thread-safe, cheap.
// kRunnableSql and CheckRealRun state the same rule; the repository
// contract suite runs one table of cases through both.
//
// Kernel matching (KernelMatches, proto/kernel_offers.h): the cell's commit
// id names a kernel when, after dropping a leading "v" from the id,
//   - it equals the release ("6.1.0-13-amd64" == "6.1.0-13-amd64"), or
//   - the release starts with it followed by '.', '-' or '+' ("v5.11" matches
//     "5.11.0-rc3", not "5.110"), or
//   - it is a hex sha of 7+ digits and the release carries it as a
//     git-describe suffix ("...-gc588072bba6b" for "c588072bba6b").
#ifndef LIB_STORAGE_RUN_ELIGIBILITY_H_
#define LIB_STORAGE_RUN_ELIGIBILITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "proto/kernel_offers.h"
#include "proto/labels.h"
#include "proto/names.h"

namespace farm::storage {

using ::farm::proto::KernelMatches;

// The host-facts half of the rule alone (an agent offering no kernels): OK
// when `host` may run `job`; otherwise FailedPrecondition saying why
// ("host runs IOMMU mode off, the cell wants strict").
absl::Status CheckRealRunHost(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host);

// SQL boolean expression of CheckRealRun(...).ok() over a jobs row
// aliased `j`, an agent's host jsonb aliased `ah` (HostToJson's keys) and
// its capabilities jsonb aliased `ac` (CapsToJson's).
extern const std::string kRunnableSql;

// SQL jsonb expression of a jobs row's workload params (row aliased `j`):
// its own column, or the matrix's copy in matrix_workloads when the row
// references one (workload_index >= 0; large params are stored once per
// matrix, see PgMatrixStore::CreateMatrix).
extern const char* const kJobParamsSql;

// SQL boolean over a jobs row aliased `j`: the job waits for no kernel build
// (Job.waits_for_job), or that build succeeded. Every claim applies it, as
// the memory fake does: a job never runs before its kernel exists.
extern const char* const kBuildDoneSql;

// An agent whose health job ran and failed (AgentHealth) is leased nothing
// and counts for no job's "some agent can run it"; one that ran none is
// healthy. kAgentHealthySql is the same over an agents row's `health`.
using ::farm::proto::AgentHealthy;
extern const char* const kAgentHealthySql;

inline bool RealRunEligible(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host) {
  return CheckRealRunHost(job, host).ok();
}

// The label half of the rule: OK when `host`'s labels hold the job's and,
// on a host platform, its "platform" label is the job's; otherwise
// FailedPrecondition naming what is missing.
absl::Status AgentLabelsHold(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host);

// OK when an agent with `capabilities` on `host` may run `job` (the rule
// above); otherwise FailedPrecondition naming what the agent offers.
absl::Status CheckRealRun(const iommufarm::v1::Job& job,
                          const std::vector<iommufarm::v1::Capability>& capabilities,
                          const iommufarm::v1::HostFacts& host);

inline bool RealRunEligible(const iommufarm::v1::Job& job,
                            const std::vector<iommufarm::v1::Capability>& capabilities,
                            const iommufarm::v1::HostFacts& host) {
  return CheckRealRun(job, capabilities, host).ok();
}

// Jobs that only some agents can run (fio, iozone, kbuild), which
// JobQueue::FailBlockedJobs fails when no registered agent can.
inline bool IsRealOrBuild(iommufarm::v1::Executor e) {
  return ::farm::proto::IsRealExecutor(e) || e == iommufarm::v1::EXECUTOR_KBUILD;
}

// A build job in this state makes (or made) its kernel: queued, leased or
// succeeded. SQL: state IN (1, 2, 3).
inline bool IsLiveBuildState(iommufarm::v1::JobState s) {
  return s == iommufarm::v1::JOB_STATE_QUEUED || s == iommufarm::v1::JOB_STATE_LEASED ||
         s == iommufarm::v1::JOB_STATE_SUCCEEDED;
}

// The failure reason of a job no registered agent could run for `waited`
// (JobQueue::FailBlockedJobs): what it needs, so the user knows which agent
// to start ("no agent offers kernel v6.1 for q35-intel-iommu in mode strict
// under fio, and none builds it; waited 1h").
std::string UnrunnableReason(const iommufarm::v1::Job& job, absl::Duration waited);

}  // namespace farm::storage

#endif  // LIB_STORAGE_RUN_ELIGIBILITY_H_
