// farm::agent::EmulatorExecutor: runs EXECUTOR_EMULATOR jobs in-process on the
// IOMMU emulation core (farm::emu::RunEmulation).
//
// A job maps to one emulator run: platform, kernel = job.commit_id, mode,
// workload name + params, seed, and job.model_set as --set keys on top. When
// the job comes from another catalog than the agent's (by name), or its
// commit is not in the agent's catalog, the kernel is the model_set alone
// (the scheduler's resolved state) over the registry defaults.
// The result is reported as samples (agent/executors/emu_samples.h) plus the full
// emulator JSON as raw output ("emu-json").
//
// Thread-safety: Run() may be called concurrently (each run owns its engine).
// Cancellation: the engine asks between events (Engine::SetStopCheck)
// whether the token fired or the time limit passed, and stops: a revoked
// lease frees its slot within moments, and a run past the limit (a huge
// `requests:`, a model that never settles) fails FAILED_PRECONDITION, which
// is not retried.
#ifndef AGENT_EXECUTORS_EMULATOR_EXECUTOR_H_
#define AGENT_EXECUTORS_EMULATOR_EXECUTOR_H_

#include <string>

#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "emu/run/run.h"

namespace farm::agent {

class EmulatorExecutor final : public Executor {
 public:
  // catalog: commit catalog file ("" = the emulator's default); time_limit:
  // the longest a run may take in wall-clock time (zero: no limit).
  explicit EmulatorExecutor(std::string catalog = "",
                            absl::Duration time_limit = absl::ZeroDuration());

  std::string capability() const override;
  std::string version() const override;
  absl::StatusOr<ExecutionResult> Run(const iommufarm::v1::Job& job, CancelToken& cancel) override;

  // The emulator run a job asks for (exposed for tests).
  absl::StatusOr<farm::emu::RunSpec> SpecForJob(const iommufarm::v1::Job& job) const;

 private:
  const std::string catalog_;
  const std::string catalog_name_;  // "" when no catalog could be read
  const absl::Duration time_limit_;
};

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_EMULATOR_EXECUTOR_H_
