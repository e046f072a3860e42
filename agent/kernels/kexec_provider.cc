#include "agent/kernels/kexec_provider.h"

#include <sys/reboot.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "lib/base/file.h"
#include "lib/kstore/kernel_store.h"
#include "proto/failure_marks.h"
#include "proto/kernel_params.h"
#include "proto/names.h"

namespace farm::kernels {

namespace pb = ::iommufarm::v1;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr char kStateFile[] = "kexec-state.json";
constexpr absl::Duration kCommandTimeout = absl::Minutes(2);

class SystemRunner : public CommandRunner {
 public:
  absl::StatusOr<process::ProcessResult> Run(const std::vector<std::string>& argv,
                                             absl::Duration timeout) override {
    process::ProcessOptions p;
    p.argv = argv;
    p.timeout = timeout;
    return process::RunProcess(p);
  }
};

absl::Status CommandOk(const absl::StatusOr<process::ProcessResult>& r,
                       const std::vector<std::string>& argv) {
  if (!r.ok())
    return absl::FailedPreconditionError(absl::StrCat(argv[0], ": ", r.status().message()));
  if (!r->ok()) {
    return absl::AbortedError(absl::StrCat(absl::StrJoin(argv, " "), ": ", r->Describe(), ": ",
                                           r->stderr_data.substr(0, 512)));
  }
  return absl::OkStatus();
}

// Whether `systemctl kexec` was ended by the shutdown it started: systemd
// stops the agent's service on the way into the loaded kernel, and with it
// every process of the service, the systemctl client too when it has not
// exited yet (without logind it queues kexec.target itself and the stop
// can come first). Only SIGTERM, and only when the runner did not send it.
bool StoppedByTheShutdown(const absl::StatusOr<process::ProcessResult>& r) {
  return r.ok() && r->signaled && r->term_signal == SIGTERM && !r->timed_out && !r->cancelled;
}

// The store's build of the request's release (and commit, when it names
// one) for `arch`. FailedPrecondition when the store or the build is gone.
absl::StatusOr<kstore::KernelBuild> StoreBuild(const std::string& kernels_dir,
                                               const std::string& arch,
                                               const KernelRequest& request) {
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(kernels_dir);
  if (!store.ok()) return absl::FailedPreconditionError(store.status().message());
  for (const kstore::KernelBuild& b : store->builds) {
    if (b.arch == arch && BootsOn(b, BootTarget::kHost) && b.release == request.kernel_release &&
        (request.commit.empty() ||
         (b.commit == request.commit && OffersConfig(b, request.kernel_config)))) {
      return b;
    }
  }
  return absl::FailedPreconditionError("the build left the store");
}

}  // namespace

std::unique_ptr<CommandRunner> SystemCommandRunner() { return std::make_unique<SystemRunner>(); }

std::string PendingBootJson(const PendingBoot& b) {
  json j = {{"job_id", b.lease.job_id},
            {"attempt", b.lease.attempt},
            {"lease_token", b.lease.lease_token},
            {"commit", b.commit},
            {"release", b.release},
            {"mode", proto::ModeName(b.mode)},
            {"cmdline", b.cmdline},
            {"deadline_unix", absl::ToUnixSeconds(b.deadline)},
            {"default_release", b.default_release},
            {"job", b.lease.job}};
  return j.dump(2) + "\n";
}

// True when the kernel's uptime says it came up within `timeout` of its
// start; false when the uptime was not read.
bool UpInTime(const KernelFacts& facts, absl::Duration timeout) {
  return facts.uptime > absl::ZeroDuration() && facts.uptime <= timeout;
}

// "12.3 s"
std::string FormatSeconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

absl::StatusOr<PendingBoot> ParsePendingBoot(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return absl::InvalidArgumentError("kexec state: not a JSON object");
  PendingBoot b;
  try {
    b.lease.job_id = j.at("job_id").get<int64_t>();
    b.lease.attempt = j.at("attempt").get<int32_t>();
    b.lease.lease_token = j.at("lease_token").get<std::string>();
    b.commit = j.at("commit").get<std::string>();
    b.release = j.at("release").get<std::string>();
    b.mode = proto::ModeFromName(j.at("mode").get<std::string>());
    b.cmdline = j.at("cmdline").get<std::string>();
    b.deadline = absl::FromUnixSeconds(j.at("deadline_unix").get<int64_t>());
    b.default_release = j.at("default_release").get<std::string>();
    b.lease.job = j.value("job", std::string());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("kexec state: ", e.what()));
  }
  if (b.release.empty() || b.mode == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError("kexec state: no release or mode");
  }
  return b;
}

absl::StatusOr<std::string> KexecCmdline(const std::string& base, pb::IommuMode mode,
                                         const std::vector<std::string>& extra) {
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(base, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    // The job's mode replaces whatever the base chose.
    if (!iommu_mode::IsModeParam({w.data(), w.size()})) words.emplace_back(w);
  }
  if (!extra.empty()) {
    std::string error;
    std::vector<std::string> checked = proto::ParseKernelParams(absl::StrJoin(extra, " "), &error);
    if (!error.empty()) return absl::InvalidArgumentError(error);
    words.insert(words.end(), checked.begin(), checked.end());
  }
  // The host's IOMMU may be either.
  absl::StatusOr<std::vector<std::string>> params =
      ModeKernelParams(mode, {iommu_mode::Driver::kIntelVtd, iommu_mode::Driver::kAmdVi});
  if (!params.ok()) return params.status();
  words.insert(words.end(), params->begin(), params->end());
  return absl::StrJoin(words, " ");
}

KexecKernelProvider::KexecKernelProvider(KexecConfig config, std::unique_ptr<CommandRunner> runner,
                                         std::function<absl::StatusOr<KernelFacts>()> read_facts,
                                         std::function<absl::Time()> now)
    : config_(std::move(config)),
      runner_(std::move(runner)),
      read_facts_(std::move(read_facts)),
      now_(std::move(now)),
      store_(std::make_unique<kstore::StoreWatch>(config_.kernels_dir)) {}

std::string KexecKernelProvider::StatePath() const {
  return (fs::path(config_.state_dir) / kStateFile).string();
}

absl::Status KexecKernelProvider::CanRun(const KernelRequest& request) const {
  if (request.mode == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::InvalidArgumentError("the request names no IOMMU mode");
  }
  std::error_code ec;
  if (config_.state_dir.empty() || !fs::is_directory(config_.state_dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kexec state dir '", config_.state_dir, "' is not a directory"));
  }
  absl::StatusOr<kstore::StoreListing> store = kstore::ReadStore(config_.kernels_dir);
  if (!store.ok()) return absl::FailedPreconditionError(store.status().message());
  for (const kstore::KernelBuild& b : store->builds) {
    if (b.arch != config_.arch || !BootsOn(b, BootTarget::kHost)) continue;
    if (request.commit.empty()
            ? b.release == request.kernel_release
            : b.commit == request.commit && b.release == request.kernel_release &&
                  OffersConfig(b, request.kernel_config)) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no kernel for ", request.commit.empty() ? request.kernel_release : request.commit, " (",
      config_.arch, ") in ", config_.kernels_dir));
}

std::vector<pb::KernelOffer> KexecKernelProvider::Offers() const {
  std::vector<pb::KernelOffer> out;
  const kstore::StoreWatch::Snapshot snapshot = store_->Current();
  const absl::StatusOr<kstore::StoreListing>& store = *snapshot.listing;
  if (!store.ok()) return out;
  for (const kstore::KernelBuild& b : store->builds) {
    if (b.arch != config_.arch || !BootsOn(b, BootTarget::kHost)) continue;
    for (const std::string& kernel_config : OfferedConfigs(b)) {
      pb::KernelOffer& o = out.emplace_back();
      o.set_provider("kexec");
      o.set_release(b.release);
      o.set_commit(b.commit);
      for (const iommu_mode::ModeSpelling& m : iommu_mode::kModes) {
        o.add_modes(proto::ProtoMode(m.mode));
      }
      o.set_architecture(config_.arch);
      o.set_kernel_config(kernel_config);
    }
  }
  return out;
}

absl::StatusOr<KernelRun> KexecKernelProvider::RunLeased(
    const KernelRequest& request, const LeaseHold& lease,
    const std::function<absl::Status()>& before_boot) {
  if (absl::Status s = CanRun(request); !s.ok()) return s;
  absl::StatusOr<KernelFacts> facts = read_facts_();
  if (!facts.ok()) return facts.status();

  KernelRun run;
  run.provider = "kexec";
  run.requested = request.mode;
  run.facts = *facts;
  absl::StatusOr<pb::IommuMode> effective = EffectiveMode(*facts, &run.effective_detail);
  run.effective = effective.ok() ? *effective : pb::IOMMU_MODE_UNSPECIFIED;
  run.domain_type = NvmeDomainType(*facts);
  const std::vector<std::string> words =
      absl::StrSplit(facts->cmdline, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  bool params_on = true;
  for (const std::string& p : request.kernel_params) {
    params_on = params_on && absl::c_linear_search(words, p);
  }
  // A kernel asked for the job's mode that chose another runs the job and
  // reports the mode it ran.
  const bool mode_ok =
      effective.ok() &&
      CheckRanMode(*facts, request.mode, run.effective, &run.effective_detail).ok();
  if (facts->release == request.kernel_release && mode_ok && params_on) {
    if (!request.tool_argv.empty()) {
      const absl::Time start = now_();
      absl::StatusOr<process::ProcessResult> r =
          runner_->Run(request.tool_argv, request.tool_runtime + config_.margin);
      if (!r.ok()) return r.status();
      if (r->timed_out) return absl::AbortedError(absl::StrCat("tool ", r->Describe()));
      run.tool_stdout = std::move(r->stdout_data);
      run.tool_stderr = std::move(r->stderr_data);
      run.tool_exit = r->signaled ? 128 + r->term_signal : r->exit_code;
      run.wall_time = now_() - start;
    }
    return run;
  }

  // Step 1: boot the job's kernel.
  absl::StatusOr<kstore::KernelBuild> build =
      StoreBuild(config_.kernels_dir, config_.arch, request);
  if (!build.ok()) return build.status();
  // A kernel that cannot mount the root would panic, and only a power cycle
  // would bring the host back.
  if (absl::Status s = CheckMountsRoot(*build, config_.root_needs); !s.ok()) return s;
  absl::StatusOr<std::string> cmdline =
      KexecCmdline(config_.base_cmdline, request.mode, request.kernel_params);
  if (!cmdline.ok()) return cmdline.status();
  PendingBoot boot;
  boot.lease = lease;
  boot.commit = build->commit;
  boot.release = build->release;
  boot.mode = request.mode;
  boot.cmdline = *cmdline;
  boot.deadline = now_() + config_.boot_timeout;
  boot.default_release = config_.default_release;
  if (before_boot) {
    if (absl::Status s = before_boot(); !s.ok()) return s;
  }
  // On disk before the kernel is replaced.
  if (absl::Status s = base::WriteFileAtomically(StatePath(), PendingBootJson(boot), 0600);
      !s.ok()) {
    return s;
  }

  std::vector<std::string> load = {config_.kexec, "-l", build->ImagePath()};
  if (!build->initrd.empty()) load.push_back("--initrd=" + build->InitrdPath());
  load.push_back("--append=" + *cmdline);
  if (absl::Status s = CommandOk(runner_->Run(load, kCommandTimeout), load); !s.ok()) {
    std::error_code ec;
    fs::remove(StatePath(), ec);
    return s;
  }
  const std::vector<std::string> exec = {config_.systemctl, "kexec"};
  const absl::StatusOr<process::ProcessResult> kexec = runner_->Run(exec, kCommandTimeout);
  if (absl::Status s = CommandOk(kexec, exec); !s.ok() && !StoppedByTheShutdown(kexec)) {
    std::error_code ec;
    fs::remove(StatePath(), ec);
    return s;
  }
  return absl::UnavailableError(absl::StrCat("rebooting into ", build->release, " (commit ",
                                             build->commit, ") for job ", lease.job_id));
}

absl::StatusOr<KexecKernelProvider::Resumed> KexecKernelProvider::Resume() {
  absl::StatusOr<Resumed> out = Check();
  if (!out.ok() || out->kind != Resumed::kFailed) return out;
  if (absl::Status s = Abandon(*out); !s.ok()) {
    out->reason = absl::StrCat(out->reason, "; ", s.message());
  }
  return out;
}

absl::Status KexecKernelProvider::Abandon(const Resumed& resumed) {
  std::error_code ec;
  fs::remove(StatePath(), ec);
  if (!resumed.running.empty() || resumed.reset_devices) {
    if (absl::Status s =
            ReturnToDefault(resumed.running, resumed.boot.default_release, resumed.reset_devices);
        !s.ok()) {
      return absl::AbortedError(
          absl::StrCat("returning to the default kernel failed: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KexecKernelProvider::Resumed> KexecKernelProvider::Check() {
  Resumed out;
  absl::StatusOr<std::string> text = base::ReadFile(StatePath());
  if (!text.ok()) return out;
  absl::StatusOr<PendingBoot> boot = ParsePendingBoot(*text);
  if (!boot.ok())
    return absl::InternalError(absl::StrCat(StatePath(), ": ", boot.status().message()));
  out.boot = *boot;
  absl::StatusOr<KernelFacts> facts = read_facts_();
  if (!facts.ok()) return absl::InternalError(facts.status().message());
  const std::string wanted = absl::StrCat(boot->release, " (commit ", boot->commit, ")");
  const absl::Time now = now_();
  std::string reason;
  if (facts->release != boot->release) {
    reason = facts->release == boot->default_release
                 ? absl::StrCat("kernel ", wanted,
                                " did not come back: the host runs its default kernel ",
                                facts->release, ", so it ", std::string(proto::kDoesNotBootMark))
                 : absl::StrCat("booted kernel ", facts->release, ", wanted ", wanted);
  } else if (now > boot->deadline && !UpInTime(*facts, config_.boot_timeout)) {
    reason = absl::StrCat("kernel ", wanted, " came back after the boot timeout (",
                          absl::FormatDuration(config_.boot_timeout), ")");
    if (facts->uptime > absl::ZeroDuration()) {
      absl::StrAppend(&reason, "; it has run for ", FormatSeconds(facts->uptime));
    }
  } else {
    std::string detail;
    absl::StatusOr<pb::IommuMode> effective = EffectiveMode(*facts, &detail);
    if (!effective.ok()) {
      reason = absl::StrCat("kernel ", wanted, ": ", effective.status().message());
    } else if (absl::Status s = CheckRanMode(*facts, boot->mode, *effective, &detail); !s.ok()) {
      reason = absl::StrCat("kernel ", wanted, ": ", s.message());
    }
  }
  if (reason.empty()) {
    out.kind = Resumed::kRun;
    if (now > boot->deadline) {
      out.note = absl::StrCat("the wall clock is ", FormatSeconds(now - boot->deadline),
                              " past the boot's deadline, but kernel ", wanted, " has run for ",
                              FormatSeconds(facts->uptime), " of its ",
                              absl::FormatDuration(config_.boot_timeout),
                              ": the clock moved after the kexec; the boot counts as in time");
    }
    return out;
  }
  out.kind = Resumed::kFailed;
  out.reason = reason;
  out.running = facts->release;
  return out;
}

absl::Status KexecKernelProvider::ReturnToDefault(const std::string& running,
                                                  const std::string& default_release,
                                                  bool reset_devices) {
  if (!reset_devices && (default_release.empty() || running == default_release)) {
    return absl::OkStatus();
  }
  const std::vector<std::string> reboot = {config_.systemctl, "reboot"};
  absl::Status st = CommandOk(runner_->Run(reboot, kCommandTimeout), reboot);
  if (st.ok() || !reset_devices || !config_.reboot_syscall_fallback) return st;
  std::fprintf(stderr, "kexec: %s; rebooting by reboot(2), without a sync\n",
               st.ToString().c_str());
  ::reboot(RB_AUTOBOOT);
  return absl::ErrnoToStatus(errno, absl::StrCat(st.message(), "; reboot(2)"));
}

absl::Status KexecKernelProvider::Finish() {
  std::error_code ec;
  fs::remove(StatePath(), ec);
  if (ec) return absl::InternalError(absl::StrCat("remove ", StatePath(), ": ", ec.message()));
  return absl::OkStatus();
}

namespace {

std::string ReadTrimmed(const fs::path& p) {
  return std::string(absl::StripAsciiWhitespace(base::ReadFileOrEmpty(p.string())));
}

std::vector<std::string> Names(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::Status CheckKexecTools(const KexecConfig& config) {
  for (const std::string& tool : {config.kexec, config.systemctl}) {
    if (absl::StatusOr<std::string> p = process::ResolveExecutable(tool); !p.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no ", tool, " on PATH: ", p.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelFacts> ReadRunningKernelFacts(const std::string& root) {
  const fs::path r(root);
  KernelFacts f;
  f.release = ReadTrimmed(r / "proc/sys/kernel/osrelease");
  if (f.release.empty()) {
    return absl::InternalError(
        absl::StrCat("cannot read ", (r / "proc/sys/kernel/osrelease").string()));
  }
  struct utsname uts {};
  if (::uname(&uts) == 0) f.machine = uts.machine;
  f.cmdline = ReadTrimmed(r / "proc/cmdline");
  // "350735.47 1334001.21": seconds up, then idle.
  double up = 0;
  const std::string uptime = ReadTrimmed(r / "proc/uptime");
  if (absl::SimpleAtod(uptime.substr(0, uptime.find(' ')), &up) && up > 0) {
    f.uptime = absl::Seconds(up);
  }
  f.iommu = absl::StrJoin(Names(r / "sys/class/iommu"), " ");
  const fs::path groups = r / "sys/kernel/iommu_groups";
  std::vector<std::string> ids = Names(groups);
  std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  for (const std::string& id : ids) {
    IommuGroup& g = f.groups.emplace_back();
    g.id = id;
    g.type = ReadTrimmed(groups / id / "type");
    g.devices = Names(groups / id / "devices");
  }
  for (const std::string& name : Names(r / "sys/class/nvme")) {
    NvmeController& n = f.nvme.emplace_back();
    n.name = name;
    n.pci_address = ReadTrimmed(r / "sys/class/nvme" / name / "address");
    for (const IommuGroup& g : f.groups) {
      if (absl::c_linear_search(g.devices, n.pci_address)) n.group = g.id;
    }
    for (const std::string& ns : Names(r / "sys/class/nvme" / name)) {
      if (absl::StartsWith(ns, name + "n")) n.namespaces.push_back(ns);
    }
  }
  return f;
}

}  // namespace farm::kernels
