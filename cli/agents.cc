#include "cli/agents.h"

#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/environment_diff.h"
#include "proto/kernel_offers.h"
#include "proto/labels.h"

namespace farm::cli {

void AddAgentsCommand(CLI::App& app, Subcommands* out) {
  auto format = std::make_shared<std::string>();
  auto* agents = app.add_subcommand("agents", "list registered agents");
  AddOutputOption(agents, format.get());
  out->push_back({agents, [format](Commands& c) { return RunAgents(c, ToFormat(*format)); }});
}

int RunAgents(Commands& commands, OutputFormat format) {
  absl::StatusOr<std::vector<pb::Agent>> agents = commands.ListAllAgents();
  if (!agents.ok()) return commands.Fail("ListAgents", agents.status());
  commands.out() << FormatAgents(*agents, format);
  return 0;
}

namespace {

// The inventory in one cell: CPU, shape, IOMMU units, the usable devices.
std::string HardwareSummary(const pb::HostFacts& host) {
  const pb::Inventory& inv = host.inventory();
  std::vector<std::string> parts;
  if (!inv.cpu_model().empty()) parts.push_back(inv.cpu_model());
  std::string shape = absl::StrCat(host.cpus(), " cpus");
  if (inv.sockets() > 0) shape = absl::StrCat(inv.sockets(), " sockets, ", shape);
  absl::StrAppend(&shape, ", ", host.numa_nodes(), " nodes");
  if (inv.memory_kib() > 0) absl::StrAppend(&shape, ", ", inv.memory_kib() >> 20, " GiB");
  parts.push_back(shape);
  std::vector<std::string> units;
  for (const pb::IommuUnit& u : inv.iommus()) {
    units.push_back(u.driver().empty() ? u.name() : absl::StrCat(u.name(), ":", u.driver()));
  }
  if (!units.empty()) parts.push_back(absl::StrCat("iommus ", absl::StrJoin(units, " ")));
  std::vector<std::string> absent;
  for (const pb::MonitorCounter& c : inv.monitor_counters()) {
    if (!c.present()) absent.push_back(c.name());
  }
  if (!absent.empty()) parts.push_back(absl::StrCat("no ", absl::StrJoin(absent, " ")));
  for (const pb::InventoryDevice& d : inv.devices()) {
    std::string where = d.block().empty() ? "no block device" : d.block();
    if (!d.pci_address().empty()) absl::StrAppend(&where, " ", d.pci_address());
    if (!d.group_type().empty()) absl::StrAppend(&where, " ", d.group_type());
    parts.push_back(absl::StrCat(d.path(), " (", where, ")"));
  }
  return absl::StrJoin(parts, "; ");
}

// Each kernel the agent runs real jobs under, with its modes, once.
std::string KernelsSummary(const pb::Agent& agent) {
  std::vector<std::string> out;
  std::set<std::string> seen;  // fio and iozone offer the same kernels
  for (const pb::Capability& cap : agent.capabilities()) {
    const pb::Executor kind = ::farm::proto::ExecutorFromName(cap.name());
    if (!::farm::proto::IsRealExecutor(kind)) continue;
    for (const pb::KernelOffer& k : ::farm::proto::OffersFor({cap}, kind, agent.host())) {
      std::vector<std::string> modes;
      for (int m : k.modes()) modes.push_back(ModeName(m));
      const std::string name = k.commit().empty() || k.commit() == k.release()
                                   ? k.release()
                                   : absl::StrCat(k.commit(), "=", k.release());
      std::string text =
          absl::StrCat(k.provider(), " ", name, " [", absl::StrJoin(modes, ","), "]");
      if (seen.insert(text).second) out.push_back(std::move(text));
    }
  }
  return absl::StrJoin(out, "; ");
}

// The digest real runs' series carry ("iommu-env=<12 hex>") and what it
// stands for.
std::string IommuEnvironmentCell(const pb::HostFacts& host) {
  const pb::IommuEnvironment& env = host.iommu_environment();
  if (env.digest().empty()) return "-";
  return absl::StrCat(ShortDigest(env.digest()), ": ", EnvironmentSummary(env));
}

std::string HealthSummary(const pb::AgentHealth& health) {
  if (!health.checked()) return "-";
  return health.ok() ? "ok" : absl::StrCat("FAILED: ", health.detail());
}

}  // namespace

std::string FormatAgents(const std::vector<pb::Agent>& agents, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListAgentsResponse message;
  for (const auto& a : agents) {
    std::vector<std::string> caps;
    for (const auto& cap : a.capabilities()) caps.push_back(cap.name());
    rows.push_back({a.name(), absl::StrCat(a.agent_id()), a.connected() ? "yes" : "no",
                    absl::StrCat(a.running_jobs(), "/", a.slots()), absl::StrJoin(caps, ","),
                    ::farm::proto::LabelsText(a.host().labels()), HealthSummary(a.health()),
                    a.host().kernel_release(), absl::StrCat(a.host().cpus()),
                    ModeName(a.host().iommu_mode()), IommuEnvironmentCell(a.host()),
                    HardwareSummary(a.host()), KernelsSummary(a),
                    FormatTimestamp(a.last_heartbeat())});
    *message.add_agents() = a;
  }
  return RenderList(
      {"name", "id", "connected", "running", "capabilities", "labels", "health", "kernel", "cpus",
       "iommu", "iommu environment", "hardware", "kernels offered", "last heartbeat"},
      rows, message, format, "no agents\n");
}

}  // namespace farm::cli
