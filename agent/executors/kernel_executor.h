// kernel_executor: the real fio or iozone executor that runs a job under the kernel
// its commit names, through the agent's kernel providers
// (agent/kernels/kernel_provider.h). It offers, per provider, the kernel
// releases and IOMMU modes it can really run (Executor::kernels(), sent at
// registration) and runs a leased job with the first offer that runs it
// (proto::FindOffer, the scheduler's own rule):
//   - `host`: the host's release in its detected mode; the job goes to the
//     wrapped host executor (today's real fio run on --allow-dir targets);
//   - `vm`: the release booted under QEMU (VmKernelProvider) with the job's
//     mode, fio on the guest's NVMe, iozone on a file system the guest makes
//     on it (the same spec check and report parser as the host runners, so
//     the same metric names), dma-map-bench as the build's dma_map_benchmark
//     on the guest's spare device (the emulator's metric names); the
//     result's host facts are the guest's (release, effective mode,
//     GuestFacts with the accelerator and icount shift).
//   - `kexec`: the store's kernels booted on this host (KexecKernelProvider).
//     A job whose kernel or mode is not running asks the agent to hold its
//     lease (LeaseContext::hold, for the provider's boot timeout plus its
//     margin), then the provider loads the kernel and reboots: the result
//     is ExecutionResult::rebooting. A resumed job (its kernel proven at
//     agent start) runs the wrapped host executor; the result's host facts
//     are the booted kernel's (release, effective mode, GuestFacts with
//     provider "kexec", its command line and group type).
//
// Error contract: executor.h. A job no offer runs (the scheduler leased it
// on a stale registration) is UNAVAILABLE, retryable; a guest that never got
// to a result keeps the provider's code (ABORTED: retryable), a mode
// mismatch or a refused spec is permanent.
//
// Thread-safety: immutable after construction; Run is safe to call from
// several worker threads (each VM run has its own scratch directory); a
// kexec host runs one slot.
// Ownership: owns the wrapped executor and the provider.
#ifndef AGENT_EXECUTORS_KERNEL_EXECUTOR_H_
#define AGENT_EXECUTORS_KERNEL_EXECUTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "agent/executors/executor.h"
#include "agent/kernels/kexec_provider.h"
#include "agent/kernels/vm_provider.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// The host half of an executor whose tool runs only in vm guests
// (dma-map-bench: the kernel's benchmark driver binds the guest's spare
// device). The KernelExecutor wrapping it offers no host kernel, so the
// scheduler never leases it a host run; Run refuses one all the same.
class GuestOnlyTool final : public Executor {
 public:
  explicit GuestOnlyTool(std::string capability) : capability_(std::move(capability)) {}
  std::string capability() const override { return capability_; }
  std::string version() const override;
  absl::StatusOr<ExecutionResult> Run(const iommufarm::v1::Job& job, CancelToken& cancel) override;

 private:
  const std::string capability_;
};

class KernelExecutor final : public Executor {
 public:
  // `host_tool`: the host's real fio executor (not null). `vm`: may be null
  // (no vm provider); `qemu_version` is recorded in guest results. `kexec`:
  // may be null (no kexec provider); shared with the agent, which resumes
  // and finishes its boots.
  KernelExecutor(std::unique_ptr<Executor> host_tool, iommufarm::v1::HostFacts host,
                 std::unique_ptr<kernels::VmKernelProvider> vm, std::string qemu_version,
                 std::shared_ptr<kernels::KexecKernelProvider> kexec = nullptr);

  std::string capability() const override { return host_tool_->capability(); }
  std::string version() const override { return host_tool_->version(); }
  std::vector<iommufarm::v1::KernelOffer> kernels() const override;
  absl::StatusOr<ExecutionResult> Run(const iommufarm::v1::Job& job, CancelToken& cancel) override {
    return RunLeased(job, cancel, LeaseContext{});
  }
  absl::StatusOr<ExecutionResult> RunLeased(const iommufarm::v1::Job& job, CancelToken& cancel,
                                            const LeaseContext& lease) override;

 private:
  absl::StatusOr<ExecutionResult> RunInVm(const iommufarm::v1::Job& job,
                                          const iommufarm::v1::KernelOffer& offer,
                                          CancelToken& cancel);
  absl::StatusOr<ExecutionResult> RunKexec(const iommufarm::v1::Job& job,
                                           const iommufarm::v1::KernelOffer& offer,
                                           CancelToken& cancel, const LeaseContext& lease);

  const std::unique_ptr<Executor> host_tool_;
  const iommufarm::v1::HostFacts host_;
  const std::unique_ptr<kernels::VmKernelProvider> vm_;
  const std::string qemu_version_;
  const std::shared_ptr<kernels::KexecKernelProvider> kexec_;
};

}  // namespace farm::agent

#endif  // AGENT_EXECUTORS_KERNEL_EXECUTOR_H_
