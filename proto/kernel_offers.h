// proto/kernel_offers.h: which kernel offer (KernelOffer in an agent's
// Capability) runs a real job. One rule, used by the scheduler to decide
// what to lease (lib/storage/run_eligibility.h) and by the agent to pick the
// provider that runs a leased job (agent/executors/kernel_executor.h).
//
// The rule: an agent may run a fio/iozone job when its capability for the
// job's executor has an offer whose `commit` equals the job's commit id or
// whose `release` the job's commit id names (KernelMatches), and whose
// `modes` contain the job's mode; a job with extra
// kernel parameters (workload param `kernel_params`, kernel_params.h) is
// never run by a `host` offer. A capability
// that lists no offers stands for one implicit `host` offer: the host facts'
// kernel release with the detected mode (none when the mode is unknown).
//
// A job whose platform is a vm platform (VmPlatforms: virt-smmuv3,
// q35-intel-iommu, q35-amd-iommu ...) runs only on a `vm` offer of that
// platform's machine model; any other platform name (this-host, a lab's
// own) leaves the model to the offer, and the agent to its "platform" label
// (proto/labels.h, lib/storage/run_eligibility.h).
//
// A job whose workload param `accel` (kAccelParam, from the spec's
// `accel:`) names a QEMU accelerator runs only on an offer under that
// accelerator (KernelOffer.accel); host and kexec offers have none, so such
// a job runs only in a vm.
//
// A kernel build job runs on an agent whose `kbuild` capability offers a
// build of the job's catalog for the job's architecture (BuildOfferRuns).
//
// Pure functions of their arguments; thread-safe.
#ifndef PROTO_KERNEL_OFFERS_H_
#define PROTO_KERNEL_OFFERS_H_

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::proto {

// The job's commit id names the kernel release when, after dropping a
// leading "v" from the id,
//   - it equals the release ("6.1.0-13-amd64" == "6.1.0-13-amd64"), or
//   - the release starts with it followed by '.', '-' or '+' ("v5.11" matches
//     "5.11.0-rc3", not "5.110"), or
//   - it is a hex sha of 7+ digits and the release carries it (its first 12
//     digits at most) as a git-describe suffix ("...-gc588072bba6b" for
//     "c588072bba6b"), case-insensitively, not followed by another hex digit.
bool KernelMatches(std::string_view commit_id, std::string_view kernel_release);

// The workload param naming the accelerator a job's guest runs under: set
// from the spec's `accel:` on every real job (its results are then another
// series), taken out before the tool sees the params.
inline constexpr char kAccelParam[] = "accel";

// The accelerators a spec may ask for (KernelOffer.accel), in the order
// messages list them: "tcg", "tcg-icount", "kvm".
const std::vector<std::string>& KnownAccels();

// A job platform that picks the emulated machine a vm offer boots.
struct VmPlatform {
  std::string_view name;           // the job's platform: "q35-amd-iommu"
  std::string_view machine_model;  // KernelOffer.machine_model: "q35+amd-iommu"
  std::string_view architecture;   // KernelOffer.architecture: "x86_64"
};

// Every vm platform, in the order docs/kernels.md lists them.
const std::vector<VmPlatform>& VmPlatforms();

// The vm platform named `platform`, or nullptr.
const VmPlatform* FindVmPlatform(std::string_view platform);

// Whether `platform` is spelled like a vm platform ("q35-..." or
// "virt-..."): such a name must be one of VmPlatforms() (the scheduler
// refuses others at submit).
bool LooksLikeVmPlatform(std::string_view platform);

// offer.commit() is non-empty and equals job.commit_id(), or
// KernelMatches(job.commit_id(), offer.release()); a host offer only for a
// job of the default kernel config, any other only when its kernel_config
// is JobBuildConfigId(job) (proto/kernel_config.h); job.mode() is one of
// offer.modes(), the offer is not `host` when the job has kernel_params, and
// for a vm platform the offer is `vm` with the platform's machine model,
// and with a param `accel` the offer's accel is that one.
bool OfferRuns(const iommufarm::v1::KernelOffer& offer, const iommufarm::v1::Job& job);

// The offers of the capability named like `executor` (proto::ExecutorName),
// or the implicit host offer when that capability lists none; empty when the
// agent has no such capability.
std::vector<iommufarm::v1::KernelOffer> OffersFor(
    const std::vector<iommufarm::v1::Capability>& capabilities, iommufarm::v1::Executor executor,
    const iommufarm::v1::HostFacts& host);

// A kernel build job (EXECUTOR_KBUILD, made by the scheduler for real jobs
// whose kernel no agent offers): which commit of which catalog, for which
// architecture, with which kernel config (the build's config id,
// proto/kernel_config.h: "" for the default). Its platform is the
// architecture, its workload is named kKbuildWorkload and carries the
// config id in its param kernel_config.
inline constexpr std::string_view kKbuildWorkload = "kbuild";
struct BuildKey {
  std::string catalog;
  std::string commit;
  std::string arch;    // "x86_64", "aarch64"
  std::string config;  // BuildConfigId: "" for the default config
  bool operator<(const BuildKey& o) const {
    return std::tie(catalog, commit, arch, config) <
           std::tie(o.catalog, o.commit, o.arch, o.config);
  }
  bool operator==(const BuildKey& o) const = default;
};

// The build key of a build job.
BuildKey BuildKeyOf(const iommufarm::v1::Job& build_job);

// True when `capabilities` hold a "kbuild" capability with a build offer for
// job.catalog() listing job.platform() (the architecture) for a build job
// `job`.
bool BuildOfferRuns(const std::vector<iommufarm::v1::Capability>& capabilities,
                    const iommufarm::v1::Job& job);

// The first of `offers` that runs `job`, in the order given; nullptr if none.
const iommufarm::v1::KernelOffer* FindOffer(const std::vector<iommufarm::v1::KernelOffer>& offers,
                                            const iommufarm::v1::Job& job);

}  // namespace farm::proto

#endif  // PROTO_KERNEL_OFFERS_H_
