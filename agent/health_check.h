// farm::agent health jobs: what the agent runs before it takes work, as
// LAVA's health checks do, so that a lab host whose disk, tool or
// permissions broke is shown as failed in `farmctl agents` and is leased
// nothing (the claim skips an agent whose health failed,
// lib/storage/run_eligibility.h AgentHealthy) instead of failing every job.
//
// Each real executor that runs on the host's own kernel (fio, iozone with a
// "host" kernel offer) runs one small job through its own Run(), exactly as
// a leased job would run: fio 1 s of 4 KiB random reads over a 4 MiB file in
// the first --allow-dir; an agent without fio runs iozone's instead, a 1 MiB
// write and read there (iozone's run syncs and takes seconds). A result
// with no samples fails too. Executors that boot the job's kernel (vm,
// kexec) are checked when the agent starts (QEMU, the guest initramfs, the
// kernel store), the emulator is a model: neither has a health job.
//
// A kexec host also proves its state directory takes a synced write
// (ProbeWritableDir): the host writes its pending boot there before every
// kexec, and a root that went read-only, or a disk that stopped answering
// after a kexec, fails that write while a read of a cached file passes.
//
// The IOMMU is checked too (AddIommuGroupCheck): every device the jobs may
// use must sit in an IOMMU group that runs the host's mode, or its jobs
// would measure another mode than the one their results name (a device the
// kernel quirked into an identity domain, one bound to VFIO, a group whose
// type was changed through sysfs).
//
// Thread-safety: RunHealthJobs calls the executors' Run(), which is
// thread-safe; it holds no state. ProbeWritableDir is thread-safe. No
// ownership of the executors.
#ifndef AGENT_HEALTH_CHECK_H_
#define AGENT_HEALTH_CHECK_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/executors/executor.h"
#include "agent/health_baseline.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::agent {

// The health job of an executor on `host`, or nullopt when it has none
// (above): a job of the host's own kernel in its mode, which only that
// kernel's offer ("host", proto/kernel_offers.h) runs.
std::optional<iommufarm::v1::Job> HealthJobFor(const Executor& executor,
                                               const iommufarm::v1::HostFacts& host);

// A passing health job's headline figure, for the host's baseline
// (health_baseline.h): fio's read IOPS.
struct HealthFigure {
  std::string name;  // "fio read IOPS"
  double value = 0;
};

// Runs every executor's health job, each cancelled after `timeout`.
// checked is false when none had one; detail names each job's outcome
// ("fio: ok, 1 samples; iozone: INTERNAL: ..."). The passing jobs'
// figures are appended to *figures when it is given.
iommufarm::v1::AgentHealth RunHealthJobs(const std::vector<Executor*>& executors,
                                         const iommufarm::v1::HostFacts& host,
                                         absl::Duration timeout = absl::Minutes(2),
                                         std::vector<HealthFigure>* figures = nullptr);

// `health` with each of `figures` judged against `baseline` (the key: the
// host's kernel release, its mode and the figure's name) within `band`,
// as "baseline: 6.1.0-57-amd64 strict fio read IOPS 10450, at least 11200
// x 0.50 (median of this host's last 5)"; a figure below its band fails
// the whole check. Adds nothing without figures.
void AddBaselineCheck(const iommufarm::v1::HostFacts& host,
                      const std::vector<HealthFigure>& figures, double band,
                      HealthBaseline* baseline, iommufarm::v1::AgentHealth* health);

// Writes 4 KiB to a probe file in `dir` as the kexec state is written
// (base::WriteFileAtomically: write, fsync, rename), then removes it. The
// error names the file and what failed ("Read-only file system"); a write
// that does not finish within `timeout` (a disk whose I/O hangs) is
// DEADLINE_EXCEEDED, and its thread is left to finish on its own.
absl::Status ProbeWritableDir(const std::string& dir, absl::Duration timeout = absl::Seconds(90));

// `health` with the probe's outcome added as "state dir DIR: ok" or its
// error (a failure fails the whole check).
void AddWritableDirProbe(const std::string& dir, const absl::Status& probe,
                         iommufarm::v1::AgentHealth* health);

// The devices of host.inventory() on PCI whose IOMMU group runs another
// mode than host.iommu_mode(), one line each ("/dev/nvme0n1 (nvme0n1 at
// 0000:00:04.0): IOMMU group 3 of type identity runs passthrough, the host
// strict"). A device's mode is read by the one rule the host's is
// (iommu_mode::ReadRunningMode over its group's type alone, with the
// host's `cmdline` for a pre-v5.15 "DMA"); a device without a group runs
// off. Empty when the host's mode is unknown or every device agrees; a
// device whose group shows no mode is not judged.
std::vector<std::string> IommuGroupMismatches(const iommufarm::v1::HostFacts& host,
                                              std::string_view cmdline);

// `health` with the group check added as "iommu groups: ok (N devices in
// <mode>)" or its mismatches (which fail the whole check). Adds nothing
// when no device was judged (the host's mode unknown, no device on PCI).
void AddIommuGroupCheck(const iommufarm::v1::HostFacts& host, std::string_view cmdline,
                        iommufarm::v1::AgentHealth* health);

}  // namespace farm::agent

#endif  // AGENT_HEALTH_CHECK_H_
