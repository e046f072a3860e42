// Whole farm, real tools: PostgreSQL, the real farm-scheduler (in-process)
// and a spawned farm-agent offering fio and iozone with an allowed temp dir.
// Matrices with executor fio / iozone run to completion on this host; their
// results carry the host's kernel release, IOMMU mode, tool version and raw
// output (parsed again here with the shared parsers). A cell whose IOMMU mode
// is not this host's is never leased, and a refused spec fails permanently
// without touching a canary outside the allowed directory.
#include <signal.h>
#include <stdlib.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/runners/fio_json.h"
#include "agent/runners/iozone_report.h"
#include "cli/commands.h"
#include "gtest/gtest.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "proto/names.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

using testing::AgentSpec;
using testing::ReadFileOrEmpty;

class RealRunsPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    if (HasFatalFailure()) return;
    root_ = TestDir();
    allowed_ = root_ + "/allowed";
    fs::create_directories(allowed_);
    fs::create_directories(root_ + "/outside");
    canary_ = root_ + "/outside/canary";
    std::ofstream(canary_) << "canary\n";

    StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
      options.config.lease_ttl = absl::Seconds(30);
    });
    ASSERT_TRUE(server_ != nullptr);
    client_ = Client();

    // A catalog naming this host's kernel, so real cells match it.
    struct utsname uts {};
    ASSERT_EQ(uname(&uts), 0);
    release_ = uts.release;
    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::LoadCatalogRequest load;
    load.set_yaml(absl::StrCat("catalog: host-kernels\ncommits:\n  - id: \"", release_,
                               "\"\n    subject: \"this host's running kernel\"\n"));
    load.set_source_name("real_runs_pgtest");
    pb::LoadCatalogResponse loaded;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->LoadCatalog(ctx.get(), load, &loaded);
    ASSERT_TRUE(st.ok()) << st.error_message();

    absl::Status up;
    agent_ = StartAgent({.name = "real-agent",
                         .slots = 2,
                         .capabilities = "fio,iozone",
                         .drain_timeout = absl::Seconds(10),
                         .labels = {"platform=this-host"},
                         .flags = {"--allow-dir", allowed_}},
                        &up);
    ASSERT_TRUE(up.ok()) << up << "\n" << agent_->Out();

    // What the agent says this host is: the cells must ask for that.
    pb::ListAgentsResponse agents;
    auto ctx2 = client::NewContext(client_, absl::Seconds(30));
    st = stub->ListAgents(ctx2.get(), pb::ListAgentsRequest(), &agents);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(agents.agents_size(), 1);
    host_ = agents.agents(0).host();
    std::set<std::string> caps;
    for (const auto& c : agents.agents(0).capabilities()) {
      caps.insert(c.name());
      EXPECT_FALSE(c.version().empty()) << c.name();
    }
    EXPECT_EQ(caps, (std::set<std::string>{"fio", "iozone"}));
    ASSERT_EQ(host_.kernel_release(), release_);
    mode_ = ::farm::proto::ModeName(host_.iommu_mode());
    ASSERT_FALSE(mode_.empty()) << "agent detected no IOMMU mode: " << host_.iommu_detail();
  }

  void TearDown() override {
    if (agent_) {
      EXPECT_EQ(agent_->Terminate(), 0) << agent_->Out();
    }
    agent_.reset();
    FarmTest::TearDown();
  }

  std::string Spec(const std::string& name, const std::string& executor, const std::string& mode,
                   const std::string& workload, const std::string& params, int repeats) {
    return absl::StrCat("name: ", name, "\ncatalog: host-kernels\nplatform: this-host\n",
                        "commits: [\"", release_, "\"]\nmodes: [", mode, "]\n",
                        "workloads:\n  - name: ", workload, "\n    params: ", params,
                        "\nrepeats: ", repeats, "\nexecutor: ", executor, "\n");
  }

  // Submits and waits; returns the final progress.
  pb::MatrixProgress Run(const std::string& spec, int64_t* matrix_id) {
    std::ostringstream out, err;
    cli::Commands commands(client_, out, err);
    auto submitted = commands.SubmitSpec(spec, /*dry_run=*/false);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    *matrix_id = submitted->matrix().id();
    auto progress = commands.WaitForMatrix(*matrix_id, [](const pb::MatrixProgress&) {});
    EXPECT_TRUE(progress.ok()) << progress.status() << "\n" << agent_->Out();
    return progress.ok() ? *progress : pb::MatrixProgress();
  }

  std::vector<pb::Result> Results(int64_t matrix_id) {
    std::ostringstream out, err;
    cli::Commands commands(client_, out, err);
    auto results = commands.FetchResults(matrix_id, /*include_raw=*/true);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results : std::vector<pb::Result>{};
  }

  void ExpectHostRecorded(const pb::Result& r) {
    EXPECT_EQ(r.host().kernel_release(), release_);
    EXPECT_EQ(r.host().iommu_mode(), host_.iommu_mode());
    EXPECT_FALSE(r.host().iommu_detail().empty());
    EXPECT_FALSE(r.host().hostname().empty());
    EXPECT_EQ(r.agent(), "real-agent");
  }

  // A second agent on this host: `name`, fio only, its own allowed
  // directory, `labels`; `fio` is the text of a script it runs as fio.
  std::unique_ptr<testing::ChildProcess> StartLabelledAgent(const std::string& name,
                                                            const std::vector<std::string>& labels,
                                                            const std::string& fio = "") {
    const std::string dir = root_ + "/" + name;
    fs::create_directories(dir + "/bin");
    AgentSpec spec{.name = name,
                   .slots = 0,
                   .capabilities = "fio",
                   .drain_timeout = absl::Seconds(10),
                   .labels = labels,
                   .flags = {"--allow-dir", dir}};
    if (!fio.empty()) {
      std::ofstream(dir + "/bin/fio") << fio;
      fs::permissions(dir + "/bin/fio", fs::perms::owner_all);
      spec.flags.insert(spec.flags.end(), {"--fio", dir + "/bin/fio"});
    }
    absl::Status up;
    auto agent = StartAgent(spec, &up);
    EXPECT_TRUE(up.ok()) << up << "\n" << agent->Out();
    return agent;
  }

  std::map<std::string, pb::Agent> Agents() {
    auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
    pb::ListAgentsResponse agents;
    auto ctx = client::NewContext(client_, absl::Seconds(30));
    grpc::Status st = stub->ListAgents(ctx.get(), pb::ListAgentsRequest(), &agents);
    EXPECT_TRUE(st.ok()) << st.error_message();
    std::map<std::string, pb::Agent> out;
    for (const pb::Agent& a : agents.agents()) out[a.name()] = a;
    return out;
  }

  // The host's monitors around the tool, stored and returned with the
  // result: a second of fio moves the timer interrupts and vmstat at least;
  // debugfs and perf say what they had.
  void ExpectMonitorsRecorded(const pb::Result& r) {
    ASSERT_TRUE(r.has_monitors()) << r.ShortDebugString().substr(0, 2000);
    const pb::Monitors& m = r.monitors();
    EXPECT_EQ(m.where(), "host");
    EXPECT_FALSE(m.cpus().empty());
    EXPECT_FALSE(m.interrupts().empty());
    EXPECT_FALSE(m.vmstat().empty());
    EXPECT_FALSE(m.iommu_note().empty());
    EXPECT_TRUE(!m.perf().empty() || !m.perf_note().empty());
    for (const pb::InterruptDelta& d : m.interrupts()) EXPECT_NE(d.total(), 0) << d.irq();
    for (const auto& [name, delta] : m.vmstat()) EXPECT_NE(delta, 0) << name;
  }

  std::string root_, allowed_, canary_, release_, mode_;
  pb::HostFacts host_;
  client::ClientOptions client_;
  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_F(RealRunsPgTest, FioMatrixRunsOnThisHostAndRecordsIt) {
  // A cell in a mode this host is not in goes first: it must stay queued
  // while the matching matrix is leased past it.
  const std::string other_mode = mode_ == "strict" ? "lazy" : "strict";
  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  auto mismatched = commands.SubmitSpec(
      Spec("fio-other-mode", "fio", other_mode, "fio-nvme", "{rw: read, size: 1m}", 1), false);
  ASSERT_TRUE(mismatched.ok()) << mismatched.status();

  int64_t matrix_id = 0;
  pb::MatrixProgress done =
      Run(Spec("fio-real", "fio", mode_, "fio-nvme",
               "{rw: randrw, bs: 4k, size: 4m, runtime: 1, ioengine: psync, iodepth: 1}", 2),
          &matrix_id);
  EXPECT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << agent_->Out();
  EXPECT_EQ(done.counts().succeeded(), 2);
  std::vector<pb::Result> results = Results(matrix_id);
  ASSERT_EQ(results.size(), 2u);
  for (const pb::Result& r : results) {
    ExpectHostRecorded(r);
    EXPECT_EQ(r.raw_format(), "fio-json");
    EXPECT_EQ(r.tool_version().rfind("fio-", 0), 0u) << r.tool_version();
    std::set<std::string> phases;
    for (const pb::Sample& s : r.samples()) {
      if (s.metric() == "iops") {
        phases.insert(s.phase());
        EXPECT_GT(s.value(), 0);
      }
    }
    EXPECT_EQ(phases, (std::set<std::string>{"read", "write"}));
    auto parsed = runners::ParseFioJson(r.raw_output());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->fio_version, r.tool_version());
    ExpectMonitorsRecorded(r);
  }

  pb::GetMatrixRequest get;
  get.set_matrix_id(mismatched->matrix().id());
  pb::Matrix other;
  auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
  auto ctx = client::NewContext(client_, absl::Seconds(30));
  ASSERT_TRUE(stub->GetMatrix(ctx.get(), get, &other).ok());
  EXPECT_EQ(other.counts().queued(), 1)
      << "a " << other_mode << " cell ran on a " << mode_ << " host";
  EXPECT_EQ(other.counts().succeeded(), 0);
}

// Two more agents on this host answer to platform this-host with the label
// disk=scratch2; one's fio fails, so its health job fails and it takes no
// work. A matrix asking for disk=scratch2 runs only on the healthy one, and
// a platform no agent answers to runs nowhere.
TEST_F(RealRunsPgTest, LabelsChooseTheHostAndAFailedHealthJobTakesNoWork) {
  auto lab = StartLabelledAgent("lab-b", {"platform=this-host", "disk=scratch2"});
  auto sick = StartLabelledAgent("lab-sick", {"platform=this-host", "disk=scratch2"},
                                 "#!/bin/sh\n[ \"$1\" = --version ] && { echo fio-3.33; exit 0; }\n"
                                 "echo 'fio: pretend the disk died' >&2\nexit 1\n");
  std::map<std::string, pb::Agent> agents = Agents();
  ASSERT_EQ(agents.size(), 3u);
  EXPECT_TRUE(agents["lab-b"].health().checked() && agents["lab-b"].health().ok())
      << agents["lab-b"].health().ShortDebugString();
  EXPECT_TRUE(agents["lab-sick"].health().checked());
  EXPECT_FALSE(agents["lab-sick"].health().ok());
  EXPECT_NE(agents["lab-sick"].health().detail().find("fio: "), std::string::npos)
      << agents["lab-sick"].health().detail();
  EXPECT_EQ(agents["lab-b"].host().labels().at("disk"), "scratch2");
  // The inventory names the allowed directory, and what the host is made of.
  const pb::Inventory& inv = agents["lab-b"].host().inventory();
  ASSERT_EQ(inv.devices_size(), 1);
  EXPECT_EQ(inv.devices(0).path(), root_ + "/lab-b");
  EXPECT_GT(inv.memory_kib(), 0u);
  // An agent without --label platform answers to its name.
  EXPECT_EQ(agents["real-agent"].host().labels().at("platform"), "this-host");

  std::ostringstream out, err;
  cli::Commands commands(client_, out, err);
  std::string nowhere = Spec("fio-nowhere", "fio", mode_, "fio-nvme", "{rw: read, size: 1m}", 1);
  nowhere.replace(nowhere.find("platform: this-host"), 19, "platform: my-lab-box");
  auto unplaced = commands.SubmitSpec(nowhere, false);
  ASSERT_TRUE(unplaced.ok()) << unplaced.status();

  int64_t matrix_id = 0;
  pb::MatrixProgress done =
      Run(Spec("fio-labelled", "fio", mode_, "fio-nvme",
               "{rw: read, bs: 4k, size: 1m, runtime: 1, ioengine: psync}", 4) +
              "labels: {disk: scratch2}\n",
          &matrix_id);
  EXPECT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << lab->Out() << sick->Out();
  for (const pb::Result& r : Results(matrix_id)) {
    EXPECT_EQ(r.agent(), "lab-b");
    EXPECT_EQ(r.host().labels().at("disk"), "scratch2");
  }
  pb::GetMatrixRequest get;
  get.set_matrix_id(unplaced->matrix().id());
  auto stub = pb::JobService::NewStub(client::MakeChannel(client_));
  pb::Matrix m;
  auto ctx = client::NewContext(client_, absl::Seconds(30));
  ASSERT_TRUE(stub->GetMatrix(ctx.get(), get, &m).ok());
  EXPECT_EQ(m.counts().queued(), 1) << "platform my-lab-box ran on a this-host agent";
  // farmctl agents shows labels, health and the kernels each agent offers.
  std::ostringstream table, table_err;
  cli::Commands agents_cmd(client_, table, table_err);
  EXPECT_EQ(agents_cmd.RunAgents(cli::OutputFormat::kCsv), 0) << table_err.str();
  EXPECT_NE(table.str().find("\"disk=scratch2,platform=this-host\""), std::string::npos)
      << table.str();
  EXPECT_NE(table.str().find("FAILED: fio: "), std::string::npos) << table.str();
  EXPECT_NE(table.str().find(absl::StrCat("host ", release_, " [", mode_, "]")), std::string::npos)
      << table.str();
  EXPECT_EQ(lab->Terminate(), 0) << lab->Out();
  EXPECT_EQ(sick->Terminate(), 0) << sick->Out();
}

TEST_F(RealRunsPgTest, IozoneMatrixRunsOnThisHostAndRecordsIt) {
  int64_t matrix_id = 0;
  pb::MatrixProgress done =
      Run(Spec("iozone-real", "iozone", mode_, "iozone-nfsrdma",
               "{threads: 2, record: 64k, size: 1m, tests: [write, read]}", 1),
          &matrix_id);
  EXPECT_EQ(done.state(), pb::MATRIX_STATE_COMPLETED) << agent_->Out();
  std::vector<pb::Result> results = Results(matrix_id);
  ASSERT_EQ(results.size(), 1u);
  const pb::Result& r = results[0];
  ExpectHostRecorded(r);
  EXPECT_EQ(r.raw_format(), "iozone");
  EXPECT_FALSE(r.tool_version().empty());
  std::set<std::string> phases;
  for (const pb::Sample& s : r.samples()) {
    if (s.metric() == "throughput_kb_s") {
      phases.insert(s.phase());
      EXPECT_GT(s.value(), 0);
      EXPECT_EQ(s.unit(), "kB/s");
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"write", "rewrite", "read", "reread"}));
  auto parsed = runners::ParseIozoneReport(r.raw_output());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Find("write")->processes, 2);
}

TEST_F(RealRunsPgTest, RefusedSpecsFailPermanentlyAndTouchNothing) {
  const std::string before = ReadFileOrEmpty(canary_);
  // A dangerous fio option is refused at submit by the agent's own check,
  // naming the rule, so no job is ever queued for it.
  {
    std::ostringstream out, err;
    cli::Commands commands(client_, out, err);
    auto evil = commands.SubmitSpec(
        Spec("fio-evil", "fio", mode_, "fio-nvme",
             absl::StrCat("{size: 1m, exec_prerun: \"rm -f ", canary_, "\"}"), 1),
        /*dry_run=*/false);
    ASSERT_FALSE(evil.ok());
    EXPECT_EQ(evil.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(evil.status().message().find("runs a shell command"), std::string::npos)
        << evil.status();
  }
  int64_t matrix2 = 0;
  pb::MatrixProgress done =
      Run(Spec("fio-outside", "fio", mode_, "fio-nvme",
               absl::StrCat("{size: 1m, rw: write, filename: \"", canary_, "\"}"), 1),
          &matrix2);
  EXPECT_EQ(done.state(), pb::MATRIX_STATE_FAILED);
  EXPECT_EQ(done.counts().failed(), 1);
  int64_t matrix3 = 0;
  done = Run(Spec("iozone-outside", "iozone", mode_, "iozone-nfsrdma",
                  absl::StrCat("{size: 1m, directory: \"", fs::path(canary_).parent_path().string(),
                               "\"}"),
                  1),
             &matrix3);
  EXPECT_EQ(done.state(), pb::MATRIX_STATE_FAILED);
  // Refusals are not retried: one attempt each, and the agent says why.
  const std::string log = agent_->Out();
  EXPECT_NE(log.find("outside the allowed directories"), std::string::npos) << log;
  EXPECT_EQ(ReadFileOrEmpty(canary_), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(fs::path(canary_).parent_path()),
                          fs::directory_iterator()),
            1);
  EXPECT_TRUE(Results(matrix2).empty());
}

}  // namespace
}  // namespace farm
