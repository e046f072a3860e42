// The agent list in every --output format.
#include "cli/agents.h"

#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

TEST(FormatAgentsTest, TableCsvAndJsonShareTheRows) {
  pb::Agent a;
  a.set_name("agent-1");
  a.set_agent_id(5);
  a.set_connected(true);
  a.set_slots(2);
  a.set_running_jobs(1);
  a.add_capabilities()->set_name("emulator");
  a.add_capabilities()->set_name("fio");
  a.mutable_host()->set_kernel_release("6.1.0");
  a.mutable_host()->set_cpus(8);
  a.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(FormatAgents({}), "no agents\n");
  (*a.mutable_host()->mutable_labels())["platform"] = "spr-lab";
  (*a.mutable_host()->mutable_labels())["nic"] = "cx6";
  a.mutable_host()->set_numa_nodes(2);
  pb::Inventory* inv = a.mutable_host()->mutable_inventory();
  inv->set_cpu_model("Xeon 8480+");
  inv->set_sockets(2);
  inv->set_memory_kib(uint64_t{512} << 20);
  inv->add_iommus()->set_name("dmar0");
  pb::InventoryDevice* dev = inv->add_devices();
  dev->set_path("/dev/nvme0n1");
  dev->set_block("nvme0n1");
  dev->set_pci_address("0000:17:00.0");
  dev->set_group_type("DMA-FQ");
  pb::MonitorCounter* counter = inv->add_monitor_counters();
  counter->set_name("trace/iommu:map");
  counter->set_present(true);
  counter = inv->add_monitor_counters();
  counter->set_name("pmcg");
  counter->set_note("no smmuv3_pmcg_* PMU");
  a.mutable_health()->set_checked(true);
  a.mutable_health()->set_ok(false);
  a.mutable_health()->set_detail("fio: INTERNAL: disk full");
  EXPECT_EQ(FormatAgents({}, OutputFormat::kCsv),
            "name,id,connected,running,capabilities,labels,health,kernel,cpus,iommu,"
            "iommu environment,hardware,kernels offered,last heartbeat\n");
  const std::string table = FormatAgents({a});
  EXPECT_NE(table.find("agent-1"), std::string::npos) << table;
  EXPECT_NE(table.find("emulator,fio"), std::string::npos) << table;
  std::vector<std::string> csv =
      absl::StrSplit(FormatAgents({a}, OutputFormat::kCsv), '\n', absl::SkipEmpty());
  ASSERT_EQ(csv.size(), 2u);
  // The fio capability lists no kernels: it runs the host's, in its mode.
  EXPECT_EQ(csv[1],
            "agent-1,5,yes,1/2,\"emulator,fio\",\"nic=cx6,platform=spr-lab\","
            "FAILED: fio: INTERNAL: disk full,6.1.0,8,strict,-,"
            "\"Xeon 8480+; 2 sockets, 8 cpus, 2 nodes, 512 GiB; iommus dmar0; no pmcg; "
            "/dev/nvme0n1 (nvme0n1 0000:17:00.0 DMA-FQ)\",host 6.1.0 [strict],-");
  auto j = nlohmann::json::parse(FormatAgents({a}, OutputFormat::kJson));
  ASSERT_EQ(j["agents"].size(), 1u);
  EXPECT_EQ(j["agents"][0]["name"], "agent-1");
  EXPECT_EQ(j["agents"][0]["slots"], 2);
  EXPECT_TRUE(nlohmann::json::parse(FormatAgents({}, OutputFormat::kJson)).is_object());
}

TEST(FormatAgentsTest, ShowsTheIommuEnvironmentAsItsSeriesKeyAndSummary) {
  pb::Agent a;
  a.set_name("lab-1");
  pb::IommuEnvironment* env = a.mutable_host()->mutable_iommu_environment();
  (*env->mutable_facts())["unit/dmar0/ecap"] = "f00f4a";
  (*env->mutable_facts())["unit/dmar0/caching_mode"] = "0";
  (*env->mutable_facts())["device/0000:17:00.0/ats"] = "on";
  (*env->mutable_facts())["firmware/bios_version"] = "2.3";
  env->set_digest("3afae21b82da9d731c76e5e0e563b6081dfa30a670add61e905161be6b919b82");
  const std::string table = FormatAgents({a});
  EXPECT_NE(table.find("3afae21b82da: 1 VT-d unit (caching mode 0); ATS on 1/1 device; "
                       "firmware 2.3"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("3afae21b82da9"), std::string::npos) << table;
  auto j = nlohmann::json::parse(FormatAgents({a}, OutputFormat::kJson));
  EXPECT_EQ(j["agents"][0]["host"]["iommu_environment"]["digest"], env->digest());
}

}  // namespace
}  // namespace farm::cli
