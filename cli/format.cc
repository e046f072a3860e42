#include "cli/format.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/number_format.h"
#include "lib/base/check.h"
#include "nlohmann/json.hpp"
#include "proto/kernel_offers.h"
#include "proto/labels.h"
#include "proto/progress_rate.h"

namespace farm::cli {
namespace {

using google::protobuf::util::TimeUtil;

std::string ParamsLabel(const pb::Workload& workload) {
  std::map<std::string, std::string> sorted(workload.params().begin(), workload.params().end());
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

std::string FormatTimestamp(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  google::protobuf::Timestamp trimmed = ts;
  trimmed.set_nanos(0);
  return TimeUtil::ToString(trimmed);
}

std::string ProtoToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

}  // namespace

const std::vector<std::string>& OutputFormatNames() {
  static const auto* const names = new std::vector<std::string>{"table", "csv", "json"};
  return *names;
}

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name) {
  const std::vector<std::string>& names = OutputFormatNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<OutputFormat>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("output format '", name, "' is not one of ", absl::StrJoin(names, ", ")));
}

MeanCi ComputeMeanCi(const std::vector<double>& values, double confidence) {
  FARM_DCHECK(confidence > 0 && confidence < 1, "confidence level outside (0, 1)");
  MeanCi out;
  out.n = static_cast<int64_t>(values.size());
  if (values.empty()) {
    out.mean = std::numeric_limits<double>::quiet_NaN();
    out.stddev = out.half_width = out.mean;
    return out;
  }
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(out.n);
  if (out.n < 2) {
    out.stddev = out.half_width = std::numeric_limits<double>::quiet_NaN();
    return out;
  }
  double ss = 0;
  for (double v : values) ss += (v - out.mean) * (v - out.mean);
  out.stddev = std::sqrt(ss / static_cast<double>(out.n - 1));
  boost::math::students_t dist(static_cast<double>(out.n - 1));
  double t = boost::math::quantile(boost::math::complement(dist, (1.0 - confidence) / 2.0));
  out.half_width = t * out.stddev / std::sqrt(static_cast<double>(out.n));
  return out;
}

absl::StatusOr<pb::RegressionState> ParseRegressionMark(const std::string& s) {
  // Only the triage states are a user's to set; the analyzer owns the rest.
  switch (pb::RegressionState state = proto::RegressionStateFromName(s)) {
    case pb::REGRESSION_STATE_FIXED:
    case pb::REGRESSION_STATE_FALSE_POSITIVE:
    case pb::REGRESSION_STATE_ACKNOWLEDGED:
    case pb::REGRESSION_STATE_IGNORED:
      return state;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("state '", s, "' is not one of fixed, false-positive, acknowledged, ignored"));
}

std::string MainMetric(const std::vector<pb::Result>& results) {
  std::string first;
  for (const auto& r : results) {
    for (const auto& s : r.samples()) {
      if (s.metric() == "throughput") return "throughput";
      if (first.empty()) first = s.metric();
    }
  }
  return first;
}

std::vector<SummaryRow> Summarize(const std::vector<pb::Result>& results,
                                  const std::string& metric) {
  // A workload name is labelled with its params only when the results hold
  // several parameter sets for it; otherwise the name alone is clearer.
  std::map<std::string, std::set<std::string>> params_by_name;
  for (const auto& r : results) {
    params_by_name[r.job().workload().name()].insert(ParamsLabel(r.job().workload()));
  }
  using Key = std::tuple<int32_t, std::string, std::string, std::string, std::string, std::string>;
  struct Cell {
    std::string unit;
    std::vector<double> values;
  };
  std::map<Key, Cell> cells;
  for (const auto& r : results) {
    const pb::Job& job = r.job();
    std::string workload = job.workload().name();
    if (params_by_name[workload].size() > 1) {
      workload = absl::StrCat(workload, "{", ParamsLabel(job.workload()), "}");
    }
    for (const auto& s : r.samples()) {
      if (s.metric() != metric) continue;
      Key key{job.commit_index(), job.commit_id(), ModeName(job.mode()),
              workload,           job.platform(),  s.phase()};
      Cell& cell = cells[key];
      // Samples of older agents carry no unit: any sample that has one names it.
      if (cell.unit.empty()) cell.unit = s.unit();
      cell.values.push_back(s.value());
    }
  }
  std::vector<SummaryRow> rows;
  rows.reserve(cells.size());
  for (const auto& [key, cell] : cells) {
    SummaryRow row;
    row.commit_index = std::get<0>(key);
    row.commit = std::get<1>(key);
    row.mode = std::get<2>(key);
    row.workload = std::get<3>(key);
    row.platform = std::get<4>(key);
    row.phase = std::get<5>(key);
    row.unit = cell.unit;
    row.stats = ComputeMeanCi(cell.values);
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// Figures of guests under QEMU's tcg-icount are instruction-timed: the
// guest's clock counts its instructions, so they repeat but are no
// hardware's times. Said once, above the table that holds them.
std::string InstructionTimedNote(const std::vector<pb::Result>& results) {
  std::set<uint32_t> shifts;
  for (const pb::Result& r : results) {
    if (r.host().guest().icount_shift() > 0) shifts.insert(r.host().guest().icount_shift());
  }
  if (shifts.empty()) return "";
  return absl::StrCat("instruction-timed: guests under QEMU tcg-icount (shift ",
                      absl::StrJoin(shifts, ", "),
                      "): each guest instruction counts 2^shift ns, not hardware time\n");
}

}  // namespace

std::string FormatResultsTable(const std::vector<pb::Result>& results) {
  if (results.empty()) return "no results\n";
  const std::string metric = MainMetric(results);
  if (metric.empty()) return "results carry no samples\n";
  std::vector<SummaryRow> rows = Summarize(results, metric);
  std::set<std::string> platforms;
  bool any_phase = false;
  for (const auto& row : rows) {
    platforms.insert(row.platform);
    any_phase = any_phase || !row.phase.empty();
  }
  const bool show_platform = platforms.size() > 1;
  std::vector<std::string> headers = {"commit", "mode", "workload"};
  if (show_platform) headers.push_back("platform");
  if (any_phase) headers.push_back("phase");
  for (const char* h : {"n", "mean", "ci95 low", "ci95 high", "+/-%", "unit"}) {
    headers.push_back(h);
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows) {
    std::vector<std::string> line = {row.commit, row.mode, row.workload};
    if (show_platform) line.push_back(row.platform);
    if (any_phase) line.push_back(row.phase);
    line.push_back(absl::StrCat(row.stats.n));
    line.push_back(FormatNumber(row.stats.mean));
    const double hw = row.stats.half_width;
    line.push_back(std::isnan(hw) ? "-" : FormatNumber(row.stats.mean - hw));
    line.push_back(std::isnan(hw) ? "-" : FormatNumber(row.stats.mean + hw));
    line.push_back(std::isnan(hw) || row.stats.mean == 0
                       ? "-"
                       : absl::StrFormat("%.2f", 100.0 * hw / std::fabs(row.stats.mean)));
    line.push_back(row.unit);
    cells.push_back(std::move(line));
  }
  return absl::StrCat("metric: ", metric,
                      " (mean and 95% Student-t confidence interval over "
                      "repeats)\n",
                      InstructionTimedNote(results), RenderTable(headers, cells));
}

std::string ParamsText(const google::protobuf::Map<std::string, std::string>& params) {
  const std::map<std::string, std::string> sorted(params.begin(), params.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

namespace {

constexpr char kResultsCsvHeader[] =
    "matrix_id,job_id,attempt,catalog,commit,commit_index,platform,workload,"
    "params,mode,repeat,agent,metric,phase,value,unit\n";

void AppendResultCsv(const pb::Result& r, std::string& out) {
  const pb::Job& job = r.job();
  const std::string prefix =
      absl::StrJoin({absl::StrCat(job.matrix_id()), absl::StrCat(r.job_id()),
                     absl::StrCat(r.attempt()), CsvField(job.catalog()), CsvField(job.commit_id()),
                     absl::StrCat(job.commit_index()), CsvField(job.platform()),
                     CsvField(job.workload().name()), CsvField(ParamsLabel(job.workload())),
                     ModeName(job.mode()), absl::StrCat(job.repeat()), CsvField(r.agent())},
                    ",");
  for (const auto& s : r.samples()) {
    absl::StrAppend(&out, prefix, ",", CsvField(s.metric()), ",", CsvField(s.phase()), ",",
                    FormatExactNumber(s.value()), ",", CsvField(s.unit()), "\n");
  }
}

nlohmann::ordered_json ResultJson(const pb::Result& r) {
  const pb::Job& job = r.job();
  nlohmann::ordered_json o;
  o["matrix_id"] = job.matrix_id();
  o["job_id"] = r.job_id();
  o["attempt"] = r.attempt();
  o["catalog"] = job.catalog();
  o["commit"] = job.commit_id();
  o["commit_index"] = job.commit_index();
  o["platform"] = job.platform();
  o["workload"] = job.workload().name();
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  std::map<std::string, std::string> sorted(job.workload().params().begin(),
                                            job.workload().params().end());
  for (const auto& [k, v] : sorted) params[k] = v;
  o["params"] = std::move(params);
  o["mode"] = ModeName(job.mode());
  o["repeat"] = job.repeat();
  o["seed"] = job.seed();
  o["agent"] = r.agent();
  o["tool_version"] = r.tool_version();
  o["wall_time_s"] = static_cast<double>(TimeUtil::DurationToNanoseconds(r.wall_time())) / 1e9;
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  for (const auto& s : r.samples()) {
    nlohmann::ordered_json so;
    so["metric"] = s.metric();
    if (!s.phase().empty()) so["phase"] = s.phase();
    so["value"] = s.value();
    so["unit"] = s.unit();
    samples.push_back(std::move(so));
  }
  o["samples"] = std::move(samples);
  if (r.has_monitors()) {
    // The proto's JSON mapping with its field names, as results.monitors holds it.
    std::string text;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(r.monitors(), &text, opts).ok()) {
      o["monitors"] = nlohmann::ordered_json::parse(text, nullptr, false);
    }
  }
  if (!r.raw_output().empty()) {
    o["raw_format"] = r.raw_format();
    o["raw_output"] = r.raw_output();
  }
  return o;
}

}  // namespace

std::string FormatResultsCsv(const std::vector<pb::Result>& results) {
  std::string out = kResultsCsvHeader;
  for (const auto& r : results) AppendResultCsv(r, out);
  return out;
}

std::string FormatResultsJson(const std::vector<pb::Result>& results) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const auto& r : results) array.push_back(ResultJson(r));
  return array.dump(2) + "\n";
}

ResultsStreamWriter::ResultsStreamWriter(std::ostream& out, OutputFormat format)
    : out_(out), format_(format) {
  FARM_DCHECK(format == OutputFormat::kCsv || format == OutputFormat::kJson,
              "ResultsStreamWriter writes csv or json");
  if (format_ == OutputFormat::kCsv) out_ << kResultsCsvHeader;
}

void ResultsStreamWriter::Add(const pb::Result& result) {
  if (format_ == OutputFormat::kCsv) {
    std::string rows;
    AppendResultCsv(result, rows);
    out_ << rows;
  } else {
    // The element as dump(2) indents it inside the array: a one-element
    // array's dump without its first and last lines.
    nlohmann::ordered_json one = nlohmann::ordered_json::array();
    one.push_back(ResultJson(result));
    const std::string text = one.dump(2);
    out_ << (count_ == 0 ? "[\n" : ",\n") << text.substr(2, text.size() - 4);
  }
  out_.flush();
  ++count_;
}

void ResultsStreamWriter::Finish() {
  if (format_ == OutputFormat::kJson) out_ << (count_ == 0 ? "[]\n" : "\n]\n");
  out_.flush();
}

std::string FormatDuration(double seconds) {
  if (std::isnan(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string FormatProgressLine(const pb::MatrixProgress& progress) {
  const pb::MatrixCounts& c = progress.counts();
  const int64_t done = c.succeeded() + c.failed() + c.cancelled();
  std::string line =
      absl::StrFormat("matrix %d %s: %d/%d done, %d failed", progress.matrix_id(),
                      MatrixStateName(progress.state()), done, c.total(), c.failed());
  if (c.cancelled() > 0) absl::StrAppend(&line, ", ", c.cancelled(), " cancelled");
  if (c.waiting_for_build() > 0) {
    absl::StrAppend(&line, ", ", c.waiting_for_build(), " waiting for kernel build");
  }
  const double rate = progress.jobs_per_second();
  // No rate yet (nothing finished, or a matrix over before it could be
  // measured): say so rather than print "0.0 jobs/s, ETA ?". Slow matrices
  // (real kernels: minutes a job) read in jobs a minute.
  if (rate > 0) {
    absl::StrAppend(&line, rate >= 0.1 ? absl::StrFormat(", %.1f jobs/s", rate)
                                       : absl::StrFormat(", %.2g jobs/min", rate * 60));
  }
  if (progress.done()) return line;
  if (progress.has_eta()) {
    absl::StrAppend(
        &line, ", ETA ",
        FormatDuration(static_cast<double>(TimeUtil::DurationToSeconds(progress.eta()))));
  } else if (rate > 0) {
    absl::StrAppend(&line, ", ETA ", FormatDuration(static_cast<double>(c.total() - done) / rate));
  } else {
    absl::StrAppend(&line, done == 0 ? ", no job finished yet" : ", rate not measured yet");
  }
  return line;
}

double JobsPerSecond(int64_t jobs_finished, double elapsed_seconds) {
  return proto::MeasuredJobsPerSecond(jobs_finished, elapsed_seconds);
}

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    // C1 controls (U+0080..U+009F) are C2 80..C2 9F in UTF-8; U+009B is a
    // terminal's CSI as ESC [ is.
    const bool c1 = c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(s[i + 1]) <= 0x9F;
    if (c < 0x20 || c == 0x7F) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else if (c1) {
      absl::StrAppend(&out, "\\u00",
                      absl::Hex(static_cast<unsigned char>(s[++i]), absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string RenderTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::string>>& rows) {
  // Cells are the server's text (names anyone with a token may choose):
  // control characters are shown escaped, never sent to the terminal.
  std::vector<std::string> shown_headers;
  for (const std::string& h : headers) shown_headers.push_back(Printable(h));
  std::vector<std::vector<std::string>> shown_rows;
  for (const auto& row : rows) {
    std::vector<std::string>& r = shown_rows.emplace_back();
    for (const std::string& cell : row) r.push_back(Printable(cell));
  }
  std::vector<size_t> width(shown_headers.size());
  for (size_t i = 0; i < shown_headers.size(); ++i) width[i] = shown_headers[i].size();
  for (const auto& row : shown_rows) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  auto emit = [&](const std::vector<std::string>& cells, std::string* out) {
    std::string line;
    for (size_t i = 0; i < width.size(); ++i) {
      const std::string& cell = i < cells.size() ? cells[i] : std::string();
      line += cell;
      if (i + 1 < width.size()) line += std::string(width[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    *out += line + "\n";
  };
  std::string out;
  emit(shown_headers, &out);
  for (const auto& row : shown_rows) emit(row, &out);
  return out;
}

std::string RenderList(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& rows,
                       const google::protobuf::Message& message, OutputFormat format,
                       const std::string& empty_text) {
  switch (format) {
    case OutputFormat::kJson:
      return ProtoToJson(message) + "\n";
    case OutputFormat::kCsv: {
      auto line = [](const std::vector<std::string>& cells) {
        std::vector<std::string> quoted;
        for (const auto& cell : cells) quoted.push_back(CsvField(cell));
        return absl::StrCat(absl::StrJoin(quoted, ","), "\n");
      };
      std::string out = line(headers);
      for (const auto& row : rows) out += line(row);
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  if (rows.empty()) return empty_text;
  return RenderTable(headers, rows);
}

std::string FormatMatrixList(const std::vector<pb::Matrix>& matrices, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListMatricesResponse message;
  for (const auto& m : matrices) {
    const auto& c = m.counts();
    rows.push_back({absl::StrCat(m.id()), m.name(), MatrixStateName(m.state()),
                    absl::StrCat(c.total()), absl::StrCat(c.succeeded()), absl::StrCat(c.failed()),
                    absl::StrCat(c.queued() + c.leased()), m.platform(),
                    FormatTimestamp(m.created_at()),
                    m.submitted_by().empty() ? "-" : m.submitted_by()});
    *message.add_matrices() = m;
  }
  return RenderList({"id", "name", "state", "jobs", "succeeded", "failed", "pending", "platform",
                     "created", "submitter"},
                    rows, message, format, "no matrices\n");
}

std::string FormatMatrixDetail(const pb::Matrix& m) {
  const auto& c = m.counts();
  return absl::StrCat(
      "matrix ", m.id(), " ", Printable(m.name()), "\n",
      "  state:     ", MatrixStateName(m.state()), "\n", "  catalog:   ", Printable(m.catalog()),
      "\n", "  platform:  ", Printable(m.platform()), "\n", "  jobs:      ", c.total(), " total, ",
      c.queued(), " queued, ", c.leased(), " leased, ", c.succeeded(), " succeeded, ", c.failed(),
      " failed, ", c.cancelled(), " cancelled\n",
      c.waiting_for_build() > 0
          ? absl::StrCat("  waiting:   ", c.waiting_for_build(),
                         " queued jobs waiting for kernel build (see the build matrix)\n")
          : "",
      "  created:   ", FormatTimestamp(m.created_at()), "\n",
      "  finished:  ", FormatTimestamp(m.finished_at()), "\n",
      m.submitted_by().empty()
          ? ""
          : absl::StrCat("  submitted by: ", Printable(m.submitted_by()), "\n"));
}

namespace {

// The inventory in one cell: CPU, shape, IOMMU units, the usable devices.
std::string HardwareSummary(const pb::HostFacts& host) {
  const pb::Inventory& inv = host.inventory();
  std::vector<std::string> parts;
  if (!inv.cpu_model().empty()) parts.push_back(inv.cpu_model());
  std::string shape = absl::StrCat(host.cpus(), " cpus");
  if (inv.sockets() > 0) shape = absl::StrCat(inv.sockets(), " sockets, ", shape);
  absl::StrAppend(&shape, ", ", host.numa_nodes(), " nodes");
  if (inv.memory_kib() > 0) absl::StrAppend(&shape, ", ", inv.memory_kib() >> 20, " GiB");
  parts.push_back(shape);
  std::vector<std::string> units;
  for (const pb::IommuUnit& u : inv.iommus()) {
    units.push_back(u.driver().empty() ? u.name() : absl::StrCat(u.name(), ":", u.driver()));
  }
  if (!units.empty()) parts.push_back(absl::StrCat("iommus ", absl::StrJoin(units, " ")));
  for (const pb::InventoryDevice& d : inv.devices()) {
    std::string where = d.block().empty() ? "no block device" : d.block();
    if (!d.pci_address().empty()) absl::StrAppend(&where, " ", d.pci_address());
    if (!d.group_type().empty()) absl::StrAppend(&where, " ", d.group_type());
    parts.push_back(absl::StrCat(d.path(), " (", where, ")"));
  }
  return absl::StrJoin(parts, "; ");
}

// Each kernel the agent runs real jobs under, with its modes, once.
std::string KernelsSummary(const pb::Agent& agent) {
  std::vector<std::string> out;
  std::set<std::string> seen;  // fio and iozone offer the same kernels
  for (const pb::Capability& cap : agent.capabilities()) {
    const pb::Executor kind = ::farm::proto::ExecutorFromName(cap.name());
    if (!::farm::proto::IsRealExecutor(kind)) continue;
    for (const pb::KernelOffer& k : ::farm::proto::OffersFor({cap}, kind, agent.host())) {
      std::vector<std::string> modes;
      for (int m : k.modes()) modes.push_back(ModeName(m));
      const std::string name = k.commit().empty() || k.commit() == k.release()
                                   ? k.release()
                                   : absl::StrCat(k.commit(), "=", k.release());
      std::string text =
          absl::StrCat(k.provider(), " ", name, " [", absl::StrJoin(modes, ","), "]");
      if (seen.insert(text).second) out.push_back(std::move(text));
    }
  }
  return absl::StrJoin(out, "; ");
}

std::string HealthSummary(const pb::AgentHealth& health) {
  if (!health.checked()) return "-";
  return health.ok() ? "ok" : absl::StrCat("FAILED: ", health.detail());
}

}  // namespace

std::string FormatAgents(const std::vector<pb::Agent>& agents, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListAgentsResponse message;
  for (const auto& a : agents) {
    std::vector<std::string> caps;
    for (const auto& cap : a.capabilities()) caps.push_back(cap.name());
    rows.push_back({a.name(), absl::StrCat(a.agent_id()), a.connected() ? "yes" : "no",
                    absl::StrCat(a.running_jobs(), "/", a.slots()), absl::StrJoin(caps, ","),
                    ::farm::proto::LabelsText(a.host().labels()), HealthSummary(a.health()),
                    a.host().kernel_release(), absl::StrCat(a.host().cpus()),
                    ModeName(a.host().iommu_mode()), HardwareSummary(a.host()), KernelsSummary(a),
                    FormatTimestamp(a.last_heartbeat())});
    *message.add_agents() = a;
  }
  return RenderList({"name", "id", "connected", "running", "capabilities", "labels", "health",
                     "kernel", "cpus", "iommu", "hardware", "kernels offered", "last heartbeat"},
                    rows, message, format, "no agents\n");
}

std::string FormatCatalogList(const std::vector<pb::Catalog>& catalogs, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListCatalogsResponse message;
  for (const auto& c : catalogs) {
    rows.push_back(
        {c.name(), absl::StrCat(c.commits_size()), c.source(), FormatTimestamp(c.loaded_at())});
    *message.add_catalogs() = c;
  }
  return RenderList({"name", "commits", "source", "loaded"}, rows, message, format,
                    "no catalogs\n");
}

std::string FormatCatalog(const pb::Catalog& catalog, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : catalog.commits()) {
    std::map<std::string, std::string> set(c.set().begin(), c.set().end());
    std::vector<std::string> kv;
    for (const auto& [k, v] : set) kv.push_back(absl::StrCat(k, "=", v));
    rows.push_back({absl::StrCat(c.index()), c.id(), c.subject(), absl::StrJoin(kv, " ")});
  }
  const std::string list =
      RenderList({"#", "id", "subject", "set"}, rows, catalog, format, "no commits\n");
  if (format != OutputFormat::kTable) return list;
  return absl::StrCat("catalog ", Printable(catalog.name()), " (", Printable(catalog.source()),
                      "), ", catalog.commits_size(), " commits\n", list);
}

std::string FormatTokens(const std::vector<pb::ApiToken>& tokens, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListTokensResponse message;
  for (const pb::ApiToken& t : tokens) {
    rows.push_back({absl::StrCat(t.id()), t.name(), t.role(), FormatTimestamp(t.created_at()),
                    t.revoked() ? "revoked" : "live"});
    *message.add_tokens() = t;
  }
  return RenderList({"id", "name", "role", "created", "state"}, rows, message, format,
                    "no tokens\n");
}

namespace {
// A server older than the metric_rank field sends it empty: unknown, not primary.
std::string RankName(const pb::Regression& r) {
  return r.metric_rank().empty() ? "-" : r.metric_rank();
}
}  // namespace

namespace {
// A regression's culprits, largest share or not, in commit order:
// "c062db039f40 (43%), c588072bba6b (57%)"; the single culprit_id when the
// server sends no list (one culprit, or a server older than the list).
std::string CulpritsCell(const pb::Regression& r) {
  if (r.culprits_size() <= 1) return r.culprit_id().empty() ? "-" : r.culprit_id();
  std::vector<std::string> named;
  for (const pb::Culprit& c : r.culprits()) {
    named.push_back(absl::StrFormat("%s (%.0f%%)", c.commit_id(), 100.0 * c.share()));
  }
  return absl::StrJoin(named, ", ");
}

// One row per culprit, for the detail views; empty when there is no list.
std::string CulpritsTable(const google::protobuf::RepeatedPtrField<pb::Culprit>& culprits) {
  if (culprits.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const pb::Culprit& c : culprits) {
    rows.push_back({c.commit_id(), absl::StrFormat("%.0f%%", 100.0 * c.share()),
                    absl::StrFormat("%+.2f%%", 100.0 * c.relative_change()),
                    c.last_good().empty() ? "-" : c.last_good(), c.subject()});
  }
  return absl::StrCat(absl::StrFormat("  culprits:  %d\n", culprits.size()),
                      RenderTable({"culprit", "share", "change", "last good", "subject"}, rows));
}
}  // namespace

namespace {
// "fio (matrix 12)", "emulator", or "-" before the confirmation ran.
std::string ConfirmedByCell(const pb::Regression& r) {
  if (r.confirmed_by().empty()) return "-";
  if (r.confirm_matrix_id() == 0) return r.confirmed_by();
  return absl::StrCat(r.confirmed_by(), " (matrix ", r.confirm_matrix_id(), ")");
}
}  // namespace

namespace {
// The workload and, when the series has any, its params: two runs of one
// workload with other params are two series.
std::string WorkloadCell(const pb::Regression& r) {
  const std::string p = ParamsText(r.params());
  return p.empty() ? r.workload() : absl::StrCat(r.workload(), "{", p, "}");
}
}  // namespace

std::string FormatRegressionsTable(const std::vector<pb::Regression>& regs) {
  if (regs.empty()) return "no regressions\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : regs) {
    rows.push_back(
        {absl::StrCat(r.id()), RegressionStateName(r.state()), r.platform(), WorkloadCell(r),
         r.metric(), RankName(r), r.overhead_series() ? "overhead" : ModeName(r.mode()),
         proto::RelativeChangeText(r.magnitude()), absl::StrCat(r.last_good(), "..", r.first_bad()),
         CulpritsCell(r), r.alert_firing() ? "firing" : "-", ConfirmedByCell(r)});
  }
  return RenderTable({"id", "state", "platform", "workload", "metric", "rank", "series", "change",
                      "range", "culprit", "alert", "confirmed by"},
                     rows);
}

namespace {
// "c062db039f40:0.43;c588072bba6b:0.57": every culprit with its share.
std::string CulpritsCsv(const google::protobuf::RepeatedPtrField<pb::Culprit>& culprits) {
  std::vector<std::string> out;
  for (const pb::Culprit& c : culprits) {
    out.push_back(absl::StrFormat("%s:%.17g", c.commit_id(), c.share()));
  }
  return absl::StrJoin(out, ";");
}
}  // namespace

std::string FormatRegressionsCsv(const std::vector<pb::Regression>& regs) {
  std::string out =
      "id,state,platform,workload,metric,rank,primary_metrics,series,change,p_value,last_good,"
      "first_bad,culprit,alert,note,confirmed_by,confirm_matrix_id,culprits,params\n";
  for (const auto& r : regs) {
    absl::StrAppend(
        &out,
        absl::StrJoin({absl::StrCat(r.id()), RegressionStateName(r.state()), CsvField(r.platform()),
                       CsvField(r.workload()), CsvField(r.metric()), CsvField(RankName(r)),
                       CsvField(absl::StrJoin(r.primary_metrics(), ";")),
                       r.overhead_series() ? std::string("overhead") : ModeName(r.mode()),
                       FormatExactNumber(r.magnitude()), FormatExactNumber(r.p_value()),
                       CsvField(r.last_good()), CsvField(r.first_bad()), CsvField(r.culprit_id()),
                       r.alert_firing() ? std::string("firing") : std::string(), CsvField(r.note()),
                       CsvField(r.confirmed_by()), absl::StrCat(r.confirm_matrix_id()),
                       CsvField(CulpritsCsv(r.culprits())), CsvField(ParamsText(r.params()))},
                      ","),
        "\n");
  }
  return out;
}

std::string FormatRegressionsJson(const std::vector<pb::Regression>& regs) {
  pb::ListRegressionsResponse wrapper;
  for (const auto& r : regs) *wrapper.add_regressions() = r;
  return ProtoToJson(wrapper) + "\n";
}

std::string FormatRegression(const pb::Regression& r) {
  std::string out = absl::StrCat(
      "regression ", r.id(), " (", RegressionStateName(r.state()), ")\n",
      "  platform/workload/metric: ", r.platform(), " / ", WorkloadCell(r), " / ", r.metric(), "\n",
      "  rank:      ", RankName(r),
      r.primary_metrics_size() > 0
          ? absl::StrCat(" (primary metrics: ", absl::StrJoin(r.primary_metrics(), ", "), ")")
          : std::string(),
      "\n", "  series:    ", r.overhead_series() ? "overhead ratio (mode/off)" : ModeName(r.mode()),
      "\n", "  catalog:   ", r.catalog(), "\n", "  range:     ", r.last_good(), " (last good) .. ",
      r.first_bad(), " (first bad)\n",
      absl::StrFormat("  change:    %+.2f%% (p = %.3g)\n", 100.0 * r.magnitude(), r.p_value()),
      "  culprit:   ",
      r.culprit_id().empty() ? "-" : absl::StrCat(r.culprit_id(), " \"", r.culprit_subject(), "\""),
      "\n", "  alert:     ", r.alert_firing() ? "firing" : "not firing", "\n",
      "  detected:  ", FormatTimestamp(r.detected_at()), "\n");
  if (r.culprits_size() > 1) absl::StrAppend(&out, CulpritsTable(r.culprits()));
  if (r.bisect_id() != 0) absl::StrAppend(&out, "  bisect:    ", r.bisect_id(), "\n");
  if (!r.confirmed_by().empty()) {
    absl::StrAppend(&out, "  confirmed: by ", ConfirmedByCell(r),
                    r.confirm_note().empty() ? "" : ": " + r.confirm_note(), "\n");
  }
  if (!r.fix_check().empty()) {
    absl::StrAppend(&out, "  fix check: ", r.fix_check(),
                    r.fix_check_commit().empty()
                        ? std::string()
                        : absl::StrFormat(" at %s (%+.2f%% vs last good)", r.fix_check_commit(),
                                          100.0 * r.fix_check_change()),
                    "\n");
  }
  if (!r.note().empty()) absl::StrAppend(&out, "  note:      ", r.note(), "\n");
  if (r.per_mode_size() > 0) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : r.per_mode()) {
      rows.push_back({ModeName(e.mode()), FormatNumber(e.before()), FormatNumber(e.after()),
                      absl::StrFormat("%+.2f%%", 100.0 * e.relative_change()),
                      absl::StrFormat("%.3g", e.p_value())});
    }
    absl::StrAppend(&out, RenderTable({"mode", "before", "after", "change", "p"}, rows));
  }
  return out;
}

std::string FormatBisectTable(const pb::Bisect& b) {
  std::string out = absl::StrCat(
      "bisect ", b.id(), " for regression ", b.regression_id(), ": ", b.state(), "\n",
      "  last good: ", b.last_good().empty() ? "-" : b.last_good(),
      "  first bad: ", b.first_bad().empty() ? "-" : b.first_bad(), "\n", "  culprit:   ",
      b.culprit_id().empty() ? "-" : absl::StrCat(b.culprit_id(), " \"", b.culprit_subject(), "\""),
      "\n");
  if (b.culprits_size() > 1) absl::StrAppend(&out, CulpritsTable(b.culprits()));
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : b.steps()) {
    rows.push_back({absl::StrCat(s.step()), s.commit_id(), absl::StrCat(s.commit_index()),
                    s.verdict(), absl::StrCat(s.repeats()), FormatNumber(s.mean()),
                    absl::StrFormat("%+.2f%%", 100.0 * s.relative_change()),
                    absl::StrFormat("%.3g", s.p_value())});
  }
  if (rows.empty()) return out + "  no steps yet\n";
  return out + RenderTable({"step", "commit", "index", "verdict", "repeats", "mean", "change", "p"},
                           rows);
}

std::string FormatRegressionJson(const pb::Regression& reg) { return ProtoToJson(reg) + "\n"; }

std::string FormatBisectJson(const pb::Bisect& bisect) { return ProtoToJson(bisect) + "\n"; }

std::string FormatBisectCsv(const pb::Bisect& b) {
  std::string out =
      "bisect,regression,state,culprit,step,commit,index,verdict,repeats,mean,change,p\n";
  const std::string prefix = absl::StrCat(b.id(), ",", b.regression_id(), ",", CsvField(b.state()),
                                          ",", CsvField(b.culprit_id()), ",");
  for (const auto& s : b.steps()) {
    absl::StrAppend(&out, prefix, s.step(), ",", CsvField(s.commit_id()), ",", s.commit_index(),
                    ",", CsvField(s.verdict()), ",", s.repeats(), ",", FormatExactNumber(s.mean()),
                    ",", FormatExactNumber(s.relative_change()), ",",
                    FormatExactNumber(s.p_value()), "\n");
  }
  return out;
}

}  // namespace farm::cli
