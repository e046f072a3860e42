// proto/kernel_params.h: the kernel parameters a job may add to the command
// line of a kernel booted for it (a VM guest), through its workload param
// `kernel_params` ("intel_iommu=sm_on iommu.forcedac=1"). Only names on an
// allow-list of IOMMU, DMA-API and test switches pass; anything that could
// change what runs as init or where the console goes (init=, rdinit=,
// root=, console=, panic=, ...) is refused, and so are the switches the
// job's mode owns (iommu.strict, iommu.passthrough, iommu=pt|nopt; use the
// matrix's modes instead). The scheduler checks them at submit (a refused
// parameter is INVALID_ARGUMENT) and the vm provider again before boot.
//
// Pure functions; thread-safe.
#ifndef PROTO_KERNEL_PARAMS_H_
#define PROTO_KERNEL_PARAMS_H_

#include <string>
#include <string_view>
#include <vector>

namespace farm::proto {

// The workload param that carries a job's extra kernel parameters.
inline constexpr char kKernelParamsKey[] = "kernel_params";

// The allowed parameter names, sorted: for --help and error messages.
const std::vector<std::string>& AllowedKernelParams();

// Splits `params` at blanks and checks every word: NAME or NAME=VALUE with
// NAME on the allow-list and VALUE of [A-Za-z0-9._,:+-]. On success returns
// the words and leaves `error` empty; otherwise `error` says which word is
// refused and why.
std::vector<std::string> ParseKernelParams(std::string_view params, std::string* error);

}  // namespace farm::proto

#endif  // PROTO_KERNEL_PARAMS_H_
