// accel_bench: how far real-kernel figures repeat under each QEMU accel.
// For each repeat it runs every (accel, workload, commit) once, interleaved
// (tcg dma-map-bench A, tcg dma-map-bench B, tcg fio A, ...), through the
// agent's KernelExecutor on builds of a kernel store, and reports per
// triple the workload's leading figure (the kernel's dma_map_benchmark:
// unmap latency mean; fio: read IOPS), its coefficient of variation, the
// boot-to-result time (QEMU start to parsed samples) and its change against
// the first commit's. From each spread it derives the smallest change a
// two-sided t-test at alpha 0.01 finds with power 0.8 at that many repeats
// per commit, the analyzer's confirmation rule in its simplest form.
//
//   build-rel/bin/accel_bench --store DIR --commit SHA [--commit SHA2] [--arch x86_64]
//       [--accel tcg --accel tcg-icount] [--workload dma-map-bench --workload fio]
//       [--mode strict] [--repeats 5] [--initramfs FILE]
//
// The store is a kernel store holding builds with their dma_map_benchmark
// tool (farmctl kernels build); the figures are the emulated machine's, not
// hardware's. A run that fails (a boot that panics, a tool that fails) is
// counted and printed with its reason's first line, not averaged.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/executors/kernel_executor.h"
#include "agent/executors/real_executors.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"
#include "proto/names.h"

namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

struct Options {
  std::string store, initramfs, arch = "x86_64", mode = "strict";
  std::vector<std::string> commits;
  std::vector<std::string> accels = {"tcg", "tcg-icount"};
  std::vector<std::string> workloads = {"dma-map-bench", "fio"};
  int repeats = 5;
};

struct Figures {
  std::vector<double> values, seconds;
  std::string metric;
  int failed = 0;
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Cv(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / m;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Smallest relative change found at n repeats per commit: (t_{1-a/2} +
// t_{power}) * sqrt(2/n) * cv, with 2n-2 degrees of freedom.
double SmallestChange(double cv, int n) {
  boost::math::students_t t(2.0 * n - 2);
  return (boost::math::quantile(t, 1 - 0.01 / 2) + boost::math::quantile(t, 0.8)) *
         std::sqrt(2.0 / n) * cv;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "accel_bench: %s\n", what.c_str());
  return 1;
}

absl::StatusOr<std::string> GuestRoot(const std::string& arch) {
  farm::process::ProcessOptions build;
  build.argv = {std::string(FARM_SOURCE_DIR) + "/scripts/build-guest-root", "--arch", arch};
  build.timeout = absl::Minutes(10);
  absl::StatusOr<farm::process::ProcessResult> r = farm::process::RunProcess(build);
  if (!r.ok()) return r.status();
  if (!r->ok()) return absl::InternalError(absl::StrCat(r->Describe(), r->stderr_data));
  return std::string(absl::StripAsciiWhitespace(r->stdout_data));
}

absl::StatusOr<std::unique_ptr<farm::agent::KernelExecutor>> MakeExecutor(
    const Options& o, const std::string& accel, const std::string& workload,
    const std::string& scratch) {
  farm::kernels::VmConfig c;
  c.arch = o.arch;
  c.qemu = absl::StrCat("qemu-system-", o.arch);
  c.kernels_dir = o.store;
  c.initramfs = o.initramfs;
  c.allow_dir = scratch;
  c.accel = accel;
  c.boot_timeout = absl::Seconds(120);
  std::unique_ptr<farm::agent::Executor> tool;
  if (workload == "fio") {
    farm::runners::RealExecutorOptions real;
    real.allow_dirs = {scratch};
    absl::StatusOr<std::unique_ptr<farm::agent::Executor>> fio =
        farm::runners::MakeRealExecutor("fio", real);
    if (!fio.ok()) return fio.status();
    tool = *std::move(fio);
  } else {
    tool = std::make_unique<farm::agent::GuestOnlyTool>("dma-map-bench");
  }
  pb::HostFacts host;
  host.set_kernel_release("host");
  host.set_architecture(o.arch);
  return std::make_unique<farm::agent::KernelExecutor>(
      std::move(tool), host, std::make_unique<farm::kernels::VmKernelProvider>(c), "accel_bench");
}

pb::Job JobOf(const Options& o, const std::string& workload, const std::string& commit, int id) {
  pb::Job job;
  job.set_id(id);
  job.set_commit_id(commit);
  job.set_platform(o.arch == "aarch64" ? "virt-smmuv3" : "q35-intel-iommu");
  pb::IommuMode mode = pb::IOMMU_MODE_STRICT;
  for (pb::IommuMode m : {pb::IOMMU_MODE_OFF, pb::IOMMU_MODE_PASSTHROUGH, pb::IOMMU_MODE_LAZY})
    if (farm::proto::ModeName(m) == o.mode) mode = m;
  job.set_mode(mode);
  auto& params = *job.mutable_workload()->mutable_params();
  if (workload == "fio") {
    job.set_executor(pb::EXECUTOR_FIO);
    job.mutable_workload()->set_name("fio-nvme");
    for (const auto& [k, v] : std::map<std::string, std::string>{{"rw", "randread"},
                                                                 {"bs", "4k"},
                                                                 {"iodepth", "16"},
                                                                 {"ioengine", "libaio"},
                                                                 {"direct", "1"},
                                                                 {"runtime", "2"},
                                                                 {"time_based", "1"}})
      params[k] = v;
  } else {
    job.set_executor(pb::EXECUTOR_DMA_MAP_BENCH);
    job.mutable_workload()->set_name("dma-map-bench");
    params["seconds"] = "1";
  }
  return job;
}

// The workload's leading figure in the run's samples.
std::pair<std::string, double> Leading(const std::string& workload,
                                       const farm::agent::ExecutionResult& r) {
  for (const pb::Sample& s : r.samples) {
    if (workload == "fio" && s.metric() == "iops" && s.phase() == "read")
      return {"read iops", s.value()};
    if (workload != "fio" && s.metric() == "unmap_latency_mean") return {"unmap ns", s.value()};
  }
  return {"", 0};
}

// Key: accel, workload, commit.
using Key = std::tuple<std::string, std::string, std::string>;

// One run of `key`, its figure or its failure recorded in `f`.
void RunOnce(const Options& o, farm::agent::KernelExecutor& executor, const Key& key, int rep,
             Figures& f) {
  const auto& [accel, workload, commit] = key;
  farm::agent::CancelToken cancel;
  const absl::Time t0 = absl::Now();
  absl::StatusOr<farm::agent::ExecutionResult> r =
      executor.Run(JobOf(o, workload, commit, rep), cancel);
  const std::string name =
      absl::StrFormat("  repeat %d %-10s %-13s %s", rep + 1, accel, workload, commit.substr(0, 12));
  const auto [metric, value] = r.ok() ? Leading(workload, *r) : std::pair<std::string, double>{};
  if (metric.empty()) {
    ++f.failed;
    const std::string why = r.ok() ? "no figure in its samples" : r.status().ToString();
    std::printf("%s failed: %s\n", name.c_str(), why.substr(0, why.find('\n')).c_str());
    std::fflush(stdout);
    return;
  }
  f.metric = metric;
  f.values.push_back(value);
  f.seconds.push_back(absl::ToDoubleSeconds(absl::Now() - t0));
  std::printf("%s %10.0f %s  %5.2f s\n", name.c_str(), value, metric.c_str(), f.seconds.back());
  std::fflush(stdout);
}

void PrintTable(const Options& o, const std::map<Key, Figures>& f) {
  std::printf(
      "\n| accel | workload | commit | figure | mean | CV | change vs %s | smallest change found "
      "at %d repeats | boot-to-result median | failed runs "
      "|\n|---|---|---|---|---|---|---|---|---|---|\n",
      o.commits.front().substr(0, 12).c_str(), o.repeats);
  for (const auto& [key, fig] : f) {
    const auto& [accel, workload, commit] = key;
    const Figures& base = f.at(Key{accel, workload, o.commits.front()});
    if (fig.values.size() < 2 || base.values.empty()) {
      std::printf("| %s | %s | %s | %s | - | - | - | - | - | %d |\n", accel.c_str(),
                  workload.c_str(), commit.substr(0, 12).c_str(), fig.metric.c_str(), fig.failed);
      continue;
    }
    const double cv = Cv(fig.values);
    std::printf("| %s | %s | %s | %s | %.0f | %.2f%% | %+.2f%% | %.2f%% | %.2f s | %d |\n",
                accel.c_str(), workload.c_str(), commit.substr(0, 12).c_str(), fig.metric.c_str(),
                Mean(fig.values), 100 * cv, 100 * (Mean(fig.values) / Mean(base.values) - 1),
                100 * SmallestChange(cv, static_cast<int>(fig.values.size())), Median(fig.seconds),
                fig.failed);
  }
}

void AddOptions(CLI::App& app, Options& o) {
  app.add_option("--store", o.store, "kernel store holding the build")->required();
  app.add_option("--commit", o.commits,
                 "a build's commit, repeatable; changes are against the first")
      ->required();
  app.add_option("--arch", o.arch, "guest architecture")
      ->check(CLI::IsMember({"aarch64", "x86_64"}))
      ->capture_default_str();
  app.add_option("--accel", o.accels, "accel, repeatable")
      ->check(CLI::IsMember({"tcg", "tcg-icount", "kvm"}))
      ->capture_default_str();
  app.add_option("--workload", o.workloads, "workload, repeatable")
      ->check(CLI::IsMember({"dma-map-bench", "fio"}))
      ->capture_default_str();
  app.add_option("--mode", o.mode, "IOMMU mode")
      ->check(CLI::IsMember({"off", "passthrough", "strict", "lazy"}))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs per accel and workload")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  app.add_option("--initramfs", o.initramfs, "guest root (default: scripts/build-guest-root's)");
}

using Executors =
    std::map<std::pair<std::string, std::string>, std::unique_ptr<farm::agent::KernelExecutor>>;

// One executor per (accel, workload).
absl::StatusOr<Executors> MakeExecutors(const Options& o, const std::string& scratch) {
  Executors ex;
  for (const std::string& accel : o.accels) {
    for (const std::string& w : o.workloads) {
      auto e = MakeExecutor(o, accel, w, scratch);
      if (!e.ok())
        return absl::Status(e.status().code(),
                            absl::StrCat(accel, " ", w, ": ", e.status().message()));
      ex[{accel, w}] = *std::move(e);
    }
  }
  return ex;
}

// Every repeat runs every (accel, workload, commit) once, in that order.
std::map<Key, Figures> Measure(const Options& o, Executors& ex) {
  std::map<Key, Figures> figures;
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (auto& [pair, executor] : ex) {
      for (const std::string& commit : o.commits) {
        const Key key{pair.first, pair.second, commit};
        RunOnce(o, *executor, key, rep, figures[key]);
      }
    }
  }
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"accel_bench: the spread of real-kernel figures per QEMU accel"};
  Options o;
  AddOptions(app, o);
  CLI11_PARSE(app, argc, argv);
  if (o.initramfs.empty()) {
    absl::StatusOr<std::string> root = GuestRoot(o.arch);
    if (!root.ok()) return Fail(absl::StrCat("build-guest-root: ", root.status().ToString()));
    o.initramfs = *root;
  }
  absl::StatusOr<farm::process::ScopedTempDir> scratch =
      farm::process::ScopedTempDir::Create(fs::temp_directory_path(), "accel-bench-");
  if (!scratch.ok()) return Fail(scratch.status().ToString());
  absl::StatusOr<Executors> ex = MakeExecutors(o, scratch->path().string());
  if (!ex.ok()) return Fail(ex.status().ToString());
  std::printf("accel_bench: %zu commits of %s, %s, %d repeats, interleaved\n", o.commits.size(),
              o.store.c_str(), o.mode.c_str(), o.repeats);
  PrintTable(o, Measure(o, *ex));
  return 0;
}
