// integration_tests/cached_kernels.h: the Debian cloud kernels
// scripts/fetch-test-kernels left in its cache (<cache>/<release>/vmlinuz,
// complete when <release>/.complete exists), for the tests that boot them.
// Tests only, header-only; pure functions over the file system.
#ifndef INTEGRATION_TESTS_CACHED_KERNELS_H_
#define INTEGRATION_TESTS_CACHED_KERNELS_H_

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"

namespace farm {

// The kernel cache the tests boot from: $FARM_KERNEL_CACHE, or
// scripts/fetch-test-kernels' default.
inline std::string KernelCacheDir() {
  const char* env = std::getenv("FARM_KERNEL_CACHE");
  return env ? env : "/var/cache/iommu-farm/kernels";
}

// The complete *-cloud-amd64 releases under `cache`, newest first (one ABI
// width: lexical order is release order); none when the cache is missing.
inline std::vector<std::string> CachedAmd64CloudReleases(const std::string& cache) {
  namespace fs = std::filesystem;
  std::vector<std::string> releases;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache, ec)) {
    std::string name = e.path().filename().string();
    if (absl::EndsWith(name, "-cloud-amd64") && fs::exists(e.path() / ".complete") &&
        fs::is_regular_file(e.path() / "vmlinuz")) {
      releases.push_back(std::move(name));
    }
  }
  std::sort(releases.rbegin(), releases.rend());
  return releases;
}

}  // namespace farm

#endif  // INTEGRATION_TESTS_CACHED_KERNELS_H_
