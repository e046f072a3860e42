#include "agent/executors/executors.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/executors/emulator_executor.h"
#include "agent/executors/kernel_executor.h"
#include "agent/executors/real_executors.h"
#include "agent/kernels/accel_probe.h"
#include "proto/names.h"

namespace farm::agent {
namespace pb = ::iommufarm::v1;

namespace {

absl::StatusOr<std::unique_ptr<kernels::VmKernelProvider>> MakeVmProvider(
    const ExecutorConfig& config, std::string* qemu_version) {
  if (config.allow_dirs.empty()) {
    return absl::InvalidArgumentError("the vm provider needs an --allow-dir for its scratch files");
  }
  kernels::VmConfig vm;
  if (config.vm_arch != kernels::kArchX86 && config.vm_arch != kernels::kArchArm64) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown guest architecture '", config.vm_arch, "' (x86_64, aarch64)"));
  }
  vm.arch = config.vm_arch;
  vm.qemu = config.qemu.empty() ? absl::StrCat("qemu-system-", config.vm_arch) : config.qemu;
  vm.kernels_dir = config.vm_kernels_dir;
  vm.initramfs = config.vm_initramfs;
  vm.allow_dir = config.allow_dirs.front();
  vm.kernel_counters = config.kernel_counters;
  if (absl::Status accel = kernels::CheckAccel(config.vm_accel, vm.arch, kernels::HostArch());
      !accel.ok()) {
    return accel;
  }
  absl::StatusOr<std::string> version = kernels::QemuVersion(vm.qemu);
  if (!version.ok()) return version.status();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(vm.initramfs, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("no guest initramfs '", vm.initramfs,
                                                      "' (scripts/build-guest-root builds it)"));
  }
  vm.accel = config.vm_accel == "auto" ? "tcg-icount" : config.vm_accel;
  vm.icount_shift = config.vm_icount_shift;
  auto provider = std::make_unique<kernels::VmKernelProvider>(vm);
  const std::vector<pb::KernelOffer> offers = provider->Offers();
  // A store this agent's kbuild fills may start empty.
  const bool builds_fill_store =
      !config.kbuild.trees.empty() && config.kbuild.store_dir == config.vm_kernels_dir;
  if (offers.empty() && !builds_fill_store) {
    return absl::FailedPreconditionError(
        absl::StrCat("no kernel under ", vm.kernels_dir,
                     " (scripts/fetch-test-kernels fetches the test kernels)"));
  }
  if (config.vm_accel == "auto" && offers.empty()) {
    std::fprintf(stderr, "farm-agent: vm accel tcg-icount (no kernel to probe KVM with yet)\n");
  } else if (config.vm_accel == "auto") {
    // Tried once, at start: a /dev/kvm that exists may still not run guests.
    std::string why;
    vm.accel = kernels::ResolveAccel(
        "auto",
        [&] { return kernels::ProbeKvm(vm, offers.front().release(), offers.front().commit()); },
        &why);
    std::fprintf(stderr, "farm-agent: vm accel %s%s\n", vm.accel.c_str(),
                 why.empty() ? " (KVM probe booted a guest)" : (" (" + why + ")").c_str());
    provider = std::make_unique<kernels::VmKernelProvider>(vm);
  }
  std::vector<std::string> releases;
  for (const pb::KernelOffer& o : provider->Offers()) {
    releases.push_back(o.commit() == o.release() ? o.release()
                                                 : absl::StrCat(o.commit(), "=", o.release()));
  }
  const std::string accel =
      vm.accel == "tcg-icount" ? absl::StrCat(vm.accel, " shift=", vm.icount_shift) : vm.accel;
  std::fprintf(stderr, "farm-agent: vm kernels offered (%s, %s): %s\n", version->c_str(),
               accel.c_str(), absl::StrJoin(releases, ", ").c_str());
  *qemu_version = *std::move(version);
  return provider;
}

// The host half of a real executor: the installed fio or iozone
// (agent/runners; NotFound when it is not installed), or for dma-map-bench,
// which runs in guests only, none.
absl::StatusOr<std::unique_ptr<Executor>> HostTool(pb::Executor kind, const std::string& cap,
                                                   const ExecutorConfig& config) {
  if (kind == pb::EXECUTOR_DMA_MAP_BENCH) return std::make_unique<GuestOnlyTool>(cap);
  farm::runners::RealExecutorOptions real;
  real.allow_dirs = config.allow_dirs;
  real.allow_devices = config.allow_devices;
  real.tool = kind == pb::EXECUTOR_FIO ? config.fio : config.iozone;
  real.monitors.perf = config.perf;
  real.monitors.kernel_counters = config.kernel_counters;
  if (!config.allow_dirs.empty()) real.monitors.scratch_dir = config.allow_dirs.front();
  return farm::runners::MakeRealExecutor(cap, real);
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Executor>>> MakeExecutors(
    const std::vector<std::string>& capabilities, const ExecutorConfig& config) {
  std::vector<std::unique_ptr<Executor>> out;
  std::set<std::string> seen;
  if (capabilities.empty()) {
    return absl::InvalidArgumentError("no capabilities given");
  }
  const kernels::VmKernelProvider* first_vm = nullptr;
  std::string first_qemu_version;
  for (const std::string& cap : capabilities) {
    if (!seen.insert(cap).second) continue;
    const pb::Executor kind = proto::ExecutorFromName(cap);
    if (kind == pb::EXECUTOR_EMULATOR) {
      out.push_back(std::make_unique<EmulatorExecutor>(config.emu_catalog, config.emu_time_limit));
    } else if (kind == pb::EXECUTOR_KBUILD) {
      if (config.kbuild.trees.empty() || config.kbuild.store_dir.empty()) {
        return absl::InvalidArgumentError(
            "kbuild needs --kbuild-tree CATALOG=TREE and --kernel-store DIR");
      }
      out.push_back(std::make_unique<KbuildExecutor>(config.kbuild));
    } else if (proto::IsRealExecutor(kind)) {
      absl::StatusOr<std::unique_ptr<Executor>> executor = HostTool(kind, cap, config);
      if (executor.status().code() == absl::StatusCode::kNotFound) {
        std::fprintf(stderr, "farm-agent: %s; not advertising it\n",
                     std::string(executor.status().message()).c_str());
        continue;
      }
      if (!executor.ok()) return executor.status();
      std::unique_ptr<kernels::VmKernelProvider> vm;
      std::string qemu_version;
      // A kexec agent's kernel store holds the kernels it boots itself; a
      // vm provider beside it needs its own guest initramfs.
      const bool vm_wanted = !config.vm_kernels_dir.empty() &&
                             (config.kexec == nullptr || !config.vm_initramfs.empty());
      if (vm_wanted && first_vm != nullptr) {
        // The real executors share one provider's checks (and its one KVM probe).
        vm = std::make_unique<kernels::VmKernelProvider>(first_vm->config());
        qemu_version = first_qemu_version;
      } else if (vm_wanted) {
        absl::StatusOr<std::unique_ptr<kernels::VmKernelProvider>> made =
            MakeVmProvider(config, &qemu_version);
        if (!made.ok()) {
          std::fprintf(stderr, "farm-agent: vm kernels not offered: %s\n",
                       std::string(made.status().message()).c_str());
        } else {
          vm = *std::move(made);
          first_vm = vm.get();  // owned by the executor pushed below, kept in `out`
          first_qemu_version = qemu_version;
        }
      }
      if (kind == pb::EXECUTOR_DMA_MAP_BENCH && vm == nullptr) {
        std::fprintf(stderr,
                     "farm-agent: dma-map-bench runs in vm guests only and this agent has no vm "
                     "provider (--vm-kernels); not advertising it\n");
        continue;
      }
      out.push_back(std::make_unique<KernelExecutor>(*std::move(executor), config.host,
                                                     std::move(vm), qemu_version, config.kexec));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown capability '", cap,
                       "' (known: ", absl::StrJoin(proto::ExecutorNames(), ", "), ")"));
    }
  }
  return out;
}

}  // namespace farm::agent
