#include "cli/compare.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/spec/spec_yaml.h"
#include "proto/try_commit.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// `n` results of one cell at `commit`, each a throughput/write around
// `mean` (1% noise) and a latency of 5.
std::vector<pb::Result> Results(const std::string& commit, const std::string& threads, int n,
                                double mean, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 0.01);
  std::vector<pb::Result> out;
  for (int i = 0; i < n; ++i) {
    pb::Result r;
    pb::Job& j = *r.mutable_job();
    j.set_commit_id(commit);
    j.set_platform("intel-vtd-2s12c");
    j.set_mode(pb::IOMMU_MODE_STRICT);
    j.mutable_workload()->set_name("dma-map-bench");
    (*j.mutable_workload()->mutable_params())["threads"] = threads;
    pb::Sample* s = r.add_samples();
    s->set_metric("throughput");
    s->set_phase("write");
    s->set_unit("ops/s");
    s->set_value(mean * (1 + noise(rng)));
    pb::Sample* l = r.add_samples();
    l->set_metric("latency");
    l->set_unit("ns");
    l->set_value(5);
    out.push_back(r);
  }
  return out;
}

TEST(CompareTest, EachSeriesOnBothSidesWithItsChangeIntervalAndP) {
  std::vector<pb::Result> a = Results("v5.10", "1", 8, 1000, 1);
  std::vector<pb::Result> b = Results("v5.11", "1", 8, 800, 2);
  // A cell only side A measured is not compared.
  for (const pb::Result& r : Results("v5.10", "16", 4, 1000, 3)) a.push_back(r);
  const std::vector<CompareRow> rows = CompareSides(a, b);
  ASSERT_EQ(rows.size(), 2u);
  const CompareRow& lat = rows[0];
  EXPECT_EQ(lat.metric, "latency");
  EXPECT_EQ(lat.change, 0);
  EXPECT_FALSE(lat.changed);
  const CompareRow& tput = rows[1];
  EXPECT_EQ(tput.params, "threads=1");
  EXPECT_EQ(tput.metric, "throughput/write");
  EXPECT_EQ(tput.mode, "strict");
  EXPECT_EQ(tput.n_a, 8);
  EXPECT_EQ(tput.n_b, 8);
  EXPECT_NEAR(tput.change, -0.2, 0.02);
  EXPECT_LT(tput.ci.lo, tput.change);
  EXPECT_GT(tput.ci.hi, tput.change);
  EXPECT_LT(tput.ci.hi, 0);
  EXPECT_LT(tput.p_value, 1e-6);
  EXPECT_TRUE(tput.changed);

  const std::string table = FormatCompareTable(rows, "v5.10 in matrix 3", "v5.11 in matrix 3");
  EXPECT_NE(table.find("A: v5.10 in matrix 3\nB: v5.11 in matrix 3\n"), std::string::npos);
  EXPECT_NE(table.find("dma-map-bench{threads=1}"), std::string::npos) << table;
  EXPECT_NE(table.find("worse"), std::string::npos) << table;
  EXPECT_NE(table.find("1 of 1 primary series changed (p < 0.01, interval reaching 3%); 0 of 1 "
                       "other series changed (--all shows them)"),
            std::string::npos)
      << table;
  const std::string csv = FormatCompareCsv(rows);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "platform,workload,params,metric,mode,unit,n_a,n_b,mean_a,mean_b,change,ci_lo,ci_hi,"
            "p_value,changed,primary,of_off_a,of_off_b");
  const nlohmann::json j = nlohmann::json::parse(FormatCompareJson(rows, "a", "b"));
  ASSERT_EQ(j["series"].size(), 2u);
  EXPECT_EQ(j["series"][1]["changed"], true);
  EXPECT_EQ(j["series"][1]["verdict"], "worse");
  EXPECT_EQ(j["series"][1]["primary"], true);
  EXPECT_EQ(j["series"][0]["primary"], false);
  EXPECT_EQ(j["b"], "b");
}

// `results` with every run's mode set to `mode` and its values scaled.
std::vector<pb::Result> InMode(std::vector<pb::Result> results, pb::IommuMode mode, double scale) {
  for (pb::Result& r : results) {
    r.mutable_job()->set_mode(mode);
    for (pb::Sample& s : *r.mutable_samples()) s.set_value(s.value() * scale);
  }
  return results;
}

std::vector<pb::Result> Join(std::vector<pb::Result> a, const std::vector<pb::Result>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A person reads the headline: the primary metric per cell and mode with
// each side's share of `off`; the latency rows wait behind --all, and the
// count still says whether any of them changed.
TEST(CompareTest, TheTableLeadsWithPrimaryMetricsAndTheShareOfOff) {
  const std::vector<pb::Result> a =
      Join(InMode(Results("v5.10", "1", 6, 1000, 1), pb::IOMMU_MODE_OFF, 1),
           Results("v5.10", "1", 6, 500, 2));  // strict at half of off
  const std::vector<pb::Result> b =
      Join(InMode(Results("v5.11", "1", 6, 1000, 3), pb::IOMMU_MODE_OFF, 1),
           InMode(Results("v5.11", "1", 6, 400, 4), pb::IOMMU_MODE_STRICT, 1));
  const std::vector<CompareRow> rows = CompareSides(a, b);
  ASSERT_EQ(rows.size(), 4u);
  for (const CompareRow& r : rows) {
    if (r.metric != "throughput/write" || r.mode != "strict") continue;
    EXPECT_NEAR(r.of_off_a, 0.5, 0.02);
    EXPECT_NEAR(r.of_off_b, 0.4, 0.02);
    EXPECT_EQ(VerdictText(r), "worse");
  }
  const std::string table = FormatCompareTable(rows, "A", "B");
  EXPECT_EQ(table.find("latency"), std::string::npos) << table;
  EXPECT_NE(table.find("50.0%"), std::string::npos) << table;
  EXPECT_NE(table.find("1 of 2 primary series changed"), std::string::npos) << table;
  EXPECT_NE(table.find("0 of 2 other series changed (--all shows them)"), std::string::npos);
  const std::string all = FormatCompareTable(rows, "A", "B", {}, /*all=*/true);
  EXPECT_NE(all.find("latency"), std::string::npos) << all;
  EXPECT_LT(all.find("throughput/write"), all.find("latency")) << "the headline comes first";
  EXPECT_EQ(all.find("--all shows them"), std::string::npos) << all;
}

// Runs far out of the rest (a disturbed run) hide a real 5% drop from a
// comparison of means; compare then uses Yuen's trimmed means, as the
// analyzer does, and says so.
TEST(CompareTest, OutlyingRunsAreComparedOnTrimmedMeans) {
  std::vector<pb::Result> a = Results("v5.10", "1", 20, 1000, 11);
  std::vector<pb::Result> b = Results("v5.11", "1", 20, 950, 12);
  for (int i : {0, 7}) b[i].mutable_samples(0)->set_value(3000);  // two runs 3x off
  const std::vector<CompareRow> rows = CompareSides(a, b);
  ASSERT_EQ(rows.size(), 2u);
  const CompareRow& tput = rows[1];
  EXPECT_EQ(tput.metric, "throughput/write");
  EXPECT_EQ(tput.method, "yuen");
  EXPECT_TRUE(tput.changed) << tput.change << " p " << tput.p_value;
  EXPECT_NEAR(tput.change, -0.05, 0.01);
  EXPECT_EQ(rows[0].method, "welch") << "the constant latency has no outliers";
  const std::string table = FormatCompareTable(rows, "A", "B");
  EXPECT_NE(table.find("1 of 2 series had outlying runs"), std::string::npos) << table;
  EXPECT_NE(FormatCompareJson(rows, "A", "B").find("\"test\": \"yuen\""), std::string::npos);
}

TEST(CompareTest, TheHtmlPageHasTheTableAndAPlotPerSeries) {
  const std::vector<CompareRow> rows =
      CompareSides(Results("v5.10", "1", 4, 1000, 1), Results("v5.11", "1", 4, 800, 2));
  const std::string html = FormatCompareHtml(rows, "v5.10 in matrix 3", "<b>");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("v5.10 in matrix 3 (A) vs &lt;b&gt; (B)"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);  // escaped
  size_t plots = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    ++plots;
  }
  EXPECT_EQ(plots, rows.size());
  EXPECT_NE(html.find("1 of 2 series changed"), std::string::npos);
  // The verdict as the table gives it: throughput fell by 20%.
  EXPECT_NE(html.find("<td>worse</td>"), std::string::npos) << html.substr(0, 2000);
}

// One run a side: no interval to give (null in JSON, "-" in the table).
// The patch rides inside the spec's YAML: a binary one is refused by name,
// never cut at its first NUL.
TEST(TryPatchTest, BinaryAndNonUtf8PatchesAreRefused) {
  EXPECT_TRUE(CheckPatchText("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n").ok());
  EXPECT_EQ(CheckPatchText(std::string("--- a/x\n+\0\n", 11)).message(),
            "a NUL byte at offset 9: a binary patch cannot be applied by the farm (text diffs "
            "only: git diff without --binary)");
  EXPECT_EQ(CheckPatchText("+caf\xe9\n").message(),
            "the patch is not UTF-8 text (a binary diff, or text in another encoding)");
  // git diff --binary's form is ASCII text, and still not a patch git
  // applies to a source tree as text; neither is one past the bound.
  EXPECT_EQ(CheckPatchText("diff --git a/fw.bin b/fw.bin\nGIT binary patch\nliteral 0\n").message(),
            "a binary diff of fw.bin: the farm applies text diffs only (a kernel patch for "
            "review changes source files)");
  const std::string big(proto::kMaxPatchBytes + 1, '+');
  EXPECT_TRUE(absl::StartsWith(CheckPatchText(big).message(),
                               absl::StrCat("the patch is ", big.size(), " bytes, over")))
      << CheckPatchText(big);
}

TEST(CompareTest, OneRunASideHasNoInterval) {
  const std::vector<CompareRow> rows =
      CompareSides(Results("a", "1", 1, 1000, 1), Results("b", "1", 1, 900, 2));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(rows[1].changed);
  const nlohmann::json j = nlohmann::json::parse(FormatCompareJson(rows, "a", "b"));
  EXPECT_TRUE(j["series"][1]["ci_lo"].is_null());
  EXPECT_EQ(FormatCompareTable({}, "matrix 1", "matrix 2"),
            "no series measured both in matrix 1 and in matrix 2\n");
}

// `results` with monitors: `irqs` interrupts of nvme0q1 on CPU1, a vmstat
// counter, an invalidation latency bucket and a perf share, plus counters
// that do not move between the sides.
std::vector<pb::Result> WithMonitors(std::vector<pb::Result> results, int64_t irqs, int64_t iotlb,
                                     double map_share) {
  for (pb::Result& r : results) {
    pb::Monitors& m = *r.mutable_monitors();
    m.set_where("host");
    m.add_cpus("CPU0");
    m.add_cpus("CPU1");
    pb::InterruptDelta* q = m.add_interrupts();
    q->set_irq("26");
    q->set_source("nvme0q1");
    q->add_per_cpu(0);
    q->add_per_cpu(irqs);
    q->set_total(irqs);
    pb::InterruptDelta* loc = m.add_interrupts();
    loc->set_irq("LOC");
    loc->set_source("LOC");
    loc->add_per_cpu(500);
    loc->add_per_cpu(500);
    loc->set_total(1000);
    (*m.mutable_vmstat())["pgfault"] = 100;
    (*m.mutable_vmstat())["nr_free_pages"] = -1000;
    pb::IommuCounter* c = m.add_iommu();
    c->set_name("dmar_perf_latency/dmar0/inv_iotlb/1us-10us");
    c->set_delta(static_cast<double>(iotlb));
    pb::PerfSymbol* p = m.add_perf();
    p->set_symbol("iommu_dma_map_page");
    p->set_share(map_share);
    p->set_kernel(true);
  }
  return results;
}

TEST(CompareMonitorsTest, ShowsOnlyWhatChangedLargestFirst) {
  const std::vector<pb::Result> a = WithMonitors(Results("v5.10", "1", 4, 1000, 1), 1000, 0, 2.0);
  std::vector<pb::Result> b = WithMonitors(Results("v5.11", "1", 4, 800, 2), 1500, 300, 2.2);
  b.push_back(Results("v5.11", "1", 1, 800, 3)[0]);  // an emulator run: not counted
  const std::vector<MonitorRow> rows = CompareMonitors(a, b);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].counter, "iommu/dmar_perf_latency/dmar0/inv_iotlb/1us-10us");  // from 0
  EXPECT_EQ(rows[0].runs_b, 4);
  EXPECT_EQ(rows[0].mean_b, 300);
  EXPECT_EQ(rows[1].counter, "interrupts/nvme0q1");
  EXPECT_DOUBLE_EQ(rows[1].change, 0.5);
  EXPECT_EQ(rows[2].counter, "interrupts-cpu/CPU1");  // 1500 -> 2000: +33%
  // LOC, CPU0, vmstat and perf (+0.2 points) did not move notably.

  const std::vector<CompareRow> series = CompareSides(a, b);
  const std::string table = FormatCompareTable(series, "A", "B", rows);
  EXPECT_NE(table.find("monitors that changed (mean per run):"), std::string::npos) << table;
  EXPECT_NE(table.find("interrupts/nvme0q1"), std::string::npos) << table;
  EXPECT_NE(table.find("rose from 0"), std::string::npos) << table;
  const std::string csv = FormatCompareCsv(series, rows);
  EXPECT_NE(csv.find("\n\ncounter,runs_a,runs_b,mean_a,mean_b,change\n"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(FormatCompareJson(series, "A", "B", rows));
  ASSERT_EQ(j["monitors"].size(), 3u);
  EXPECT_EQ(j["monitors"][1]["counter"], "interrupts/nvme0q1");
  EXPECT_EQ(j["monitors"][1]["mean_a"], 1000);
  const std::string html = FormatCompareHtml(series, "A", "B", rows);
  EXPECT_NE(html.find("Monitors that changed"), std::string::npos);
  EXPECT_NE(html.find("<td>interrupts/nvme0q1</td>"), std::string::npos);
}

// The kernel's event counts are diffed by their own names: a side whose
// runs mapped nothing (passthrough) against one that mapped (strict).
TEST(CompareMonitorsTest, DiffsTheKernelEventsByTheirNames) {
  std::vector<pb::Result> a = WithMonitors(Results("v5.10", "1", 2, 1000, 1), 1000, 0, 2.0);
  std::vector<pb::Result> b = WithMonitors(Results("v5.10", "1", 2, 1000, 2), 1000, 0, 2.0);
  for (pb::Result& r : a) (*r.mutable_monitors()->mutable_events())["trace/iommu:map"] = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    auto& ev = *b[i].mutable_monitors()->mutable_events();
    ev["trace/iommu:map"] = 1000 * static_cast<int64_t>(i + 1);
    ev["trace/iommu:map/bytes"] = 4096 * 1000 * static_cast<int64_t>(i + 1);
  }
  const std::vector<MonitorRow> rows = CompareMonitors(a, b);
  ASSERT_EQ(rows.size(), 2u);
  // Both rose from 0: the larger move first.
  EXPECT_EQ(rows[0].counter, "trace/iommu:map/bytes");
  EXPECT_EQ(rows[0].mean_b, 1500 * 4096);
  EXPECT_EQ(rows[1].counter, "trace/iommu:map");
  EXPECT_EQ(rows[1].mean_a, 0);
  EXPECT_EQ(rows[1].mean_b, 1500);
}

TEST(CompareMonitorsTest, NothingWithoutMonitorsOnBothSides) {
  EXPECT_TRUE(
      CompareMonitors(Results("a", "1", 2, 1, 1), WithMonitors(Results("b", "1", 2, 1, 2), 1, 1, 1))
          .empty());
  EXPECT_EQ(FormatCompareCsv({}).find("counter,"), std::string::npos);
}

TEST(MatrixMonitorsTableTest, OneColumnPerModeAndTheLargestOfEachKind) {
  std::vector<pb::Result> rs = WithMonitors(Results("v5.10", "1", 2, 1000, 1), 1000, 7, 2.0);
  std::vector<pb::Result> off = WithMonitors(Results("v5.10", "1", 2, 1000, 2), 10, 0, 0);
  for (pb::Result& r : off) r.mutable_job()->set_mode(pb::IOMMU_MODE_OFF);
  rs.insert(rs.end(), off.begin(), off.end());
  ReportTable t = MatrixMonitorsTable(rs, 1);
  EXPECT_EQ(t.headers, (std::vector<std::string>{"counter", "off (2 runs)", "strict (2 runs)"}));
  ASSERT_EQ(t.rows.size(), 5u);  // one of each kind
  EXPECT_EQ(t.rows[0], (std::vector<std::string>{"interrupts/LOC", "1000", "1000"}));
  EXPECT_EQ(t.rows[2][0], "iommu/dmar_perf_latency/dmar0/inv_iotlb/1us-10us");
  EXPECT_EQ(t.rows[2][2], "7");
}

constexpr char kTrySpec[] = R"(name: nfs
catalog: linux-iommu
platform: intel-vtd-snb16c
commits: [v4.6]
modes: [strict]
workloads:
  - name: dma-map-bench
    params: {threads: 2}
repeats: 4
set: {iova.allocator: rcache}
)";

// An emulator patch: a base and a patch matrix, the patch's keys over the
// spec's `set:`, everything else (seeds included) the same.
TEST(TryTest, ASetPatchIsABaseAndAPatchMatrix) {
  absl::StatusOr<TryPlan> plan = PlanTry(kTrySpec, {{"fq.kind", "single"}}, "");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->specs_yaml.size(), 2u);
  EXPECT_EQ(plan->base_commit, "v4.6");
  EXPECT_NE(plan->specs_yaml[0].find("name: nfs (try base)"), std::string::npos);
  EXPECT_EQ(plan->specs_yaml[0].find("fq.kind"), std::string::npos) << plan->specs_yaml[0];
  EXPECT_NE(plan->specs_yaml[1].find("name: nfs (try patch)"), std::string::npos);
  EXPECT_NE(plan->specs_yaml[1].find("fq.kind: single"), std::string::npos) << plan->specs_yaml[1];
  EXPECT_NE(plan->specs_yaml[1].find("iova.allocator: rcache"), std::string::npos);
}

TEST(TryTest, ACommitPatchIsOneMatrixOfBothCommits) {
  absl::StatusOr<TryPlan> plan = PlanTry(kTrySpec, {}, "9257b4a206fc");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->specs_yaml.size(), 1u);
  EXPECT_NE(plan->specs_yaml[0].find("commits: [v4.6, 9257b4a206fc]"), std::string::npos)
      << plan->specs_yaml[0];
  EXPECT_EQ(plan->patch_commit, "9257b4a206fc");
}

// A patch file: one matrix carrying it as `patch:`; the scheduler adds the
// base's try commit, which compare's patch side names.
TEST(TryTest, APatchFileIsOneMatrixWithThePatch) {
  const std::string patch = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
  absl::StatusOr<TryPlan> plan = PlanTry(kTrySpec, {}, "", patch);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->specs_yaml.size(), 1u);
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(plan->specs_yaml[0], {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->patch(), patch);
  EXPECT_EQ(spec->commit_list().ids_size(), 1);
  EXPECT_EQ(plan->base_commit, "v4.6");
  EXPECT_EQ(plan->patch_commit, proto::TryCommitId("v4.6", patch));
  EXPECT_FALSE(PlanTry(kTrySpec, {}, "9257b4a206fc", patch).ok()) << "one kind of patch";
}

// The jobs carry full ids; a spec may name an abbreviation.
TEST(TryTest, CommitIsMatchesAbbreviationsAndTryCommitsOfThem) {
  const std::string full = "9257b4a206fc1234567890abcdef123456789012";
  EXPECT_TRUE(CommitIs(full, full));
  EXPECT_TRUE(CommitIs(full, "9257b4a"));
  EXPECT_FALSE(CommitIs(full, "9257b4"));
  EXPECT_FALSE(CommitIs(full, "v4.6"));
  const std::string patch = "--- a/f\n+++ b/f\n";
  EXPECT_TRUE(CommitIs(proto::TryCommitId(full, patch), proto::TryCommitId("9257b4a206fc", patch)));
  EXPECT_FALSE(CommitIs(proto::TryCommitId(full, patch), "9257b4a206fc"));
  EXPECT_FALSE(CommitIs(full, proto::TryCommitId("9257b4a206fc", patch)));
  EXPECT_FALSE(CommitIs(proto::TryCommitId(full, patch), proto::TryCommitId(full, "other")));
}

TEST(TryTest, TheSpecNamesOneBaseAndThePatchIsOneKind) {
  std::string range = kTrySpec;
  range.replace(range.find("[v4.6]"), 6, "v4.6..v4.7");
  EXPECT_NE(PlanTry(range, {{"fq.kind", "single"}}, "").status().message().find("one commit"),
            std::string::npos);
  EXPECT_FALSE(PlanTry(kTrySpec, {}, "").ok());
  EXPECT_FALSE(PlanTry(kTrySpec, {{"fq.kind", "single"}}, "abc").ok());
}

}  // namespace
}  // namespace farm::cli
