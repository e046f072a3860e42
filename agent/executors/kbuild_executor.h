// KbuildExecutor: the `kbuild` capability. It runs the kernel build jobs the
// scheduler makes for real jobs whose kernel no agent offers
// (scheduler/kernel_builds.h): one commit of a catalog's git tree for one
// architecture, built by lib/kbuild into the kernel store the vm provider of
// this or another agent reads, with every shipped fragment of that
// architecture (kbuild::kAllMachines), so one build serves each machine
// model of it. A job with a kernel config (proto/kernel_config.h) is built
// with its base instead of the agent's and its fragments after the shipped
// ones, into the store entry its config id names; a dma-map-bench build
// adds the dma-map-bench fragment. The build log is the job's raw output; a commit that does not
// build fails the job permanently with "build failed at <sha>: <line>".
//
// It offers (builds()) the catalogs it has a tree for, each for the
// architectures it can build: x86_64, and aarch64 where
// aarch64-linux-gnu-gcc is on PATH.
//
// While it builds, RunLeased reports the build's progress
// (lib/kbuild/build_progress.h: phase, objects compiled of the last cold
// build's, elapsed, time left) through LeaseContext.progress.
//
// Thread-safety: Run() may be called from several worker threads; builds of
// one build directory wait for its lock (lib/kbuild/build_cache.h).
#ifndef AGENT_EXECUTORS_KBUILD_EXECUTOR_H_
#define AGENT_EXECUTORS_KBUILD_EXECUTOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/executors/executor.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/kbuild/build_progress.h"

namespace farm::agent {

struct KbuildConfig {
  std::map<std::string, std::string> trees;  // catalog -> git tree or URL (--kbuild-tree)
  std::string store_dir;                     // the kernel store builds go to
  std::string cache_root;                    // "" for kbuild::DefaultCacheRoot()
  std::string base = "tinyconfig";           // base config (BuildRequest::base)
  // Empty: x86_64, and aarch64 when the cross compiler is installed.
  std::vector<std::string> archs;
  std::uint64_t cache_max_bytes = std::uint64_t{20} << 30;
  int jobs = 0;               // make -j; 0 for the number of CPUs
  std::string make = "make";  // tests give a fake
  std::string git = "git";
};

class KbuildExecutor final : public Executor {
 public:
  explicit KbuildExecutor(KbuildConfig config);

  std::string capability() const override;
  std::string version() const override { return "1"; }
  absl::StatusOr<ExecutionResult> Run(const iommufarm::v1::Job& job, CancelToken& cancel) override;
  absl::StatusOr<ExecutionResult> RunLeased(const iommufarm::v1::Job& job, CancelToken& cancel,
                                            const LeaseContext& lease) override;
  std::vector<iommufarm::v1::BuildOffer> builds() const override;

 private:
  const KbuildConfig config_;
  const std::vector<std::string> archs_;
};

// The architectures this host can build kernels for: x86_64, and aarch64
// when aarch64-linux-gnu-gcc is on PATH.
std::vector<std::string> BuildableArchs();

// A build's progress as the job's (job id and attempt left to the caller).
iommufarm::v1::JobProgress JobProgressOf(const kbuild::BuildProgress& progress);

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_KBUILD_EXECUTOR_H_
