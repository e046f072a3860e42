#include "scheduler/spec.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_testing.h"

namespace farm::scheduler {
namespace {

using spec::kGoodSpec;
using spec::MatrixSpec;
using spec::ParseMatrixSpec;
using spec::SpecLimits;
using spec::WithWorkload;

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

TEST(ResolveTest, RangeIsInclusiveInCatalogOrder) {
  auto s = ParseMatrixSpec(kGoodSpec, {});
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

TEST(ExpandTest, RealRepeatsRunRoundByRoundInAShuffledOrder) {
  auto s = ParseMatrixSpec(kGoodSpec, {});
  ASSERT_TRUE(s.ok());
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok());
  s->modes = {pb::IOMMU_MODE_STRICT};
  s->executor = pb::EXECUTOR_DMA_MAP_BENCH;
  const std::vector<pb::Job> jobs = ExpandMatrix(*s, *c, 3);
  ASSERT_EQ(jobs.size(), 5u * 5u);  // 5 commits x 5 repeats
  std::set<std::vector<std::string>> orders;
  for (size_t round = 0; round < 5; ++round) {
    std::vector<std::string> order;
    for (size_t i = 0; i < 5; ++i) {
      const pb::Job& j = jobs[round * 5 + i];
      EXPECT_EQ(j.repeat(), static_cast<int>(round)) << i;
      order.push_back(j.commit_id());
    }
    EXPECT_EQ(std::set<std::string>(order.begin(), order.end()).size(), 5u) << round;
    orders.insert(order);
  }
  EXPECT_GT(orders.size(), 1u);  // not the same order every round
  // The order is the spec seed's: the same again, another under another seed.
  EXPECT_EQ(ExpandMatrix(*s, *c, 3)[7].commit_id(), jobs[7].commit_id());
  s->seed += 1;
  const std::vector<pb::Job> other = ExpandMatrix(*s, *c, 3);
  bool differs = false;
  for (size_t i = 0; i < jobs.size(); ++i) differs |= other[i].commit_id() != jobs[i].commit_id();
  EXPECT_TRUE(differs);
  // The emulator's stay commit by commit, in catalog order.
  s->executor = pb::EXECUTOR_EMULATOR;
  const std::vector<pb::Job> emu = ExpandMatrix(*s, *c, 3);
  for (size_t i = 0; i < emu.size(); ++i) {
    EXPECT_EQ(emu[i].commit_id(), (*c)[i / 5].id) << i;
    EXPECT_EQ(emu[i].repeat(), static_cast<int>(i % 5)) << i;
  }
}

// The spec's accel goes into every job's params (another series, and what
// the claim matches the offers' accel against); none, no param.
TEST(ExpandTest, TheSpecsAccelIsAParamOfEveryJob) {
  auto s = ParseMatrixSpec(kGoodSpec, {});
  ASSERT_TRUE(s.ok());
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok());
  s->executor = pb::EXECUTOR_FIO;
  for (const pb::Job& j : ExpandMatrix(*s, *c, 3)) {
    EXPECT_EQ(j.workload().params().count("accel"), 0u);
  }
  s->accel = "tcg-icount";
  const std::vector<pb::Job> jobs = ExpandMatrix(*s, *c, 3);
  ASSERT_FALSE(jobs.empty());
  for (const pb::Job& j : jobs) EXPECT_EQ(j.workload().params().at("accel"), "tcg-icount");
}

TEST(ExpandTest, CountsSeedsAndCap) {
  auto s = ParseMatrixSpec(kGoodSpec, {});
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

// A swept param expands into jobs like a workload of its own per value.
TEST(ExpandTest, ASweptParamGivesItsOwnJobsPerValue) {
  std::string yaml = kGoodSpec;
  yaml.replace(yaml.find("threads: 12"), 11, "threads: [4, 12]");
  auto s = ParseMatrixSpec(yaml, {});
  ASSERT_TRUE(s.ok()) << s.status();
  auto c = ResolveCommits(*s, TestCatalog());
  ASSERT_TRUE(c.ok());
  const std::vector<pb::Job> jobs = ExpandMatrix(*s, *c, 3);
  EXPECT_EQ(jobs.size(), 5u * 3u * 2u * 5u);
  std::map<std::string, int> by_threads;
  for (const pb::Job& j : jobs) ++by_threads[j.workload().params().at("threads")];
  EXPECT_EQ(by_threads, (std::map<std::string, int>{{"4", 75}, {"12", 75}}));
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
  std::string y = std::string(kGoodSpec) + "kind: bisect\npriority: 5\n";
  auto s = ParseMatrixSpec(y, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(JobPriority(pb::JOB_KIND_BISECT, -999), JobPriority(pb::JOB_KIND_CONFIRM, 999));
  EXPECT_GT(JobPriority(pb::JOB_KIND_CONFIRM, -999), JobPriority(pb::JOB_KIND_BULK, 999));
  EXPECT_EQ(JobPriority(s->kind, s->priority), 4005);
}

// kLeftOut keeps the spec's `set:` out of the jobs (the store holds it once).
TEST(ExpandTest, SpecSetCanBeLeftOutOfTheJobs) {
  auto s = ParseMatrixSpec(std::string(kGoodSpec) + "set: {fq.kind: percpu}\n", {});
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

}  // namespace
}  // namespace farm::scheduler

namespace farm::scheduler {
namespace {

// A catalog of `n` ids sharing one 7-digit prefix: every abbreviation of
// that prefix is ambiguous between all of them.
pb::Catalog SharedPrefixCatalog(int n) {
  pb::Catalog c;
  c.set_name("git");
  for (int i = 0; i < n; ++i) {
    auto* cc = c.add_commits();
    cc->set_id(absl::StrCat("abcdef1", absl::Hex(i, absl::kZeroPad8)));
    cc->set_index(i);
  }
  return c;
}

TEST(ResolveTest, AHugeListOfRepeatedCommitsGivesABoundedError) {
  // ~840 KB of YAML: one ambiguous abbreviation and one id, repeated.
  std::string yaml =
      "name: x\ncatalog: git\nplatform: intel-vtd-snb16c\nmodes: [off]\n"
      "workloads: [dma-map-bench]\ncommits:\n";
  int entries = 0;
  for (; yaml.size() < 840 * 1024; ++entries) {
    absl::StrAppend(&yaml, "  - ", entries % 2 == 0 ? "abcdef1" : "ABCDEF100000000", "\n");
  }
  // The list's own duplicate check counts every repeat past the first two.
  auto s = ParseMatrixSpec(yaml, {});
  ASSERT_FALSE(s.ok());
  std::string msg(s.status().message());
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 50);
  EXPECT_NE(msg.find(absl::StrCat("... and ", entries - 2 - 50, " more problems")),
            std::string::npos)
      << msg.substr(msg.size() - 200);
  EXPECT_LT(msg.size(), 50u * 600u);

  // Spellings that differ, each naming one commit or none: resolved one by
  // one against a large catalog.
  MatrixSpec l;
  for (int i = 0; i < 40000; ++i) {
    l.commit_ids.push_back(i % 2 == 0 ? absl::StrCat("abcdef1", i % 3 == 0 ? "" : "0")
                                      : absl::StrCat("abcdef1", absl::Hex(0, absl::kZeroPad8),
                                                     std::string(i % 7, ' ')));
  }
  auto c = ResolveCommits(l, SharedPrefixCatalog(20000));
  ASSERT_FALSE(c.ok());
  msg = std::string(c.status().message());
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 50);
  EXPECT_NE(msg.find(" more problems"), std::string::npos);
  EXPECT_LT(msg.size(), 50u * 600u);
  // Five candidates at most name an ambiguity.
  EXPECT_NE(msg.find("candidates abcdef100000000, abcdef100000001, abcdef100000002, "
                     "abcdef100000003, abcdef100000004, ...\n"),
            std::string::npos)
      << msg.substr(0, 600);
}

TEST(ResolveTest, AnIdAndItsAbbreviationAreTheSameCommitTwice) {
  MatrixSpec l;
  l.commit_ids = {"aa4732406e12abcd", "v6.2", "aa47324"};
  auto c = ResolveCommits(l, HexCatalog());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "commits[2]: the same commit \"aa4732406e12abcd\" as commits[0]");
}

}  // namespace
}  // namespace farm::scheduler
