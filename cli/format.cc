#include "cli/format.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/check.h"
#include "proto/progress_rate.h"

namespace farm::cli {
namespace {

using google::protobuf::util::TimeUtil;

}  // namespace

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
    params_by_name[r.job().workload().name()].insert(ParamsText(r.job().workload().params()));
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
      workload = absl::StrCat(workload, "{", ParamsText(job.workload().params()), "}");
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

std::string FormatDuration(double seconds) {
  if (std::isnan(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string GroupThousands(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return n < 0 ? "-" + digits : digits;
}

std::string FormatBuildProgress(const pb::JobProgress& p) {
  std::string line = absl::StrCat("building ", Printable(p.commit_id().substr(0, 12)), " ",
                                  Printable(p.platform()), ": ", Printable(p.phase()));
  if (p.objects() > 0 || p.expected_objects() > 0) {
    absl::StrAppend(&line, " ", GroupThousands(p.objects()),
                    p.expected_objects() > 0 ? "/~" + GroupThousands(p.expected_objects()) : "",
                    " objects");
  }
  absl::StrAppend(&line, ", ",
                  FormatDuration(static_cast<double>(TimeUtil::DurationToSeconds(p.elapsed()))));
  if (p.has_remaining()) {
    absl::StrAppend(&line, ", ~",
                    FormatDuration(static_cast<double>(TimeUtil::DurationToSeconds(p.remaining()))),
                    " left");
  }
  return line;
}

namespace {

// The counts, rate and ETA of FormatProgressLine.
std::string FormatCountsLine(const pb::MatrixProgress& progress) {
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

}  // namespace

std::string FormatProgressLine(const pb::MatrixProgress& progress) {
  std::string line = FormatCountsLine(progress);
  if (progress.building_size() > 0) {
    absl::StrAppend(&line, "; ", FormatBuildProgress(progress.building(0)));
    if (progress.building_size() > 1) {
      absl::StrAppend(&line, "; and ", progress.building_size() - 1, " more builds");
    }
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

std::string PrintableLines(std::string_view s) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(absl::string_view(s.data(), s.size()), '\n'))
    lines.push_back(Printable(std::string_view(line.data(), line.size())));
  return absl::StrJoin(lines, "\n");
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

}  // namespace farm::cli
