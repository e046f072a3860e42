// farm-agent: registers with a farm scheduler, leases jobs and runs them.
// Parses flags, wires executors, metrics and the Agent, and turns SIGTERM /
// SIGINT into a drain.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/executors/executors.h"
#include "agent/host_facts.h"
#include "agent/host_iommu_environment.h"
#include "agent/inventory.h"
#include "agent/kernels/kexec_provider.h"
#include "agent/runners/targets.h"
#include "lib/metrics/metrics.h"
#include "lib/metrics/metrics_flags.h"
#include "lib/service/flags.h"
#include "lib/service/shutdown.h"
#include "proto/labels.h"
#include "proto/names.h"

namespace {

[[noreturn]] void Exit(int code) {
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  // Worker threads inside abandoned jobs are not joined: the process ends.
  std::_Exit(code);
}

// The options of the kbuild capability (agent/executors/kbuild_executor.h).
void AddKbuildOptions(CLI::App& app, farm::agent::KbuildConfig* kbuild,
                      std::vector<std::string>* trees) {
  app.add_option("--kbuild-tree", *trees,
                 "CATALOG=TREE: with the kbuild capability, build the kernels real jobs of "
                 "catalog CATALOG need from the git tree TREE (a local repository or a URL) into "
                 "--kernel-store, for x86_64 and, where aarch64-linux-gnu-gcc is installed, "
                 "aarch64 (repeatable)");
  app.add_option("--kbuild-base", kbuild->base,
                 "base config of kernel builds: a make target (tinyconfig, defconfig) or a file; "
                 "the shipped fragments of every machine model of the architecture are merged "
                 "on top")
      ->capture_default_str();
  app.add_option("--kbuild-cache", kbuild->cache_root,
                 "kernel build cache: tree mirrors, build directories, ccache (default "
                 "/var/cache/iommu-farm/kbuild when writable, else ~/.cache/iommu-farm/kbuild)");
  app.add_option("--kbuild-jobs", kbuild->jobs, "make -j of kernel builds (0: the number of CPUs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// --kbuild-tree's CATALOG=TREE pairs into `kbuild`; the builds go to the
// kernel store the vm provider reads.
absl::Status FinishKbuildConfig(const std::vector<std::string>& trees,
                                const std::string& kernel_store,
                                farm::agent::KbuildConfig* kbuild) {
  for (const std::string& t : trees) {
    std::pair<std::string, std::string> kv = absl::StrSplit(t, absl::MaxSplits('=', 1));
    if (kv.first.empty() || kv.second.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kbuild-tree ", t, ": expected CATALOG=TREE"));
    }
    kbuild->trees[kv.first] = kv.second;
  }
  kbuild->store_dir = kernel_store;
  return absl::OkStatus();
}

// The command line as parsed; ResolveFlags and SetUpKexec finish it.
struct Flags {
  farm::agent::AgentOptions options;
  std::string capabilities = farm::proto::ExecutorName(iommufarm::v1::EXECUTOR_EMULATOR);
  std::string metrics_address;
  std::string log_level = "info";
  farm::metrics::MetricsTls metrics_tls;
  farm::client::SecurityFlags security;
  farm::agent::ExecutorConfig executor_config;
  std::string kexec_state_dir;
  std::string state_dir;
  std::string set_governor;
  std::string set_turbo, set_smt;  // "", "on", "off"
  std::string kexec_default_release;
  absl::Duration kexec_boot_timeout;
  std::vector<std::string> kbuild_trees;
  std::vector<std::string> labels;
};

// A usage error: printed after "farm-agent: ", exit 2.
int UsageError(const absl::Status& status) {
  std::fprintf(stderr, "farm-agent: %s\n", std::string(status.message()).c_str());
  return 2;
}

// Who the agent is, where its scheduler is, how much it runs at once.
void AddAgentOptions(CLI::App& app, Flags* f) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  f->options.name = host;
  f->options.client.server = farm::client::kDefaultServer;
  app.add_option("--scheduler", f->options.client.server,
                 "scheduler address HOST:PORT, or several IP:PORT separated by commas "
                 "(schedulers sharing one database; the agent fails over between them)")
      ->capture_default_str()
      ->envname("FARM_SERVER");
  app.add_option("--name", f->options.name, "agent name, unique in the farm (default: hostname)");
  app.add_option("--slots", f->options.slots, "jobs run at once")->check(CLI::Range(1, 1024));
  app.add_option(
      "--capabilities", f->capabilities,
      "comma list of executors to offer: " + absl::StrJoin(farm::proto::ExecutorNames(), ", ") +
          " (fio/iozone: real runs, need --allow-dir/--allow-device; "
          "skipped with a warning when the tool is not installed; dma-map-bench: vm guests "
          "only, needs --kernel-store)");
  app.add_option("--metrics", f->metrics_address,
                 "serve Prometheus /metrics on HOST:PORT (port 0: any free "
                 "port; prints 'metrics on HOST:PORT')");
  farm::metrics::AddMetricsTlsOptions(app, &f->metrics_tls);
  farm::client::AddSecurityOptions(app, &f->security);
  farm::service::AddDurationOption(app, "--drain-timeout", &f->options.drain_timeout, "30s",
                                   "how long running jobs may finish after SIGTERM (e.g. 30s, 2m)",
                                   farm::service::DurationRange::kNonNegative);
  app.add_option("--log-level", f->log_level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
}

// How a lab selects this host, and whether it checks itself first.
void AddLabOptions(CLI::App& app, Flags* f) {
  app.add_option("--label", f->labels,
                 "KEY=VALUE label of this agent (repeatable); a spec's `labels:` picks agents "
                 "holding them all. `platform=NAME` is the platform real runs on this host "
                 "answer to (a spec's `platform:`; default: the agent's --name)");
  app.add_flag("!--no-health-job", f->options.health_jobs,
               "take work without first running the health job (fio: 1 s of 4k random reads "
               "of a 4 MiB file in the first --allow-dir; without fio, iozone writes and reads "
               "1 MiB there); "
               "by default an agent whose health job fails registers as failed and takes no "
               "work until a retry passes");
  app.add_option("--state-dir", f->state_dir,
                 "where the agent keeps what outlives a boot: the SMMUv3 boot lines of "
                 "the kernel log (DIR/iommu-environment.kmsg), so that an agent restarted after "
                 "the log wrapped keeps its IOMMU environment and its results' series, and the "
                 "health job's recent figures per kernel and mode (DIR/health-baseline.json, "
                 "--health-band); created if missing (default: --kexec-state-dir, else none)");
  app.add_option("--health-band", f->options.health_band,
                 "with a --state-dir: the health job fails when fio's read IOPS fall below this "
                 "share of the median of the host's last 5 passes on the same kernel and mode "
                 "(judged once 3 are kept; a kernel is compared with itself only, so a slower "
                 "kernel under test is never the host's fault); 0 judges nothing")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  farm::service::AddDurationOption(app, "--health-retry", &f->options.health_retry, "10m",
                                   "how often a failed health job is run again",
                                   farm::service::DurationRange::kPositive);
}

// What real runs may touch, and the emulator's catalog.
void AddRunOptions(CLI::App& app, farm::agent::ExecutorConfig* config) {
  app.add_option("--allow-dir", config->allow_dirs, "directory real runs may use (repeatable)");
  app.add_option("--fio", config->fio,
                 "the fio executable (default: fio on /usr/local/bin:/usr/bin:/bin)");
  app.add_option("--iozone", config->iozone,
                 "the iozone executable (default: iozone on /usr/local/bin:/usr/bin:/bin)");
  app.add_option(
      "--allow-device", config->allow_devices,
      "block device real runs may use: DEV, DEV:ro or DEV:rw (writes only with :rw; repeatable)");
  app.add_option("--perf", config->perf,
                 "profile each real run on this host with a system-wide perf record (its top "
                 "symbols are stored with the result's monitors; false: none)")
      ->default_val(true);
  app.add_option("--kernel-counters", config->kernel_counters,
                 "count the kernel's IOMMU events around each real run, on this host and in "
                 "guests (iommu:map/unmap tracepoints, VT-d invalidation latency, SMMUv3 PMCG; "
                 "docs/usage.md). They add work to the measured path, so results with them are "
                 "another series (hygiene kernel_counters=on)")
      ->default_val(false);
  app.add_option("--emu-catalog", config->emu_catalog,
                 "commit catalog file for the emulator (default: the shipped "
                 "linux-iommu catalog)");
  farm::service::AddDurationOption(
      app, "--emulator-time-limit", &config->emu_time_limit, "30m",
      "an emulator run still going after this long is stopped and its job failed for good "
      "(0: no limit); a revoked lease stops its run too",
      farm::service::DurationRange::kNonNegative);
}

// The kernel store and the QEMU guests its kernels boot in.
void AddKernelStoreOptions(CLI::App& app, farm::agent::ExecutorConfig* config) {
  app.add_option("--kernel-store,--vm-kernels", config->vm_kernels_dir,
                 "offer fio under the kernels of the kernel store DIR (build directories with a "
                 "kernel.yaml, e.g. from farmctl kernels import, or DIR/<release>/vmlinuz as "
                 "scripts/fetch-test-kernels lays them out), each advertised with its commit id "
                 "and release, booted under QEMU (x86_64: q35 + intel-iommu, or amd-iommu for a "
                 "kernel built with it; aarch64: virt + smmuv3); needs --vm-initramfs, QEMU and "
                 "an --allow-dir for scratch files. With --kexec-state-dir: booted on this host "
                 "instead (fio and iozone)");
  app.add_option("--vm-arch", config->vm_arch,
                 "guest architecture of --kernel-store: only its kernels are offered, with a "
                 "guest root of that architecture")
      ->check(CLI::IsMember({"x86_64", "aarch64"}))
      ->capture_default_str();
  app.add_option("--vm-initramfs", config->vm_initramfs,
                 "the guest root scripts/build-guest-root built (initramfs.cpio)");
  app.add_option("--qemu", config->qemu,
                 "QEMU for --kernel-store (default: qemu-system-<--vm-arch>)");
}

// Booting the kernel store's kernels on this host (kexec_provider.h).
void AddKexecOptions(CLI::App& app, Flags* f) {
  app.add_option("--set-turbo", f->set_turbo,
                 "turn turbo on or off before leasing (intel_pstate/no_turbo or cpufreq/boost; "
                 "needs root); results record what the host then reads")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--set-smt", f->set_smt,
                 "turn SMT on or off before leasing (smt/control; needs root); results record "
                 "smt/active")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--set-governor", f->set_governor,
                 "set every CPU's cpufreq governor (e.g. performance) before leasing, and record "
                 "it with each result as set by the agent (needs root); without it the governor, "
                 "turbo, SMT and the agent's CPU and memory binding are only recorded");
  app.add_option(
      "--kexec-state-dir", f->kexec_state_dir,
      "boot the kernels of --kernel-store on this host with kexec (bare-metal lab hosts under "
      "systemd, docs/kernels.md): fio and iozone offer each of them in every IOMMU mode; a job "
      "whose kernel or mode is not running has the scheduler hold its lease, is written to "
      "DIR/kexec-state.json, then `kexec -l` and `systemctl kexec` reboot into it and the agent "
      "that systemd starts on that kernel proves its release and mode, runs the job and reports "
      "it. Needs --kernel-store, kexec and systemctl on PATH, --slots 1; the vm provider is then "
      "made only with --vm-initramfs");
  farm::service::AddDurationOption(
      app, "--kexec-boot-timeout", &f->kexec_boot_timeout, "10m",
      "how long the job's kernel may take to boot and its agent to come back; the lease is "
      "held this long plus 60s (capped by farm-scheduler --max-boot-timeout), later the job "
      "fails and the host reboots into --kexec-default-release");
  app.add_option("--kexec-default-release", f->kexec_default_release,
                 "the kernel release the boot loader starts (default: the running one; set it "
                 "when the agent may start on a job's kernel)");
}

// How QEMU runs the guests of --kernel-store.
void AddVmAccelOptions(CLI::App& app, farm::agent::ExecutorConfig* config) {
  app.add_option("--vm-accel", config->vm_accel,
                 "QEMU accelerator for --kernel-store: kvm; tcg (software emulation, timed by "
                 "the host's clock); tcg-icount (one TCG thread, the guest's clock counting its "
                 "instructions: figures that repeat, instruction-timed, x86_64 guests with one "
                 "CPU); or auto (tries one KVM boot at start and falls back to tcg-icount; the "
                 "agent prints which)")
      ->check(CLI::IsMember({"auto", "tcg", "tcg-icount", "kvm"}))
      ->capture_default_str();
  app.add_option("--vm-icount-shift", config->vm_icount_shift,
                 "tcg-icount: each guest instruction counts 2^N ns of guest time")
      ->check(CLI::Range(0, 10))
      ->capture_default_str();
}

// Every option, in the order --help lists them.
void AddFlags(CLI::App& app, Flags* f) {
  AddAgentOptions(app, f);
  AddLabOptions(app, f);
  AddRunOptions(app, &f->executor_config);
  AddKernelStoreOptions(app, &f->executor_config);
  AddKexecOptions(app, f);
  AddVmAccelOptions(app, &f->executor_config);
  AddKbuildOptions(app, &f->executor_config.kbuild, &f->kbuild_trees);
}

// What parsing cannot check: --kbuild-tree's pairs, a non-empty --name, the
// TLS material. An error is a usage error.
absl::Status ResolveFlags(Flags& f) {
  if (absl::Status st = FinishKbuildConfig(f.kbuild_trees, f.executor_config.vm_kernels_dir,
                                           &f.executor_config.kbuild);
      !st.ok()) {
    return st;
  }
  if (f.options.name.empty()) return absl::InvalidArgumentError("--name must not be empty");
  absl::StatusOr<std::map<std::string, std::string>> labels = farm::proto::ParseLabels(f.labels);
  if (!labels.ok())
    return absl::InvalidArgumentError(absl::StrCat("--label: ", labels.status().message()));
  // The platform a lab spec names: this host by its name unless labelled.
  labels->emplace(farm::proto::kPlatformLabel, f.options.name);
  if (absl::Status st = farm::proto::CheckLabel(farm::proto::kPlatformLabel,
                                                labels->at(farm::proto::kPlatformLabel));
      !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--name as the platform label: ", st.message(),
                                                   " (give --label platform=NAME)"));
  }
  f.options.host.mutable_labels()->insert(labels->begin(), labels->end());
  return farm::client::ApplySecurity(f.security, &f.options.client);
}

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("farm-agent");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// --set-governor, --set-turbo, --set-smt, before the host is described.
absl::Status SetHygiene(const Flags& f) {
  if (!f.set_governor.empty()) {
    if (absl::Status st = farm::agent::SetGovernor(f.set_governor); !st.ok()) return st;
  }
  if (!f.set_turbo.empty()) {
    if (absl::Status st = farm::agent::SetTurbo(f.set_turbo == "on"); !st.ok()) return st;
  }
  if (!f.set_smt.empty()) return farm::agent::SetSmt(f.set_smt == "on");
  return absl::OkStatus();
}

// The file `name` in the agent's --state-dir, which is created if missing;
// "" for none.
std::string StateFile(const Flags& f, const char* name) {
  const std::string& dir = f.state_dir.empty() ? f.kexec_state_dir : f.state_dir;
  if (dir.empty()) return "";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // a failed write warns
  return (std::filesystem::path(dir) / name).string();
}

// The file of the kernel-log facts of this boot; "" for none.
std::string KernelLogRecord(const Flags& f) { return StateFile(f, "iommu-environment.kmsg"); }

// The host facts every registration and result carries: what the host runs,
// its hygiene, its labels (ResolveFlags), its inventory and IOMMU environment.
void DescribeHost(Flags& f) {
  iommufarm::v1::HostFacts host = farm::agent::DetectHostFacts("/");
  host.mutable_hygiene()->set_governor_set(!f.set_governor.empty());
  if (f.executor_config.kernel_counters) host.mutable_hygiene()->set_kernel_counters("on");
  *host.mutable_labels() = f.options.host.labels();
  farm::agent::InventoryScope scope;
  // Bad values are the executors' to refuse; the inventory lists good ones.
  if (auto allowed = farm::runners::AllowedTargets::Parse(f.executor_config.allow_dirs,
                                                          f.executor_config.allow_devices);
      allowed.ok()) {
    scope.allow_dirs = allowed->dirs();
    for (const farm::runners::AllowedDevice& d : allowed->devices()) {
      scope.allow_devices.push_back(d.path);
    }
  }
  *host.mutable_inventory() = farm::agent::DetectInventory(scope, "/");
  *host.mutable_iommu_environment() = farm::agent::DetectIommuEnvironment("/", KernelLogRecord(f));
  f.options.read_hygiene = [] { return farm::agent::DetectHygiene("/"); };
  f.options.read_iommu_environment = [at_start = host.iommu_environment()] {
    return farm::agent::RefreshIommuEnvironment(at_start, "/");
  };
  f.options.host = std::move(host);
  f.options.health_baseline = StateFile(f, "health-baseline.json");
}

// With --kexec-state-dir: the kexec provider, shared by the agent and its
// executors. An error is a usage error; missing kexec tools only leave the
// provider out (with a warning), so that the agent still offers the host's
// kernel and a pending boot stays for an agent that can resume it.
// REQUIRES: f.options.host detected.
absl::Status SetUpKexec(Flags& f) {
  if (f.executor_config.vm_kernels_dir.empty()) {
    return absl::InvalidArgumentError("--kexec-state-dir needs --kernel-store");
  }
  // A host under test builds nothing: a build would load the host its
  // measurements run on and reboot it out from under the build.
  for (absl::string_view cap : absl::StrSplit(f.capabilities, ',', absl::SkipWhitespace())) {
    if (absl::StripAsciiWhitespace(cap) ==
        farm::proto::ExecutorName(iommufarm::v1::EXECUTOR_KBUILD)) {
      return absl::InvalidArgumentError(
          "a kexec host (--kexec-state-dir) does not build kernels: drop kbuild from "
          "--capabilities and run the build on a build agent of the host's architecture");
    }
  }
  if (f.options.slots != 1) {
    return absl::InvalidArgumentError("a kexec host runs one slot (--slots 1)");
  }
  std::error_code ec;
  std::filesystem::create_directories(f.kexec_state_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kexec-state-dir ", f.kexec_state_dir, ": ", ec.message()));
  }
  const iommufarm::v1::HostFacts& host = f.options.host;
  farm::kernels::KexecConfig kexec;
  kexec.kernels_dir = f.executor_config.vm_kernels_dir;
  kexec.state_dir = f.kexec_state_dir;
  kexec.arch = host.architecture().empty() ? "x86_64" : host.architecture();
  kexec.boot_timeout = f.kexec_boot_timeout;
  kexec.reboot_syscall_fallback = true;
  kexec.default_release =
      f.kexec_default_release.empty() ? host.kernel_release() : f.kexec_default_release;
  absl::StatusOr<farm::kernels::KernelFacts> facts = farm::kernels::ReadRunningKernelFacts("/");
  if (facts.ok()) kexec.base_cmdline = facts->cmdline;
  kexec.root_needs = farm::kernels::ReadRootNeeds("/");
  for (const farm::kernels::RootNeed& n : kexec.root_needs) {
    std::fprintf(stderr, "farm-agent: a kernel without an initramfs needs %s=y: %s\n",
                 n.option.c_str(), n.why.c_str());
  }
  absl::Status tools = facts.ok() ? farm::kernels::CheckKexecTools(kexec) : facts.status();
  if (!tools.ok()) {
    std::fprintf(stderr, "farm-agent: kexec kernels not offered: %s\n",
                 std::string(tools.message()).c_str());
    return absl::OkStatus();
  }
  f.executor_config.kexec = std::make_shared<farm::kernels::KexecKernelProvider>(
      kexec, farm::kernels::SystemCommandRunner(),
      [] { return farm::kernels::ReadRunningKernelFacts("/"); });
  f.options.kexec = f.executor_config.kexec;
  std::fprintf(stderr, "farm-agent: kexec kernels offered (%s, default kernel %s): %zu\n",
               kexec.arch.c_str(), kexec.default_release.c_str(),
               f.executor_config.kexec->Offers().size());
  return absl::OkStatus();
}

// The /metrics exposer of --metrics (nullptr without it). An error names the
// flag.
absl::StatusOr<std::unique_ptr<farm::metrics::MetricsExposer>> StartMetrics(
    const Flags& f, farm::metrics::MetricsRegistry& registry) {
  if (f.metrics_address.empty()) return nullptr;
  auto started = farm::metrics::MetricsExposer::Start(f.metrics_address, registry, f.metrics_tls);
  if (!started.ok()) {
    return absl::Status(started.status().code(), absl::StrCat("--metrics ", f.metrics_address, ": ",
                                                              started.status().message()));
  }
  std::fprintf(stderr, "metrics on %s\n", (*started)->address().c_str());
  return started;
}

// Runs the agent until a signal drains it, then waits out a reboot into a
// job's kernel, and ends the process.
[[noreturn]] void RunAgent(Flags& f, std::vector<std::unique_ptr<farm::agent::Executor>> executors,
                           farm::metrics::AgentMetrics* metrics,
                           farm::service::ShutdownSignals& signals) {
  f.options.on_registered = [](const std::string& name, int64_t id, bool first) {
    if (first) {
      std::fprintf(stderr, "registered as %s\n", name.c_str());
      std::fflush(stderr);
    }
  };
  farm::agent::Agent agent(f.options, std::move(executors), metrics);
  signals.OnStop([&agent](int sig) {
    spdlog::info("signal {}: draining", sig);
    agent.Shutdown();
  });

  absl::Status status = agent.Run();
  const auto stats = agent.stats();
  spdlog::info(
      "stopped: {} succeeded, {} failed, {} revoked, {} stale, {} released, "
      "{} abandoned, {} rebooting",
      stats.succeeded, stats.failed, stats.revoked, stats.stale, stats.released, stats.abandoned,
      stats.reboots);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    Exit(1);
  }
  if (stats.reboots > 0 && !signals.stop_requested()) {
    // systemd stops the agent on its way into the job's kernel. Exiting
    // first could get it restarted on this kernel, where it would find the
    // boot failed.
    if (!signals.WaitFor(f.kexec_boot_timeout)) {
      spdlog::error("the host did not reboot into the job's kernel within {}",
                    absl::FormatDuration(f.kexec_boot_timeout));
      Exit(1);
    }
  }
  Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-agent: registers with a farm scheduler, leases jobs its "
      "capabilities match and runs them on up to --slots worker threads.\n"
      "SIGTERM/SIGINT: stop leasing, hand back unstarted leases, let running "
      "jobs finish for up to --drain-timeout, then exit 0 (a second signal "
      "exits at once)."};
  Flags flags;
  AddFlags(app, &flags);
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;
  if (absl::Status st = ResolveFlags(flags); !st.ok()) return UsageError(st);
  SetUpLogging(flags.log_level);

  if (absl::Status st = SetHygiene(flags); !st.ok()) return UsageError(st);
  DescribeHost(flags);
  flags.executor_config.host = flags.options.host;
  if (!flags.kexec_state_dir.empty()) {
    if (absl::Status st = SetUpKexec(flags); !st.ok()) return UsageError(st);
  }
  std::vector<std::string> caps = absl::StrSplit(flags.capabilities, ',', absl::SkipWhitespace());
  auto executors = farm::agent::MakeExecutors(caps, flags.executor_config);
  if (!executors.ok()) {
    return UsageError(
        absl::InvalidArgumentError(absl::StrCat("--capabilities: ", executors.status().message())));
  }

  // Before any thread starts, so that no worker or gRPC thread takes a signal.
  farm::service::ShutdownSignals signals;
  farm::metrics::MetricsRegistry registry;
  farm::metrics::AgentMetrics metrics(registry.registry());
  absl::StatusOr<std::unique_ptr<farm::metrics::MetricsExposer>> exposer =
      StartMetrics(flags, registry);
  if (!exposer.ok()) {
    std::fprintf(stderr, "farm-agent: %s\n", std::string(exposer.status().message()).c_str());
    return 1;
  }
  RunAgent(flags, std::move(*executors), &metrics, signals);
}
