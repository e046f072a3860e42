#include "proto/kernel_params.h"

#include <algorithm>
#include <cctype>

#include "lib/iommu_mode/iommu_mode.h"

namespace farm::proto {
namespace {

bool ValueCharOk(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ',' ||
         c == ':' || c == '+' || c == '-';
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

const std::vector<std::string>& AllowedKernelParams() {
  // IOMMU drivers and the DMA API (Documentation/admin-guide/kernel-parameters.txt),
  // the NVMe driver's queue knobs, and switches that only change logging or
  // layout. Sorted.
  static const auto* names = new std::vector<std::string>{
      "amd_iommu",
      "amd_iommu_dump",
      "arm-smmu-v3.disable_bypass",
      "arm-smmu-v3.disable_msipolling",
      "dma_debug",
      "dma_debug_entries",
      "ignore_loglevel",
      "intel_iommu",
      "iommu",
      "iommu.forcedac",
      "loglevel",
      "mitigations",
      "nokaslr",
      "nvme.io_queue_depth",
      "nvme.poll_queues",
      "nvme.use_threaded_interrupts",
      "nvme.write_queues",
      "quiet",
      "swiotlb",
  };
  return *names;
}

std::vector<std::string> ParseKernelParams(std::string_view params, std::string* error) {
  error->clear();
  std::vector<std::string> out;
  size_t i = 0;
  while (i < params.size()) {
    while (i < params.size() && std::isspace(static_cast<unsigned char>(params[i]))) ++i;
    size_t end = i;
    while (end < params.size() && !std::isspace(static_cast<unsigned char>(params[end]))) ++end;
    if (end == i) break;
    const std::string word(params.substr(i, end - i));
    i = end;
    const size_t eq = word.find('=');
    const std::string name = word.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
    if (iommu_mode::OverridesMode(word)) {
      *error = "kernel parameter '" + word +
               "' sets the IOMMU mode, which the job's mode owns (use the matrix's modes)";
      return {};
    }
    const std::vector<std::string>& allowed = AllowedKernelParams();
    if (!std::binary_search(allowed.begin(), allowed.end(), name)) {
      *error = "kernel parameter '" + name + "' is not allowed on a guest's command line " +
               "(allowed: " + Joined(allowed) + ")";
      return {};
    }
    if (eq != std::string::npos &&
        (value.empty() || !std::all_of(value.begin(), value.end(), ValueCharOk))) {
      *error = "kernel parameter '" + word + "' has a value outside [A-Za-z0-9._,:+-]";
      return {};
    }
    out.push_back(word);
  }
  return out;
}

}  // namespace farm::proto
