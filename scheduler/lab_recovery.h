// LabRecovery: brings a lab host back when the kernel it kexec'd into for a
// job never did (docs/kernels.md "Power, console and recovery").
//
// The reaper fails a job whose lease was held through its agent's reboot and
// whose hold passed (storage::UnbootedLease). For an agent named in the lab
// hosts file (farm-scheduler --lab-hosts), LabRecovery then runs, on its own
// thread, the host's console command (its output's last lines are what the
// console showed: a panic, a hang), then its power-cycle command, which
// resets the host into its default kernel; both outcomes and the console's
// tail are appended to the failed job's reason (JobQueue::AnnotateFailure).
// The agent on the default kernel registers again and leases the next job:
// the host returns to service. An agent without an entry gets a note on the
// job instead, saying that nobody cycles its power.
//
// Each recovery counts once in the scheduler's metrics (when given):
// farm_lab_power_cycles_total{agent, outcome} (lib/metrics/metrics.h), so
// that a lab alerts on hosts that keep failing to boot or stay down.
//
// A host without a power command (its entry names only a kernel config) is
// left down with a note on the job, as one without an entry. The commands
// are argv lists run without a shell (lib/process), each within its
// timeout. They come from the scheduler's own configuration, never from
// an agent: a lab's operator decides what the scheduler may run.
//
// Thread-safety: Recover() and Stop() from any thread; one worker thread
// runs the commands in order. Ownership: the queue and the metrics are not
// owned and must outlive the LabRecovery (Stop() or the destructor joins the
// worker).
#ifndef SCHEDULER_LAB_RECOVERY_H_
#define SCHEDULER_LAB_RECOVERY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/metrics/metrics.h"
#include "lib/storage/job_queue.h"

namespace farm::scheduler {

// One lab host's recovery commands and kernel config, by its agent's name.
struct LabHost {
  std::vector<std::string> power_cycle;       // required unless kernel_config_file is set
  std::vector<std::string> console;           // optional: prints the console log
  absl::Duration timeout = absl::Minutes(2);  // per command
  int console_lines = 40;                     // how much of the console to keep
  // The config the farm builds the host's kernels from (its base file and
  // fragments, as the file names them; kernel_builds.h LabKernelConfig), and
  // what LoadLabHosts read of them. "" and the default config: none named.
  std::string kernel_config_file;
  std::vector<std::string> kernel_fragment_files;
  iommufarm::v1::KernelConfig kernel_config;
};
using LabHosts = std::map<std::string, LabHost>;

// Parses the lab hosts file (YAML):
//   hosts:
//     <agent name>:
//       power_cycle: [ipmitool, -I, lanplus, -H, bmc-7, -E, chassis, power, cycle]
//       console: [tail, -c, "65536", /var/log/conserver/lab-7.log]
//       timeout: 2m          # optional, per command
//       console_lines: 40    # optional
//       kernel_config: lab-7.config           # optional: the host's kernel config
//       kernel_fragments: [nvme-root.config]  # optional, needs kernel_config
// InvalidArgument naming the host and key for anything else. The config
// files are named, not read (LoadLabHosts reads them).
absl::StatusOr<LabHosts> ParseLabHosts(std::string_view yaml);
// ParseLabHosts of a file, then each host's kernel config files read
// (relative paths from the file's directory) into LabHost::kernel_config
// and checked as a spec's kernel_config is (proto/kernel_config.h); the
// error names the file, the host and the key (a config file that does not
// read, an option line that does not parse).
absl::StatusOr<LabHosts> LoadLabHosts(const std::string& path);

// The kernel configs `hosts` name, by agent name.
std::map<std::string, iommufarm::v1::KernelConfig> LabKernelConfigs(const LabHosts& hosts);

// The last `lines` lines of `text` (all of it when it has fewer).
std::string TailLines(std::string_view text, int lines);

class LabRecovery final {
 public:
  // `metrics` may be null (no counting).
  LabRecovery(storage::JobQueue* queue, LabHosts hosts,
              metrics::SchedulerMetrics* metrics = nullptr);
  LabRecovery(const LabRecovery&) = delete;
  LabRecovery& operator=(const LabRecovery&) = delete;
  ~LabRecovery();  // Stop()

  // Queues the recovery of `lease`'s host; returns at once.
  void Recover(const storage::UnbootedLease& lease) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the commands under way (their group is killed), drops the
  // queued recoveries and joins.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Recoveries finished (commands run or the note written), for tests.
  int64_t finished() const { return finished_.load(); }

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the host's commands and returns the text appended to the job.
  std::string RecoverHost(const storage::UnbootedLease& lease);

  // Counts one recovery of `agent` with `outcome`, when there are metrics.
  void Count(const std::string& agent, const char* outcome);

  storage::JobQueue* const queue_;
  const LabHosts hosts_;
  metrics::SchedulerMetrics* const metrics_;
  absl::Mutex mu_;
  std::deque<storage::UnbootedLease> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> finished_{0};
  std::atomic<bool> cancel_{false};
  std::thread worker_;
};

}  // namespace farm::scheduler

#endif  // SCHEDULER_LAB_RECOVERY_H_
