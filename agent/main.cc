// farm-agent: registers with a farm scheduler, leases jobs and runs them.
// Parses flags, wires executors, metrics and the Agent, and turns SIGTERM /
// SIGINT into a drain.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "agent/agent.h"
#include "agent/executors/executors.h"
#include "agent/host_facts.h"
#include "lib/metrics/metrics.h"
#include "lib/metrics/metrics_flags.h"
#include "lib/service/flags.h"
#include "lib/service/shutdown.h"
#include "proto/names.h"

namespace {

[[noreturn]] void Exit(int code) {
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  // Worker threads inside abandoned jobs are not joined: the process ends.
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-agent: registers with a farm scheduler, leases jobs its "
      "capabilities match and runs them on up to --slots worker threads.\n"
      "SIGTERM/SIGINT: stop leasing, hand back unstarted leases, let running "
      "jobs finish for up to --drain-timeout, then exit 0 (a second signal "
      "exits at once)."};
  farm::agent::AgentOptions options;
  std::string capabilities = farm::proto::ExecutorName(iommufarm::v1::EXECUTOR_EMULATOR);
  std::string metrics_address;
  std::string log_level = "info";
  farm::agent::ExecutorConfig executor_config;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  options.name = host;
  options.client.server = farm::client::kDefaultServer;

  app.add_option("--scheduler", options.client.server,
                 "scheduler address HOST:PORT, or several IP:PORT separated by commas "
                 "(schedulers sharing one database; the agent fails over between them)")
      ->capture_default_str()
      ->envname("FARM_SERVER");
  app.add_option("--name", options.name, "agent name, unique in the farm (default: hostname)");
  app.add_option("--slots", options.slots, "jobs run at once")->check(CLI::Range(1, 1024));
  app.add_option(
      "--capabilities", capabilities,
      "comma list of executors to offer: " + absl::StrJoin(farm::proto::ExecutorNames(), ", ") +
          " (fio/iozone: real runs, need --allow-dir/--allow-device; "
          "skipped with a warning when the tool is not installed)");
  app.add_option("--metrics", metrics_address,
                 "serve Prometheus /metrics on HOST:PORT (port 0: any free "
                 "port; prints 'metrics on HOST:PORT')");
  farm::metrics::MetricsTls metrics_tls;
  farm::metrics::AddMetricsTlsOptions(app, &metrics_tls);
  farm::client::SecurityFlags security;
  farm::client::AddSecurityOptions(app, &security);
  farm::service::AddDurationOption(app, "--drain-timeout", &options.drain_timeout, "30s",
                                   "how long running jobs may finish after SIGTERM (e.g. 30s, 2m)",
                                   farm::service::DurationRange::kNonNegative);
  app.add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
  app.add_option("--allow-dir", executor_config.allow_dirs,
                 "directory real runs may use (repeatable)");
  app.add_option(
      "--allow-device", executor_config.allow_devices,
      "block device real runs may use: DEV, DEV:ro or DEV:rw (writes only with :rw; repeatable)");
  app.add_option("--emu-catalog", executor_config.emu_catalog,
                 "commit catalog file for the emulator (default: the shipped "
                 "linux-iommu catalog)");
  app.add_option("--kernel-store,--vm-kernels", executor_config.vm_kernels_dir,
                 "offer fio under the kernels of the kernel store DIR (build directories with a "
                 "kernel.yaml, e.g. from farmctl kernels import, or DIR/<release>/vmlinuz as "
                 "scripts/fetch-test-kernels lays them out), each advertised with its commit id "
                 "and release, booted under QEMU (x86_64: q35 + intel-iommu, or amd-iommu for a "
                 "kernel built with it; aarch64: virt + smmuv3); needs --vm-initramfs, QEMU and "
                 "an --allow-dir for scratch files");
  app.add_option("--vm-arch", executor_config.vm_arch,
                 "guest architecture of --kernel-store: only its kernels are offered, with a "
                 "guest root of that architecture")
      ->check(CLI::IsMember({"x86_64", "aarch64"}))
      ->capture_default_str();
  app.add_option("--vm-initramfs", executor_config.vm_initramfs,
                 "the guest root scripts/build-guest-root built (initramfs.cpio)");
  app.add_option("--qemu", executor_config.qemu,
                 "QEMU for --kernel-store (default: qemu-system-<--vm-arch>)");
  app.add_option("--vm-accel", executor_config.vm_accel,
                 "QEMU accelerator for --kernel-store: tcg, kvm, or auto (tries one KVM boot at "
                 "start and falls back to tcg; the agent prints which)")
      ->check(CLI::IsMember({"auto", "tcg", "kvm"}))
      ->capture_default_str();
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;
  if (options.name.empty()) {
    std::fprintf(stderr, "farm-agent: --name must not be empty\n");
    return 2;
  }
  if (absl::Status st = farm::client::ApplySecurity(security, &options.client); !st.ok()) {
    std::fprintf(stderr, "farm-agent: %s\n", std::string(st.message()).c_str());
    return 2;
  }

  auto logger = spdlog::stderr_color_mt("farm-agent");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));

  options.host = farm::agent::DetectHostFacts("/");
  executor_config.host = options.host;
  std::vector<std::string> caps = absl::StrSplit(capabilities, ',', absl::SkipWhitespace());
  auto executors = farm::agent::MakeExecutors(caps, executor_config);
  if (!executors.ok()) {
    std::fprintf(stderr, "farm-agent: --capabilities: %s\n",
                 std::string(executors.status().message()).c_str());
    return 2;
  }

  // Before any thread starts, so that no worker or gRPC thread takes a signal.
  farm::service::ShutdownSignals signals;

  farm::metrics::MetricsRegistry registry;
  farm::metrics::AgentMetrics metrics(registry.registry());
  std::unique_ptr<farm::metrics::MetricsExposer> exposer;
  if (!metrics_address.empty()) {
    auto started = farm::metrics::MetricsExposer::Start(metrics_address, registry, metrics_tls);
    if (!started.ok()) {
      std::fprintf(stderr, "farm-agent: --metrics %s: %s\n", metrics_address.c_str(),
                   std::string(started.status().message()).c_str());
      return 1;
    }
    exposer = std::move(*started);
    std::fprintf(stderr, "metrics on %s\n", exposer->address().c_str());
  }

  options.on_registered = [](const std::string& name, int64_t id, bool first) {
    if (first) {
      std::fprintf(stderr, "registered as %s\n", name.c_str());
      std::fflush(stderr);
    }
  };
  farm::agent::Agent agent(options, std::move(*executors), &metrics);

  signals.OnStop([&agent](int sig) {
    spdlog::info("signal {}: draining", sig);
    agent.Shutdown();
  });

  absl::Status status = agent.Run();
  const auto stats = agent.stats();
  spdlog::info(
      "stopped: {} succeeded, {} failed, {} revoked, {} stale, {} released, "
      "{} abandoned",
      stats.succeeded, stats.failed, stats.revoked, stats.stale, stats.released, stats.abandoned);
  if (!status.ok()) {
    spdlog::error("{}", status.ToString());
    Exit(1);
  }
  Exit(0);
}
