#include "scheduler/spec.h"

#include <fstream>
#include <set>
#include <string>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/yaml_limits.h"

namespace farm::scheduler {
namespace {

const char* const kGood = R"(
name: nfsrdma-v5.11
catalog: linux-iommu
platform: intel-vtd-2s12c
commits: v5.10..v5.12
modes: [off, strict, lazy]
workloads:
  - name: iozone-nfsrdma
    params: {threads: 12, record: 256k, size: 1g, tests: [write, read]}
repeats: 5
executor: emulator
analysis: {bisect: true}
)";

pb::Catalog TestCatalog() {
  pb::Catalog c;
  c.set_name("linux-iommu");
  int i = 0;
  for (const char* id : {"v5.9", "v5.10", "abc123", "v5.11", "def456", "v5.12", "v5.13"}) {
    auto* cc = c.add_commits();
    cc->set_id(id);
    cc->set_index(i++);
  }
  (*c.mutable_commits(0)->mutable_set())["iova.allocator"] = "rbtree";
  (*c.mutable_commits(0)->mutable_set())["fq.kind"] = "global";
  (*c.mutable_commits(3)->mutable_set())["iova.allocator"] = "rcache";
  return c;
}

std::string ErrorOf(const std::string& yaml, SpecLimits limits = {}) {
  auto s = ParseMatrixSpec(yaml, limits);
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(SpecTest, ParsesTheDesignExample) {
  auto s = ParseMatrixSpec(kGood, {});
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
  std::string y = kGood;
  y.replace(y.find("[off, strict, lazy]"), 19, "[off, stict]");
  EXPECT_EQ(ErrorOf(y),
            "modes[1]: unknown mode \"stict\" (expected off, passthrough, strict, lazy)");
}

TEST(SpecTest, KernelParamsOutsideTheAllowListAreRefused) {
  std::string y = kGood;
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

TEST(SpecTest, NotAMapAndSyntaxErrors) {
  EXPECT_NE(ErrorOf("- a\n- b\n").find("expected a YAML map"), std::string::npos);
  EXPECT_NE(ErrorOf("name: [unclosed\n").find("YAML syntax error at line"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("expected a YAML map"), std::string::npos);
}

TEST(SpecTest, WorkloadErrorsNameThePath) {
  std::string y = kGood;
  y.replace(y.find("  - name: iozone-nfsrdma"), 24, "  - nam: iozone-nfsrdma");
  const std::string e = ErrorOf(y);
  EXPECT_NE(e.find("workloads[0].nam: unknown field"), std::string::npos) << e;
  EXPECT_NE(e.find("workloads[0].name: required"), std::string::npos) << e;
  EXPECT_EQ(ErrorOf(std::string(kGood) + "set: {a: [1, 2]}\n"),
            "set.a: expected a scalar, got a list");
}

TEST(SpecTest, SpecSizeCap) {
  SpecLimits l;
  l.max_spec_bytes = 64;
  auto s = ParseMatrixSpec(kGood, l);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("--max-spec-bytes"), std::string::npos);
}

TEST(SpecTest, UnknownNamesOnlyWarn) {
  std::string y = kGood;
  y.replace(y.find("intel-vtd-2s12c"), 15, "my-new-platform");
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->warnings.size(), 1u);
  EXPECT_NE(s->warnings[0].find("my-new-platform"), std::string::npos);
}

TEST(ResolveTest, RangeIsInclusiveInCatalogOrder) {
  auto s = ParseMatrixSpec(kGood, {});
  ASSERT_TRUE(s.ok());
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> ids;
  for (const auto& rc : *c) ids.push_back(rc.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"v5.10", "abc123", "v5.11", "def456", "v5.12"}));
  EXPECT_EQ((*c)[0].index, 1);
}

TEST(ResolveTest, BackwardsAndUnknown) {
  MatrixSpec s;
  s.commit_range = true;
  s.range_from = "v5.12";
  s.range_to = "v5.10";
  auto c = ResolveCommits(s, TestCatalog());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("backwards"), std::string::npos);
  s.range_from = "nope";
  c = ResolveCommits(s, TestCatalog());
  EXPECT_NE(c.status().message().find("range start \"nope\" is not in catalog"), std::string::npos);
  MatrixSpec l;
  l.commit_ids = {"v5.13", "zzz"};
  c = ResolveCommits(l, TestCatalog());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "commits[1]: unknown commit \"zzz\" in catalog \"linux-iommu\"");
}

TEST(ExpandTest, CountsSeedsAndCap) {
  auto s = ParseMatrixSpec(kGood, {});
  ASSERT_TRUE(s.ok());
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok());
  auto n = CountJobs(*s, c->size(), {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 5 * 3 * 1 * 1 * 5);
  std::vector<pb::Job> jobs = ExpandMatrix(*s, *c, 3);
  ASSERT_EQ(static_cast<int64_t>(jobs.size()), *n);
  // Deterministic, distinct per (mode, repeat), shared across commits.
  std::set<uint64_t> seeds;
  for (const pb::Job& j : jobs) {
    seeds.insert(j.seed());
    EXPECT_EQ(j.max_attempts(), 3);
    EXPECT_EQ(j.kind(), pb::JOB_KIND_BULK);
  }
  EXPECT_EQ(seeds.size(), 3u * 5u);
  EXPECT_EQ(ExpandMatrix(*s, *c, 3)[7].seed(), jobs[7].seed());
  EXPECT_EQ(jobs[0].workload().params().at("tests"), "write,read");
  // model_set = accumulated catalog settings at the commit, spec `set:` on top.
  EXPECT_EQ(jobs.front().model_set().at("iova.allocator"), "rbtree");  // v5.10
  EXPECT_EQ(jobs.back().model_set().at("iova.allocator"), "rcache");   // v5.12
  EXPECT_EQ(jobs.back().model_set().at("fq.kind"), "global");
  s->model_set["fq.kind"] = "percpu";
  EXPECT_EQ(ExpandMatrix(*s, *c, 3).back().model_set().at("fq.kind"), "percpu");

  SpecLimits small;
  small.max_jobs_per_matrix = 74;
  auto over = CountJobs(*s, c->size(), small);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max-jobs-per-matrix"), std::string::npos);
  // Huge products saturate instead of overflowing.
  s->repeats = 10000;
  s->platforms.assign(1000, "p");
  EXPECT_FALSE(CountJobs(*s, 1000000000, {}).ok());
}

// kGood with its workload list (and executor) replaced.
std::string WithWorkload(const std::string& workload_yaml, const std::string& executor) {
  std::string y = kGood;
  const size_t from = y.find("workloads:");
  const size_t to = y.find("analysis:");
  y.replace(from, to - from,
            "workloads:\n" + workload_yaml + "repeats: 1\nexecutor: " + executor + "\n");
  return y;
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
  const std::string e = ErrorOf(std::string(kGood) + "set: {bogus.key: 1, fq.size: 256}\n");
  EXPECT_EQ(e.rfind("set.bogus.key: ", 0), 0u) << e;
  EXPECT_NE(e.find("bogus.key"), std::string::npos) << e;
  EXPECT_EQ(e.find("fq.size"), std::string::npos) << e;  // a real key, a valid value
  EXPECT_EQ(ErrorOf(std::string(kGood) + "set: {fq.kind: sideways}\n").rfind("set.fq.kind: ", 0),
            0u);
  // Agent directives are not model keys.
  EXPECT_EQ(ErrorOf(std::string(kGood) + "set: {agent.hold_ms: 20, fq.kind: percpu}\n"), "");
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

pb::Catalog HexCatalog() {
  pb::Catalog c;
  c.set_name("git");
  int i = 0;
  for (const char* id : {"v6.1", "9257b4a206fc0000", "9257b4a2aaaa1111", "aa4732406e12abcd",
                         "bb11cc22dd33ee44", "v6.2"}) {
    auto* cc = c.add_commits();
    cc->set_id(id);
    cc->set_index(i++);
  }
  return c;
}

TEST(ResolveTest, UniqueAbbreviationResolvesToTheFullId) {
  MatrixSpec l;
  l.commit_ids = {"aa47324", "BB11CC22D", "v6.2"};
  auto c = ResolveCommits(l, HexCatalog());
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> ids;
  for (const auto& rc : *c) ids.push_back(rc.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"aa4732406e12abcd", "bb11cc22dd33ee44", "v6.2"}));
  EXPECT_EQ((*c)[0].index, 3);
  MatrixSpec r;
  r.commit_range = true;
  r.range_from = "9257b4a2a";
  r.range_to = "bb11cc2";
  c = ResolveCommits(r, HexCatalog());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ(c->front().id, "9257b4a2aaaa1111");
  EXPECT_EQ(c->back().id, "bb11cc22dd33ee44");
}

TEST(ResolveTest, AmbiguousShortAndUnknownAbbreviationsAreErrors) {
  MatrixSpec l;
  l.commit_ids = {"9257b4a", "aa4732", "1234567"};
  auto c = ResolveCommits(l, HexCatalog());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "commits[0]: ambiguous commit \"9257b4a\" in catalog \"git\": candidates "
            "9257b4a206fc0000, 9257b4a2aaaa1111\n"
            "commits[1]: unknown commit \"aa4732\" in catalog \"git\" (abbreviations need at "
            "least 7 hex digits)\n"
            "commits[2]: unknown commit \"1234567\" in catalog \"git\"");
  MatrixSpec r;
  r.commit_range = true;
  r.range_from = "9257b4a";
  r.range_to = "v6.2";
  c = ResolveCommits(r, HexCatalog());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "commits: range start ambiguous commit \"9257b4a\" in catalog \"git\": candidates "
            "9257b4a206fc0000, 9257b4a2aaaa1111");
}

TEST(ExpandTest, AbbreviatedCommitsExpandToTheSameJobsAsFullIds) {
  std::string full =
      WithWorkload("  - name: dma-map-bench\n    params: {threads: 2, seconds: 0.5}\n", "emulator");
  full.replace(full.find("linux-iommu"), 11, "git");
  full.replace(full.find("v5.10..v5.12"), 12, "[aa4732406e12abcd, 9257b4a206fc0000]");
  std::string abbreviated = full;
  abbreviated.replace(abbreviated.find("[aa4732406e12abcd, 9257b4a206fc0000]"), 36,
                      "[aa47324, 9257b4a20]");
  auto a = ParseMatrixSpec(full, {});
  auto b = ParseMatrixSpec(abbreviated, {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  auto ca = ResolveCommits(*a, HexCatalog());
  auto cb = ResolveCommits(*b, HexCatalog());
  ASSERT_TRUE(ca.ok() && cb.ok());
  const std::vector<pb::Job> ja = ExpandMatrix(*a, *ca, 3);
  const std::vector<pb::Job> jb = ExpandMatrix(*b, *cb, 3);
  ASSERT_EQ(ja.size(), 2u * 3u);
  ASSERT_EQ(ja.size(), jb.size());
  for (size_t i = 0; i < ja.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ja[i], jb[i]))
        << ja[i].DebugString() << jb[i].DebugString();
  }
  EXPECT_EQ(jb[0].commit_id(), "aa4732406e12abcd");
}

TEST(ExpandTest, KindSetsThePriorityBand) {
  std::string y = std::string(kGood) + "kind: bisect\npriority: 5\n";
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(JobPriority(pb::JOB_KIND_BISECT, -999), JobPriority(pb::JOB_KIND_CONFIRM, 999));
  EXPECT_GT(JobPriority(pb::JOB_KIND_CONFIRM, -999), JobPriority(pb::JOB_KIND_BULK, 999));
  EXPECT_EQ(JobPriority(s->kind, s->priority), 4005);
}

// Resident set size of this process in KiB (Linux /proc), 0 if unknown.
int64_t RssKib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      in >> kib;
      return kib;
    }
    std::getline(in, key);
  }
  return 0;
}

// Ten levels of ten aliases each over a padded scalar: 127 KB of text that
// expands to 10^10 scalars. Refused from the event stream, before a tree is
// built, and the check itself stays small.
TEST(SpecTest, AliasBombIsRefusedWithoutGrowing) {
  std::string yaml = "name: bomb\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\n";
  absl::StrAppend(&yaml, "pad: &a0 [\"", std::string(126000, 'x'), "\"]\n");
  for (int level = 1; level <= 10; ++level) {
    absl::StrAppend(&yaml, "l", level, ": &a", level, " [");
    for (int k = 0; k < 10; ++k) absl::StrAppend(&yaml, k ? ", " : "", "*a", level - 1);
    absl::StrAppend(&yaml, "]\n");
  }
  absl::StrAppend(&yaml,
                  "commits: [v5.10]\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n"
                  "    params: {tests: *a10}\n");
  ASSERT_GT(yaml.size(), 126000u);
  const int64_t before = RssKib();
  auto s = ParseMatrixSpec(yaml, {});
  const int64_t after = RssKib();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "spec: YAML document is more than 4194304 bytes of scalars with its aliases expanded");
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 50 * 1024) << "RSS grew by " << (after - before) << " KiB";
}

TEST(YamlLimits, CountsAliasesAndExpandedNodes) {
  EXPECT_TRUE(CheckYamlExpansion("a: &x {k: v}\nb: *x\nc: *x\n", {}).ok());
  YamlExpansionLimits tight;
  tight.max_aliases = 2;
  EXPECT_TRUE(CheckYamlExpansion("a: &x 1\nb: [*x, *x]\n", tight).ok());
  EXPECT_EQ(CheckYamlExpansion("a: &x 1\nb: [*x, *x, *x]\n", tight).message(),
            "spec: YAML document is more than 2 aliases");
  tight.max_aliases = 100;
  tight.max_expanded_nodes = 20;
  // The root, keys a and b, x's 5 nodes, b's sequence and twice x's 5: 19.
  const std::string doc = "a: &x [1, 2, 3, 4]\nb: [*x, *x]\n";
  EXPECT_TRUE(CheckYamlExpansion(doc, tight).ok());
  EXPECT_FALSE(CheckYamlExpansion(doc + "c: [*x, *x]\n", tight).ok());
  // A document the parser rejects is the loader's to report.
  EXPECT_TRUE(CheckYamlExpansion("a: [1, 2\n", {}).ok());
  // A spec with a few aliases still parses.
  auto spec = ParseMatrixSpec(
      "name: aliased\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\ncommits: v5.10..v5.12\n"
      "modes: [strict]\nworkloads:\n  - name: dma-map-bench\n    params: &p {threads: 1}\n"
      "  - name: iozone-nfsrdma\n    params: *p\n",
      {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->workloads.size(), 2u);
  EXPECT_EQ(spec->workloads[1].params.at("threads"), "1");
}

}  // namespace
// The typed message is what a YAML spec maps onto: YAML -> message -> YAML
// -> message is the same message, and both forms check to the same spec.
TEST(TypedSpecTest, YamlMapsOntoTheMessageAndBack) {
  const std::string y = std::string(kGood) +
                        "set: {fq.kind: percpu, agent.hold_ms: 5}\nkind: confirm\npriority: 7\n"
                        "seed: 18446744073709551615\n";
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(y, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->platform_size(), 1);
  ASSERT_TRUE(typed->has_commit_range());
  EXPECT_EQ(typed->commit_range().from(), "v5.10");
  EXPECT_EQ(typed->modes_size(), 3);
  EXPECT_EQ(typed->workloads(0).params().at("tests"), "write,read");
  EXPECT_TRUE(typed->analysis().bisect());
  EXPECT_EQ(typed->seed(), 18446744073709551615ULL);
  const std::string back = MatrixSpecToYaml(*typed);
  absl::StatusOr<pb::MatrixSpec> again = MatrixSpecFromYaml(back, {});
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << back;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*typed, *again)) << back;

  auto from_yaml = ParseMatrixSpec(y, {});
  auto from_typed = CheckMatrixSpec(*typed, {});
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  ASSERT_TRUE(from_typed.ok()) << from_typed.status();
  EXPECT_EQ(from_typed->name, from_yaml->name);
  EXPECT_EQ(from_typed->range_to, from_yaml->range_to);
  EXPECT_EQ(from_typed->modes, from_yaml->modes);
  EXPECT_EQ(from_typed->model_set, from_yaml->model_set);
  EXPECT_EQ(from_typed->kind, pb::JOB_KIND_CONFIRM);
  EXPECT_EQ(from_typed->priority, 7);
  EXPECT_EQ(from_typed->repeats, 5);
  EXPECT_EQ(from_typed->workloads[0].params, from_yaml->workloads[0].params);
}

// A typed spec meets every submit check, each error naming its field.
TEST(TypedSpecTest, ErrorsNameTheField) {
  pb::MatrixSpec s;
  std::string e = std::string(CheckMatrixSpec(s, {}).status().message());
  for (const char* want : {"name: required", "catalog: required", "platform: required",
                           "commits: required", "modes: required", "workloads: required"}) {
    EXPECT_NE(e.find(want), std::string::npos) << want << "\n" << e;
  }
  absl::StatusOr<pb::MatrixSpec> good = MatrixSpecFromYaml(kGood, {});
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

// kLeftOut keeps the spec's `set:` out of the jobs (the store holds it once).
TEST(ExpandTest, SpecSetCanBeLeftOutOfTheJobs) {
  auto s = ParseMatrixSpec(std::string(kGood) + "set: {fq.kind: percpu}\n", {});
  ASSERT_TRUE(s.ok()) << s.status();
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok());
  const std::vector<pb::Job> left = ExpandMatrix(*s, *c, 3, SpecSet::kLeftOut);
  const std::vector<pb::Job> full = ExpandMatrix(*s, *c, 3);
  ASSERT_EQ(left.size(), full.size());
  EXPECT_EQ(left.back().model_set().at("fq.kind"), "global");  // the catalog's
  EXPECT_EQ(full.back().model_set().at("fq.kind"), "percpu");  // the spec's on top
  EXPECT_EQ(left.back().model_set().at("iova.allocator"), "rcache");
}

}  // namespace farm::scheduler

namespace farm::scheduler {
namespace {

// kGood with `analysis:` replaced.
std::string WithAnalysis(const std::string& analysis) {
  std::string y = kGood;
  const size_t at = y.find("analysis:");
  return y.substr(0, at) + analysis;
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
  auto none = ParseMatrixSpec(kGood, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->confirm.enabled);
}

TEST(ConfirmSpecTest, ErrorsNameTheField) {
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: qemu, workload: w}}\n"))
                .find("analysis.confirm.executor: unknown real executor \"qemu\" (expected fio, "
                      "iozone)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(WithAnalysis("analysis: {confirm: {executor: emulator, workload: w}}\n"))
                .find("analysis.confirm.executor: unknown real executor \"emulator\""),
            std::string::npos);
  const std::string missing = ErrorOf(WithAnalysis("analysis: {confirm: {repeats: 1}}\n"));
  for (const char* want : {"analysis.confirm.repeats: must be between 2 and 100, got 1",
                           "analysis.confirm.executor: required (fio or iozone)",
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
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(kGood, {});
  ASSERT_TRUE(typed.ok());
  typed->mutable_analysis()->mutable_confirm()->set_executor(pb::EXECUTOR_EMULATOR);
  auto checked = CheckMatrixSpec(*typed, {});
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(checked.status().message())
                .find("analysis.confirm.executor: unknown real executor 1 (expected fio, iozone)"),
            std::string::npos)
      << checked.status();
}

}  // namespace
}  // namespace farm::scheduler
