#include "proto/kernel_offers.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "proto/kernel_config.h"
#include "proto/kernel_params.h"
#include "proto/names.h"

namespace farm::proto {
namespace {

namespace pb = ::iommufarm::v1;

bool IsHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool KernelMatches(std::string_view commit_id, std::string_view kernel_release) {
  if (commit_id.empty() || kernel_release.empty()) return false;
  std::string_view id = commit_id;
  if (id.size() > 1 && (id[0] == 'v' || id[0] == 'V') &&
      std::isdigit(static_cast<unsigned char>(id[1]))) {
    id.remove_prefix(1);
  }
  if (kernel_release == id || kernel_release == commit_id) return true;
  if (kernel_release.size() > id.size() && kernel_release.substr(0, id.size()) == id) {
    const char next = kernel_release[id.size()];
    if (next == '.' || next == '-' || next == '+') return true;
  }
  if (commit_id.size() >= 7 && IsHex(commit_id)) {
    const std::string release = Lower(kernel_release);
    // git describe prints 12 digits; a catalog may hold more or fewer.
    const std::string needle = "g" + Lower(commit_id.substr(0, 12));
    for (size_t pos = release.find(needle); pos != std::string::npos;
         pos = release.find(needle, pos + 1)) {
      const size_t end = pos + needle.size();
      if (end == release.size() || !std::isxdigit(static_cast<unsigned char>(release[end]))) {
        return true;
      }
    }
  }
  return false;
}

const std::vector<VmPlatform>& VmPlatforms() {
  static const auto* const k = new std::vector<VmPlatform>{
      {"virt-smmuv3", "virt+smmuv3", "aarch64"},
      {"q35-intel-iommu", "q35+intel-iommu", "x86_64"},
      {"q35-vtd", "q35+intel-iommu", "x86_64"},
      {"q35-amd-iommu", "q35+amd-iommu", "x86_64"},
  };
  return *k;
}

const VmPlatform* FindVmPlatform(std::string_view platform) {
  for (const VmPlatform& p : VmPlatforms()) {
    if (p.name == platform) return &p;
  }
  return nullptr;
}

bool LooksLikeVmPlatform(std::string_view platform) {
  return platform.substr(0, 4) == "q35-" || platform.substr(0, 5) == "virt-";
}

const std::vector<std::string>& KnownAccels() {
  static const auto* accels = new std::vector<std::string>{"tcg", "tcg-icount", "kvm"};
  return *accels;
}

bool OfferRuns(const pb::KernelOffer& offer, const pb::Job& job) {
  const bool by_commit = !offer.commit().empty() && offer.commit() == job.commit_id();
  if (!by_commit && !KernelMatches(job.commit_id(), offer.release())) return false;
  // The host's command line is not the job's to change.
  if (offer.provider() == "host" && job.workload().params().count(kKernelParamsKey) > 0) {
    return false;
  }
  // A host runs its own kernel, whatever config a job asks for; a built one
  // is the job's only when built with its config.
  if (offer.provider() == "host" ? !JobConfigId(job).empty()
                                 : offer.kernel_config() != JobBuildConfigId(job)) {
    return false;
  }
  if (const VmPlatform* p = FindVmPlatform(job.platform());
      p != nullptr && (offer.provider() != "vm" || offer.machine_model() != p->machine_model)) {
    return false;
  }
  // tcg-icount figures are instruction-timed, kvm's are host times: a job
  // that asked for one accelerator has no use for another's.
  if (auto accel = job.workload().params().find(kAccelParam);
      accel != job.workload().params().end() && accel->second != offer.accel()) {
    return false;
  }
  for (int m : offer.modes()) {
    if (m == job.mode()) return true;
  }
  return false;
}

std::vector<pb::KernelOffer> OffersFor(const std::vector<pb::Capability>& capabilities,
                                       pb::Executor executor, const pb::HostFacts& host) {
  const std::string name = ExecutorName(executor);
  for (const pb::Capability& c : capabilities) {
    if (c.name() != name) continue;
    if (c.kernels_size() > 0) return {c.kernels().begin(), c.kernels().end()};
    pb::KernelOffer implicit;
    implicit.set_provider("host");
    implicit.set_release(host.kernel_release());
    if (host.iommu_mode() != pb::IOMMU_MODE_UNSPECIFIED) implicit.add_modes(host.iommu_mode());
    implicit.set_architecture(host.architecture());
    return {implicit};
  }
  return {};
}

const pb::KernelOffer* FindOffer(const std::vector<pb::KernelOffer>& offers, const pb::Job& job) {
  for (const pb::KernelOffer& o : offers) {
    if (OfferRuns(o, job)) return &o;
  }
  return nullptr;
}

BuildKey BuildKeyOf(const pb::Job& build_job) {
  return {build_job.catalog(), build_job.commit_id(), build_job.platform(), JobConfigId(build_job)};
}

bool BuildOfferRuns(const std::vector<pb::Capability>& capabilities, const pb::Job& job) {
  const std::string name = ExecutorName(pb::EXECUTOR_KBUILD);
  for (const pb::Capability& c : capabilities) {
    if (c.name() != name) continue;
    for (const pb::BuildOffer& b : c.builds()) {
      if (b.catalog() != job.catalog()) continue;
      for (const std::string& arch : b.architectures()) {
        if (arch == job.platform()) return true;
      }
    }
  }
  return false;
}

}  // namespace farm::proto
