#include "agent/health_check.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/util/time_util.h"
#include "lib/base/file.h"
#include "lib/iommu_mode/iommu_mode.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

// The host's own kernel in its mode, as a leased job would name it.
pb::Job SmallJob(pb::Executor executor, const pb::KernelOffer& host, const char* workload,
                 std::initializer_list<std::pair<const char*, const char*>> params) {
  pb::Job job;
  job.set_executor(executor);
  job.set_platform("health");
  job.set_commit_id(host.release());
  job.set_mode(static_cast<pb::IommuMode>(host.modes(0)));
  job.mutable_workload()->set_name(workload);
  for (const auto& [k, v] : params) (*job.mutable_workload()->mutable_params())[k] = v;
  return job;
}

// The headline figure of a passing health job's samples; nullopt for a
// job that has none (iozone's).
std::optional<HealthFigure> FigureOf(const pb::Job& job, const std::vector<pb::Sample>& samples) {
  if (job.executor() != pb::EXECUTOR_FIO) return std::nullopt;
  for (const pb::Sample& s : samples) {
    if (s.metric() == "iops" && s.phase() == "read") {
      return HealthFigure{"fio read IOPS", s.value()};
    }
  }
  return std::nullopt;
}

// One health job, cancelled when `timeout` passes; a passing job's figure
// into *figure.
std::string RunOne(Executor& executor, const pb::Job& job, absl::Duration timeout, bool* ok,
                   std::optional<HealthFigure>* figure) {
  CancelToken cancel;
  absl::Notification done;
  std::thread watchdog([&] {
    if (!done.WaitForNotificationWithTimeout(timeout)) cancel.Cancel();
  });
  absl::StatusOr<ExecutionResult> result = executor.Run(job, cancel);
  done.Notify();
  watchdog.join();
  *ok = result.ok() && !result->samples.empty();
  if (*ok) *figure = FigureOf(job, result->samples);
  if (!result.ok()) {
    return absl::StrCat(executor.capability(), ": ", cancel.cancelled() ? "timed out: " : "",
                        result.status().ToString());
  }
  return absl::StrCat(executor.capability(), ": ", *ok ? "ok, " : "failed, ",
                      result->samples.size(), " samples");
}

// Appends one check's line to `health`; a failed check fails the whole.
void AddCheck(const std::string& line, bool ok, pb::AgentHealth* health) {
  health->set_detail(health->detail().empty() ? line : absl::StrCat(health->detail(), "; ", line));
  health->set_ok((!health->checked() || health->ok()) && ok);
  health->set_checked(true);
  *health->mutable_checked_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

std::string ModeWord(std::optional<iommu_mode::Mode> mode) {
  return mode ? iommu_mode::Word(*mode) : "no known mode";
}

// IommuGroupMismatches, counting the devices judged into *judged.
std::vector<std::string> JudgeDeviceGroups(const pb::HostFacts& host, std::string_view cmdline,
                                           int* judged) {
  std::vector<std::string> out;
  const std::optional<iommu_mode::Mode> host_mode = ::farm::proto::ModeOf(host.iommu_mode());
  if (!host_mode) return out;
  for (const pb::InventoryDevice& d : host.inventory().devices()) {
    if (d.pci_address().empty()) continue;
    iommu_mode::RunningKernel kernel;
    kernel.behind_iommu = !d.iommu_group().empty();
    if (!d.group_type().empty()) kernel.group_types = {d.group_type()};
    // The command line is read only for a pre-v5.15 "DMA": with no group
    // type it would speak for the device alone, so the device is not judged.
    if (kernel.behind_iommu && kernel.group_types.empty()) continue;
    kernel.cmdline = cmdline;
    kernel.release = host.kernel_release();
    kernel.arch = host.architecture();
    if (judged != nullptr) ++*judged;
    const std::optional<iommu_mode::Mode> mode = iommu_mode::ReadRunningMode(kernel).mode;
    if (mode == host_mode) continue;
    const std::string where = absl::StrCat(d.path(), " (", d.block(), " at ", d.pci_address(), ")");
    out.push_back(d.iommu_group().empty()
                      ? absl::StrCat(where, ": in no IOMMU group, its DMA untranslated, the host ",
                                     iommu_mode::Word(*host_mode))
                      : absl::StrCat(where, ": IOMMU group ", d.iommu_group(), " of type ",
                                     d.group_type(), " runs ", ModeWord(mode), ", the host ",
                                     iommu_mode::Word(*host_mode)));
  }
  return out;
}

}  // namespace

std::optional<pb::Job> HealthJobFor(const Executor& executor, const pb::HostFacts& host) {
  const pb::Executor kind = ::farm::proto::ExecutorFromName(executor.capability());
  if (kind != pb::EXECUTOR_FIO && kind != pb::EXECUTOR_IOZONE) return std::nullopt;
  std::optional<pb::KernelOffer> own;
  for (const pb::KernelOffer& k : ::farm::proto::OffersFor({[&] {
                                                             pb::Capability c;
                                                             c.set_name(executor.capability());
                                                             for (const pb::KernelOffer& o :
                                                                  executor.kernels())
                                                               *c.add_kernels() = o;
                                                             return c;
                                                           }()},
                                                           kind, host)) {
    if (k.provider() == "host" && k.modes_size() > 0) own = k;
  }
  // A host whose mode is unknown runs no real job: nothing to check.
  if (!own) return std::nullopt;
  if (kind == pb::EXECUTOR_FIO) {
    return SmallJob(
        kind, *own, "health-fio",
        {{"rw", "randread"}, {"bs", "4k"}, {"size", "4m"}, {"runtime", "1"}, {"time_based", "1"}});
  }
  if (kind == pb::EXECUTOR_IOZONE) {
    return SmallJob(kind, *own, "health-iozone",
                    {{"tests", "write,read"}, {"size", "1m"}, {"record", "64k"}});
  }
  return std::nullopt;
}

pb::AgentHealth RunHealthJobs(const std::vector<Executor*>& executors, const pb::HostFacts& host,
                              absl::Duration timeout, std::vector<HealthFigure>* figures) {
  pb::AgentHealth health;
  std::vector<std::string> detail;
  bool all_ok = true;
  bool fio_checked = false;
  std::vector<std::pair<Executor*, pb::Job>> jobs;
  for (Executor* executor : executors) {
    std::optional<pb::Job> job = HealthJobFor(*executor, host);
    if (!job) continue;
    fio_checked = fio_checked || job->executor() == pb::EXECUTOR_FIO;
    jobs.emplace_back(executor, *std::move(job));
  }
  for (auto& [executor, job] : jobs) {
    // fio's job checks the host's disk; iozone's (seconds, as it syncs)
    // only runs where fio does not.
    if (fio_checked && job.executor() == pb::EXECUTOR_IOZONE) continue;
    bool ok = false;
    std::optional<HealthFigure> figure;
    detail.push_back(RunOne(*executor, job, timeout, &ok, &figure));
    all_ok = all_ok && ok;
    if (figure && figures != nullptr) figures->push_back(*std::move(figure));
  }
  if (detail.empty()) return health;
  health.set_checked(true);
  health.set_ok(all_ok);
  health.set_detail(absl::StrJoin(detail, "; "));
  *health.mutable_checked_at() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
  return health;
}

absl::Status ProbeWritableDir(const std::string& dir, absl::Duration timeout) {
  struct Probe {
    absl::Notification done;
    absl::Status status;
  };
  // Shared with the thread, which may outlive this call on a hung disk.
  auto probe = std::make_shared<Probe>();
  const std::string path = dir + "/.health-probe";
  std::thread([probe, path] {
    // The write the pending boot's state takes before every kexec.
    probe->status = base::WriteFileAtomically(path, std::string(4096, 'h'), 0600);
    ::unlink(path.c_str());
    ::unlink((path + ".tmp").c_str());
    probe->done.Notify();
  }).detach();
  if (!probe->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("a 4 KiB synced write to ", path, " did not finish in ",
                     absl::FormatDuration(timeout), ": the disk does not answer"));
  }
  return probe->status;
}

void AddWritableDirProbe(const std::string& dir, const absl::Status& probe,
                         pb::AgentHealth* health) {
  AddCheck(absl::StrCat("state dir ", dir, ": ", probe.ok() ? "ok" : probe.ToString()), probe.ok(),
           health);
}

std::vector<std::string> IommuGroupMismatches(const pb::HostFacts& host, std::string_view cmdline) {
  return JudgeDeviceGroups(host, cmdline, nullptr);
}

void AddBaselineCheck(const pb::HostFacts& host, const std::vector<HealthFigure>& figures,
                      double band, HealthBaseline* baseline, pb::AgentHealth* health) {
  const std::string mode = ::farm::proto::ModeName(host.iommu_mode());
  for (const HealthFigure& f : figures) {
    const HealthBaseline::Verdict v =
        baseline->Judge(absl::StrCat(host.kernel_release(), " ", mode, " ", f.name), f.value, band);
    AddCheck(absl::StrCat("baseline: ", v.line), v.ok, health);
  }
}

void AddIommuGroupCheck(const pb::HostFacts& host, std::string_view cmdline,
                        pb::AgentHealth* health) {
  int judged = 0;
  const std::vector<std::string> mismatches = JudgeDeviceGroups(host, cmdline, &judged);
  if (judged == 0) return;
  if (mismatches.empty()) {
    AddCheck(absl::StrCat("iommu groups: ok (", judged, judged == 1 ? " device" : " devices",
                          " in ", iommu_mode::Word(*::farm::proto::ModeOf(host.iommu_mode())), ")"),
             true, health);
    return;
  }
  AddCheck(absl::StrCat("iommu groups: ", absl::StrJoin(mismatches, "; ")), false, health);
}

}  // namespace farm::agent
