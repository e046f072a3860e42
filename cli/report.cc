#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/bisect.h"
#include "cli/format.h"
#include "cli/monitor_diff.h"
#include "cli/number_format.h"

namespace farm::cli {
namespace {

std::string Percent(double fraction) { return proto::RelativeChangeText(fraction); }

// The workload name of a results-table label ("name" or "name{params}").
std::string WorkloadName(const std::string& label) { return label.substr(0, label.find('{')); }

std::string MetricName(const std::string& metric, const std::string& phase) {
  return phase.empty() ? metric : absl::StrCat(metric, "/", phase);
}

int ModeOrder(const std::string& mode) { return static_cast<int>(proto::ModeFromName(mode)); }

// Regressions a person or a confirmation run has dismissed are listed, not drawn.
bool Drawn(const pb::Regression& r) {
  return r.state() != pb::REGRESSION_STATE_REJECTED &&
         r.state() != pb::REGRESSION_STATE_FALSE_POSITIVE;
}

std::string SeriesOf(const pb::Regression& r) {
  const std::string mode = ModeName(r.mode());
  return r.overhead_series() ? absl::StrCat(mode, "/off") : mode;
}

// Commit positions and subjects: the catalog first, the results for commits
// it does not list.
class Commits {
 public:
  explicit Commits(const ReportSources& s) {
    for (const auto& c : s.commits) by_id_[c.id()] = {c.index(), c.subject()};
    for (const auto& r : s.results) {
      by_id_.try_emplace(r.job().commit_id(), Entry{r.job().commit_index(), ""});
    }
    for (const auto& [id, e] : by_id_) id_by_index_.try_emplace(e.index, id);
  }
  std::optional<int32_t> Index(const std::string& id) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second.index;
  }
  std::string Subject(const std::string& id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? "" : it->second.subject;
  }
  std::string IdAt(int32_t index) const {
    auto it = id_by_index_.find(index);
    return it == id_by_index_.end() ? absl::StrCat("#", index) : it->second;
  }

 private:
  struct Entry {
    int32_t index = 0;
    std::string subject;
  };
  std::map<std::string, Entry> by_id_;
  std::map<int32_t, std::string> id_by_index_;
};

// A regression's culprits: the bisect's list, else the single culprit field.
std::vector<pb::Culprit> CulpritsOf(const pb::Regression& r) {
  std::vector<pb::Culprit> out(r.culprits().begin(), r.culprits().end());
  if (out.empty() && !r.culprit_id().empty()) {
    pb::Culprit c;
    c.set_commit_id(r.culprit_id());
    c.set_subject(r.culprit_subject());
    c.set_last_good(r.last_good());
    c.set_share(1);
    c.set_relative_change(r.magnitude());
    out.push_back(c);
  }
  return out;
}

struct Panel {
  std::string platform;
  std::string workload;  // results-table label
  std::string metric;    // "metric" or "metric/phase"
  std::string unit;
  // Every sample of the metric is >= 0 (throughput, IOPS, latency): its band
  // is drawn from 0 up, never below (a t interval of a few noisy repeats
  // can reach below 0; the results table keeps it as computed).
  bool nonnegative = true;
  std::vector<SummaryRow> rows;
};

bool Matches(const pb::Regression& r, const Panel& p) {
  return r.platform() == p.platform && r.workload() == WorkloadName(p.workload) &&
         r.metric() == p.metric;
}

std::vector<Panel> Panels(const std::vector<pb::Result>& results) {
  std::set<std::string> metrics, negative;
  for (const auto& r : results) {
    for (const auto& s : r.samples()) {
      metrics.insert(s.metric());
      if (s.value() < 0) negative.insert(s.metric());
    }
  }
  std::map<std::tuple<std::string, std::string, std::string>, Panel> panels;
  for (const std::string& metric : metrics) {
    for (SummaryRow& row : Summarize(results, metric)) {
      Panel& p = panels[{row.platform, row.workload, MetricName(metric, row.phase)}];
      p.platform = row.platform;
      p.workload = row.workload;
      p.metric = MetricName(metric, row.phase);
      p.unit = row.unit;
      p.nonnegative = !negative.contains(metric);
      p.rows.push_back(std::move(row));
    }
  }
  std::vector<Panel> out;
  for (auto& [key, p] : panels) out.push_back(std::move(p));
  return out;
}

// The plot's series per mode: the rows as they are, or each translated mode
// over off at the same commit (ratio).
std::vector<PlotSeries> SeriesOfPanel(const Panel& panel, bool ratio) {
  std::map<std::pair<std::string, int32_t>, const SummaryRow*> off;
  for (const auto& row : panel.rows)
    if (row.mode == "off") off[{row.commit, row.commit_index}] = &row;
  std::map<std::string, PlotSeries> by_mode;
  for (const auto& row : panel.rows) {
    double scale = 1;
    if (ratio) {
      if (row.mode == "off") continue;
      auto o = off.find({row.commit, row.commit_index});
      if (o == off.end() || o->second->stats.mean == 0 || std::isnan(o->second->stats.mean)) {
        continue;
      }
      scale = 1 / o->second->stats.mean;
    }
    PlotPoint p;
    p.commit_index = row.commit_index;
    p.commit = row.commit;
    p.n = row.stats.n;
    p.mean = row.stats.mean * scale;
    const double hw = std::isnan(row.stats.half_width) ? 0 : row.stats.half_width * scale;
    p.lo = p.mean - std::fabs(hw);
    if (panel.nonnegative) p.lo = std::max(p.lo, 0.0);
    p.hi = p.mean + std::fabs(hw);
    PlotSeries& s = by_mode[row.mode];
    s.mode = row.mode;
    s.points.push_back(std::move(p));
  }
  std::vector<PlotSeries> out;
  for (auto& [mode, s] : by_mode) {
    std::sort(s.points.begin(), s.points.end(), [](const PlotPoint& a, const PlotPoint& b) {
      return a.commit_index < b.commit_index;
    });
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const PlotSeries& a, const PlotSeries& b) {
    return ModeOrder(a.mode) < ModeOrder(b.mode);
  });
  return out;
}

std::vector<PlotMarker> MarkersOf(const Panel& panel, const std::vector<pb::Regression>& regs,
                                  const Commits& commits) {
  std::vector<PlotMarker> out;
  int culprit_tag = 0;
  for (const auto& r : regs) {
    if (!Drawn(r) || !Matches(r, panel)) continue;
    auto good = commits.Index(r.last_good());
    auto bad = commits.Index(r.first_bad());
    if (good && bad) {
      PlotMarker m;
      m.kind = PlotMarker::Kind::kChange;
      m.from_index = *good;
      m.commit_index = *bad;
      m.commit = r.first_bad();
      m.tag = absl::StrCat("R", r.id());
      m.label = absl::StrCat(
          m.tag, " ",
          r.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT ? "improvement " : "regression ",
          Percent(r.magnitude()), " in ", SeriesOf(r), " between ", r.last_good(), " and ",
          r.first_bad(), " (", RegressionStateName(r.state()),
          absl::StrFormat(", p=%.2g)", r.p_value()));
      out.push_back(std::move(m));
    }
    for (const pb::Culprit& c : CulpritsOf(r)) {
      auto at = commits.Index(c.commit_id());
      PlotMarker m;
      m.kind = PlotMarker::Kind::kCulprit;
      m.commit_index = at ? *at : c.commit_index();
      m.from_index = m.commit_index;
      m.commit = c.commit_id();
      m.tag = absl::StrCat("C", ++culprit_tag);
      const std::string subject =
          c.subject().empty() ? commits.Subject(c.commit_id()) : c.subject();
      m.label = absl::StrCat(m.tag, " ", c.commit_id(), " (culprit of R", r.id(), ", share ",
                             absl::StrFormat("%.0f%%", 100.0 * c.share()), ", ",
                             Percent(c.relative_change()), ") ", subject);
      out.push_back(std::move(m));
    }
  }
  return out;
}

// The bisect steps of the drawn regressions found in this plot's series.
std::vector<PlotStep> StepsOf(const Panel& panel, bool ratio,
                              const std::vector<pb::Regression>& regs,
                              const std::vector<pb::Bisect>& bisects, const Commits& commits) {
  std::vector<PlotStep> out;
  for (const auto& r : regs) {
    if (!Drawn(r) || !Matches(r, panel) || r.overhead_series() != ratio) continue;
    for (const auto& b : bisects) {
      if (b.regression_id() != r.id()) continue;
      for (const auto& st : b.steps()) {
        auto at = commits.Index(st.commit_id());
        if (st.verdict() == "pending" || st.repeats() == 0 || !std::isfinite(st.mean())) continue;
        PlotStep p;
        p.commit_index = at ? *at : st.commit_index();
        p.commit = st.commit_id();
        p.mode = ModeName(r.mode());
        p.step = st.step();
        p.verdict = st.verdict();
        p.repeats = st.repeats();
        p.mean = st.mean();
        out.push_back(std::move(p));
      }
    }
  }
  return out;
}

void FillAxis(Plot& plot, const Commits& commits) {
  std::map<int32_t, std::string> axis;
  for (const auto& st : plot.steps) axis[st.commit_index] = st.commit;
  for (const auto& s : plot.series)
    for (const auto& p : s.points) axis[p.commit_index] = p.commit;
  for (const auto& m : plot.markers) {
    axis.try_emplace(m.from_index, commits.IdAt(m.from_index));
    axis[m.commit_index] = m.commit;
  }
  plot.axis.assign(axis.begin(), axis.end());
}

// The metric of the results table: the regression's in a focused report,
// else a regression's primary metric, else a throughput, else MainMetric.
std::string TableMetric(const ReportSources& s, const pb::Regression* focus) {
  auto base = [](const std::string& m) { return m.substr(0, m.find('/')); };
  if (focus != nullptr) return base(focus->metric());
  for (const auto& r : s.regressions)
    if (r.primary_metrics_size() > 0) return base(r.primary_metrics(0));
  std::set<std::string> metrics;
  for (const auto& r : s.results)
    for (const auto& sample : r.samples()) metrics.insert(sample.metric());
  for (const auto& m : metrics)
    if (m.rfind("throughput", 0) == 0) return m;
  return MainMetric(s.results);
}

ReportTable ResultsTable(const ReportSources& s, const pb::Regression* focus,
                         const Commits& commits) {
  const std::string metric = TableMetric(s, focus);
  ReportTable t;
  t.title = absl::StrCat("Results: ", metric.empty() ? "-" : metric,
                         " (mean and 95% confidence interval over repeats)");
  t.headers = {"commit", "subject", "mode",     "workload",  "platform", "phase",
               "n",      "mean",    "ci95 low", "ci95 high", "+/-%",     "unit"};
  t.empty_text = "no results";
  if (metric.empty()) return t;
  for (const SummaryRow& row : Summarize(s.results, metric)) {
    if (focus != nullptr &&
        (row.platform != focus->platform() || WorkloadName(row.workload) != focus->workload())) {
      continue;
    }
    const double hw = row.stats.half_width;
    t.rows.push_back({row.commit, commits.Subject(row.commit), row.mode, row.workload, row.platform,
                      row.phase, absl::StrCat(row.stats.n), FormatNumber(row.stats.mean),
                      std::isnan(hw) ? "-" : FormatNumber(row.stats.mean - hw),
                      std::isnan(hw) ? "-" : FormatNumber(row.stats.mean + hw),
                      std::isnan(hw) || row.stats.mean == 0
                          ? "-"
                          : absl::StrFormat("%.2f", 100.0 * hw / std::fabs(row.stats.mean)),
                      row.unit});
  }
  return t;
}

ReportTable RegressionsTable(const std::vector<pb::Regression>& regs) {
  ReportTable t;
  t.title = "Regressions and improvements";
  t.headers = {"id",       "state",  "rank",   "direction",   "platform",  "workload",
               "metric",   "series", "change", "p",           "last good", "first bad",
               "culprits", "alert",  "note",   "confirmed by"};
  for (const auto& r : regs) {
    std::vector<std::string> culprits;
    for (const auto& c : CulpritsOf(r)) {
      culprits.push_back(absl::StrFormat("%s (%.0f%%)", c.commit_id(), 100.0 * c.share()));
    }
    t.rows.push_back(
        {absl::StrCat(r.id()), RegressionStateName(r.state()), r.metric_rank(),
         r.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT ? "improvement" : "regression",
         r.platform(), r.workload(), r.metric(), SeriesOf(r), Percent(r.magnitude()),
         absl::StrFormat("%.2g", r.p_value()), r.last_good(), r.first_bad(),
         culprits.empty() ? "-" : absl::StrJoin(culprits, ", "), r.alert_firing() ? "firing" : "-",
         r.note(),
         r.confirmed_by().empty()
             ? "-"
             : absl::StrCat(r.confirmed_by(),
                            r.confirm_matrix_id() == 0
                                ? ""
                                : absl::StrCat(" (matrix ", r.confirm_matrix_id(), ")"),
                            r.confirm_note().empty() ? "" : ": " + r.confirm_note())});
  }
  return t;
}

ReportTable CulpritsTable(const std::vector<pb::Regression>& regs, const Commits& commits) {
  ReportTable t;
  t.title = "Culprits (first bad commits found by bisection)";
  t.headers = {"regression", "commit", "subject", "share", "change", "last good"};
  t.empty_text = "no bisected culprit";
  for (const auto& r : regs) {
    for (const auto& c : CulpritsOf(r)) {
      t.rows.push_back({absl::StrCat(r.id()), c.commit_id(),
                        c.subject().empty() ? commits.Subject(c.commit_id()) : c.subject(),
                        absl::StrFormat("%.0f%%", 100.0 * c.share()), Percent(c.relative_change()),
                        c.last_good()});
    }
  }
  return t;
}

ReportTable BisectTable(const pb::Bisect& b, const Commits& commits) {
  ReportTable t;
  t.title = absl::StrCat("Bisect ", b.id(), " of regression ", b.regression_id(), ": ", b.state(),
                         ", last good ", b.last_good().empty() ? "-" : b.last_good(),
                         ", first bad ", b.first_bad().empty() ? "-" : b.first_bad());
  t.headers = {"step", "commit", "subject", "verdict", "repeats", "mean", "change", "p", "ran on"};
  t.empty_text = "no steps yet";
  for (const auto& s : b.steps()) {
    t.rows.push_back({absl::StrCat(s.step()), s.commit_id(), commits.Subject(s.commit_id()),
                      s.verdict(), absl::StrCat(s.repeats()), FormatNumber(s.mean()),
                      Percent(s.relative_change()), absl::StrFormat("%.3g", s.p_value()),
                      StepRanOn(s)});
  }
  return t;
}

ReportTable HostsTable(const std::vector<pb::Result>& results) {
  ReportTable t;
  t.title = "Hosts and guests the results were measured on (emulated runs: the IOMMU emulated)";
  t.headers = {"agent",      "hostname",     "kernel", "arch",         "cpus",
               "numa nodes", "IOMMU (seen)", "detail", "tool version", "results"};
  t.empty_text = "no results";
  std::map<std::vector<std::string>, int> rows;
  for (const auto& r : results) {
    const pb::HostFacts& h = r.host();
    // An emulated run measured the emulated platform's IOMMU in the job's
    // mode, not the IOMMU of the host the agent runs on.
    const bool emulated = r.job().executor() == pb::EXECUTOR_EMULATOR;
    ++rows[{r.agent(), h.hostname(), h.kernel_release(), h.architecture(), absl::StrCat(h.cpus()),
            absl::StrCat(h.numa_nodes()),
            emulated ? ModeName(r.job().mode()) : ModeName(h.iommu_mode()),
            emulated ? absl::StrCat("emulated platform ", r.job().platform()) : h.iommu_detail(),
            absl::StrCat(r.raw_format(), " ", r.tool_version())}];
  }
  for (const auto& [row, count] : rows) {
    std::vector<std::string> line = row;
    line.push_back(absl::StrCat(count));
    t.rows.push_back(std::move(line));
  }
  return t;
}

std::string Summary(const ReportSources& s, const pb::Regression* focus,
                    const std::vector<pb::Regression>& regs, const Commits& commits) {
  const pb::Matrix& m = s.matrix;
  std::set<std::pair<int32_t, std::string>> commit_set;
  std::set<std::pair<int, std::string>> modes;
  std::set<std::string> workloads, tools;
  for (const auto& r : s.results) {
    commit_set.insert({r.job().commit_index(), r.job().commit_id()});
    modes.insert({static_cast<int>(r.job().mode()), ModeName(r.job().mode())});
    workloads.insert(r.job().workload().name());
    tools.insert(absl::StrCat(r.raw_format(), " ", r.tool_version()));
  }
  auto second = [](const auto& set) {
    std::vector<std::string> out;
    for (const auto& [k, v] : set) out.push_back(v);
    return absl::StrJoin(out, ", ");
  };
  std::string out;
  if (focus != nullptr) {
    absl::StrAppend(&out, "iommu-farm report: regression ", focus->id(), " of matrix ", m.id(),
                    " \"", m.name(), "\"\n");
  } else {
    absl::StrAppend(&out, "iommu-farm report: matrix ", m.id(), " \"", m.name(), "\" (",
                    MatrixStateName(m.state()), ")\n");
  }
  absl::StrAppend(&out, "catalog ", m.catalog(), ", platform ", m.platform(), ", executor ",
                  proto::ExecutorName(m.executor()), "\n");
  const pb::MatrixCounts& c = m.counts();
  absl::StrAppend(&out, c.total(), " jobs: ", c.succeeded(), " succeeded, ", c.failed(),
                  " failed, ", c.cancelled(), " cancelled; ", s.results.size(), " results\n");
  absl::StrAppend(&out, "commits:   ", second(commit_set), "\n");
  absl::StrAppend(&out, "modes:     ", second(modes), "\n");
  absl::StrAppend(&out, "workloads: ", absl::StrJoin(workloads, ", "), "\n");
  if (regs.empty()) absl::StrAppend(&out, "no regression or improvement found\n");
  for (const auto& r : regs) {
    absl::StrAppend(
        &out, "R", r.id(), " ", RegressionStateName(r.state()),
        r.metric_rank().empty() ? "" : absl::StrCat(" ", r.metric_rank()),
        r.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT ? " improvement: " : " regression: ",
        r.workload(), " ", r.metric(), " ", SeriesOf(r), " ", Percent(r.magnitude()), " between ",
        r.last_good(), " and ", r.first_bad(), absl::StrFormat(", p=%.2g", r.p_value()), "\n");
    for (const auto& cu : CulpritsOf(r)) {
      const std::string subject =
          cu.subject().empty() ? commits.Subject(cu.commit_id()) : cu.subject();
      absl::StrAppend(&out, "    culprit ", cu.commit_id(),
                      absl::StrFormat(" (share %.0f%%, change ", 100.0 * cu.share()),
                      Percent(cu.relative_change()), ") \"", subject, "\"\n");
    }
    for (const auto& b : s.bisects) {
      if (b.regression_id() != r.id()) continue;
      int runs = 0;
      for (const auto& st : b.steps()) runs += st.repeats();
      absl::StrAppend(&out, "    bisect ", b.id(), " ", b.state(), ": ", b.steps_size(), " steps, ",
                      runs, " runs\n");
    }
  }
  absl::StrAppend(&out, "farm ", s.farm_version, "; tools: ", absl::StrJoin(tools, ", "), "\n");
  if (!s.generated_at.empty()) absl::StrAppend(&out, "generated ", s.generated_at, "\n");
  return out;
}

// ---------------------------------------------------------------- drawing

const char* ModeColor(const std::string& mode) {
  switch (proto::ModeFromName(mode)) {
    case pb::IOMMU_MODE_OFF:
      return "#4d4d4d";
    case pb::IOMMU_MODE_PASSTHROUGH:
      return "#8e44ad";
    case pb::IOMMU_MODE_STRICT:
      return "#d62728";
    case pb::IOMMU_MODE_LAZY:
      return "#1f77b4";
    default:
      break;
  }
  return "#2ca02c";
}

constexpr char kCulpritColor[] = "#e07000";
constexpr char kChangeFill[] = "#f6d7d7";

std::string F(double v) { return absl::StrFormat("%.1f", v); }

// Tick values covering [lo, hi] at a 1, 2 or 5 times a power of ten step.
std::vector<double> Ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    step = f * mag;
    if (raw <= step) break;
  }
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
}

std::string Truncate(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max - 3) + "...";
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

ReportTable BisectStepsTable(const ReportSources& sources, const pb::Bisect& b) {
  return BisectTable(b, Commits(sources));
}

std::string RenderTableText(const ReportTable& table) {
  return absl::StrCat(table.title, ":\n",
                      table.rows.empty() ? absl::StrCat(table.empty_text, "\n")
                                         : RenderTable(table.headers, table.rows));
}

const pb::Regression* FocusRegression(const ReportSources& s) {
  if (!s.focus_regression) return nullptr;
  for (const auto& r : s.regressions)
    if (r.id() == *s.focus_regression) return &r;
  return nullptr;
}

ReportData BuildReport(const ReportSources& s) {
  const Commits commits(s);
  const pb::Regression* focus = FocusRegression(s);
  std::vector<pb::Regression> regs;
  for (const auto& r : s.regressions)
    if (focus == nullptr || r.id() == focus->id()) regs.push_back(r);

  ReportData out;
  out.title = focus != nullptr
                  ? absl::StrCat("iommu-farm: regression ", focus->id(), ", matrix ", s.matrix.id())
                  : absl::StrCat("iommu-farm: matrix ", s.matrix.id(), " ", s.matrix.name());
  out.summary = Summary(s, focus, regs, commits);

  std::vector<Panel> panels = Panels(s.results);
  if (focus != nullptr) {
    std::erase_if(panels, [&](const Panel& p) { return !Matches(*focus, p); });
  }
  // Marked panels first (by regression id), then throughput figures, then by name.
  auto rank = [&](const Panel& p) {
    int64_t first = INT64_MAX;
    for (const auto& r : regs)
      if (Drawn(r) && Matches(r, p)) first = std::min<int64_t>(first, r.id());
    return std::make_tuple(first, p.metric.rfind("throughput", 0) == 0 ? 0 : 1, p.workload,
                           p.metric, p.platform);
  };
  std::stable_sort(panels.begin(), panels.end(),
                   [&](const Panel& a, const Panel& b) { return rank(a) < rank(b); });
  for (const Panel& p : panels) {
    const std::vector<PlotMarker> markers = MarkersOf(p, regs, commits);
    for (bool ratio : {false, true}) {
      Plot plot;
      plot.ratio = ratio;
      plot.series = SeriesOfPanel(p, ratio);
      if (plot.series.empty()) continue;
      plot.title = absl::StrCat(p.workload, ": ", p.metric, ratio ? ", overhead mode/off" : "",
                                " (", p.platform, ")");
      plot.y_label = ratio ? "ratio mode / off" : (p.unit.empty() ? p.metric : p.unit);
      plot.markers = markers;
      plot.steps = StepsOf(p, ratio, regs, s.bisects, commits);
      FillAxis(plot, commits);
      out.plots.push_back(std::move(plot));
    }
  }

  out.tables.push_back(RegressionsTable(regs));
  out.tables.push_back(CulpritsTable(regs, commits));
  for (const auto& b : s.bisects) {
    if (focus == nullptr || b.regression_id() == focus->id()) {
      out.tables.push_back(BisectTable(b, commits));
    }
  }
  out.tables.push_back(ResultsTable(s, focus, commits));
  out.tables.push_back(HostsTable(s.results));
  if (std::any_of(s.results.begin(), s.results.end(),
                  [](const pb::Result& r) { return r.has_monitors(); })) {
    out.tables.push_back(MatrixMonitorsTable(s.results));
  }
  std::set<std::string> tools;
  for (const auto& r : s.results) tools.insert(absl::StrCat(r.raw_format(), " ", r.tool_version()));
  ReportTable versions;
  versions.title = "Versions";
  versions.headers = {"what", "version"};
  versions.rows.push_back({"iommu-farm (farmctl)", s.farm_version});
  for (const auto& t : tools) versions.rows.push_back({"tool (format, version)", t});
  if (!s.generated_at.empty()) versions.rows.push_back({"report generated", s.generated_at});
  out.tables.push_back(std::move(versions));
  return out;
}

namespace {

// Where things go on a plot: its fixed geometry, each commit's x and the
// value range its y axis spans.
class PlotFrame {
 public:
  static constexpr double kWidth = 660, kLeft = 72, kRight = 16, kTop = 44, kPlotHeight = 210;
  static constexpr double kLabelLine = 15;
  // Commit labels stand upright under their ticks, so a label of any length
  // stays inside the plot's width; the axis is as tall as the longest one
  // (an advance of 6.4 px a character covers DejaVu Sans' digits at 10 px).
  static constexpr double kAxisLabelTop = 8, kAxisCharWidth = 6.4, kMinAxisHeight = 40;
  static constexpr double kPlotWidth = kWidth - kLeft - kRight;
  static constexpr double kAxisY = kTop + kPlotHeight;

  explicit PlotFrame(const Plot& plot)
      : axis_height_(AxisHeight(plot)),
        height_(kTop + kPlotHeight + axis_height_ + kLabelLine * plot.markers.size() + 6),
        slot_(plot.axis.empty() ? kPlotWidth : kPlotWidth / plot.axis.size()) {
    for (size_t i = 0; i < plot.axis.size(); ++i) position_[plot.axis[i].first] = i;
    SetValueRange(plot);
  }

  double axis_height() const { return axis_height_; }
  double height() const { return height_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double X(int32_t commit_index) const {
    auto it = position_.find(commit_index);
    const double i = it == position_.end() ? 0 : static_cast<double>(it->second);
    return kLeft + (i + 0.5) * slot_;
  }
  double Y(double v) const { return kTop + kPlotHeight - (v - lo_) / (hi_ - lo_) * kPlotHeight; }

 private:
  // Every finite mean and band edge, the bisect steps and (for a ratio) 1,
  // padded by 8%; a flat range is widened first.
  void SetValueRange(const Plot& plot) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& s : plot.series) {
      for (const auto& p : s.points) {
        for (double v : {p.lo, p.hi, p.mean}) {
          if (!std::isfinite(v)) continue;
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    }
    for (const auto& st : plot.steps) {
      lo = std::min(lo, st.mean);
      hi = std::max(hi, st.mean);
    }
    if (plot.ratio) {
      lo = std::min(lo, 1.0);
      hi = std::max(hi, 1.0);
    }
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (hi - lo <= 1e-12 * std::max(std::fabs(hi), 1.0)) {
      const double pad = hi != 0 ? std::fabs(hi) * 0.01 : 1;
      lo -= pad;
      hi += pad;
    }
    const double pad = (hi - lo) * 0.08;
    // Data that never goes below 0 gets no negative axis either.
    lo_ = lo >= 0 ? std::max(lo - pad, 0.0) : lo - pad;
    hi_ = hi + pad;
  }

  static double AxisHeight(const Plot& plot) {
    size_t chars = 0;
    for (const auto& [index, label] : plot.axis) chars = std::max(chars, label.size());
    return std::max(kMinAxisHeight, kAxisLabelTop + kAxisCharWidth * chars + 12);
  }

  double axis_height_;
  double height_;
  double slot_;
  std::map<int32_t, size_t> position_;
  double lo_ = 0, hi_ = 1;
};

// The <svg> element's opening, the title and the legend (one entry per mode).
void AppendPlotHeader(const Plot& plot, const PlotFrame& frame, std::string& svg) {
  constexpr double kLeft = PlotFrame::kLeft, kWidth = PlotFrame::kWidth;
  absl::StrAppend(
      &svg,
      absl::StrFormat(
          "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot%s\" width=\"%.0f\" "
          "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">\n<title>%s"
          "</title>\n",
          plot.ratio ? " ratio" : "", kWidth, frame.height(), kWidth, frame.height(),
          HtmlEscape(plot.title), HtmlEscape(plot.title)));
  absl::StrAppend(&svg, "<text class=\"plot-title\" x=\"", F(kLeft), "\" y=\"16\">",
                  HtmlEscape(Truncate(plot.title, 86)), "</text>\n");
  double lx = kLeft;
  for (const auto& s : plot.series) {
    absl::StrAppend(&svg, "<rect x=\"", F(lx), "\" y=\"24\" width=\"12\" height=\"10\" fill=\"",
                    ModeColor(s.mode), "\"/><text class=\"legend\" x=\"", F(lx + 16),
                    "\" y=\"33\">", HtmlEscape(plot.ratio ? s.mode + "/off" : s.mode), "</text>\n");
    lx += 34 + 8 * (s.mode.size() + (plot.ratio ? 4 : 0));
  }
  absl::StrAppend(&svg, "<text class=\"legend\" x=\"", F(lx), "\" y=\"33\">",
                  "band: 95% CI of the mean over repeats",
                  plot.steps.empty() ? "" : "; \u25c7 bisect step", "</text>\n");
}

// Frame, grid and y ticks, the y label, the ratio's reference line at 1 and
// the commit axis.
void AppendPlotAxes(const Plot& plot, const PlotFrame& frame, std::string& svg) {
  constexpr double kLeft = PlotFrame::kLeft, kTop = PlotFrame::kTop;
  constexpr double kPlotWidth = PlotFrame::kPlotWidth, kPlotHeight = PlotFrame::kPlotHeight;
  absl::StrAppend(&svg, "<rect class=\"frame\" x=\"", F(kLeft), "\" y=\"", F(kTop), "\" width=\"",
                  F(kPlotWidth), "\" height=\"", F(kPlotHeight), "\"/>\n");
  for (double t : Ticks(frame.lo(), frame.hi())) {
    const double y = frame.Y(t);
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", F(kLeft), "\" x2=\"", F(kLeft + kPlotWidth),
                    "\" y1=\"", F(y), "\" y2=\"", F(y), "\"/><text x=\"", F(kLeft - 6), "\" y=\"",
                    F(y + 4), "\" text-anchor=\"end\" class=\"tick\">", FormatNumber(t),
                    "</text>\n");
  }
  absl::StrAppend(&svg, "<text class=\"axis-label\" transform=\"translate(14,",
                  F(kTop + kPlotHeight / 2), ") rotate(-90)\" text-anchor=\"middle\">",
                  HtmlEscape(plot.y_label), "</text>\n");
  if (plot.ratio) {
    absl::StrAppend(&svg, "<line class=\"reference\" x1=\"", F(kLeft), "\" x2=\"",
                    F(kLeft + kPlotWidth), "\" y1=\"", F(frame.Y(1)), "\" y2=\"", F(frame.Y(1)),
                    "\"/>\n");
  }
  constexpr double kAxisY = PlotFrame::kAxisY;
  for (const auto& [index, label] : plot.axis) {
    const double x = frame.X(index);
    absl::StrAppend(&svg, "<line class=\"tickmark\" x1=\"", F(x), "\" x2=\"", F(x), "\" y1=\"",
                    F(kAxisY), "\" y2=\"", F(kAxisY + 4), "\"/><text class=\"tick\" ",
                    "text-anchor=\"end\" transform=\"translate(", F(x + 3.5), ",",
                    F(kAxisY + PlotFrame::kAxisLabelTop), ") rotate(-90)\">", HtmlEscape(label),
                    "<title>", HtmlEscape(label), "</title></text>\n");
  }
}

// The change spans, drawn behind the data.
void AppendChangeSpans(const Plot& plot, const PlotFrame& frame, std::string& svg) {
  constexpr double kTop = PlotFrame::kTop, kPlotHeight = PlotFrame::kPlotHeight;
  for (const auto& m : plot.markers) {
    if (m.kind != PlotMarker::Kind::kChange) continue;
    const double x0 = frame.X(m.from_index), x1 = frame.X(m.commit_index);
    absl::StrAppend(&svg, "<g class=\"marker change\" data-commit=\"", HtmlEscape(m.commit),
                    "\"><title>", HtmlEscape(m.label), "</title><rect x=\"", F(std::min(x0, x1)),
                    "\" y=\"", F(kTop), "\" width=\"", F(std::max(std::fabs(x1 - x0), 2.0)),
                    "\" height=\"", F(kPlotHeight), "\" fill=\"", kChangeFill,
                    "\"/><text class=\"tag\" x=\"", F((x0 + x1) / 2), "\" y=\"", F(kTop + 12),
                    "\" text-anchor=\"middle\">", HtmlEscape(m.tag), "</text></g>\n");
  }
}

// One series: its confidence band and mean line (with two points or more),
// then each point with its interval.
void AppendSeries(const PlotSeries& s, const PlotFrame& frame, std::string& svg) {
  const char* color = ModeColor(s.mode);
  absl::StrAppend(&svg, "<g class=\"series\" data-mode=\"", HtmlEscape(s.mode), "\" data-points=\"",
                  s.points.size(), "\">");
  if (s.points.size() > 1) {
    std::string d;
    for (size_t i = 0; i < s.points.size(); ++i) {
      absl::StrAppend(&d, i == 0 ? "M" : "L", F(frame.X(s.points[i].commit_index)), ",",
                      F(frame.Y(s.points[i].hi)));
    }
    for (size_t i = s.points.size(); i-- > 0;) {
      absl::StrAppend(&d, "L", F(frame.X(s.points[i].commit_index)), ",",
                      F(frame.Y(s.points[i].lo)));
    }
    absl::StrAppend(&svg, "<path class=\"band\" d=\"", d, "Z\" fill=\"", color,
                    "\" fill-opacity=\"0.2\" stroke=\"none\"/>");
    std::string pts;
    for (const auto& p : s.points) {
      absl::StrAppend(&pts, pts.empty() ? "" : " ", F(frame.X(p.commit_index)), ",",
                      F(frame.Y(p.mean)));
    }
    absl::StrAppend(&svg, "<polyline class=\"mean\" points=\"", pts, "\" fill=\"none\" stroke=\"",
                    color, "\" stroke-width=\"2\"/>");
  }
  for (const auto& p : s.points) {
    const double x = frame.X(p.commit_index);
    absl::StrAppend(
        &svg, "<line class=\"ci\" x1=\"", F(x), "\" x2=\"", F(x), "\" y1=\"", F(frame.Y(p.lo)),
        "\" y2=\"", F(frame.Y(p.hi)), "\" stroke=\"", color,
        "\" stroke-width=\"1.5\"/><circle class=\"point\" cx=\"", F(x), "\" cy=\"",
        F(frame.Y(p.mean)), "\" r=\"3.5\" fill=\"", color, "\"><title>",
        HtmlEscape(absl::StrCat(p.commit, " ", s.mode, ": ", FormatNumber(p.mean), " [",
                                FormatNumber(p.lo), ", ", FormatNumber(p.hi), "] n=", p.n)),
        "</title></circle>");
  }
  absl::StrAppend(&svg, "</g>\n");
}

// Bisect steps: hollow diamonds in the bisected mode's colour.
void AppendBisectSteps(const Plot& plot, const PlotFrame& frame, std::string& svg) {
  for (const auto& st : plot.steps) {
    const double x = frame.X(st.commit_index), y = frame.Y(st.mean);
    absl::StrAppend(&svg, "<path class=\"step\" data-commit=\"", HtmlEscape(st.commit),
                    "\" data-verdict=\"", HtmlEscape(st.verdict), "\" d=\"M", F(x), ",", F(y - 6),
                    "L", F(x + 6), ",", F(y), "L", F(x), ",", F(y + 6), "L", F(x - 6), ",", F(y),
                    "Z\" fill=\"#fff\" fill-opacity=\"0.6\" stroke=\"", ModeColor(st.mode),
                    "\" stroke-width=\"1.5\"><title>",
                    HtmlEscape(absl::StrCat("bisect step ", st.step, " ", st.commit, " ", st.mode,
                                            ": ", st.verdict, ", mean ", FormatNumber(st.mean),
                                            " over ", st.repeats, " repeats")),
                    "</title></path>\n");
  }
}

// Culprits over the data; every marker's label under the axis.
void AppendMarkerLabels(const Plot& plot, const PlotFrame& frame, std::string& svg) {
  constexpr double kLeft = PlotFrame::kLeft, kTop = PlotFrame::kTop;
  constexpr double kAxisY = PlotFrame::kAxisY;
  double label_y = kAxisY + frame.axis_height();
  for (const auto& m : plot.markers) {
    if (m.kind == PlotMarker::Kind::kCulprit) {
      const double x = frame.X(m.commit_index);
      absl::StrAppend(&svg, "<g class=\"marker culprit\" data-commit=\"", HtmlEscape(m.commit),
                      "\"><title>", HtmlEscape(m.label), "</title><line x1=\"", F(x), "\" x2=\"",
                      F(x), "\" y1=\"", F(kTop), "\" y2=\"", F(kAxisY), "\" stroke=\"",
                      kCulpritColor, "\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>",
                      "<text class=\"tag culprit-tag\" x=\"", F(x), "\" y=\"", F(kTop - 2),
                      "\" text-anchor=\"middle\">", HtmlEscape(m.tag), "</text></g>\n");
    }
    absl::StrAppend(&svg, "<text class=\"marker-label\" x=\"", F(kLeft - 50), "\" y=\"", F(label_y),
                    "\">", HtmlEscape(Truncate(m.label, 116)), "<title>", HtmlEscape(m.label),
                    "</title></text>\n");
    label_y += PlotFrame::kLabelLine;
  }
}

}  // namespace

std::string RenderPlotSvg(const Plot& plot) {
  const PlotFrame frame(plot);
  std::string svg;
  AppendPlotHeader(plot, frame, svg);
  AppendPlotAxes(plot, frame, svg);
  AppendChangeSpans(plot, frame, svg);
  for (const auto& s : plot.series) AppendSeries(s, frame, svg);
  AppendBisectSteps(plot, frame, svg);
  AppendMarkerLabels(plot, frame, svg);
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

std::string RenderReportHtml(const ReportData& report) {
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
      // Self-contained by construction; the policy makes a browser refuse
      // anything else.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n<title>",
      HtmlEscape(report.title), "</title>\n<style>\n",
      "body{font-family:'DejaVu Sans',Arial,sans-serif;margin:16px 24px;color:#222;"
      "background:#fff;font-size:13px}\n"
      "h1{font-size:20px;margin:4px 0 10px}h2{font-size:16px;margin:22px 0 6px}\n"
      "pre.summary{background:#f4f4f4;border:1px solid #ccc;padding:8px 10px;font-size:12px;"
      "white-space:pre-wrap}\n"
      ".plots{display:flex;flex-wrap:wrap;gap:8px}\n"
      "svg.plot{border:1px solid #ddd;background:#fff}\n"
      "svg .frame{fill:none;stroke:#888}svg .grid{stroke:#e6e6e6}svg .tickmark{stroke:#888}\n"
      "svg .reference{stroke:#555;stroke-dasharray:2,3}\n"
      "svg text{font-family:'DejaVu Sans',Arial,sans-serif;fill:#222}\n"
      "svg .tick{font-size:10px}svg .legend{font-size:11px}svg .axis-label{font-size:11px}\n"
      "svg .plot-title{font-size:13px;font-weight:bold}svg .tag{font-size:10px;"
      "font-weight:bold}\n"
      "svg .culprit-tag{fill:",
      kCulpritColor,
      "}svg .marker-label{font-size:10px}\n"
      "table{border-collapse:collapse;margin:4px 0 8px;font-size:12px}\n"
      "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\n"
      "th{background:#eee}td.num{text-align:right}\n"
      "</style>\n</head>\n<body>\n<h1>",
      HtmlEscape(report.title), "</h1>\n<pre class=\"summary\">", HtmlEscape(report.summary),
      "</pre>\n");
  absl::StrAppend(&html, "<h2>Series over commits per mode</h2>\n");
  if (report.plots.empty()) absl::StrAppend(&html, "<p>no samples to plot</p>\n");
  absl::StrAppend(&html, "<div class=\"plots\">\n");
  for (const Plot& p : report.plots) absl::StrAppend(&html, RenderPlotSvg(p));
  absl::StrAppend(&html, "</div>\n");
  for (const ReportTable& t : report.tables) {
    absl::StrAppend(&html, "<h2>", HtmlEscape(t.title), "</h2>\n");
    if (t.rows.empty()) {
      absl::StrAppend(&html, "<p>", HtmlEscape(t.empty_text), "</p>\n");
      continue;
    }
    absl::StrAppend(&html, "<table>\n<tr>");
    for (const auto& h : t.headers) absl::StrAppend(&html, "<th>", HtmlEscape(h), "</th>");
    absl::StrAppend(&html, "</tr>\n");
    for (const auto& row : t.rows) {
      absl::StrAppend(&html, "<tr>");
      for (const auto& cell : row) absl::StrAppend(&html, "<td>", HtmlEscape(cell), "</td>");
      absl::StrAppend(&html, "</tr>\n");
    }
    absl::StrAppend(&html, "</table>\n");
  }
  absl::StrAppend(&html, "</body>\n</html>\n");
  return html;
}

}  // namespace farm::cli
