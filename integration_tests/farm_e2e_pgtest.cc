// End to end: real PostgreSQL, the real farm-scheduler (in-process), two
// spawned farm-agent processes running emulator jobs, and farmctl's own client
// code (farm::cli::Commands) plus the farmctl binary for the output formats.
// Checks that every job of a small matrix succeeded exactly once, with one
// result each, and that SIGTERM makes the agents exit 0.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "cli/git_import.h"
#include "lib/base/file.h"
#include "lib/metrics/metrics.h"
#include "nlohmann/json.hpp"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

constexpr char kSpec[] = R"(name: e2e-smoke
catalog: linux-iommu
platform: intel-vtd-snb16c
commits: [v4.6, 9257b4a206fc]
modes: [off, strict, lazy]
workloads:
  - name: dma-map-bench
    params: {threads: 2, seconds: 0.002}
repeats: 3
executor: emulator
)";

class FarmEndToEndPgTest : public testing::FarmTest {};

TEST_F(FarmEndToEndPgTest, MatrixRunsEveryJobExactlyOnce) {
  StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
    options.catalog_dir = std::string(FARM_SOURCE_DIR) + "/emu/model/catalogs";
    options.config.lease_ttl = absl::Seconds(6);
  });
  ASSERT_FALSE(HasFatalFailure());
  const std::string address = SchedulerAddress();

  const std::string base = TestDir() + "/farm-e2e";
  std::vector<std::unique_ptr<testing::ChildProcess>> agents;
  for (int i = 1; i <= 2; ++i) {
    absl::Status up;
    agents.push_back(StartAgent({.name = absl::StrCat("e2e-agent-", i),
                                 .slots = 2,
                                 .metrics = true,
                                 .drain_timeout = absl::Seconds(10)},
                                &up));
    ASSERT_TRUE(up.ok()) << up << "\n" << agents.back()->Out();
  }

  client::ClientOptions client_options;
  client_options.server = address;
  std::ostringstream out, err;
  cli::Commands commands(client_options, out, err);
  auto submitted = commands.SubmitSpec(kSpec, /*dry_run=*/false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t jobs = submitted->jobs_created();
  EXPECT_EQ(jobs, 2 * 3 * 3);
  const int64_t matrix_id = submitted->matrix().id();

  int updates = 0;
  auto final_progress =
      commands.WaitForMatrix(matrix_id, [&](const pb::MatrixProgress&) { ++updates; });
  ASSERT_TRUE(final_progress.ok()) << final_progress.status() << "\n"
                                   << agents[0]->Out() << agents[1]->Out();
  EXPECT_TRUE(final_progress->done());
  EXPECT_EQ(final_progress->state(), pb::MATRIX_STATE_COMPLETED)
      << agents[0]->Out() << agents[1]->Out();
  EXPECT_EQ(final_progress->counts().succeeded(), jobs);
  EXPECT_EQ(final_progress->counts().failed(), 0);
  EXPECT_GE(updates, 1);

  auto results = commands.FetchResults(matrix_id, /*include_raw=*/true);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(static_cast<int64_t>(results->size()), jobs);
  std::set<int64_t> job_ids;
  std::set<std::string> agent_names;
  for (const pb::Result& r : *results) {
    EXPECT_TRUE(job_ids.insert(r.job_id()).second) << "duplicate result for job " << r.job_id();
    EXPECT_EQ(r.attempt(), 1);
    EXPECT_EQ(r.raw_format(), "emu-json");
    EXPECT_FALSE(r.raw_output().empty());
    EXPECT_TRUE(nlohmann::json::accept(r.raw_output()));
    bool has_throughput = false;
    for (const auto& s : r.samples()) has_throughput |= s.metric() == "throughput";
    EXPECT_TRUE(has_throughput) << r.ShortDebugString().substr(0, 500);
    agent_names.insert(r.agent());
  }
  EXPECT_EQ(static_cast<int64_t>(job_ids.size()), jobs);

  // Two commits of the matrix compared series by series, through farmctl.
  const std::string compare_html = base + "-compare.html";
  auto compared =
      cli::RunProgram({FARMCTL_BIN, "--server", address, "compare", std::to_string(matrix_id),
                       "--commits", "v4.6", "9257b4a206fc", "--html", compare_html});
  ASSERT_TRUE(compared.ok()) << compared.status();
  absl::StatusOr<std::string> page = base::ReadFile(compare_html);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_NE(page->find("<svg"), std::string::npos);
  EXPECT_NE(compared->find(absl::StrCat("A: v4.6 in matrix ", matrix_id)), std::string::npos)
      << *compared;
  EXPECT_NE(compared->find("dma-map-bench{seconds=0.002,threads=2}"), std::string::npos)
      << *compared;
  EXPECT_NE(compared->find("series changed"), std::string::npos) << *compared;
  auto unknown = cli::RunProgram({FARMCTL_BIN, "--server", address, "compare",
                                  std::to_string(matrix_id), "--commits", "v4.6", "nonesuch"});
  EXPECT_FALSE(unknown.ok());

  // A try job: base and patch matrices submitted together, then compared.
  const std::string try_spec = base + "-try.yaml";
  ASSERT_TRUE(base::WriteFile(try_spec,
                              "name: e2e-try\ncatalog: linux-iommu\nplatform: intel-vtd-snb16c\n"
                              "commits: [v4.6]\nmodes: [strict]\nworkloads:\n"
                              "  - name: dma-map-bench\n    params: {threads: 2, seconds: 0.002}\n"
                              "repeats: 3\nexecutor: emulator\n")
                  .ok());
  auto tried = cli::RunProgram({FARMCTL_BIN, "--server", address, "try", try_spec, "--set",
                                "iova.allocator=rbtree", "--output", "json"});
  ASSERT_TRUE(tried.ok()) << tried.status();
  const nlohmann::json answer = nlohmann::json::parse(*tried);
  EXPECT_NE(answer["a"].get<std::string>().find("matrix "), std::string::npos) << *tried;
  EXPECT_NE(answer["a"], answer["b"]);
  EXPECT_FALSE(answer["series"].empty()) << *tried;
  for (const nlohmann::json& row : answer["series"]) {
    EXPECT_EQ(row["n_a"], 3);
    EXPECT_EQ(row["n_b"], 3);
  }

  // The three output formats, through the farmctl binary itself.
  for (const char* format : {"table", "csv", "json"}) {
    auto printed = cli::RunProgram({FARMCTL_BIN, "--server", address, "results",
                                    std::to_string(matrix_id), "--output", format});
    ASSERT_TRUE(printed.ok()) << format << ": " << printed.status();
    if (std::string(format) == "table") {
      EXPECT_NE(printed->find("metric: throughput"), std::string::npos) << *printed;
      EXPECT_NE(printed->find("9257b4a206fc"), std::string::npos) << *printed;
    } else if (std::string(format) == "json") {
      auto j = nlohmann::json::parse(*printed);
      EXPECT_EQ(static_cast<int64_t>(j.size()), jobs);
    } else {
      EXPECT_GT(std::count(printed->begin(), printed->end(), '\n'), jobs);
    }
  }
  // Raw outputs through GetRawOutput: `farmctl raw-output` prints one
  // verbatim, `results -o json --raw` carries each, both equal to what
  // GetResults returns inline.
  std::map<int64_t, std::string> raw_of;
  for (const pb::Result& r : *results) raw_of[r.job_id()] = r.raw_output();
  const pb::Result& first = results->front();
  auto raw_printed = cli::RunProgram(
      {FARMCTL_BIN, "--server", address, "raw-output", std::to_string(first.job_id())});
  ASSERT_TRUE(raw_printed.ok()) << raw_printed.status();
  EXPECT_EQ(*raw_printed, first.raw_output());
  auto json_raw = cli::RunProgram({FARMCTL_BIN, "--server", address, "results",
                                   std::to_string(matrix_id), "--output", "json", "--raw"});
  ASSERT_TRUE(json_raw.ok()) << json_raw.status();
  auto with_raw = nlohmann::json::parse(*json_raw);
  ASSERT_EQ(static_cast<int64_t>(with_raw.size()), jobs);
  for (const auto& o : with_raw) {
    const int64_t id = o.at("job_id").get<int64_t>();
    EXPECT_EQ(o.at("raw_output").get<std::string>(), raw_of[id]) << "job " << id;
  }
  auto agents_out = cli::RunProgram({FARMCTL_BIN, "--server", address, "agents"});
  ASSERT_TRUE(agents_out.ok()) << agents_out.status();
  EXPECT_NE(agents_out->find("e2e-agent-1"), std::string::npos) << *agents_out;
  // The other list commands: --output json parses, and is the same list.
  for (const char* list : {"status", "agents", "catalog"}) {
    std::vector<std::string> argv = {FARMCTL_BIN, "--server", address, list};
    if (std::string(list) == "catalog") argv.push_back("list");
    for (const char* flag : {"--output", "json"}) argv.push_back(flag);
    auto printed = cli::RunProgram(argv);
    ASSERT_TRUE(printed.ok()) << list << ": " << printed.status();
    ASSERT_TRUE(nlohmann::json::accept(*printed)) << list << ": " << *printed;
    auto j = nlohmann::json::parse(*printed);
    const char* key = std::string(list) == "status"   ? "matrices"
                      : std::string(list) == "agents" ? "agents"
                                                      : "catalogs";
    EXPECT_FALSE(j[key].empty()) << list << ": " << *printed;
  }
  // catalog list counts each catalog's commits, as catalog show does.
  auto shown =
      cli::RunProgram({FARMCTL_BIN, "--server", address, "catalog", "show", "linux-iommu"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  std::istringstream shown_head(*shown);
  std::string word, name, source;
  int64_t shown_commits = 0;
  shown_head >> word >> name >> source >> shown_commits;  // "catalog NAME (SOURCE), N commits"
  ASSERT_EQ(name, "linux-iommu") << *shown;
  ASSERT_GT(shown_commits, 1) << *shown;
  auto listed = cli::RunProgram({FARMCTL_BIN, "--server", address, "catalog", "list"});
  ASSERT_TRUE(listed.ok()) << listed.status();
  bool found = false;
  std::istringstream rows(*listed);
  for (std::string row; std::getline(rows, row);) {
    std::istringstream cells(row);
    std::string cell_name;
    int64_t commits = -1;
    cells >> cell_name >> commits;
    if (cell_name != "linux-iommu") continue;
    found = true;
    EXPECT_EQ(commits, shown_commits) << *listed;
  }
  EXPECT_TRUE(found) << *listed;
  auto listed_json =
      cli::RunProgram({FARMCTL_BIN, "--server", address, "catalog", "list", "--output", "json"});
  ASSERT_TRUE(listed_json.ok()) << listed_json.status();
  for (const auto& c : nlohmann::json::parse(*listed_json)["catalogs"]) {
    if (c["name"] == "linux-iommu") {
      EXPECT_EQ(static_cast<int64_t>(c["commits"].size()), shown_commits);
    }
  }
  // An unknown --output is a usage error naming the accepted values.
  auto bad = cli::RunProgram({FARMCTL_BIN, "--server", address, "agents", "--output", "xml"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exit status 2"), std::string::npos) << bad.status();
  // The analysis calls work against empty tables.
  EXPECT_TRUE(cli::RunProgram(
                  {FARMCTL_BIN, "--server", address, "regressions", "--all", "--output", "json"})
                  .ok());

  for (auto& agent : agents) {
    EXPECT_EQ(agent->Terminate(), 0) << agent->Out();
  }
  server_->Shutdown();
}

}  // namespace
}  // namespace farm
