#include "agent/executors/kernel_executor.h"

#include <google/protobuf/util/json_util.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/executors/real_executors.h"
#include "agent/kernels/guest_archive.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/fio_spec.h"
#include "agent/runners/params.h"
#include "agent/runners/runners.h"
#include "lib/toolspec/dma_map_bench_spec.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"
#include "proto/kernel_params.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

// The guest's NVMe namespace: the only block device of the VM.
constexpr char kGuestDevice[] = "/dev/nvme0n1";

std::string Tail(const std::string& s, size_t n = 512) {
  return s.size() <= n ? s : s.substr(s.size() - n);
}

// iozone has no runtime of its own: its wall-clock budget in the guest is
// this much (throughput mode pauses 2 s around each test: about 12 s for
// -i0 -i1) plus every byte of its passes at kGuestIozoneBytesPerSecond, a
// floor well under what the emulated NVMe does under TCG.
constexpr absl::Duration kGuestIozoneBase = absl::Seconds(60);
constexpr double kGuestIozoneBytesPerSecond = 4 << 20;

// The guest run of an iozone job: its validated spec (IozoneSpecFromParams,
// the host runner's check) as the guest argv, files on the NVMe's scratch
// file system.
absl::Status IozoneGuestRequest(const runners::Params& params, std::uint64_t nvme_bytes,
                                kernels::KernelRequest& request) {
  absl::StatusOr<runners::IozoneSpec> spec = runners::IozoneSpecFromParams(params);
  if (!spec.ok()) return spec.status();
  const std::uint64_t bytes = spec->size_bytes * static_cast<std::uint64_t>(spec->threads);
  if (bytes > nvme_bytes / 4 * 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone's ", spec->threads, " x ", spec->size_bytes,
                     " bytes do not fit the guest's NVMe of ", nvme_bytes, " bytes"));
  }
  absl::StatusOr<std::vector<std::string>> argv =
      runners::BuildIozoneGuestArgv(*spec, kernels::kGuestScratchDir);
  if (!argv.ok()) return argv.status();
  request.tool_argv = *std::move(argv);
  // Each test group writes or reads every file twice (write+rewrite, ...).
  const double passes = 2.0 * static_cast<double>(spec->tests.size() + 1);
  request.tool_runtime = kGuestIozoneBase + absl::Seconds(passes * static_cast<double>(bytes) /
                                                          kGuestIozoneBytesPerSecond);
  return absl::OkStatus();
}

// The guest's iozone report as the host runner's samples.
absl::Status IozoneGuestResult(const kernels::KernelRun& run, ExecutionResult& out) {
  if (run.tool_exit != 0) {
    return absl::InternalError(
        absl::StrCat("iozone in the guest exited ", run.tool_exit, ": ", Tail(run.tool_stderr)));
  }
  absl::StatusOr<runners::IozoneReport> report = runners::ParseIozoneReport(run.tool_stdout);
  if (!report.ok()) {
    return absl::InternalError(absl::StrCat("guest iozone: ", report.status().message(),
                                            "; stderr: ", Tail(run.tool_stderr)));
  }
  runners::AppendSamples(runners::IozoneSamples(*report), out.samples);
  out.raw_output = run.tool_stdout;
  out.raw_format = "iozone";
  out.tool_version = report->version;
  return absl::OkStatus();
}

// The guest's fio JSON as the host runner's samples.
absl::Status FioGuestResult(kernels::KernelRun& run, ExecutionResult& out) {
  if (run.tool_exit != 0) {
    return absl::InternalError(
        absl::StrCat("fio in the guest exited ", run.tool_exit, ": ", Tail(run.tool_stderr)));
  }
  absl::StatusOr<runners::FioReport> report = runners::ParseFioJson(run.tool_stdout);
  if (!report.ok()) {
    return absl::InternalError(absl::StrCat("guest fio: ", report.status().message(),
                                            "; stderr: ", Tail(run.tool_stderr)));
  }
  for (const runners::FioJob& j : report->jobs) {
    if (j.error != 0) {
      return absl::InternalError(absl::StrCat("guest fio job ", j.name, " failed with error ",
                                              j.error, ": ", Tail(run.tool_stderr)));
    }
  }
  runners::AppendSamples(runners::FioSamples(*report), out.samples);
  if (out.samples.empty()) return absl::InternalError("guest fio did no I/O");
  out.raw_output = std::move(run.tool_stdout);
  out.raw_format = "fio-json";
  out.tool_version = report->fio_version;
  return absl::OkStatus();
}

// The guest run of a dma-map-bench job: the kernel's selftest tool with the
// job's params. The tool's -s is guest seconds; under tcg-icount they pass
// faster than the host's, under tcg about as fast, so they bound the run.
absl::Status DmaMapBenchGuestRequest(const runners::Params& params,
                                     kernels::KernelRequest& request) {
  absl::StatusOr<toolspec::DmaMapBenchSpec> spec = toolspec::DmaMapBenchSpecFromParams(params);
  if (!spec.ok()) return spec.status();
  request.tool_argv = toolspec::DmaMapBenchArgv(*spec, kernels::kBenchTool);
  request.tool_runtime = absl::Seconds(spec->seconds);
  return absl::OkStatus();
}

// The kernel's figures under the emulator's dma-map-bench names: the raw
// 100 ns integers (avg_map_100ns, map_stddev, ...) and the latencies in ns.
// The kernel reports no loop count, so there is no throughput sample.
absl::Status DmaMapBenchGuestResult(const kernels::KernelRun& run, ExecutionResult& out) {
  if (run.tool_exit != 0) {
    return absl::InternalError(absl::StrCat(kernels::kBenchTool, " in the guest exited ",
                                            run.tool_exit, ": ",
                                            Tail(run.tool_stderr + run.tool_stdout)));
  }
  absl::StatusOr<toolspec::DmaMapBenchReport> r = toolspec::ParseDmaMapBenchOutput(run.tool_stdout);
  if (!r.ok()) {
    return absl::InternalError(absl::StrCat("guest ", kernels::kBenchTool, ": ",
                                            r.status().message(),
                                            "; stderr: ", Tail(run.tool_stderr)));
  }
  runners::AppendSamples({{"map_latency_mean", r->avg_map_100ns * 100, "ns", ""},
                          {"map_latency_stddev", r->map_stddev * 100, "ns", ""},
                          {"unmap_latency_mean", r->avg_unmap_100ns * 100, "ns", ""},
                          {"unmap_latency_stddev", r->unmap_stddev * 100, "ns", ""},
                          {"avg_map_100ns", r->avg_map_100ns, "", ""},
                          {"map_stddev", r->map_stddev, "", ""},
                          {"avg_unmap_100ns", r->avg_unmap_100ns, "", ""},
                          {"unmap_stddev", r->unmap_stddev, "", ""}},
                         out.samples);
  out.raw_output = run.tool_stdout;
  out.raw_format = "dma-map-bench";
  out.tool_version = absl::StrCat(kernels::kBenchTool, " of ", run.facts.release);
  return absl::OkStatus();
}

}  // namespace

std::string GuestOnlyTool::version() const { return "the kernel's own"; }

absl::StatusOr<ExecutionResult> GuestOnlyTool::Run(const pb::Job& job, CancelToken&) {
  return absl::FailedPreconditionError(absl::StrCat(capability_, " runs in vm guests only; job ",
                                                    job.id(), " was offered the host's kernel"));
}

KernelExecutor::KernelExecutor(std::unique_ptr<Executor> host_tool, pb::HostFacts host,
                               std::unique_ptr<kernels::VmKernelProvider> vm,
                               std::string qemu_version,
                               std::shared_ptr<kernels::KexecKernelProvider> kexec)
    : host_tool_(std::move(host_tool)),
      host_(std::move(host)),
      vm_(std::move(vm)),
      qemu_version_(std::move(qemu_version)),
      kexec_(std::move(kexec)) {}

std::vector<pb::KernelOffer> KernelExecutor::kernels() const {
  std::vector<pb::KernelOffer> out;
  const bool guest_only = capability() == proto::ExecutorName(pb::EXECUTOR_DMA_MAP_BENCH);
  if (!guest_only) {
    pb::KernelOffer& h = out.emplace_back();
    h.set_provider("host");
    h.set_release(host_.kernel_release());
    if (host_.iommu_mode() != pb::IOMMU_MODE_UNSPECIFIED) h.add_modes(host_.iommu_mode());
    h.set_architecture(host_.architecture());
  }
  // fio and iozone are packed into the guest root; dma_map_benchmark comes
  // with each build.
  if (vm_ && proto::IsRealExecutor(proto::ExecutorFromName(capability()))) {
    for (pb::KernelOffer& o : vm_->Offers()) out.push_back(std::move(o));
  }
  if (kexec_) {
    for (pb::KernelOffer& o : kexec_->Offers()) out.push_back(std::move(o));
  }
  return out;
}

absl::StatusOr<ExecutionResult> KernelExecutor::RunLeased(const pb::Job& job, CancelToken& cancel,
                                                          const LeaseContext& lease) {
  std::vector<pb::KernelOffer> offers = kernels();
  if (lease.resumed) {
    // Booted for this job: only the kexec provider proves what runs.
    std::erase_if(offers, [](const pb::KernelOffer& o) { return o.provider() != "kexec"; });
  }
  const pb::KernelOffer* offer = proto::FindOffer(offers, job);
  if (offer == nullptr) {
    return absl::UnavailableError(absl::StrCat("this agent offers no kernel for ", job.commit_id(),
                                               " in mode ", proto::ModeName(job.mode())));
  }
  if (offer->provider() == "host") return host_tool_->Run(job, cancel);
  if (offer->provider() == "kexec") return RunKexec(job, *offer, cancel, lease);
  return RunInVm(job, *offer, cancel);
}

absl::StatusOr<ExecutionResult> KernelExecutor::RunKexec(const pb::Job& job,
                                                         const pb::KernelOffer& offer,
                                                         CancelToken& cancel,
                                                         const LeaseContext& lease) {
  kernels::KernelRequest request;
  request.kernel_release = offer.release();
  request.commit = offer.commit();
  request.kernel_config = offer.kernel_config();
  request.mode = job.mode();
  auto params = job.workload().params();
  if (auto it = params.find(proto::kKernelParamsKey); it != params.end()) {
    std::string error;
    request.kernel_params = proto::ParseKernelParams(it->second, &error);
    if (!error.empty()) return absl::InvalidArgumentError(error);
  }
  kernels::LeaseHold hold{lease.lease.job_id(), lease.lease.attempt(), lease.lease.lease_token(),
                          ""};
  std::string job_json;
  google::protobuf::util::JsonPrintOptions json;
  if (!google::protobuf::util::MessageToJsonString(job, &job_json, json).ok()) {
    return absl::InternalError("cannot encode the job for the kexec state");
  }
  hold.job = std::move(job_json);
  auto before_boot = [&]() -> absl::Status {
    if (lease.resumed) {
      return absl::FailedPreconditionError(
          "the kernel booted for this job is no longer running in its mode");
    }
    if (!lease.hold) {
      return absl::FailedPreconditionError("this agent cannot hold a lease through a reboot");
    }
    const kernels::KexecConfig& c = kexec_->config();
    if (absl::Status s = lease.hold(c.boot_timeout + c.margin); !s.ok()) {
      // Retryable: another agent, or this one later, may get the hold.
      return absl::AbortedError(
          absl::StrCat("the scheduler did not hold the lease through a reboot: ", s.message()));
    }
    return absl::OkStatus();
  };
  absl::StatusOr<kernels::KernelRun> run = kexec_->RunLeased(request, hold, before_boot);
  if (run.status().code() == absl::StatusCode::kUnavailable) {
    ExecutionResult rebooting;
    rebooting.rebooting = true;
    return rebooting;
  }
  if (!run.ok()) return run.status();

  // The job's kernel runs in its mode: the host's own fio runs the job (its
  // kernel parameters are the command line's, not fio's).
  pb::Job tool_job = job;
  auto& tool_params = *tool_job.mutable_workload()->mutable_params();
  tool_params.erase(std::string(proto::kKernelParamsKey));
  tool_params.erase(std::string(proto::kKernelConfigParam));
  absl::StatusOr<ExecutionResult> out = host_tool_->Run(tool_job, cancel);
  if (!out.ok()) return out;
  pb::HostFacts facts = host_;
  facts.set_kernel_release(run->facts.release);
  facts.set_iommu_mode(run->effective);
  facts.set_iommu_detail(run->effective_detail);
  if (!run->facts.machine.empty()) facts.set_architecture(run->facts.machine);
  pb::GuestFacts* g = facts.mutable_guest();
  g->set_provider(run->provider);
  g->set_requested_mode(run->requested);
  g->set_domain_type(run->domain_type);
  g->set_iommu_driver(run->facts.iommu);
  g->set_cmdline(run->facts.cmdline);
  out->ran_on = std::move(facts);
  return out;
}

absl::StatusOr<ExecutionResult> KernelExecutor::RunInVm(const pb::Job& job,
                                                        const pb::KernelOffer& offer,
                                                        CancelToken& cancel) {
  runners::Params params(job.workload().params().begin(), job.workload().params().end());
  std::vector<std::string> kernel_params;
  if (auto it = params.find(proto::kKernelParamsKey); it != params.end()) {
    std::string error;
    kernel_params = proto::ParseKernelParams(it->second, &error);
    if (!error.empty()) return absl::InvalidArgumentError(error);
    params.erase(it);  // the guest's command line, not the tool's
  }
  // The offer's, chosen at lease: what the kernel is, not the tool's options.
  params.erase(proto::kAccelParam);
  params.erase(proto::kKernelConfigParam);
  kernels::KernelRequest request;
  request.kernel_release = offer.release();
  request.commit = offer.commit();
  request.kernel_config = offer.kernel_config();
  request.machine_model = offer.machine_model();
  request.mode = job.mode();
  request.kernel_params = kernel_params;
  request.cancelled = [&cancel] { return cancel.cancelled(); };
  ExecutionResult out;
  const pb::Executor kind = proto::ExecutorFromName(capability());
  const bool iozone = kind == pb::EXECUTOR_IOZONE;
  const bool bench = kind == pb::EXECUTOR_DMA_MAP_BENCH;
  if (iozone) {
    if (absl::Status s = IozoneGuestRequest(params, vm_->config().nvme_bytes, request); !s.ok()) {
      return s;
    }
  } else if (bench) {
    if (absl::Status s = DmaMapBenchGuestRequest(params, request); !s.ok()) return s;
  } else {
    // The guest's NVMe is the target unless the spec names one (a device
    // target needs no size).
    if (params.count("filename") == 0 && params.count("directory") == 0) {
      params.emplace("filename", kGuestDevice);
    }
    absl::StatusOr<runners::FioSpec> spec = runners::FioSpecFromParams(params);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<std::vector<std::string>> argv = runners::BuildFioGuestArgv(*spec, kGuestDevice);
    if (!argv.ok()) return argv.status();
    request.tool_argv = *std::move(argv);
    request.tool_runtime = absl::Seconds(spec->runtime_s + spec->ramp_time_s);
  }
  absl::StatusOr<kernels::KernelRun> run = vm_->Run(request);
  if (!run.ok()) return run.status();

  if (iozone) {
    if (absl::Status s = IozoneGuestResult(*run, out); !s.ok()) return s;
    if (out.samples.empty()) return absl::InternalError("guest iozone reported no test");
  } else if (bench) {
    if (absl::Status s = DmaMapBenchGuestResult(*run, out); !s.ok()) return s;
  } else if (absl::Status s = FioGuestResult(*run, out); !s.ok()) {
    return s;
  }

  pb::HostFacts facts;
  facts.set_kernel_release(run->facts.release);
  facts.set_iommu_mode(run->effective);
  facts.set_iommu_detail(run->effective_detail);
  facts.set_architecture(run->facts.machine);
  facts.set_cpus(static_cast<uint32_t>(vm_->GuestCpus()));
  facts.set_numa_nodes(1);
  // The guest is the host of this run: its IOMMU, not the agent's.
  *facts.mutable_iommu_environment() = run->facts.iommu_environment;
  pb::GuestFacts* g = facts.mutable_guest();
  g->set_provider(run->provider);
  g->set_requested_mode(run->requested);
  g->set_domain_type(run->domain_type);
  g->set_iommu_driver(run->facts.iommu);
  g->set_cmdline(run->facts.cmdline);
  g->set_machine_model(run->machine_model);
  g->set_accel(run->accel);
  g->set_icount_shift(static_cast<uint32_t>(run->icount_shift));
  g->set_qemu_version(qemu_version_);
  out.ran_on = std::move(facts);
  out.monitors = std::move(run->monitors);
  return out;
}

}  // namespace farm::agent
