#include "scheduler/lab_recovery.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/file.h"
#include "lib/base/utf8.h"
#include "lib/process/process.h"
#include "lib/spec/yaml_document.h"
#include "proto/kernel_config.h"
#include "spdlog/spdlog.h"

namespace farm::scheduler {
namespace {

absl::Status HostError(const std::string& host, absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("hosts.", host, ".", key, ": ", why));
}

absl::StatusOr<std::vector<std::string>> ReadArgv(const YAML::Node& n, const std::string& host,
                                                  absl::string_view key) {
  if (!n.IsSequence() || n.size() == 0) {
    return HostError(host, key, "must be a non-empty list: the command and its arguments");
  }
  std::vector<std::string> argv;
  for (const YAML::Node& a : n) {
    if (!a.IsScalar()) return HostError(host, key, "every item must be a string");
    argv.push_back(a.as<std::string>());
  }
  if (argv[0].empty()) return HostError(host, key, "the command is empty");
  return argv;
}

// One host's `kernel_fragments`: a list of file names.
absl::Status ReadFragmentNames(const YAML::Node& n, const std::string& host, LabHost* h) {
  if (!n.IsSequence() || n.size() == 0) {
    return HostError(host, "kernel_fragments", "must be a non-empty list of config files");
  }
  for (const YAML::Node& f : n) {
    if (!f.IsScalar() || f.as<std::string>().empty()) {
      return HostError(host, "kernel_fragments", "every item must be a file name");
    }
    h->kernel_fragment_files.push_back(f.as<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadHostKey(const std::string& name, const std::string& key, const YAML::Node& v,
                         LabHost* h) {
  if (key == "power_cycle" || key == "console") {
    absl::StatusOr<std::vector<std::string>> argv = ReadArgv(v, name, key);
    if (!argv.ok()) return argv.status();
    (key == "console" ? h->console : h->power_cycle) = *std::move(argv);
  } else if (key == "timeout") {
    if (!v.IsScalar() || !absl::ParseDuration(v.as<std::string>(), &h->timeout) ||
        h->timeout <= absl::ZeroDuration()) {
      return HostError(name, key, "must be a positive duration such as 90s or 2m");
    }
  } else if (key == "console_lines") {
    int lines = 0;
    if (!v.IsScalar() || !YAML::convert<int>::decode(v, lines) || lines < 1 || lines > 10000) {
      return HostError(name, key, "must be a whole number from 1 to 10000");
    }
    h->console_lines = lines;
  } else if (key == "kernel_config") {
    if (!v.IsScalar() || v.as<std::string>().empty()) {
      return HostError(name, key, "must be the file name of the host's kernel config");
    }
    h->kernel_config_file = v.as<std::string>();
  } else if (key == "kernel_fragments") {
    return ReadFragmentNames(v, name, h);
  } else {
    return HostError(name, key,
                     "unknown key (power_cycle, console, timeout, console_lines, kernel_config, "
                     "kernel_fragments)");
  }
  return absl::OkStatus();
}

absl::StatusOr<LabHost> ReadHost(const std::string& name, const YAML::Node& n) {
  if (!n.IsMap()) {
    return HostError(name, "", "must be a map (power_cycle, console, timeout, kernel_config)");
  }
  LabHost h;
  for (const auto& kv : n) {
    if (absl::Status s = ReadHostKey(name, kv.first.as<std::string>(), kv.second, &h); !s.ok()) {
      return s;
    }
  }
  if (h.power_cycle.empty() && h.kernel_config_file.empty()) {
    return HostError(name, "power_cycle", "is required (unless the host names a kernel_config)");
  }
  if (!h.kernel_fragment_files.empty() && h.kernel_config_file.empty()) {
    return HostError(name, "kernel_fragments", "needs kernel_config: the base they merge over");
  }
  return h;
}

// A config file of `host`'s entry, read relative to `dir`.
absl::StatusOr<std::string> ReadConfigFile(const std::filesystem::path& dir,
                                           const std::string& host, absl::string_view key,
                                           const std::string& file) {
  std::filesystem::path path(file);
  if (path.is_relative()) path = dir / path;
  absl::StatusOr<std::string> text = base::ReadFile(path.string());
  if (!text.ok()) return HostError(host, key, text.status().message());
  return text;
}

// Reads and checks `h`'s kernel config files.
absl::Status ReadKernelConfig(const std::filesystem::path& dir, const std::string& name,
                              LabHost* h) {
  if (h->kernel_config_file.empty()) return absl::OkStatus();
  absl::StatusOr<std::string> base =
      ReadConfigFile(dir, name, "kernel_config", h->kernel_config_file);
  if (!base.ok()) return base.status();
  h->kernel_config.set_base(std::filesystem::path(h->kernel_config_file).filename().string());
  h->kernel_config.set_base_text(*base);
  for (size_t i = 0; i < h->kernel_fragment_files.size(); ++i) {
    const std::string& file = h->kernel_fragment_files[i];
    absl::StatusOr<std::string> text =
        ReadConfigFile(dir, name, absl::StrCat("kernel_fragments[", i + 1, "]"), file);
    if (!text.ok()) return text.status();
    iommufarm::v1::ConfigFragment* f = h->kernel_config.add_fragments();
    f->set_name(std::filesystem::path(file).filename().string());
    f->set_text(*text);
  }
  // As a spec's kernel_config: its problems, named by the spec's field,
  // are this entry's ("kernel_config.base: line 2 ...").
  const auto problems = proto::CheckKernelConfig(h->kernel_config);
  if (problems.empty()) return absl::OkStatus();
  return HostError(name, problems[0].first,
                   absl::StrCat(problems[0].second, " (", h->kernel_config_file, ")"));
}

// Runs `argv` within `timeout`; the outcome as a line for the job's reason
// ("exit 0", "signal 9 (timed out after 2m)", or why it could not start).
struct CommandOutcome {
  bool ok = false;
  std::string describe;
  std::string output;  // stdout, then stderr
};

CommandOutcome RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                          const std::atomic<bool>& cancel) {
  process::ProcessOptions o;
  o.argv = argv;
  o.timeout = timeout;
  o.cancelled = [&cancel] { return cancel.load(); };
  o.max_stdout = 1 << 20;
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(o);
  if (!r.ok()) return {false, r.status().ToString(), ""};
  return {r->ok(), r->Describe(), absl::StrCat(r->stdout_data, r->stderr_data)};
}

}  // namespace

absl::StatusOr<LabHosts> ParseLabHosts(std::string_view yaml) {
  if (absl::Status s = spec::CheckYamlDocument(yaml); !s.ok()) return s;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not YAML: ", e.what()));
  }
  if (!root.IsMap() || root.size() != 1 || !root["hosts"] || !root["hosts"].IsMap()) {
    return absl::InvalidArgumentError("must be a map with one key, hosts: {<agent name>: ...}");
  }
  LabHosts out;
  try {
    for (const auto& kv : root["hosts"]) {
      const std::string name = kv.first.as<std::string>();
      if (name.empty()) return absl::InvalidArgumentError("hosts: an agent name is empty");
      absl::StatusOr<LabHost> h = ReadHost(name, kv.second);
      if (!h.ok()) return h.status();
      out.emplace(name, *std::move(h));
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("hosts: ", e.what()));
  }
  return out;
}

absl::StatusOr<LabHosts> LoadLabHosts(const std::string& path) {
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<LabHosts> hosts = ParseLabHosts(*text);
  if (!hosts.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", hosts.status().message()));
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (auto& [name, host] : *hosts) {
    if (absl::Status s = ReadKernelConfig(dir, name, &host); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
  }
  return hosts;
}

std::map<std::string, iommufarm::v1::KernelConfig> LabKernelConfigs(const LabHosts& hosts) {
  std::map<std::string, iommufarm::v1::KernelConfig> out;
  for (const auto& [name, host] : hosts) {
    if (!proto::IsDefaultKernelConfig(host.kernel_config)) out.emplace(name, host.kernel_config);
  }
  return out;
}

std::string TailLines(std::string_view text, int lines) {
  // A console is a byte stream: at most this much of its end, made valid
  // UTF-8 (a reason is text in PostgreSQL), carriage returns dropped and
  // other control bytes but newline and tab shown as '?'.
  constexpr size_t kMaxBytes = 8192;
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  size_t end = text.size();  // the lines kept start after `end`
  bool all = false;
  for (int n = 0; n < lines && !all; ++n) {
    const size_t nl = end == 0 ? std::string_view::npos : text.rfind('\n', end - 1);
    if (nl == std::string_view::npos) {
      all = true;
    } else {
      end = nl;
    }
  }
  std::string out(all ? text : text.substr(end + 1));
  // A serial console ends its lines with "\r\n".
  out.erase(std::remove(out.begin(), out.end(), '\r'), out.end());
  if (out.size() > kMaxBytes) out.erase(0, out.size() - kMaxBytes);
  for (char& c : out) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) c = '?';
  }
  base::ReplaceInvalidUtf8(&out);
  return out;
}

LabRecovery::LabRecovery(storage::JobQueue* queue, LabHosts hosts,
                         metrics::SchedulerMetrics* metrics)
    : queue_(queue), hosts_(std::move(hosts)), metrics_(metrics), worker_([this] { Loop(); }) {
  // A counter's series that first appears at 1 is not an increase to
  // Prometheus: a host's first recovery would be invisible to increase()
  // and to the alert rules. The hosts with a power command start at 0;
  // an agent without one cannot be named ahead (the rules see it appear).
  if (metrics_ == nullptr) return;
  for (const auto& [agent, host] : hosts_) {
    if (host.power_cycle.empty()) continue;
    metrics_->power_cycles(agent, "power_cycled");
    metrics_->power_cycles(agent, "failed");
  }
}

void LabRecovery::Count(const std::string& agent, const char* outcome) {
  if (metrics_ != nullptr) metrics_->power_cycles(agent, outcome).Increment();
}

LabRecovery::~LabRecovery() { Stop(); }

void LabRecovery::Recover(const storage::UnbootedLease& lease) {
  absl::MutexLock lock(&mu_);
  if (!stopping_) pending_.push_back(lease);
}

void LabRecovery::Stop() {
  cancel_.store(true);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    pending_.clear();
  }
  if (worker_.joinable()) worker_.join();
}

void LabRecovery::Loop() {
  for (;;) {
    storage::UnbootedLease lease;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !pending_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      lease = pending_.front();
      pending_.pop_front();
    }
    const std::string note = RecoverHost(lease);
    absl::StatusOr<bool> stored = queue_->AnnotateFailure(lease.job_id, lease.attempt, note);
    if (!stored.ok() || !*stored) {
      spdlog::warn(
          "lab recovery: job {} attempt {}: the recovery's note was not stored ({})", lease.job_id,
          lease.attempt,
          stored.ok() ? "the job's attempt is no longer failed" : stored.status().ToString());
    }
    finished_.fetch_add(1);
  }
}

std::string LabRecovery::RecoverHost(const storage::UnbootedLease& lease) {
  auto it = hosts_.find(lease.agent);
  if (it == hosts_.end() || it->second.power_cycle.empty()) {
    spdlog::warn(
        "lab recovery: agent {} did not come back from job {}'s kernel and has no "
        "power command (farm-scheduler --lab-hosts): its host stays down",
        lease.agent, lease.job_id);
    Count(lease.agent, "no_command");
    return absl::StrCat("no power command for agent ", lease.agent,
                        " (farm-scheduler --lab-hosts): the host was not power-cycled");
  }
  const LabHost& h = it->second;
  std::string note;
  if (!h.console.empty()) {
    const CommandOutcome c = RunCommand(h.console, h.timeout, cancel_);
    const std::string tail = TailLines(c.output, h.console_lines);
    absl::StrAppend(&note, "console (", absl::StrJoin(h.console, " "), ": ", c.describe,
                    "), its last lines:\n", tail, "\n");
  }
  const CommandOutcome p = RunCommand(h.power_cycle, h.timeout, cancel_);
  Count(lease.agent, p.ok ? "power_cycled" : "failed");
  spdlog::info("lab recovery: agent {} did not come back from job {}'s kernel; power cycle {}: {}",
               lease.agent, lease.job_id, absl::StrJoin(h.power_cycle, " "), p.describe);
  absl::StrAppend(&note,
                  p.ok ? "power-cycled into the default kernel by " : "the power cycle failed: ",
                  absl::StrJoin(h.power_cycle, " "), " (", p.describe, ")");
  if (!p.ok && !p.output.empty()) absl::StrAppend(&note, ": ", TailLines(p.output, 5));
  return note;
}

}  // namespace farm::scheduler
