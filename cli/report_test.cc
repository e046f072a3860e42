#include "cli/report.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/format.h"

namespace farm::cli {
namespace {

constexpr char kHostile[] = "<script>alert(\"x\")</script> & 'q'";

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

void AddResults(ReportSources& s, const std::string& commit, int32_t index, pb::IommuMode mode,
                const std::string& metric, const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    pb::Result r;
    r.set_job_id(static_cast<int64_t>(s.results.size()) + 1);
    r.set_attempt(1);
    pb::Job* j = r.mutable_job();
    j->set_commit_id(commit);
    j->set_commit_index(index);
    j->set_mode(mode);
    j->set_platform("intel-vtd-2s12c");
    j->mutable_workload()->set_name("iozone-nfsrdma");
    j->set_repeat(static_cast<int32_t>(i));
    pb::Sample* sample = r.add_samples();
    sample->set_metric(metric);
    sample->set_value(values[i]);
    sample->set_unit("kB/s");
    sample->set_phase("read");
    r.set_agent("agent-1");
    r.set_tool_version("emu 1");
    r.set_raw_format("emu-json");
    r.mutable_host()->set_hostname(kHostile);
    s.results.push_back(r);
  }
}

pb::CatalogCommit Commit(const std::string& id, int32_t index, const std::string& subject) {
  pb::CatalogCommit c;
  c.set_id(id);
  c.set_index(index);
  c.set_subject(subject);
  return c;
}

// Three tags (catalog positions 0, 10, 20), off and strict, five repeats;
// strict drops at v2 and a culprit sits at position 5, between v1 and v2.
ReportSources Sources() {
  ReportSources s;
  s.matrix.set_id(3);
  s.matrix.set_name(kHostile);
  s.matrix.set_catalog("linux-iommu");
  s.matrix.set_platform("intel-vtd-2s12c");
  s.farm_version = "0.1.0";
  s.commits = {Commit("v1", 0, "tag v1"), Commit("c5", 5, kHostile), Commit("v2", 10, "tag v2"),
               Commit("v3", 20, "tag v3")};
  for (const auto& [commit, index] :
       std::vector<std::pair<std::string, int32_t>>{{"v1", 0}, {"v2", 10}, {"v3", 20}}) {
    AddResults(s, commit, index, pb::IOMMU_MODE_OFF, "throughput_kb_s", {100, 101, 99, 100, 100});
    const double strict = commit == "v1" ? 80 : 60;
    AddResults(s, commit, index, pb::IOMMU_MODE_STRICT, "throughput_kb_s",
               {strict - 2, strict + 2, strict - 1, strict + 1, strict});
  }
  pb::Regression r;
  r.set_id(7);
  r.set_state(pb::REGRESSION_STATE_CONFIRMED);
  r.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
  r.set_platform("intel-vtd-2s12c");
  r.set_workload("iozone-nfsrdma");
  r.set_metric("throughput_kb_s/read");
  r.set_mode(pb::IOMMU_MODE_STRICT);
  r.set_last_good("v1");
  r.set_first_bad("v2");
  r.set_magnitude(-0.25);
  r.set_matrix_id(3);
  r.set_bisect_id(2);
  r.set_note(kHostile);
  pb::Culprit* c = r.add_culprits();
  c->set_commit_id("c5");
  c->set_subject(kHostile);
  c->set_share(1);
  c->set_relative_change(-0.25);
  c->set_commit_index(5);
  s.regressions.push_back(r);
  pb::Bisect b;
  b.set_id(2);
  b.set_regression_id(7);
  b.set_state("done");
  pb::BisectStep* step = b.add_steps();
  step->set_step(1);
  step->set_commit_id("c5");
  step->set_verdict("bad");
  step->set_repeats(3);
  step->set_mean(60);
  step->set_p_value(1e-9);
  s.bisects.push_back(b);
  return s;
}

TEST(ReportTest, SeriesPerModeWithConfidenceBandsAndOverheadRatio) {
  const ReportData report = BuildReport(Sources());
  ASSERT_EQ(report.plots.size(), 2u);
  const Plot& abs = report.plots[0];
  const Plot& ratio = report.plots[1];
  EXPECT_FALSE(abs.ratio);
  EXPECT_TRUE(ratio.ratio);
  ASSERT_EQ(abs.series.size(), 2u);
  EXPECT_EQ(abs.series[0].mode, "off");
  EXPECT_EQ(abs.series[1].mode, "strict");
  ASSERT_EQ(abs.series[1].points.size(), 3u);
  // The band is the results table's interval.
  const MeanCi strict_v1 = ComputeMeanCi({78, 82, 79, 81, 80});
  const PlotPoint& p = abs.series[1].points[0];
  EXPECT_EQ(p.commit, "v1");
  EXPECT_EQ(p.n, 5);
  EXPECT_DOUBLE_EQ(p.mean, 80);
  EXPECT_DOUBLE_EQ(p.lo, 80 - strict_v1.half_width);
  EXPECT_DOUBLE_EQ(p.hi, 80 + strict_v1.half_width);
  // The ratio has no off series; strict/off at v1 is 0.8 with the interval
  // scaled by the mean of off.
  ASSERT_EQ(ratio.series.size(), 1u);
  EXPECT_EQ(ratio.series[0].mode, "strict");
  EXPECT_DOUBLE_EQ(ratio.series[0].points[0].mean, 0.8);
  EXPECT_DOUBLE_EQ(ratio.series[0].points[0].hi, 0.8 + strict_v1.half_width / 100);
  // The culprit, which the matrix did not run, gets its place on the axis.
  ASSERT_EQ(abs.axis.size(), 4u);
  EXPECT_EQ(abs.axis[1].first, 5);
  EXPECT_EQ(abs.axis[1].second, "c5");
  ASSERT_EQ(abs.markers.size(), 2u);
  EXPECT_EQ(abs.markers[0].kind, PlotMarker::Kind::kChange);
  EXPECT_EQ(abs.markers[0].from_index, 0);
  EXPECT_EQ(abs.markers[0].commit_index, 10);
  EXPECT_EQ(abs.markers[1].kind, PlotMarker::Kind::kCulprit);
  EXPECT_EQ(abs.markers[1].commit_index, 5);
  EXPECT_NE(abs.markers[1].label.find(kHostile), std::string::npos) << abs.markers[1].label;
  EXPECT_EQ(ratio.markers.size(), 2u);
  // The bisect step measured the strict series, not its ratio.
  ASSERT_EQ(abs.steps.size(), 1u);
  EXPECT_EQ(abs.steps[0].commit, "c5");
  EXPECT_EQ(abs.steps[0].mode, "strict");
  EXPECT_EQ(abs.steps[0].verdict, "bad");
  EXPECT_TRUE(ratio.steps.empty());
}

TEST(ReportTest, HtmlDrawsSeriesMarkersAndEscapesEveryUserString) {
  const std::string html = RenderReportHtml(BuildReport(Sources()));
  EXPECT_EQ(Count(html, "<svg "), 2);
  EXPECT_EQ(Count(html, "<g class=\"series\" data-mode=\"off\""), 1);
  EXPECT_EQ(Count(html, "<g class=\"series\" data-mode=\"strict\""), 2);
  EXPECT_EQ(Count(html, "class=\"band\""), 3);
  EXPECT_EQ(Count(html, "<g class=\"marker culprit\" data-commit=\"c5\""), 2);
  EXPECT_EQ(Count(html, "<g class=\"marker change\" data-commit=\"v2\""), 2);
  EXPECT_EQ(Count(html, "<pre class=\"summary\">"), 1);
  EXPECT_EQ(Count(html, "<path class=\"step\" data-commit=\"c5\" data-verdict=\"bad\""), 1);
  // Matrix name, commit subject, hostname, note: all escaped, nothing runs.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(kHostile), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"),
            std::string::npos);
  // Nothing to fetch: the only URL is the SVG namespace.
  EXPECT_EQ(Count(html, "://"), Count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
  // The bisect step, the results table and the version are there.
  EXPECT_NE(html.find("Bisect 2 of regression 7: done"), std::string::npos);
  EXPECT_NE(html.find("<td>bad</td>"), std::string::npos);
  EXPECT_NE(html.find("Results: throughput_kb_s"), std::string::npos);
  EXPECT_NE(html.find("<td>0.1.0</td>"), std::string::npos);
}

TEST(ReportTest, PointsLieInsideThePlotFrame) {
  const std::string svg = RenderPlotSvg(BuildReport(Sources()).plots[0]);
  const std::regex frame(
      R"re(class="frame" x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)" height="([0-9.]+)")re");
  std::smatch f;
  ASSERT_TRUE(std::regex_search(svg, f, frame)) << svg;
  const double x0 = std::stod(f[1]), y0 = std::stod(f[2]);
  const double x1 = x0 + std::stod(f[3]), y1 = y0 + std::stod(f[4]);
  const std::regex circle(R"re(<circle class="point" cx="([0-9.-]+)" cy="([0-9.-]+)")re");
  int points = 0;
  double off_y = 0, strict_y = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator();
       ++it) {
    const double cx = std::stod((*it)[1]), cy = std::stod((*it)[2]);
    EXPECT_GT(cx, x0);
    EXPECT_LT(cx, x1);
    EXPECT_GT(cy, y0);
    EXPECT_LT(cy, y1);
    if (points == 0) off_y = cy;
    if (points == 3) strict_y = cy;
    ++points;
  }
  EXPECT_EQ(points, 6);
  // Larger values are drawn higher: off (100) above strict (80).
  EXPECT_LT(off_y, strict_y);
}

TEST(ReportTest, RegressionReportShowsOnlyItsSeries) {
  ReportSources s = Sources();
  AddResults(s, "v1", 0, pb::IOMMU_MODE_OFF, "latency_ns", {5, 5, 5});
  s.focus_regression = 7;
  const ReportData focused = BuildReport(s);
  EXPECT_EQ(focused.plots.size(), 2u);
  for (const Plot& p : focused.plots) {
    EXPECT_NE(p.title.find("throughput_kb_s/read"), std::string::npos) << p.title;
  }
  EXPECT_NE(focused.summary.find("regression 7 of matrix 3"), std::string::npos) << focused.summary;
  s.focus_regression.reset();
  EXPECT_EQ(BuildReport(s).plots.size(), 3u);  // latency: off only, no ratio
}

TEST(ReportTest, RejectedRegressionsAreListedNotDrawn) {
  ReportSources s = Sources();
  s.regressions[0].set_state(pb::REGRESSION_STATE_REJECTED);
  const ReportData report = BuildReport(s);
  EXPECT_TRUE(report.plots[0].markers.empty());
  ASSERT_FALSE(report.tables.empty());
  EXPECT_EQ(report.tables[0].rows.size(), 1u);
  EXPECT_EQ(report.tables[0].rows[0][1], "rejected");
}

TEST(ReportTest, SingleRepeatHasAPointBandAndNoSpread) {
  ReportSources s;
  s.matrix.set_id(1);
  AddResults(s, "v1", 0, pb::IOMMU_MODE_OFF, "throughput", {10});
  AddResults(s, "v2", 1, pb::IOMMU_MODE_OFF, "throughput", {10});
  const ReportData report = BuildReport(s);
  ASSERT_EQ(report.plots.size(), 1u);
  const PlotPoint& p = report.plots[0].series[0].points[0];
  EXPECT_EQ(p.lo, p.mean);
  EXPECT_EQ(p.hi, p.mean);
  const std::string html = RenderReportHtml(report);
  EXPECT_EQ(html.find("nan"), std::string::npos);
  EXPECT_EQ(html.find(">inf"), std::string::npos);
  EXPECT_EQ(html.find("\"inf"), std::string::npos);
}

TEST(ReportTest, BandsOfANonNegativeMetricStopAtZero) {
  ReportSources s;
  s.matrix.set_id(1);
  // Three noisy repeats: the t interval's low end is far below 0.
  AddResults(s, "v1", 0, pb::IOMMU_MODE_OFF, "iops", {1, 100, 1});
  AddResults(s, "v2", 1, pb::IOMMU_MODE_OFF, "iops", {2, 90, 2});
  const ReportData report = BuildReport(s);
  ASSERT_FALSE(report.plots.empty());
  for (const PlotPoint& p : report.plots[0].series[0].points) {
    EXPECT_EQ(p.lo, 0) << p.commit;
    EXPECT_GT(p.hi, p.mean) << p.commit;
  }
  const std::string svg = RenderPlotSvg(report.plots[0]);
  EXPECT_EQ(svg.find("class=\"tick\">-"), std::string::npos) << "a negative y tick";
  // A metric that does go below 0 keeps its band as computed.
  ReportSources n;
  n.matrix.set_id(2);
  AddResults(n, "v1", 0, pb::IOMMU_MODE_OFF, "delta", {-5, 5, 1});
  EXPECT_LT(BuildReport(n).plots[0].series[0].points[0].lo, 0);
}

TEST(ReportTest, KernelReleaseLabelsAreDrawnWhole) {
  ReportSources s;
  s.matrix.set_id(1);
  AddResults(s, "6.1.0-54-cloud-arm64", 0, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  AddResults(s, "6.1.0-57-cloud-arm64", 1, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  const std::string svg = RenderPlotSvg(BuildReport(s).plots[0]);
  EXPECT_NE(svg.find(">6.1.0-54-cloud-arm64<title>6.1.0-54-cloud-arm64</title>"), std::string::npos)
      << svg;
  EXPECT_EQ(svg.find("6.1.0-54-cl..."), std::string::npos);
}

TEST(ReportTest, LongCommitLabelsAreDrawnWholeInsideThePlot) {
  ReportSources s;
  s.matrix.set_id(1);
  const std::string sha = "c588072bba6b5e4c9f1b8e2d7a3c6f0e1d2b3a49";
  const std::string try_id = "6.1.0-54-cloud-arm64+0123456789ab";
  AddResults(s, sha, 0, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  AddResults(s, try_id, 1, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  ReportSources short_labels;
  short_labels.matrix.set_id(1);
  AddResults(short_labels, "v1", 0, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  AddResults(short_labels, "v2", 1, pb::IOMMU_MODE_OFF, "throughput", {10, 11});
  const std::string short_svg = RenderPlotSvg(BuildReport(short_labels).plots[0]);
  const std::string svg = RenderPlotSvg(BuildReport(s).plots[0]);
  for (const std::string& label : {sha, try_id}) {
    EXPECT_NE(svg.find(absl::StrCat(">", label, "<title>")), std::string::npos) << label;
  }
  EXPECT_EQ(svg.find("..."), std::string::npos) << svg;
  // Upright labels hang below their ticks: the plot grows by what the
  // longest needs instead of cutting it or letting it run past the edge.
  EXPECT_NE(svg.find("rotate(-90)"), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("height=\"([0-9]+)\"")));
  const double height = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(short_svg, m, std::regex("height=\"([0-9]+)\"")));
  EXPECT_GE(height - std::stod(m[1]), 6.0 * static_cast<double>(sha.size() - 2)) << svg;
}

TEST(ReportTest, ResultsTableUnitComesFromTheSamplesThatHaveOne) {
  ReportSources s;
  s.matrix.set_id(1);
  AddResults(s, "v1", 0, pb::IOMMU_MODE_OFF, "throughput", {10, 11, 12});
  // The newest repeat came from an agent that sent no unit.
  s.results.back().mutable_samples(0)->clear_unit();
  const ReportData report = BuildReport(s);
  const ReportTable* results = nullptr;
  for (const ReportTable& t : report.tables) {
    if (t.title.rfind("Results", 0) == 0) results = &t;
  }
  ASSERT_NE(results, nullptr);
  ASSERT_EQ(results->rows.size(), 1u);
  ASSERT_EQ(results->headers.back(), "unit");
  EXPECT_EQ(results->rows[0].back(), "kB/s");
}

TEST(ReportTest, HostsOfEmulatedRunsShowTheEmulatedIommu) {
  ReportSources s;
  s.matrix.set_id(1);
  AddResults(s, "v1", 0, pb::IOMMU_MODE_STRICT, "throughput", {10});
  s.results[0].mutable_job()->set_executor(pb::EXECUTOR_EMULATOR);
  s.results[0].mutable_host()->set_iommu_mode(pb::IOMMU_MODE_PASSTHROUGH);
  s.results[0].mutable_host()->set_iommu_detail("DMAR: host VT-d");
  const ReportData report = BuildReport(s);
  const ReportTable* hosts = nullptr;
  for (const ReportTable& t : report.tables) {
    if (t.title.rfind("Hosts", 0) == 0) hosts = &t;
  }
  ASSERT_NE(hosts, nullptr);
  ASSERT_EQ(hosts->rows.size(), 1u);
  const std::vector<std::string>& row = hosts->rows[0];
  EXPECT_EQ(row[6], "strict");
  EXPECT_EQ(row[7], "emulated platform intel-vtd-2s12c");
}

TEST(ReportTest, HtmlEscapeReplacesTheFiveSpecialCharacters) {
  EXPECT_EQ(HtmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(HtmlEscape("plain v5.11"), "plain v5.11");
}

}  // namespace
}  // namespace farm::cli
