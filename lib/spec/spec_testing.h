// lib/spec/spec_testing: specs and helpers the spec tests share (lib/spec
// and the scheduler's expansion tests): the design example and ways to vary
// it. Test-only; header-only.
#ifndef LIB_SPEC_SPEC_TESTING_H_
#define LIB_SPEC_SPEC_TESTING_H_

#include <string>

#include "lib/spec/spec_check.h"

namespace farm::spec {

// The design's example spec (docs/scheduler.md): valid, 5 commits of
// linux-iommu x 3 modes x 5 repeats.
inline constexpr char kGoodSpec[] = R"(
name: nfsrdma-v5.11
catalog: linux-iommu
platform: intel-vtd-2s12c
commits: v5.10..v5.12
modes: [off, strict, lazy]
workloads:
  - name: iozone-nfsrdma
    params: {threads: 12, record: 256k, size: 1g, tests: [write, read]}
repeats: 5
executor: emulator
analysis: {bisect: true}
)";

// ParseMatrixSpec's error message, "" when the spec is valid.
inline std::string ErrorOf(const std::string& yaml, SpecLimits limits = {}) {
  auto s = ParseMatrixSpec(yaml, limits);
  return s.ok() ? "" : std::string(s.status().message());
}

// kGoodSpec with its workload list (and executor) replaced.
inline std::string WithWorkload(const std::string& workload_yaml, const std::string& executor) {
  std::string y = kGoodSpec;
  const size_t from = y.find("workloads:");
  const size_t to = y.find("analysis:");
  y.replace(from, to - from,
            "workloads:\n" + workload_yaml + "repeats: 1\nexecutor: " + executor + "\n");
  return y;
}

}  // namespace farm::spec

#endif  // LIB_SPEC_SPEC_TESTING_H_
