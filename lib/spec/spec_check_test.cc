// The checks of a spec that need no database, from YAML and from the typed
// message: every problem at once, each naming its field.
#include "lib/spec/spec_check.h"

#include <algorithm>
#include <map>
#include <string>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "lib/spec/field_errors.h"
#include "lib/spec/spec_testing.h"
#include "lib/spec/spec_yaml.h"

namespace farm::spec {
namespace {

// kGoodSpec with `analysis:` replaced.
std::string WithAnalysis(const std::string& analysis) {
  std::string y = kGoodSpec;
  const size_t at = y.find("analysis:");
  return y.substr(0, at) + analysis;
}

TEST(SpecTest, ParsesTheDesignExample) {
  auto s = ParseMatrixSpec(kGoodSpec, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "nfsrdma-v5.11");
  EXPECT_EQ(s->platforms, std::vector<std::string>{"intel-vtd-2s12c"});
  EXPECT_TRUE(s->commit_range);
  EXPECT_EQ(s->range_from, "v5.10");
  EXPECT_EQ(s->range_to, "v5.12");
  ASSERT_EQ(s->modes.size(), 3u);
  EXPECT_EQ(s->modes[1], pb::IOMMU_MODE_STRICT);
  ASSERT_EQ(s->workloads.size(), 1u);
  EXPECT_EQ(s->workloads[0].params.at("tests"), "write,read");
  EXPECT_EQ(s->workloads[0].params.at("threads"), "12");
  EXPECT_EQ(s->repeats, 5);
  EXPECT_TRUE(s->bisect);
  EXPECT_EQ(s->executor, pb::EXECUTOR_EMULATOR);
  EXPECT_TRUE(s->warnings.empty());
}

TEST(SpecTest, UnknownModeNamesIndexAndChoices) {
  std::string y = kGoodSpec;
  y.replace(y.find("[off, strict, lazy]"), 19, "[off, stict]");
  EXPECT_EQ(ErrorOf(y),
            "modes[1]: unknown mode \"stict\" (expected off, passthrough, strict, lazy)");
}

TEST(SpecTest, KernelParamsOutsideTheAllowListAreRefused) {
  std::string y = kGoodSpec;
  y.replace(y.find("tests: [write, read]}"), 21,
            "tests: [write, read], kernel_params: \"iommu.forcedac=1 rdinit=/bin/sh\"}");
  const std::string error = ErrorOf(y);
  EXPECT_EQ(error.rfind("workloads[0].params.kernel_params: kernel parameter 'rdinit' is not "
                        "allowed on a guest's command line",
                        0),
            0u)
      << error;
  // Allowed ones pass on a real run (the vm provider boots with them).
  y = "name: k\ncatalog: linux-iommu\nplatform: this-host\ncommits: [v5.10]\nmodes: [strict]\n"
      "executor: fio\nworkloads:\n  - name: fio-randread\n    params: {rw: randread, size: 8m, "
      "kernel_params: \"iommu.forcedac=1 intel_iommu=sm_on\"}\n";
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->workloads[0].params.at("kernel_params"), "iommu.forcedac=1 intel_iommu=sm_on");
}

TEST(SpecTest, RealJobsVmPlatformMustNameAKnownIommuModel) {
  auto spec = [](const std::string& platform, const std::string& executor) {
    return ParseMatrixSpec(
        absl::StrCat("name: k\ncatalog: vm-kernels\nplatform: ", platform,
                     "\ncommits: [6.1.0-57-amd64]\nmodes: [strict]\nexecutor: ", executor,
                     "\nworkloads:\n  - name: r\n    params: {rw: randread, size: 8m}\n"),
        {});
  };
  for (const char* ok : {"q35-amd-iommu", "q35-intel-iommu", "virt-smmuv3", "this-host"}) {
    EXPECT_TRUE(spec(ok, "fio").ok()) << ok << ": " << spec(ok, "fio").status();
  }
  auto bad = spec("[q35-intel-iommu, q35-amd-vi]", "fio");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("platform[1]: unknown IOMMU model \"q35-amd-vi\""),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("q35-amd-iommu"), std::string::npos) << bad.status();
  EXPECT_EQ(spec("virt-smmuv2", "fio").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecTest, ReportsAllErrorsAtOnce) {
  const std::string y = R"(
name: x
catalog: linux-iommu
platform: [a, a]
commits: v1..
modes: [off, off, bogus]
workloads: []
repeats: 0
executor: qemu
analysis: {bisect: maybe, extra: 1}
typo_field: 3
)";
  const std::string e = ErrorOf(y);
  for (const char* want :
       {"platform[1]: duplicate \"a\"", "commits: bad range \"v1..\"", "modes[1]: duplicate mode",
        "modes[2]: unknown mode \"bogus\"", "workloads: expected a non-empty list",
        "repeats: must be between 1 and 10000, got 0", "executor: unknown executor \"qemu\"",
        "analysis.bisect: expected true or false", "analysis.extra: unknown field",
        "typo_field: unknown field"}) {
    EXPECT_NE(e.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << e;
  }
}

TEST(SpecTest, RequiredFields) {
  const std::string e = ErrorOf("name: only-a-name\n");
  for (const char* want : {"catalog: required", "platform: required", "commits: required",
                           "modes: required", "workloads: required"}) {
    EXPECT_NE(e.find(want), std::string::npos) << want << "\n" << e;
  }
}

TEST(SpecTest, WorkloadErrorsNameThePath) {
  std::string y = kGoodSpec;
  y.replace(y.find("  - name: iozone-nfsrdma"), 24, "  - nam: iozone-nfsrdma");
  const std::string e = ErrorOf(y);
  EXPECT_NE(e.find("workloads[0].nam: unknown field"), std::string::npos) << e;
  EXPECT_NE(e.find("workloads[0].name: required"), std::string::npos) << e;
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {a: [1, 2]}\n"),
            "set.a: expected a scalar, got a list");
}

TEST(SpecTest, UnknownNamesOnlyWarn) {
  std::string y = kGoodSpec;
  y.replace(y.find("intel-vtd-2s12c"), 15, "my-new-platform");
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("my-new-platform"), std::string::npos);
}

TEST(SpecCheckTest, UnknownWorkloadParameterNamesTheFieldAndTheTable) {
  const std::string e =
      ErrorOf(WithWorkload("  - name: dma-map-bench\n    params: {threadz: 2}\n", "emulator"));
  EXPECT_EQ(e.rfind("workloads[0].params.threadz: unknown parameter of dma-map-bench (known: "
                    "threads, seconds, ",
                    0),
            0u)
      << e;
  auto s = ParseMatrixSpec(
      WithWorkload("  - name: dma-map-bench\n    params: {threadz: 2}\n", "emulator"), {});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SpecCheckTest, WorkloadParameterTypeAndRangeNameTheField) {
  const std::string e = ErrorOf(
      WithWorkload("  - name: dma-map-bench\n    params: {threads: 2, seconds: x, granule: 2048}\n"
                   "  - name: fio-nvme\n    params: {rw: trim}\n",
                   "emulator"));
  EXPECT_NE(e.find("workloads[0].params.seconds: "), std::string::npos) << e;
  EXPECT_NE(e.find("workloads[0].params.granule: "), std::string::npos) << e;
  EXPECT_NE(e.find("workloads[1].params.rw: "), std::string::npos) << e;
  EXPECT_EQ(e.find("params.threads"), std::string::npos) << e;  // 2 is in range
  EXPECT_NE(ErrorOf(WithWorkload("  - name: no-such-workload\n", "emulator"))
                .find("workloads[0].name: unknown workload 'no-such-workload'"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(WithWorkload(
                "  - name: dma-map-bench\n    params: {threads: 2, seconds: 0.5}\n", "emulator")),
            "");
}

TEST(SpecCheckTest, SetKeysAreCheckedAgainstTheModelRegistry) {
  const std::string e = ErrorOf(std::string(kGoodSpec) + "set: {bogus.key: 1, fq.size: 256}\n");
  EXPECT_EQ(e.rfind("set.bogus.key: ", 0), 0u) << e;
  EXPECT_NE(e.find("bogus.key"), std::string::npos) << e;
  EXPECT_EQ(e.find("fq.size"), std::string::npos) << e;  // a real key, a valid value
  EXPECT_EQ(
      ErrorOf(std::string(kGoodSpec) + "set: {fq.kind: sideways}\n").rfind("set.fq.kind: ", 0), 0u);
  // Agent directives are not model keys.
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {agent.hold_ms: 20, fq.kind: percpu}\n"), "");
  // The agent's directives are checked too: a hold of years would park a
  // slot for good, and an unknown one would be dropped unseen.
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {agent.hold_ms: 99999999999999}\n"),
            "set.agent.hold_ms: must be an integer between 0 and 3600000 (milliseconds), got "
            "\"99999999999999\"");
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {agent.hold_ms: -1}\n")
                .rfind("set.agent.hold_ms: must be", 0),
            0u);
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {agent.hold_ms: soon}\n")
                .rfind("set.agent.hold_ms: must be", 0),
            0u);
  EXPECT_EQ(ErrorOf(std::string(kGoodSpec) + "set: {agent.pad: x}\n"),
            "set.agent.pad: unknown agent directive (known: agent.hold_ms)");
}

TEST(SpecCheckTest, RealJobParamsGoThroughTheAgentsValidator) {
  const std::string e = ErrorOf(WithWorkload(
      "  - name: fio-nvme\n    params: {size: 1m, exec_prerun: \"rm -rf /\"}\n", "fio"));
  EXPECT_EQ(e,
            "workloads[0].params: fio param 'exec_prerun' refused: it runs a shell command on the "
            "agent's host");
  EXPECT_NE(
      ErrorOf(WithWorkload("  - name: fio-nvme\n    params: {size: 1m, ioengine: exec}\n", "fio"))
          .find("executes arbitrary code"),
      std::string::npos);
  EXPECT_NE(
      ErrorOf(WithWorkload("  - name: iozone-nfsrdma\n    params: {size: 1m, filename: /etc/x}\n",
                           "iozone"))
          .find("workloads[0].params: iozone param 'filename' refused"),
      std::string::npos);
  // The same params the agent accepts pass; emulator tables do not apply.
  EXPECT_EQ(ErrorOf(WithWorkload(
                "  - name: fio-nvme\n    params: {rw: randread, size: 1m, bs: 4k}\n", "fio")),
            "");
  EXPECT_EQ(
      ErrorOf(WithWorkload(
          "  - name: iozone-nfsrdma\n    params: {size: 1m, tests: [write, read]}\n", "iozone")),
      "");
}

// A try job's `patch:`: a unified diff on one commit of a real matrix; it
// comes back from the YAML the scheduler stores.
TEST(SpecCheckTest, LabelsPickTheHostsOfARealMatrix) {
  std::string real =
      WithWorkload("  - name: fio-nvme\n    params: {rw: randread, size: 1m}\n", "fio");
  real.replace(real.find("platform: intel-vtd-2s12c"), 25, "platform: spr-lab");
  absl::StatusOr<MatrixSpec> s = ParseMatrixSpec(real + "labels: {nic: cx6, disk: pm1733}\n", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->labels, (std::map<std::string, std::string>{{"disk", "pm1733"}, {"nic", "cx6"}}));
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(real + "labels: {nic: cx6}\n", {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  absl::StatusOr<pb::MatrixSpec> back = MatrixSpecFromYaml(MatrixSpecToYaml(*typed), {});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->labels().at("nic"), "cx6");

  EXPECT_NE(ErrorOf(std::string(kGoodSpec) + "labels: {nic: cx6}\n")
                .find("labels: labels choose the hosts of real runs"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(real + "labels: {Nic: cx6}\n"),
            "labels.Nic: label key 'Nic': 1-63 of a-z 0-9 . _ / - starting with a letter or digit");
  EXPECT_EQ(ErrorOf(real + "labels: {nic: \"a b\"}\n"),
            "labels.nic: label nic value 'a b': 1-128 of A-Z a-z 0-9 . _ : / + -");
  EXPECT_EQ(ErrorOf(real + "labels: {platform: x}\n"),
            "labels.platform: the platform is the spec's own key: platform: NAME");
  EXPECT_NE(ErrorOf(real + "labels: [cx6]\n").find("labels: expected a map of agent labels"),
            std::string::npos);
}

// `accel:` asks for the QEMU accelerator a real matrix's guests run under;
// it reads back from the stored YAML, and an unknown one names the choices.
TEST(SpecCheckTest, AccelAsksForTheGuestsAcceleratorOfARealMatrix) {
  std::string real =
      WithWorkload("  - name: fio-nvme\n    params: {rw: randread, size: 1m}\n", "fio");
  real.replace(real.find("platform: intel-vtd-2s12c"), 25, "platform: q35-intel-iommu");
  absl::StatusOr<MatrixSpec> s = ParseMatrixSpec(real + "accel: tcg-icount\n", {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->accel, "tcg-icount");
  absl::StatusOr<MatrixSpec> none = ParseMatrixSpec(real, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->accel, "");
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(real + "accel: kvm\n", {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  absl::StatusOr<pb::MatrixSpec> back = MatrixSpecFromYaml(MatrixSpecToYaml(*typed), {});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->accel(), "kvm");

  EXPECT_EQ(ErrorOf(real + "accel: hvf\n"),
            "accel: unknown accelerator \"hvf\" (expected tcg, tcg-icount, kvm)");
  EXPECT_EQ(ErrorOf(real + "accel: TCG\n"),
            "accel: unknown accelerator \"TCG\" (expected tcg, tcg-icount, kvm)");
  EXPECT_NE(ErrorOf(real + "accel: [tcg]\n").find("accel: "), std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kGoodSpec) + "accel: tcg\n")
                .find("accel: an accelerator runs a guest: executor fio, iozone or dma-map-bench"),
            std::string::npos);
  std::string as_param = real;
  as_param.replace(as_param.find("size: 1m}"), 9, "size: 1m, accel: tcg}");
  EXPECT_NE(ErrorOf(as_param).find("workloads[0].params.accel: set by the spec's accel"),
            std::string::npos);
}

TEST(SpecCheckTest, APatchIsADiffOnOneCommitOfARealMatrix) {
  constexpr char kPatch[] =
      "--- a/drivers/iommu/dma-iommu.c\n+++ b/drivers/iommu/dma-iommu.c\n@@ -1 +1 @@\n-a\n+b\n";
  std::string real =
      WithWorkload("  - name: fio-nvme\n    params: {rw: randread, size: 1m}\n", "fio");
  real.replace(real.find("commits: v5.10..v5.12"), 21, "commits: [v5.11]");
  real.replace(real.find("platform: intel-vtd-2s12c"), 25, "platform: q35-intel-iommu");
  const std::string with_patch =
      real +
      "patch: |\n  --- a/drivers/iommu/dma-iommu.c\n  +++ b/drivers/iommu/dma-iommu.c\n"
      "  @@ -1 +1 @@\n  -a\n  +b\n";
  absl::StatusOr<MatrixSpec> s = ParseMatrixSpec(with_patch, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->patch, kPatch);
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(with_patch, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  absl::StatusOr<pb::MatrixSpec> back = MatrixSpecFromYaml(MatrixSpecToYaml(*typed), {});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->patch(), kPatch);

  // The kernel's own benchmark sees a DMA-path patch best: a patch on it too.
  std::string bench =
      WithWorkload("  - name: dma-map-bench\n    params: {threads: 1}\n", "dma-map-bench");
  bench.replace(bench.find("commits: v5.10..v5.12"), 21, "commits: [v5.11]");
  bench.replace(bench.find("platform: intel-vtd-2s12c"), 25, "platform: q35-intel-iommu");
  absl::StatusOr<MatrixSpec> on_bench = ParseMatrixSpec(bench + with_patch.substr(real.size()), {});
  ASSERT_TRUE(on_bench.ok()) << on_bench.status();
  EXPECT_EQ(on_bench->patch, kPatch);

  std::string emulator = kGoodSpec;
  emulator.replace(emulator.find("commits: v5.10..v5.12"), 21, "commits: [v5.11]");
  EXPECT_NE(ErrorOf(emulator + "patch: \"--- a/x\\n+++ b/x\\n\"\n").find("patch: a patch is built"),
            std::string::npos);
  std::string range = real;
  range.replace(range.find("commits: [v5.11]"), 16, "commits: v5.10..v5.12");
  EXPECT_EQ(ErrorOf(range + "patch: \"--- a/x\\n+++ b/x\\n\"\n"),
            "patch: applies to one commit, the base: commits: [ID]");
  EXPECT_EQ(ErrorOf(real + "patch: \"just text\"\n"),
            "patch: not a unified diff (no '--- ' and '+++ ' file lines)");
  // What the builder could not apply as text is refused at submit, before
  // a job exists (proto::PatchTextProblem).
  EXPECT_EQ(ErrorOf(real + "patch: \"diff --git a/x.bin b/x.bin\\n--- a/x.bin\\n+++ b/x.bin\\n"
                           "GIT binary patch\\nliteral 0\\n\"\n"),
            "patch: a binary diff of x.bin: the farm applies text diffs only (a kernel patch for "
            "review changes source files)");
}

// A typed spec meets every submit check, each error naming its field.
TEST(TypedSpecTest, ErrorsNameTheField) {
  pb::MatrixSpec s;
  std::string e = std::string(CheckMatrixSpec(s, {}).status().message());
  for (const char* want : {"name: required", "catalog: required", "platform: required",
                           "commits: required", "modes: required", "workloads: required"}) {
    EXPECT_NE(e.find(want), std::string::npos) << want << "\n" << e;
  }
  absl::StatusOr<pb::MatrixSpec> good = MatrixSpecFromYaml(kGoodSpec, {});
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(CheckMatrixSpec(*good, {}).ok());

  pb::MatrixSpec bad = *good;
  bad.add_platform("intel-vtd-2s12c");
  bad.add_modes(pb::IOMMU_MODE_OFF);
  bad.set_repeats(20000);
  bad.set_priority(1000);
  bad.set_executor(static_cast<pb::Executor>(9));
  bad.mutable_commit_range()->clear_to();
  e = std::string(CheckMatrixSpec(bad, {}).status().message());
  for (const char* want :
       {"platform[1]: duplicate \"intel-vtd-2s12c\"", "modes[3]: duplicate mode \"off\"",
        "repeats: must be between 1 and 10000, got 20000",
        "priority: must be between -999 and 999, got 1000", "executor: unknown executor 9",
        "commits: range end"}) {
    EXPECT_NE(e.find(want), std::string::npos) << want << "\n" << e;
  }

  // The tables: workload parameters, model keys.
  bad = *good;
  bad.mutable_workloads(0)->set_name("dma-map-bench");
  bad.mutable_workloads(0)->clear_params();
  (*bad.mutable_workloads(0)->mutable_params())["threadz"] = "2";
  (*bad.mutable_set())["bogus.key"] = "1";
  e = std::string(CheckMatrixSpec(bad, {}).status().message());
  EXPECT_NE(e.find("workloads[0].params.threadz: unknown parameter of dma-map-bench"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("set.bogus.key: "), std::string::npos) << e;

  // Size cap on the message as on the text.
  SpecLimits tight;
  tight.max_spec_bytes = 16;
  EXPECT_EQ(CheckMatrixSpec(*good, tight).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ConfirmSpecTest, ParsesAndRoundTrips) {
  const std::string y = WithAnalysis(
      "analysis:\n  bisect: true\n  confirm:\n    executor: fio\n    platform: vm-smmuv3\n"
      "    repeats: 2\n    max_repeats: 8\n    workload:\n      name: fio-nvme\n"
      "      params: {rw: randread, bs: 4k, iodepth: 16, runtime: 2, time_based: 1}\n");
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->bisect);
  ASSERT_TRUE(s->confirm.enabled);
  EXPECT_EQ(s->confirm.executor, pb::EXECUTOR_FIO);
  EXPECT_EQ(s->confirm.workload.name, "fio-nvme");
  EXPECT_EQ(s->confirm.workload.params.at("rw"), "randread");
  EXPECT_EQ(s->confirm.platform, "vm-smmuv3");
  EXPECT_EQ(s->confirm.catalog, "");
  EXPECT_EQ(s->confirm.repeats, 2);
  EXPECT_EQ(s->confirm.max_repeats, 8);
  EXPECT_EQ(s->confirm.metric, "iops/read");  // from rw
  // The matrix's own jobs are unchanged: the confirmation is the analyzer's.
  EXPECT_EQ(s->executor, pb::EXECUTOR_EMULATOR);

  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(y, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  const std::string back = MatrixSpecToYaml(*typed);
  absl::StatusOr<pb::MatrixSpec> again = MatrixSpecFromYaml(back, {});
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << back;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*typed, *again)) << back;
  EXPECT_TRUE(again->analysis().bisect());
  EXPECT_EQ(again->analysis().confirm().repeats(), 2);

  // Defaults: 3 repeats, no doubling; a write job's metric.
  auto d = ParseMatrixSpec(
      WithAnalysis("analysis: {confirm: {executor: fio, workload: {name: w, params: {rw: write, "
                   "bs: 4k}}}}\n"),
      {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->bisect);
  EXPECT_EQ(d->confirm.repeats, 3);
  EXPECT_EQ(d->confirm.max_repeats, 3);
  EXPECT_EQ(d->confirm.metric, "iops/write");
  auto none = ParseMatrixSpec(kGoodSpec, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->confirm.enabled);
}

// dma-map-bench confirms without a metric (the analyzer chooses the map or
// unmap latency by the finding); a metric named must say which way is
// worse, and its params are the tool's, checked by its validator.
TEST(ConfirmSpecTest, DmaMapBenchConfirmsWithTheMetricItsFindingCallsFor) {
  auto d = ParseMatrixSpec(
      WithAnalysis("analysis: {bisect: true, confirm: {executor: dma-map-bench, platform: "
                   "q35-intel-iommu, workload: {name: dma-map-bench, params: {seconds: 1}}}}\n"),
      {});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->confirm.executor, pb::EXECUTOR_DMA_MAP_BENCH);
  EXPECT_EQ(d->confirm.metric, "");  // chosen per finding
  EXPECT_EQ(d->confirm.platform, "q35-intel-iommu");
  auto named = ParseMatrixSpec(
      WithAnalysis("analysis: {confirm: {executor: dma-map-bench, metric: map_latency_mean, "
                   "workload: {name: dma-map-bench, params: {seconds: 1}}}}\n"),
      {});
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->confirm.metric, "map_latency_mean");
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: dma-map-bench, metric: "
                                 "map_calls, workload: {name: dma-map-bench}}}\n"))
                .find("analysis.confirm.metric: \"map_calls\" says neither higher nor lower is "
                      "better"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: dma-map-bench, workload: {name: "
                                 "dma-map-bench, params: {threadz: 2}}}}\n"))
                .find("analysis.confirm.workload.params: "),
            std::string::npos);
  // A named throughput with its phase reads as before.
  EXPECT_EQ(ErrorOf(WithAnalysis("analysis: {confirm: {executor: fio, metric: iops/read, "
                                 "workload: {name: w, params: {rw: randrw, bs: 4k}}}}\n")),
            "");
}

TEST(SpecTest, DmaMapBenchRunsInVmGuestsWithTheKernelsLimits) {
  const std::string ok = R"(
name: strict-unmap
catalog: test-tree
platform: q35-intel-iommu
commits: [a, b]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 1, seconds: 2, granule: 4}
repeats: 5
executor: dma-map-bench
)";
  EXPECT_EQ(ErrorOf(ok), "");
  std::string host = ok;
  host.replace(host.find("q35-intel-iommu"), 15, "my-lab-box");
  EXPECT_EQ(ErrorOf(host),
            "platform[0]: dma-map-bench runs in vm guests only; \"my-lab-box\" is not a vm "
            "platform");
  std::string fractional = ok;
  fractional.replace(fractional.find("seconds: 2"), 10, "seconds: 0.5");
  EXPECT_NE(ErrorOf(fractional).find("workloads[0].params: param 'seconds'"), std::string::npos)
      << ErrorOf(fractional);
}

TEST(ConfirmSpecTest, ErrorsNameTheField) {
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: qemu, workload: w}}\n"))
                .find("analysis.confirm.executor: unknown real executor \"qemu\" (expected fio, "
                      "iozone, dma-map-bench)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: emulator, workload: w}}\n"))
                .find("analysis.confirm.executor: unknown real executor \"emulator\""),
            std::string::npos);
  const std::string missing = ErrorOf(WithAnalysis("analysis: {confirm: {repeats: 1}}\n"));
  for (const char* want : {"analysis.confirm.repeats: must be between 2 and 100, got 1",
                           "analysis.confirm.executor: required (fio, iozone or dma-map-bench)",
                           "analysis.confirm.workload.name: required"}) {
    EXPECT_NE(missing.find(want), std::string::npos) << want << "\n" << missing;
  }
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: fio, workload: w, extra: 1}}\n"))
                .find("analysis.confirm.extra: unknown field"),
            std::string::npos);
  // Bad tool params are the agent validator's message, on the confirm's path.
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: fio, workload: {name: w, "
                                 "params: {rw: randread, ioengine: sg}}}}\n"))
                .find("analysis.confirm.workload.params: "),
            std::string::npos);
  // No metric to compare for a mixed job or iozone.
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: fio, workload: {name: w, params: "
                                 "{rw: randrw}}}}\n"))
                .find("analysis.confirm.metric: required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: fio, repeats: 4, max_repeats: 2, "
                                 "workload: {name: w, params: {rw: read}}}}\n"))
                .find("analysis.confirm.max_repeats: must be between repeats (4) and 1000, got 2"),
            std::string::npos);
  // A real matrix is not pre-screened.
  std::string real = WithAnalysis(
      "analysis: {confirm: {executor: fio, workload: {name: w, params: {rw: read}}}}\n");
  real.replace(real.find("executor: emulator"), 18, "executor: fio");
  EXPECT_NE(ErrorOf(real).find("analysis.confirm: confirms an emulator matrix's findings"),
            std::string::npos)
      << ErrorOf(real);
  // Typed: the same checks.
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(kGoodSpec, {});
  ASSERT_TRUE(typed.ok());
  typed->mutable_analysis()->mutable_confirm()->set_executor(pb::EXECUTOR_EMULATOR);
  auto checked = CheckMatrixSpec(*typed, {});
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(checked.status().message())
                .find("analysis.confirm.executor: unknown real executor 1 (expected fio, iozone, "
                      "dma-map-bench)"),
            std::string::npos)
      << checked.status();
}

// What the mapping cannot map and what the field and table checks refuse
// come back in one answer, each problem once.
TEST(SpecTest, MappingAndTableErrorsComeBackTogether) {
  std::string y = WithWorkload(
      "  - name: dma-map-bench\n    params: {threadz: 2}\n"
      "  - name: no-such-workload\n",
      "emulator");
  y.replace(y.find("[off, strict, lazy]"), 19, "[off, strict, off]");
  y += "typo_field: 3\nset: {bogus.key: 1}\npriority: high\n";
  auto s = ParseMatrixSpec(y, {});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  const std::string e(s.status().message());
  for (const char* want :
       {"typo_field: unknown field", "priority: expected an integer",
        "modes[2]: duplicate mode \"off\"",
        "workloads[0].params.threadz: unknown parameter of dma-map-bench",
        "workloads[1].name: unknown workload 'no-such-workload'", "set.bogus.key: "}) {
    EXPECT_NE(e.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << e;
  }
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 5) << e;
  // A refused executor holds its workloads to no table (it is not known
  // which), and a field refused by the mapping is not refused again.
  const std::string typo = ErrorOf(WithWorkload("  - name: fio-nvme\n", "fioo"));
  EXPECT_EQ(typo,
            "executor: unknown executor \"fioo\" (expected emulator, fio, iozone, dma-map-bench)");
}

// A spec with thousands of problems answers with the first ones and a count.
TEST(SpecTest, TheNumberOfErrorsReportedIsBounded) {
  std::string y = std::string(kGoodSpec) + "set:\n";
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&y, "  bogus.key", i, ": [", i, "]\n");
  const std::string e = ErrorOf(y);
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), static_cast<long>(FieldErrors::kMaxReported));
  EXPECT_NE(e.find("set.bogus.key0: expected a scalar, got a list\n"), std::string::npos) << e;
  EXPECT_NE(e.find(absl::StrCat("\n... and ", 5000 - FieldErrors::kMaxReported, " more problems")),
            std::string::npos)
      << e.substr(e.size() - 200);
  EXPECT_LT(e.size(), 4096u);
}

}  // namespace
}  // namespace farm::spec
