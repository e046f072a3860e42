// proto/kernel_config.h: the kernel config a matrix names (`kernel_config:`
// in a spec, iommufarm.v1.KernelConfig), how it reaches a build job and how
// kernels built with it are told apart. Shared by the scheduler (checks at
// submit, build keys), the kbuild agent (the build) and the vm agent (its
// offers), so they agree on one id.
//
// A config is a base, a make target of kernel_config_targets() or a config
// file's text, and fragments merged over it after the shipped ones
// (lib/kbuild/fragments.h). Its id (KernelConfigId) is "" for the default
// (no kernel_config: the build agent's --kbuild-base and the shipped
// fragments), so the default keeps the build keys and store entries it had;
// any other config's id is 16 hex digits of a SHA-256 over its options (see
// KernelConfigId), so comments and blank lines do not change it and a
// renamed file does not either.
//
// A kernel a dma-map-bench job boots is built with the shipped
// dma-map-bench fragment (CONFIG_DMA_MAP_BENCHMARK) too: that build is
// another kernel, named by BuildConfigId(id, true). A kernel a job of a host
// platform boots (a lab host kexecs into it) is built with the shipped host
// fragment instead of the vm guests' ones: another kernel too, named by
// HostBuildConfigId(id); only a config other than the default is built for
// a host (the default on a host is the host's own kernel). Offers (OfferRuns,
// proto/kernel_offers.h): a job runs on a vm or kexec offer whose
// kernel_config is JobBuildConfigId(job), and on a host offer only with the
// default config.
//
// Pure functions; thread-safe.
#ifndef PROTO_KERNEL_CONFIG_H_
#define PROTO_KERNEL_CONFIG_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::proto {

// The workload param naming the config id: on a real job (its series is
// then another series) and on its build job.
inline constexpr char kKernelConfigParam[] = "kernel_config";
// The build job's workload param holding the config (EncodeKernelConfig).
inline constexpr char kKernelConfigTextParam[] = "kernel_config_text";

// The base texts and fragments of one config, in bytes, at most.
inline constexpr size_t kMaxKernelConfigBytes = 256 * 1024;
inline constexpr int kMaxKernelConfigFragments = 32;

// The make targets a base may name, in the order messages list them.
const std::vector<std::string>& KernelConfigTargets();

// True for an unset config (no base, no fragments): the default.
bool IsDefaultKernelConfig(const iommufarm::v1::KernelConfig& config);

// What is wrong with `config`, one message each naming the field under
// "kernel_config" (kernel_config.base, kernel_config.fragments[1]): an
// unknown base, a fragment or base file that was not read (its text is
// empty), a line that is neither `CONFIG_X=value`, `# CONFIG_X is not set`,
// another comment nor blank, too many fragments or bytes.
std::vector<std::pair<std::string, std::string>> CheckKernelConfig(
    const iommufarm::v1::KernelConfig& config);

// The config's id: "" for the default; else the first 16 hex digits of the
// SHA-256 of
//   "kernel-config 1\n"
//   "base <make target>\n"  or  "base-file\n" and the base's option lines,
//   then per fragment, in order, "fragment\n" and its option lines,
// each option line as `CONFIG_X=value` or `# CONFIG_X is not set` with the
// blanks around it dropped, comments and blank lines left out.
std::string KernelConfigId(const iommufarm::v1::KernelConfig& config);

// The id of the build of config `config_id` that a dma-map-bench job boots
// (dma_map_bench) or that fio and iozone boot: `config_id` itself for the
// latter; "dma-map-bench" for the default's, else "<config_id>+dma-map-bench".
std::string BuildConfigId(std::string_view config_id, bool dma_map_bench);

// True for a BuildConfigId made with dma_map_bench.
bool IsDmaMapBenchBuild(std::string_view build_config_id);

// The id of the build of config `config_id` for a host platform:
// "<config_id>+host" ("host" for the default's, which is never built);
// BuildConfigId of it adds "+dma-map-bench".
std::string HostBuildConfigId(std::string_view config_id);

// True for a build config id made by HostBuildConfigId (with or without
// the dma-map-bench suffix).
bool IsHostBuild(std::string_view build_config_id);

// The config id a real job asks for: its kernel_config param, "" when
// none. JobBuildConfigId: the id of the build it boots: on a host platform
// (not a vm platform, proto/kernel_offers.h) with a config other than the
// default its HostBuildConfigId, else the id; then BuildConfigId of that
// with dma_map_bench for a dma-map-bench job.
std::string JobConfigId(const iommufarm::v1::Job& job);
std::string JobBuildConfigId(const iommufarm::v1::Job& job);

// The config as one string (protobuf text format) for the build job's
// param, and back.
std::string EncodeKernelConfig(const iommufarm::v1::KernelConfig& config);
absl::StatusOr<iommufarm::v1::KernelConfig> DecodeKernelConfig(std::string_view text);

}  // namespace farm::proto

#endif  // PROTO_KERNEL_CONFIG_H_
