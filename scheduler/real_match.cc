#include "scheduler/real_match.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/names.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

absl::Status CheckRealRunHost(const pb::Job& job, const pb::HostFacts& host) {
  if (job.executor() != pb::EXECUTOR_FIO && job.executor() != pb::EXECUTOR_IOZONE) {
    return absl::OkStatus();
  }
  if (host.iommu_mode() == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::FailedPreconditionError(
        "host's IOMMU mode is unknown; real runs need a detected mode");
  }
  if (job.mode() != host.iommu_mode()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host runs IOMMU mode ", ::farm::proto::ModeName(host.iommu_mode()),
                     ", the cell wants ", ::farm::proto::ModeName(job.mode())));
  }
  if (!KernelMatches(job.commit_id(), host.kernel_release())) {
    return absl::FailedPreconditionError(absl::StrCat("host runs kernel ", host.kernel_release(),
                                                      ", the cell wants ", job.commit_id()));
  }
  return absl::OkStatus();
}

absl::Status CheckRealRun(const pb::Job& job, const std::vector<pb::Capability>& capabilities,
                          const pb::HostFacts& host) {
  if (job.executor() != pb::EXECUTOR_FIO && job.executor() != pb::EXECUTOR_IOZONE) {
    return absl::OkStatus();
  }
  const std::vector<pb::KernelOffer> offers =
      ::farm::proto::OffersFor(capabilities, job.executor(), host);
  if (::farm::proto::FindOffer(offers, job) != nullptr) return absl::OkStatus();
  std::vector<std::string> offered;
  for (const pb::KernelOffer& o : offers) {
    std::vector<std::string> modes;
    for (int m : o.modes()) modes.push_back(::farm::proto::ModeName(m));
    offered.push_back(
        absl::StrCat(o.provider(), " ", o.release(), " [", absl::StrJoin(modes, ","), "]"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no kernel offer runs ", job.commit_id(), " in mode ", ::farm::proto::ModeName(job.mode()),
      " (offered: ", offered.empty() ? "none" : absl::StrJoin(offered, "; "), ")"));
}

}  // namespace farm::scheduler
