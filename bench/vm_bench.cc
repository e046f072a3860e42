// vm_bench: the vm kernel provider end to end, one QEMU guest per run. For
// each repeat it boots one kernel in every mode it offers (interleaved:
// off, passthrough, strict, lazy, off, ... so that the load of a shared
// machine falls on every mode alike), runs a fio randread on the guest's
// NVMe and reports per mode the boot-to-result time (QEMU start to the
// parsed result; median, min, max) and the guest's read IOPS (median), then
// the ratios strict/off, lazy/off and passthrough/off of the medians.
//
//   build/bin/vm_bench [--arch aarch64|x86_64] [--kernels DIR] [--release R]
//                      [--initramfs FILE] [--repeats 5] [--runtime 2]
//                      [--model q35+amd-iommu] [--mode lazy]...
//                      [--kernel-counters off|on|both] [--accel tcg-icount]
//
// --model picks the machine model (default: the arch's, q35+intel-iommu or
// virt+smmuv3); --mode (repeatable) the modes to boot, offered or not (to
// measure what a model really runs): a mode that ends in a mode mismatch is
// reported as such and left out of the table. --kernel-counters runs the
// guests with the init's IOMMU counters around fio (farm-agent
// --kernel-counters: iommu:map/unmap tracepoints in tracefs instances with a
// hist trigger, VT-d dmar_perf_latency where the kernel has it); `both` runs
// every mode without and with them, in turn (the order swapped each repeat),
// and reports the IOPS ratio with/without per mode: the counters' overhead.
//
// The IOPS are the guest's under TCG: they measure the emulated machine
// (QEMU's SMMUv3 or VT-d model and its NVMe), not a real IOMMU, and say
// nothing about hardware; the ratios against off, measured in the same run,
// are what compares modes. A run whose effective mode differs from the
// requested one is printed as a mismatch and left out of the figures; one
// whose fio fails aborts the benchmark.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "agent/kernels/accel_probe.h"
#include "agent/kernels/vm_provider.h"
#include "agent/runners/fio_json.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"
#include "proto/names.h"

namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;
using farm::kernels::KernelRequest;
using farm::kernels::KernelRun;
using farm::kernels::VmConfig;
using farm::kernels::VmKernelProvider;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct ModeStats {
  std::vector<double> seconds;  // boot to result
  std::vector<double> iops;
  std::vector<double> maps;  // iommu:map events counted; empty without counters
  std::string domain_type;
};

// A mode, and whether its guests counted the kernel's IOMMU events.
using Variant = std::pair<pb::IommuMode, bool>;

int Fail(const std::string& what) {
  std::fprintf(stderr, "vm_bench: %s\n", what.c_str());
  return 1;
}

struct Flags {
  std::string arch = farm::kernels::kArchArm64;
  std::string kernels;
  std::string release, initramfs;
  int repeats = 5, runtime = 2;
  std::string model;
  std::vector<std::string> mode_names;
  std::string counters = "off";  // off, on, both
  std::string accel = "tcg";
};

void AddFlags(CLI::App& app, Flags* f) {
  const char* cache = std::getenv("FARM_KERNEL_CACHE");
  f->kernels = cache ? cache : "/var/cache/iommu-farm/kernels";
  app.add_option("--arch", f->arch, "guest architecture")
      ->check(CLI::IsMember({"aarch64", "x86_64"}))
      ->capture_default_str();
  app.add_option("--kernels", f->kernels, "scripts/fetch-test-kernels' directory")
      ->capture_default_str();
  app.add_option("--release", f->release, "kernel release (default: the newest of --arch)");
  app.add_option("--initramfs", f->initramfs,
                 "guest root (default: scripts/build-guest-root --arch ARCH builds or finds it)");
  app.add_option("--repeats", f->repeats, "boots per mode")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--runtime", f->runtime, "fio runtime in seconds")
      ->check(CLI::Range(1, 60))
      ->capture_default_str();
  app.add_option("--model", f->model, "machine model (default: the arch's)")
      ->check(CLI::IsMember(
          {farm::kernels::kModelIntel, farm::kernels::kModelAmd, farm::kernels::kModelSmmuv3}));
  app.add_option("--mode", f->mode_names, "mode to boot, repeatable (default: the offered ones)")
      ->check(CLI::IsMember(farm::proto::ModeNames()));
  app.add_option("--accel", f->accel,
                 "QEMU accelerator: tcg, tcg-icount (x86_64: one CPU, instruction-timed figures "
                 "that repeat) or kvm")
      ->check(CLI::IsMember({"tcg", "tcg-icount", "kvm"}))
      ->capture_default_str();
  app.add_option("--kernel-counters", f->counters,
                 "the guests count the kernel's IOMMU events around fio (on), or not (off), or "
                 "each mode runs both ways and the IOPS ratio with/without is printed (both)")
      ->check(CLI::IsMember({"off", "on", "both"}))
      ->capture_default_str();
}

// The guest root scripts/build-guest-root builds (or finds) for `arch`.
absl::StatusOr<std::string> BuildGuestRoot(const std::string& arch) {
  farm::process::ProcessOptions build;
  build.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--arch", arch};
  build.timeout = absl::Minutes(10);
  absl::StatusOr<farm::process::ProcessResult> r = farm::process::RunProcess(build);
  if (!r.ok())
    return absl::InternalError(absl::StrCat("build-guest-root: ", r.status().ToString()));
  if (!r->ok()) {
    return absl::InternalError(absl::StrCat("build-guest-root: ", r->Describe(), r->stderr_data));
  }
  return std::string(absl::StripAsciiWhitespace(r->stdout_data));
}

// Defaults --release (the newest offered) and --model (the provider's), and
// returns the modes to boot: --mode's, else those the release's offer lists.
absl::StatusOr<std::vector<pb::IommuMode>> ChooseModes(const VmKernelProvider& vm, Flags& f) {
  std::vector<pb::KernelOffer> offers = vm.Offers();
  if (offers.empty()) {
    return absl::NotFoundError(absl::StrCat("no ", f.arch, " kernel under ", f.kernels,
                                            " (scripts/fetch-test-kernels --arch ",
                                            f.arch == "aarch64" ? "arm64" : "amd64", ")"));
  }
  if (f.release.empty()) f.release = offers.back().release();  // sorted: the newest last
  if (f.model.empty()) f.model = vm.MachineModel();
  std::vector<pb::IommuMode> modes;
  bool offered = false;
  for (const pb::KernelOffer& o : offers) {
    if (o.release() != f.release || o.machine_model() != f.model) continue;
    offered = true;
    if (!f.mode_names.empty()) continue;
    for (int m : o.modes()) modes.push_back(static_cast<pb::IommuMode>(m));
  }
  if (!offered) {
    return absl::NotFoundError(
        absl::StrCat("release ", f.release, " is not offered under ", f.model));
  }
  for (const std::string& n : f.mode_names) modes.push_back(farm::proto::ModeFromName(n));
  return modes;
}

// The fio randread every run does on the guest's NVMe.
KernelRequest FioRequest(const Flags& f, pb::IommuMode mode) {
  KernelRequest r;
  r.kernel_release = f.release;
  r.mode = mode;
  r.machine_model = f.model;
  r.tool_argv = {"fio",
                 "--name=randread",
                 "--filename=/dev/nvme0n1",
                 "--rw=randread",
                 "--bs=4k",
                 "--direct=1",
                 "--ioengine=libaio",
                 "--iodepth=16",
                 absl::StrCat("--runtime=", f.runtime),
                 "--time_based",
                 "--output-format=json"};
  r.tool_runtime = absl::Seconds(f.runtime);
  return r;
}

// One boot of `mode` by `vm` into `stats`; a mode mismatch is printed and
// skipped, any other failure ends the benchmark.
absl::Status RunOnce(VmKernelProvider& vm, const Flags& f, int rep, Variant variant,
                     std::map<Variant, ModeStats>* stats) {
  const auto [mode, counted] = variant;
  absl::StatusOr<KernelRun> run = vm.Run(FioRequest(f, mode));
  const std::string name = absl::StrCat(farm::proto::ModeName(mode), counted ? "+counters" : "");
  if (!run.ok() && run.status().code() == absl::StatusCode::kFailedPrecondition &&
      absl::StrContains(run.status().message(), "requested IOMMU mode")) {
    std::printf("  repeat %d %-20s mismatch: %s\n", rep + 1, name.c_str(),
                std::string(run.status().message()).c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }
  if (!run.ok()) return absl::InternalError(absl::StrCat(name, ": ", run.status().ToString()));
  // A kernel that chose another mode is a run, not a figure of this mode.
  if (run->effective != mode) {
    std::printf("  repeat %d %-20s mismatch: ran %s: %s\n", rep + 1, name.c_str(),
                farm::proto::ModeName(run->effective).c_str(), run->effective_detail.c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }
  if (run->tool_exit != 0) {
    return absl::InternalError(absl::StrCat(name, ": fio failed: ", run->tool_stderr));
  }
  absl::StatusOr<farm::runners::FioReport> report = farm::runners::ParseFioJson(run->tool_stdout);
  if (!report.ok() || report->jobs.size() != 1) {
    return absl::InternalError(absl::StrCat(
        name, ": fio's JSON: ", report.ok() ? "not one job" : report.status().ToString()));
  }
  ModeStats& s = (*stats)[variant];
  s.seconds.push_back(absl::ToDoubleSeconds(run->wall_time));
  s.iops.push_back(report->jobs[0].read.iops);
  s.domain_type = run->domain_type.empty() ? "none" : run->domain_type;
  std::string counts;
  if (counted && run->monitors) {
    auto it = run->monitors->events().find("trace/iommu:map");
    if (it != run->monitors->events().end()) {
      s.maps.push_back(static_cast<double>(it->second));
      counts = absl::StrCat(", ", it->second, " iommu:map");
    } else {
      counts =
          absl::StrCat(", no iommu:map count: ", absl::StrJoin(run->monitors->event_notes(), "; "));
    }
  }
  std::printf("  repeat %d %-20s %6.2f s  %8.0f IOPS  (%s%s)\n", rep + 1, name.c_str(),
              s.seconds.back(), s.iops.back(), s.domain_type.c_str(), counts.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

// Every repeat boots every mode once per provider (`providers`: whether its
// guests count, and the provider), in turn, the providers' order swapped
// each repeat so that neither always runs first.
absl::Status RunRepeats(const std::vector<std::pair<bool, VmKernelProvider*>>& providers,
                        const Flags& f, const std::vector<pb::IommuMode>& modes,
                        std::map<Variant, ModeStats>* stats) {
  for (int rep = 0; rep < f.repeats; ++rep) {
    for (pb::IommuMode mode : modes) {
      for (size_t i = 0; i < providers.size(); ++i) {
        const auto& [counted, vm] = providers[rep % 2 == 0 ? i : providers.size() - 1 - i];
        if (absl::Status st = RunOnce(*vm, f, rep, {mode, counted}, stats); !st.ok()) return st;
      }
    }
  }
  return absl::OkStatus();
}

// The table per mode, the overall boot-to-result median, the IOPS ratios
// against off and, with both, with/without the counters. False when no mode
// ran as requested.
bool PrintResults(const std::vector<pb::IommuMode>& modes, std::map<Variant, ModeStats>& stats) {
  std::printf(
      "\n| mode | counters | group type | boot-to-result median (min-max) | read IOPS median "
      "| iommu:map median |\n");
  std::printf("|---|---|---|---|---|---|\n");
  std::vector<double> all;
  for (pb::IommuMode mode : modes) {
    for (bool counted : {false, true}) {
      if (stats.count({mode, counted}) == 0) continue;  // not run, or mismatched every time
      const ModeStats& s = stats[{mode, counted}];
      all.insert(all.end(), s.seconds.begin(), s.seconds.end());
      std::printf("| %s | %s | %s | %.2f s (%.2f-%.2f) | %.0f | %s |\n",
                  farm::proto::ModeName(mode).c_str(), counted ? "on" : "off",
                  s.domain_type.c_str(), Median(s.seconds),
                  *std::min_element(s.seconds.begin(), s.seconds.end()),
                  *std::max_element(s.seconds.begin(), s.seconds.end()), Median(s.iops),
                  s.maps.empty() ? "-" : absl::StrCat(Median(s.maps)).c_str());
    }
  }
  if (all.empty()) return false;
  std::printf("\nboot-to-result per VM job, all modes: median %.2f s over %zu runs\n", Median(all),
              all.size());
  for (bool counted : {false, true}) {
    if (stats.count({pb::IOMMU_MODE_OFF, counted}) == 0) continue;
    const double off = Median(stats[{pb::IOMMU_MODE_OFF, counted}].iops);
    for (pb::IommuMode mode :
         {pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_PASSTHROUGH}) {
      if (stats.count({mode, counted}) == 0 || off <= 0) continue;
      std::printf("read IOPS %s/off%s: %.3f\n", farm::proto::ModeName(mode).c_str(),
                  counted ? " (counters on)" : "", Median(stats[{mode, counted}].iops) / off);
    }
  }
  for (pb::IommuMode mode : modes) {
    if (stats.count({mode, false}) == 0 || stats.count({mode, true}) == 0) continue;
    const double without = Median(stats[{mode, false}].iops);
    if (without <= 0) continue;
    std::printf("read IOPS with/without kernel counters, %s: %.3f\n",
                farm::proto::ModeName(mode).c_str(), Median(stats[{mode, true}].iops) / without);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vm_bench: boot-to-result time and guest fio IOPS per IOMMU mode (QEMU, TCG)"};
  Flags flags;
  AddFlags(app, &flags);
  CLI11_PARSE(app, argc, argv);

  if (flags.initramfs.empty()) {
    absl::StatusOr<std::string> built = BuildGuestRoot(flags.arch);
    if (!built.ok()) return Fail(std::string(built.status().message()));
    flags.initramfs = *std::move(built);
  }
  absl::StatusOr<farm::process::ScopedTempDir> scratch =
      farm::process::ScopedTempDir::Create(fs::temp_directory_path(), "vm-bench-");
  if (!scratch.ok()) return Fail(scratch.status().ToString());
  VmConfig config;
  config.arch = flags.arch;
  config.qemu = absl::StrCat("qemu-system-", flags.arch);
  config.kernels_dir = flags.kernels;
  config.initramfs = flags.initramfs;
  config.allow_dir = scratch->path().string();
  config.boot_timeout = absl::Seconds(120);
  config.accel = flags.accel;
  VmKernelProvider vm(config);
  VmConfig counted_config = config;
  counted_config.kernel_counters = true;
  VmKernelProvider counted_vm(counted_config);
  std::vector<std::pair<bool, VmKernelProvider*>> providers;
  if (flags.counters != "on") providers.emplace_back(false, &vm);
  if (flags.counters != "off") providers.emplace_back(true, &counted_vm);
  absl::StatusOr<std::vector<pb::IommuMode>> modes = ChooseModes(vm, flags);
  if (!modes.ok()) return Fail(std::string(modes.status().message()));

  absl::StatusOr<std::string> qemu_version = farm::kernels::QemuVersion(config.qemu);
  std::printf(
      "vm_bench: %s on %s (%s, %s), fio randread 4k qd16 libaio direct %d s, %d repeats, "
      "kernel counters %s\n",
      flags.release.c_str(), flags.model.c_str(), config.accel.c_str(),
      qemu_version.ok() ? qemu_version->c_str() : "qemu version unknown", flags.runtime,
      flags.repeats, flags.counters.c_str());
  std::fflush(stdout);
  std::map<Variant, ModeStats> stats;
  if (absl::Status st = RunRepeats(providers, flags, *modes, &stats); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  if (!PrintResults(*modes, stats)) return Fail("no mode ran as requested");
  return 0;
}
