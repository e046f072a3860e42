// farm::cli report: the one-file HTML report of a matrix or a regression
// (`farmctl report`).
//
// Two pure steps, so both are unit-testable without a server:
//   BuildReport:      what farmctl fetched over the API (ReportSources:
//                     protos) -> plain data (ReportData: plots as points,
//                     bands and markers; tables as text cells; the summary);
//   RenderReportHtml: ReportData -> one self-contained HTML document: inline
//                     CSS and SVG drawn here, no scripts, nothing fetched
//                     (a Content-Security-Policy of default-src 'none' says
//                     so to the browser). Every string that came from a user
//                     or the server is HTML-escaped on the way out.
// The statistics are the results table's (ComputeMeanCi: mean and Student-t
// 95% interval over the repeats); the overhead ratio of a mode at a commit is
// the analyzer's overhead series (each repeat over the mean of off), whose
// interval is the mode's interval over the mean of off.
//
// Thread-safety: all functions are reentrant. No ownership is taken.
#ifndef CLI_REPORT_H_
#define CLI_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

// What `farmctl report` gathers through the scheduler's API.
struct ReportSources {
  pb::Matrix matrix;
  std::vector<pb::Result> results;
  // The matrix's catalog, for commit subjects and the positions of commits
  // that the matrix did not run (culprits found by bisection).
  std::vector<pb::CatalogCommit> commits;
  std::vector<pb::Regression> regressions;
  std::vector<pb::Bisect> bisects;  // of those regressions that have one
  // Set for `report --regression ID`: the plots are that regression's
  // workload and metric only.
  std::optional<int64_t> focus_regression;
  std::string farm_version;  // farmctl's own
  std::string generated_at;  // shown as given
};

struct PlotPoint {
  int32_t commit_index = 0;
  std::string commit;
  int64_t n = 0;
  double mean = 0;
  double lo = 0;  // 95% confidence band; lo == hi == mean when n < 2
  double hi = 0;
};

struct PlotSeries {
  std::string mode;
  std::vector<PlotPoint> points;  // ascending commit_index
};

// A vertical mark on the commit axis: a change point (the span from its last
// good to its first bad commit) or a culprit (one commit).
struct PlotMarker {
  enum class Kind { kChange, kCulprit };
  Kind kind = Kind::kCulprit;
  int32_t from_index = 0;  // kChange: the last good commit; kCulprit: == commit_index
  int32_t commit_index = 0;
  std::string commit;  // the first bad commit or the culprit
  std::string tag;     // short, drawn on the plot: "R1", "C1"
  std::string label;   // the line under the plot: commit, change, subject
};

// A bisect step's measurement of the series it bisected: drawn on the
// regression's plot (its mode, or its overhead ratio) as a hollow diamond.
struct PlotStep {
  int32_t commit_index = 0;
  std::string commit;
  std::string mode;
  int32_t step = 0;
  std::string verdict;
  int32_t repeats = 0;
  double mean = 0;
};

struct Plot {
  std::string title;
  std::string y_label;
  bool ratio = false;  // the overhead ratio mode/off: a reference line at 1
  // The commit axis in catalog order: (commit_index, label). Every point and
  // marker of the plot has its index here.
  std::vector<std::pair<int32_t, std::string>> axis;
  std::vector<PlotSeries> series;
  std::vector<PlotMarker> markers;
  std::vector<PlotStep> steps;
};

struct ReportTable {
  std::string title;
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  std::string empty_text = "none";
};

struct ReportData {
  std::string title;
  std::string summary;  // plain text, for a mail
  // Plots in pairs: a metric's series per mode, then its overhead ratio.
  std::vector<Plot> plots;
  std::vector<ReportTable> tables;
};

ReportData BuildReport(const ReportSources& sources);
// The regression sources.focus_regression names among sources.regressions;
// nullptr without one.
const pb::Regression* FocusRegression(const ReportSources& sources);
// The steps of bisect `b` as BuildReport shows them (subjects from
// sources.commits): the bisect log of a mail.
ReportTable BisectStepsTable(const ReportSources& sources, const pb::Bisect& b);
// A table as plain text: its title, then the aligned columns (or its
// empty_text).
std::string RenderTableText(const ReportTable& table);
std::string RenderReportHtml(const ReportData& report);
// One SVG element (no XML prolog): RenderReportHtml's drawing of a plot.
std::string RenderPlotSvg(const Plot& plot);

// &, <, >, " and ' as character references.
std::string HtmlEscape(const std::string& text);

}  // namespace farm::cli

#endif  // CLI_REPORT_H_
