// farmctl gate against a real farm (PostgreSQL, farm-scheduler in-process,
// a farm-agent running emulator jobs), in the plaintext and the deployed
// configuration (mTLS, a submitter's certificate): exit 0 for a commit that
// changes nothing, 1 for one that slows strict unmap several times over, 2
// for a small change under 2% noise with three runs (and a decision once
// --until-decided spends the runs it asks for), 3 for a commit the catalog
// lacks, an unreachable scheduler, an unwritable --junit file and a usage
// error (the farmctl binary).
#include <sys/wait.h>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/gate.h"
#include "lib/base/file.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

// Commits that change nothing, a lot and a little of the strict unmap path
// (the VT-d page-selective invalidation's device time). Ids the agent's own
// catalog (linux-iommu) lacks, so each runs exactly the keys the scheduler
// resolved for it.
const char* const kCatalog = R"(
catalog: gate-test
commits:
  - id: a000001
    subject: "base"
  - id: a000002
    subject: "changes nothing"
  - id: a000003
    subject: "slow invalidation"
    set: {hw.qi_iotlb_psi_ns: 6000}
  - id: a000004
    subject: "a little slower invalidation"
    set: {hw.qi_iotlb_psi_ns: 960}
)";

std::string Spec(double cv, int repeats) {
  return absl::StrCat(R"(name: gate-test
catalog: gate-test
platform: intel-vtd-snb16c
commits: [a000001]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 0.002}
executor: emulator
seed: 7
repeats: )",
                      repeats, "\nset: {noise.cv: ", cv, "}\n");
}

class GatePgTest : public testing::FarmTestWithParam<testing::FarmMode> {
 protected:
  void SetUp() override {
    testing::FarmTestWithParam<testing::FarmMode>::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    StartScheduler(GetParam(), {});
    ASSERT_FALSE(HasFatalFailure());
    LoadCatalog(kCatalog);
    absl::Status up;
    agent_ = StartAgent({.name = "gate-agent", .slots = 2}, &up);
    ASSERT_TRUE(up.ok()) << up;
  }

  // Runs the gate in-process; its exit status, stdout in *out.
  int Gate(const std::string& spec, const std::string& candidate, std::string* out,
           bool until_decided = false, const std::string& junit = "",
           cli::OutputFormat format = cli::OutputFormat::kTable) {
    const std::string path = TestDir() + "/gate-spec.yaml";
    EXPECT_TRUE(base::WriteFile(path, spec).ok());
    std::ostringstream o, e;
    cli::Commands commands(Client("submitter1"), o, e);
    cli::GateArgs args;
    args.spec_path = path;
    args.base = "a000001";
    args.candidate = candidate;
    args.until_decided = until_decided;
    args.budget = 30;
    args.junit_path = junit;
    args.format = format;
    const int exit = cli::RunGate(commands, args);
    *out = o.str() + e.str();
    // The answers are the figures a reader of the test log checks.
    std::cout << "gate " << args.base << " -> " << candidate << ": exit " << exit << "\n"
              << *out << "\n";
    return exit;
  }

  // farmctl ARGS...; its exit status (-1: not an exit).
  int Farmctl(std::vector<std::string> args, const std::string& name) {
    args.insert(args.begin(), FARMCTL_BIN);
    testing::ChildProcess p(args, TestDir() + "/" + name + ".out");
    const absl::StatusOr<int> status = p.Wait(absl::Minutes(2));
    EXPECT_TRUE(status.ok()) << name << ": " << status.status();
    const std::string out = p.Out();
    EXPECT_FALSE(out.empty()) << name << ": says nothing";
    return status.ok() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

  std::unique_ptr<testing::ChildProcess> agent_;
};

TEST_P(GatePgTest, PassRegressionAndInconclusive) {
  std::string out;
  EXPECT_EQ(Gate(Spec(0.005, 4), "a000002", &out), cli::kGatePass) << out;
  const std::string junit = TestDir() + "/gate.xml";
  EXPECT_EQ(Gate(Spec(0.005, 4), "a000003", &out, false, junit), cli::kGateRegression) << out;
  EXPECT_NE(out.find("REGRESSION"), std::string::npos) << out;
  absl::StatusOr<std::string> xml = base::ReadFile(junit);
  ASSERT_TRUE(xml.ok());
  EXPECT_NE(xml->find("failures=\"1\""), std::string::npos) << *xml;

  EXPECT_EQ(Gate(Spec(0.02, 3), "a000004", &out, false, "", cli::OutputFormat::kJson),
            cli::kGateInconclusive)
      << out;
  const nlohmann::json j =
      nlohmann::json::parse(out.substr(0, out.rfind('}') + 1), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_GT(j.value("further_runs", int64_t{0}), 0) << out;
  // Spending the runs it asks for (within the budget) decides it.
  const int decided = Gate(Spec(0.02, 3), "a000004", &out, /*until_decided=*/true);
  EXPECT_TRUE(decided == cli::kGatePass || decided == cli::kGateRegression ||
              out.find("of 30 of the budget") != std::string::npos)
      << decided << "\n"
      << out;
  EXPECT_NE(out.find("further runs per commit"), std::string::npos) << out;
}

TEST_P(GatePgTest, TheFarmNotAnsweringIsExitThree) {
  std::string out;
  EXPECT_EQ(Gate(Spec(0.005, 2), "a999999", &out), cli::kGateInfrastructure) << out;
  EXPECT_NE(out.find("a999999"), std::string::npos) << out;
  EXPECT_EQ(Gate(Spec(0.005, 2), "a000002", &out, false, "/nonexistent-dir/gate.xml"),
            cli::kGateInfrastructure)
      << out;
  EXPECT_NE(out.find("--junit"), std::string::npos) << out;

  // The farmctl binary: nothing listens, and a usage error.
  const std::string spec = TestDir() + "/spec.yaml";
  ASSERT_TRUE(base::WriteFile(spec, Spec(0.005, 2)).ok());
  EXPECT_EQ(Farmctl({"--server", "127.0.0.1:1", "gate", spec, "--base", "a000001", "--candidate",
                     "a000002"},
                    "unreachable"),
            cli::kGateInfrastructure);
  EXPECT_EQ(Farmctl({"gate", spec, "--base", "a000001"}, "usage"), cli::kGateInfrastructure);
}

INSTANTIATE_TEST_SUITE_P(Modes, GatePgTest,
                         ::testing::Values(testing::FarmMode::kPlaintext,
                                           testing::FarmMode::kDeployed),
                         [](const ::testing::TestParamInfo<testing::FarmMode>& p) {
                           return p.param == testing::FarmMode::kDeployed ? "mtls" : "plaintext";
                         });

}  // namespace
}  // namespace farm
