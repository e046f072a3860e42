// farm::cli formatting: the plain functions every farmctl noun's output is
// built from (each noun's own views are in its file: cli/matrix.h,
// cli/results.h, cli/agents.h, ...).
//
// Everything here is pure (protos in, text out) so it can be unit-tested
// without a server: the --output formats, tables, lists in every format,
// CSV fields, timestamps and proto JSON, the live progress line, and the
// statistics of the results table (mean and a Student-t 95% confidence
// interval over repeats), which the report and compare share.
//
// Thread-safety: all functions are reentrant. No ownership is taken.
#ifndef CLI_FORMAT_H_
#define CLI_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "proto/names.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

// farmctl's --output for list commands.
enum class OutputFormat { kTable, kCsv, kJson };
// The accepted --output names, in OutputFormat order: table, csv, json.
const std::vector<std::string>& OutputFormatNames();
// InvalidArgument naming the accepted values when `name` is not one of them.
absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& name);

// Mean and confidence interval of one cell's repeats. half_width is the
// distance from the mean to either CI bound; it is NaN when n < 2 (no spread
// can be estimated from one value).
struct MeanCi {
  int64_t n = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n - 1)
  double half_width = 0;
};

// REQUIRES: 0 < confidence < 1 (FARM_DCHECK). Uses the Student t quantile
// with n - 1 degrees of freedom.
MeanCi ComputeMeanCi(const std::vector<double>& values, double confidence = 0.95);

// "off", "passthrough", "strict", "lazy" (or "unspecified").
using ::farm::proto::JobStateName;
using ::farm::proto::MatrixStateName;
using ::farm::proto::ModeName;
using ::farm::proto::RegressionStateName;

// The metric the results table summarises: "throughput" when any sample has
// it, else the first metric seen, else "".
std::string MainMetric(const std::vector<pb::Result>& results);

// One line of the results table: a (commit, mode, workload, platform, phase)
// cell over its repeats.
struct SummaryRow {
  std::string commit;
  int32_t commit_index = 0;
  std::string mode;
  std::string workload;  // name, plus params when one name has several
  std::string platform;
  std::string phase;
  std::string unit;
  MeanCi stats;
};

std::vector<SummaryRow> Summarize(const std::vector<pb::Result>& results,
                                  const std::string& metric);

// "matrix 7 running: 120/400 done, 2 failed, 35.1 jobs/s, ETA 8s"; with
// kernel builds running for it, the first one's progress after "; "
// (FormatBuildProgress) and how many more.
std::string FormatProgressLine(const pb::MatrixProgress& progress);
// A running kernel build: "building 3e9b66c84c73 x86_64: compile 1,234/~2,100
// objects, 6m12s, ~4m left" (no "/~N" without an estimate, no "left"
// outside compile).
std::string FormatBuildProgress(const pb::JobProgress& progress);
// 1234567 -> "1,234,567".
std::string GroupThousands(int64_t n);
// Jobs finished per second of wall time; 0 (no rate) until one can be
// measured (proto/progress_rate.h: 2 jobs, 1 s). The server's rate covers
// only its own watch stream, so a client that waited longer (reconnects, a
// matrix done before the first update) measures its own.
double JobsPerSecond(int64_t jobs_finished, double elapsed_seconds);
std::string FormatDuration(double seconds);

// `s` safe to print on a terminal: C0 and C1 control characters (ESC, CSI,
// newline, ...) and DEL as \xNN / \u00NN; other UTF-8 as it is.
std::string Printable(std::string_view s);
// Printable line by line, the newlines kept: a message of several lines
// (every problem of a spec) stays readable, and a server's message that
// quotes a user's name cannot move the cursor or clear the screen.
std::string PrintableLines(std::string_view s);

// Renders rows under headers with columns padded to the widest cell, every
// cell Printable.
std::string RenderTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::string>>& rows);
// Quotes a CSV field when it holds a comma, quote or line break.
std::string CsvField(const std::string& field);
// Workload params as shown: "threads=16,tests=write" (keys sorted), "" for none.
std::string ParamsText(const google::protobuf::Map<std::string, std::string>& params);
// "2024-01-02T03:04:05Z" (whole seconds); "-" for an unset timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& ts);
// `message` in proto JSON: indented, with the proto field names.
std::string ProtoToJson(const google::protobuf::Message& message);
// Rows under headers as a table (`empty_text` when there are no rows), as CSV
// (header line first, RFC 4180 quoting), or as `message` in proto JSON with
// the proto field names. The list commands (status, agents, catalog list,
// token list) render through it: table and CSV come from the same rows, JSON
// is the list's response message, so the formats never disagree.
std::string RenderList(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& rows,
                       const google::protobuf::Message& message, OutputFormat format,
                       const std::string& empty_text);

}  // namespace farm::cli

#endif  // CLI_FORMAT_H_
