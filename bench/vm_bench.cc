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
//
// --model picks the machine model (default: the arch's, q35+intel-iommu or
// virt+smmuv3); --mode (repeatable) the modes to boot, offered or not (to
// measure what a model really runs): a mode that ends in a mode mismatch is
// reported as such and left out of the table.
//
// The IOPS are the guest's under TCG: they measure the emulated machine
// (QEMU's SMMUv3 or VT-d model and its NVMe), not a real IOMMU, and say
// nothing about hardware; the ratios against off, measured in the same run,
// are what compares modes. A run whose effective mode differs from the
// requested one, or whose fio fails, aborts the benchmark.
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
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
  std::string domain_type;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "vm_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vm_bench: boot-to-result time and guest fio IOPS per IOMMU mode (QEMU, TCG)"};
  std::string arch = farm::kernels::kArchArm64;
  const char* cache = std::getenv("FARM_KERNEL_CACHE");
  std::string kernels = cache ? cache : "/var/cache/iommu-farm/kernels";
  std::string release, initramfs;
  int repeats = 5, runtime = 2;
  std::string model;
  std::vector<std::string> mode_names;
  app.add_option("--arch", arch, "guest architecture")
      ->check(CLI::IsMember({"aarch64", "x86_64"}))
      ->capture_default_str();
  app.add_option("--kernels", kernels, "scripts/fetch-test-kernels' directory")
      ->capture_default_str();
  app.add_option("--release", release, "kernel release (default: the newest of --arch)");
  app.add_option("--initramfs", initramfs,
                 "guest root (default: scripts/build-guest-root --arch ARCH builds or finds it)");
  app.add_option("--repeats", repeats, "boots per mode")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--runtime", runtime, "fio runtime in seconds")
      ->check(CLI::Range(1, 60))
      ->capture_default_str();
  app.add_option("--model", model, "machine model (default: the arch's)")
      ->check(CLI::IsMember(
          {farm::kernels::kModelIntel, farm::kernels::kModelAmd, farm::kernels::kModelSmmuv3}));
  app.add_option("--mode", mode_names, "mode to boot, repeatable (default: the offered ones)")
      ->check(CLI::IsMember({"off", "passthrough", "strict", "lazy"}));
  CLI11_PARSE(app, argc, argv);

  if (initramfs.empty()) {
    farm::runners::ProcessOptions build;
    build.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--arch", arch};
    build.timeout = absl::Minutes(10);
    absl::StatusOr<farm::runners::ProcessResult> r = farm::runners::RunProcess(build);
    if (!r.ok()) return Fail(absl::StrCat("build-guest-root: ", r.status().ToString()));
    if (!r->ok()) return Fail(absl::StrCat("build-guest-root: ", r->Describe(), r->stderr_data));
    initramfs = std::string(absl::StripAsciiWhitespace(r->stdout_data));
  }

  absl::StatusOr<farm::runners::ScopedTempDir> scratch =
      farm::runners::ScopedTempDir::Create(fs::temp_directory_path(), "vm-bench-");
  if (!scratch.ok()) return Fail(scratch.status().ToString());
  const std::string tmpl = scratch->path().string();
  VmConfig config;
  config.arch = arch;
  config.qemu = absl::StrCat("qemu-system-", arch);
  config.kernels_dir = kernels;
  config.initramfs = initramfs;
  config.allow_dir = tmpl;
  config.boot_timeout = absl::Seconds(120);
  VmKernelProvider vm(config);
  std::vector<pb::KernelOffer> offers = vm.Offers();
  if (offers.empty()) {
    return Fail(absl::StrCat("no ", arch, " kernel under ", kernels,
                             " (scripts/fetch-test-kernels --arch ",
                             arch == "aarch64" ? "arm64" : "amd64", ")"));
  }
  if (release.empty()) release = offers.back().release();  // sorted: the newest last
  if (model.empty()) model = vm.MachineModel();
  std::vector<pb::IommuMode> modes;
  bool offered = false;
  for (const pb::KernelOffer& o : offers) {
    if (o.release() != release || o.machine_model() != model) continue;
    offered = true;
    if (!mode_names.empty()) continue;
    for (int m : o.modes()) modes.push_back(static_cast<pb::IommuMode>(m));
  }
  if (!offered) return Fail(absl::StrCat("release ", release, " is not offered under ", model));
  for (const std::string& n : mode_names) {
    for (pb::IommuMode m : {pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_STRICT,
                            pb::IOMMU_MODE_LAZY}) {
      if (farm::proto::ModeName(m) == n) modes.push_back(m);
    }
  }
  absl::StatusOr<std::string> qemu_version = farm::kernels::QemuVersion(config.qemu);
  std::printf("vm_bench: %s on %s (%s, %s), fio randread 4k qd16 libaio direct %d s, %d repeats\n",
              release.c_str(), model.c_str(), config.accel.c_str(),
              qemu_version.ok() ? qemu_version->c_str() : "qemu version unknown", runtime, repeats);
  std::fflush(stdout);

  std::map<pb::IommuMode, ModeStats> stats;
  for (int rep = 0; rep < repeats; ++rep) {
    for (pb::IommuMode mode : modes) {
      KernelRequest r;
      r.kernel_release = release;
      r.mode = mode;
      r.machine_model = model;
      r.tool_argv = {"fio",
                     "--name=randread",
                     "--filename=/dev/nvme0n1",
                     "--rw=randread",
                     "--bs=4k",
                     "--direct=1",
                     "--ioengine=libaio",
                     "--iodepth=16",
                     absl::StrCat("--runtime=", runtime),
                     "--time_based",
                     "--output-format=json"};
      r.tool_runtime = absl::Seconds(runtime);
      absl::StatusOr<KernelRun> run = vm.Run(r);
      const std::string name = farm::proto::ModeName(mode);
      if (!run.ok() && run.status().code() == absl::StatusCode::kFailedPrecondition &&
          absl::StrContains(run.status().message(), "requested IOMMU mode")) {
        std::printf("  repeat %d %-11s mismatch: %s\n", rep + 1, name.c_str(),
                    std::string(run.status().message()).c_str());
        std::fflush(stdout);
        continue;
      }
      if (!run.ok()) return Fail(absl::StrCat(name, ": ", run.status().ToString()));
      if (run->effective != mode) return Fail(absl::StrCat(name, ": ran ", run->effective_detail));
      if (run->tool_exit != 0) return Fail(absl::StrCat(name, ": fio failed: ", run->tool_stderr));
      absl::StatusOr<farm::runners::FioReport> report =
          farm::runners::ParseFioJson(run->tool_stdout);
      if (!report.ok() || report->jobs.size() != 1) {
        return Fail(absl::StrCat(
            name, ": fio's JSON: ", report.ok() ? "not one job" : report.status().ToString()));
      }
      ModeStats& s = stats[mode];
      s.seconds.push_back(absl::ToDoubleSeconds(run->wall_time));
      s.iops.push_back(report->jobs[0].read.iops);
      s.domain_type = run->domain_type.empty() ? "none" : run->domain_type;
      std::printf("  repeat %d %-11s %6.2f s  %8.0f IOPS  (%s)\n", rep + 1, name.c_str(),
                  s.seconds.back(), s.iops.back(), s.domain_type.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\n| mode | group type | boot-to-result median (min-max) | read IOPS median |\n");
  std::printf("|---|---|---|---|\n");
  std::vector<double> all;
  for (pb::IommuMode mode : modes) {
    if (stats.count(mode) == 0) continue;  // mismatched on every repeat
    const ModeStats& s = stats[mode];
    all.insert(all.end(), s.seconds.begin(), s.seconds.end());
    std::printf("| %s | %s | %.2f s (%.2f-%.2f) | %.0f |\n", farm::proto::ModeName(mode).c_str(),
                s.domain_type.c_str(), Median(s.seconds),
                *std::min_element(s.seconds.begin(), s.seconds.end()),
                *std::max_element(s.seconds.begin(), s.seconds.end()), Median(s.iops));
  }
  if (all.empty()) return Fail("no mode ran as requested");
  std::printf("\nboot-to-result per VM job, all modes: median %.2f s over %zu runs\n", Median(all),
              all.size());
  if (stats.count(pb::IOMMU_MODE_OFF) != 0) {
    const double off = Median(stats[pb::IOMMU_MODE_OFF].iops);
    for (pb::IommuMode mode :
         {pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_PASSTHROUGH}) {
      if (stats.count(mode) == 0 || off <= 0) continue;
      std::printf("read IOPS %s/off: %.3f\n", farm::proto::ModeName(mode).c_str(),
                  Median(stats[mode].iops) / off);
    }
  }
  return 0;
}
