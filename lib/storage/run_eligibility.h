// run_eligibility: which agents may take a job. Every JobQueue claim applies
// this rule itself (PostgreSQL through kRunnableSql inside the claim
// statement, the memory fake through CheckRealRunHost), so a job no agent
// can run never sits ahead of one it can: the agent's executors must
// include the job's, and a real run (fio / iozone) lands only on a host
// whose IOMMU mode and kernel are the cell's; the result then records what
// the host really was.
//
// Contract: pure functions of their arguments, thread-safe, cheap.
// Emulator jobs match any host: they run the emulated kernel and mode, not
// the host's. kRunnableSql and CheckRealRunHost state the same rule; the
// repository contract suite runs one table of cases through both.
//
// Kernel matching (KernelMatches): the cell's commit id names the host's
// kernel when, after dropping a leading "v" from the id,
//   - it equals the release ("6.1.0-13-amd64" == "6.1.0-13-amd64"), or
//   - the release starts with it followed by '.', '-' or '+' ("v5.11" matches
//     "5.11.0-rc3", not "5.110"), or
//   - it is a hex sha of 7+ digits and the release carries it as a
//     git-describe suffix ("...-gc588072bba6b" for "c588072bba6b").
#ifndef LIB_STORAGE_RUN_ELIGIBILITY_H_
#define LIB_STORAGE_RUN_ELIGIBILITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

bool KernelMatches(absl::string_view commit_id, absl::string_view kernel_release);

// OK when `host` may run `job`; otherwise FailedPrecondition saying why
// ("host runs IOMMU mode off, the cell wants strict").
absl::Status CheckRealRunHost(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host);

// SQL boolean expression of CheckRealRunHost(...).ok() over a jobs row
// aliased `j` and an agent's host jsonb aliased `ah` (HostToJson's keys).
extern const char* const kRunnableSql;

inline bool RealRunEligible(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host) {
  return CheckRealRunHost(job, host).ok();
}

}  // namespace farm::storage

#endif  // LIB_STORAGE_RUN_ELIGIBILITY_H_
