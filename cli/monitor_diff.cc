#include "cli/monitor_diff.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/format.h"
#include "cli/number_format.h"
#include "lib/stats/stats.h"
#include "proto/names.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// One run's counters, by the names of monitor_diff.h.
std::map<std::string, double> RunCounters(const pb::Monitors& m) {
  std::map<std::string, double> out;
  for (const pb::InterruptDelta& d : m.interrupts()) {
    out[absl::StrCat("interrupts/", d.source())] += static_cast<double>(d.total());
    for (int i = 0; i < d.per_cpu_size() && i < m.cpus_size(); ++i) {
      out[absl::StrCat("interrupts-cpu/", m.cpus(i))] += static_cast<double>(d.per_cpu(i));
    }
  }
  for (const auto& [name, delta] : m.vmstat()) {
    out[absl::StrCat("vmstat/", name)] = static_cast<double>(delta);
  }
  for (const pb::IommuCounter& c : m.iommu()) {
    out[absl::StrCat("iommu/", c.name())] = c.gauge() ? c.after() : c.delta();
  }
  for (const pb::PerfSymbol& s : m.perf()) out[absl::StrCat("perf/", s.symbol())] += s.share();
  for (const auto& [name, count] : m.events()) out[name] = static_cast<double>(count);
  return out;
}

double RelativeChange(double a, double b) {
  if (a == 0) return b == 0 ? 0 : (b > 0 ? stats::kFromZero : -stats::kFromZero);
  return (b - a) / std::fabs(a);
}

std::vector<std::string> Cells(const MonitorRow& r) {
  return {r.counter, absl::StrCat(r.runs_a, "/", r.runs_b), FormatNumber(r.mean_a),
          FormatNumber(r.mean_b), proto::RelativeChangeText(r.change)};
}

const std::vector<std::string>& Headers() {
  static const std::vector<std::string>* const kHeaders = new std::vector<std::string>{
      "counter", "runs A/B", "mean A per run", "mean B per run", "change"};
  return *kHeaders;
}

}  // namespace

MonitorMeans MeanMonitors(const std::vector<pb::Result>& results) {
  MonitorMeans out;
  for (const pb::Result& r : results) {
    if (!r.has_monitors()) continue;
    ++out.runs;
    for (const auto& [name, v] : RunCounters(r.monitors())) out.mean[name] += v;
  }
  for (auto& [name, sum] : out.mean) sum /= static_cast<double>(out.runs);
  return out;
}

std::vector<MonitorRow> CompareMonitors(const std::vector<pb::Result>& a,
                                        const std::vector<pb::Result>& b, size_t max_rows) {
  const MonitorMeans ma = MeanMonitors(a);
  const MonitorMeans mb = MeanMonitors(b);
  std::vector<MonitorRow> out;
  if (ma.runs == 0 || mb.runs == 0) return out;
  std::set<std::string> names;
  for (const auto& [n, v] : ma.mean) names.insert(n);
  for (const auto& [n, v] : mb.mean) names.insert(n);
  for (const std::string& n : names) {
    MonitorRow row{n, ma.runs, mb.runs, 0, 0, 0};
    if (auto it = ma.mean.find(n); it != ma.mean.end()) row.mean_a = it->second;
    if (auto it = mb.mean.find(n); it != mb.mean.end()) row.mean_b = it->second;
    row.change = RelativeChange(row.mean_a, row.mean_b);
    // A profile's shares are percentages: half a point is a notable move.
    const double floor = absl::StartsWith(n, "perf/") ? 0.5 : 1.0;
    if (std::fabs(row.change) < 0.10 || std::fabs(row.mean_b - row.mean_a) < floor) continue;
    out.push_back(std::move(row));
  }
  std::sort(out.begin(), out.end(), [](const MonitorRow& x, const MonitorRow& y) {
    const double cx = std::fabs(x.change), cy = std::fabs(y.change);
    if (cx != cy) return cx > cy;
    return std::fabs(x.mean_b - x.mean_a) > std::fabs(y.mean_b - y.mean_a);
  });
  if (out.size() > max_rows) out.resize(max_rows);
  return out;
}

ReportTable MonitorDiffTable(const std::vector<MonitorRow>& rows) {
  ReportTable t;
  t.title = "Monitors that changed (mean per run; by 10% and at least 1 a run, largest first)";
  t.headers = Headers();
  t.empty_text = "no monitor changed notably (or a side has no run with monitors)";
  for (const MonitorRow& r : rows) t.rows.push_back(Cells(r));
  return t;
}

std::string FormatMonitorDiffTable(const std::vector<MonitorRow>& rows) {
  if (rows.empty()) return "monitors: none changed notably (or a side has no run with them)\n";
  std::vector<std::vector<std::string>> cells;
  for (const MonitorRow& r : rows) cells.push_back(Cells(r));
  return absl::StrCat("monitors that changed (mean per run):\n", RenderTable(Headers(), cells));
}

std::string FormatMonitorDiffCsv(const std::vector<MonitorRow>& rows) {
  std::string out = "counter,runs_a,runs_b,mean_a,mean_b,change\n";
  for (const MonitorRow& r : rows) {
    absl::StrAppend(&out, CsvField(r.counter), ",", r.runs_a, ",", r.runs_b, ",",
                    FormatExactNumber(r.mean_a), ",", FormatExactNumber(r.mean_b), ",",
                    FormatExactNumber(r.change), "\n");
  }
  return out;
}

ReportTable MatrixMonitorsTable(const std::vector<pb::Result>& results, size_t max_rows_per_kind) {
  std::map<std::string, std::vector<pb::Result>> by_mode;
  for (const pb::Result& r : results) {
    if (r.has_monitors()) by_mode[proto::ModeName(r.job().mode())].push_back(r);
  }
  ReportTable t;
  t.title = "Monitors of the real runs (mean per run in each mode; the largest of each kind)";
  t.empty_text = "no real run with monitors";
  t.headers = {"counter"};
  std::vector<MonitorMeans> means;
  std::map<std::string, double> size;  // a counter's largest mean in any mode
  for (const auto& [mode, rs] : by_mode) {
    means.push_back(MeanMonitors(rs));
    t.headers.push_back(absl::StrCat(mode, " (", means.back().runs, " runs)"));
    for (const auto& [n, v] : means.back().mean) size[n] = std::max(size[n], std::fabs(v));
  }
  // The largest of each kind, kinds in a fixed order: vmstat's page counts
  // would crowd out a profile's percentages in one ranking.
  std::map<std::string, std::vector<std::pair<double, std::string>>> kinds;
  for (const auto& [n, s] : size) kinds[n.substr(0, n.find('/'))].emplace_back(-s, n);
  for (const char* kind : {"interrupts", "interrupts-cpu", "iommu", "perf", "vmstat"}) {
    std::vector<std::pair<double, std::string>>& order = kinds[kind];
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < order.size() && i < max_rows_per_kind; ++i) {
      std::vector<std::string> row = {order[i].second};
      for (const MonitorMeans& m : means) {
        auto it = m.mean.find(order[i].second);
        row.push_back(it == m.mean.end() ? "0" : FormatNumber(it->second));
      }
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

}  // namespace farm::cli
