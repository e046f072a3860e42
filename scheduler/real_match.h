// real_match: which hosts may take a real (fio / iozone) job. The scheduler
// plugs RealRunEligible into its lease hook (storage::JobPredicate) so a
// real run lands only on a host whose IOMMU mode and kernel are the cell's;
// the result then records what the host really was.
//
// Contract: pure functions of their arguments, thread-safe, cheap (called
// per candidate job inside the lease transaction). Emulator jobs always
// match: they run the emulated kernel and mode, not the host's.
//
// Kernel matching (KernelMatches): the cell's commit id names the host's
// kernel when, after dropping a leading "v" from the id,
//   - it equals the release ("6.1.0-13-amd64" == "6.1.0-13-amd64"), or
//   - the release starts with it followed by '.', '-' or '+' ("v5.11" matches
//     "5.11.0-rc3", not "5.110"), or
//   - it is a hex sha of 7+ digits and the release carries it as a
//     git-describe suffix ("...-gc588072bba6b" for "c588072bba6b").
#ifndef SCHEDULER_REAL_MATCH_H_
#define SCHEDULER_REAL_MATCH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::scheduler {

bool KernelMatches(absl::string_view commit_id, absl::string_view kernel_release);

// OK when `host` may run `job`; otherwise FailedPrecondition saying why
// ("host runs IOMMU mode off, the cell wants strict").
absl::Status CheckRealRunHost(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host);

// CheckRealRunHost(...).ok(): the shape of the scheduler's JobPredicate.
inline bool RealRunEligible(const iommufarm::v1::Job& job, const iommufarm::v1::HostFacts& host) {
  return CheckRealRunHost(job, host).ok();
}

}  // namespace farm::scheduler

#endif  // SCHEDULER_REAL_MATCH_H_
