// host_provider: the `host` KernelProvider, this machine's booted kernel. A
// request runs only when its release equals the host's `uname -r` and its
// mode equals the mode detected on the host; anything else is refused
// (FAILED_PRECONDITION naming both sides), so the job is left for an agent
// that can run it. The tool runs directly on the host through RunProcess.
//
// The host's facts are given, not read here: the agent detects them once
// (agent/host_facts.h DetectHostFacts) and passes them in.
//
// Thread-safety: immutable after construction; Run/CanRun are safe to call
// concurrently. Error contract: kernel_provider.h.
#ifndef AGENT_KERNELS_HOST_PROVIDER_H_
#define AGENT_KERNELS_HOST_PROVIDER_H_

#include "agent/kernels/kernel_provider.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::kernels {

class HostKernelProvider : public KernelProvider {
 public:
  // `margin` is added to the request's tool runtime for the wall-clock limit.
  explicit HostKernelProvider(iommufarm::v1::HostFacts host,
                              absl::Duration margin = absl::Seconds(60));

  std::string_view name() const override { return "host"; }
  absl::Status CanRun(const KernelRequest& request) const override;
  absl::StatusOr<KernelRun> Run(const KernelRequest& request) override;

 private:
  iommufarm::v1::HostFacts host_;
  absl::Duration margin_;
};

}  // namespace farm::kernels

#endif  // AGENT_KERNELS_HOST_PROVIDER_H_
