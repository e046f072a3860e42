// farm::cli formatting: the plain functions behind farmctl's output.
//
// Everything here is pure (protos in, text out) so it can be unit-tested
// without a server: tables, CSV, JSON, the live progress line, and the
// statistics of the results table (mean and a Student-t 95% confidence
// interval over repeats).
//
// Thread-safety: all functions are reentrant. No ownership is taken.
#ifndef CLI_FORMAT_H_
#define CLI_FORMAT_H_

#include <cstdint>
#include <ostream>
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
// Accepts "fixed", "false-positive", "acknowledged", "ignored" (reopening is
// UpdateRegressionRequest.reopen, not a state).
absl::StatusOr<pb::RegressionState> ParseRegressionMark(const std::string& s);

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

// The text table. Platform and phase columns appear only when the results
// have more than one platform / any phase.
std::string FormatResultsTable(const std::vector<pb::Result>& results);
// One row per sample, header first; RFC 4180 quoting.
std::string FormatResultsCsv(const std::vector<pb::Result>& results);
// A JSON array, one object per result with its job cell and every sample;
// raw_output included when the results carry it.
std::string FormatResultsJson(const std::vector<pb::Result>& results);

// The CSV and JSON forms written one result at a time, so `farmctl
// results` holds one result, not the matrix's: the output equals
// FormatResultsCsv / FormatResultsJson of all of them. Not thread-safe;
// `out` must outlive the writer; Finish() once, after the last Add().
class ResultsStreamWriter {
 public:
  ResultsStreamWriter(std::ostream& out, OutputFormat format);  // kCsv or kJson
  void Add(const pb::Result& result);
  void Finish();

 private:
  std::ostream& out_;
  const OutputFormat format_;
  int64_t count_ = 0;
};

// "matrix 7 running: 120/400 done, 2 failed, 35.1 jobs/s, ETA 8s".
std::string FormatProgressLine(const pb::MatrixProgress& progress);
// Jobs finished per second of wall time; 0 (no rate) until one can be
// measured (proto/progress_rate.h: 2 jobs, 1 s). The server's rate covers
// only its own watch stream, so a client that waited longer (reconnects, a
// matrix done before the first update) measures its own.
double JobsPerSecond(int64_t jobs_finished, double elapsed_seconds);
std::string FormatDuration(double seconds);

// The list commands (status, agents, catalog list) share one renderer,
// RenderList: table and CSV come from the same rows, JSON is the list's
// response message (as FormatRegressionsJson), so the formats never disagree.
std::string FormatMatrixList(const std::vector<pb::Matrix>& matrices,
                             OutputFormat format = OutputFormat::kTable);
std::string FormatMatrixDetail(const pb::Matrix& matrix);
std::string FormatAgents(const std::vector<pb::Agent>& agents,
                         OutputFormat format = OutputFormat::kTable);
// Counts each catalog's commits, so the catalogs must carry them (GetCatalog;
// ListCatalogs omits them).
std::string FormatCatalogList(const std::vector<pb::Catalog>& catalogs,
                              OutputFormat format = OutputFormat::kTable);
// The table (a header line, then one row per commit), CSV of the commits, or
// the catalog message as JSON.
std::string FormatCatalog(const pb::Catalog& catalog, OutputFormat format = OutputFormat::kTable);
// API tokens, never their secrets (the server sends none).
std::string FormatTokens(const std::vector<pb::ApiToken>& tokens,
                         OutputFormat format = OutputFormat::kTable);
std::string FormatRegressionsTable(const std::vector<pb::Regression>& regs);
std::string FormatRegressionsJson(const std::vector<pb::Regression>& regs);
// One line per regression; primary_metrics joined by ';', the last column
// `culprits` as id:share joined by ';'. Header line first.
std::string FormatRegressionsCsv(const std::vector<pb::Regression>& regs);
// The detail view; with several culprits, one row per culprit and its share.
std::string FormatRegression(const pb::Regression& reg);
std::string FormatRegressionJson(const pb::Regression& reg);
std::string FormatBisectTable(const pb::Bisect& bisect);
std::string FormatBisectJson(const pb::Bisect& bisect);
// One line per step, each with the bisect's id, regression, state and
// culprit; header line first.
std::string FormatBisectCsv(const pb::Bisect& bisect);

// `s` safe to print on a terminal: C0 and C1 control characters (ESC, CSI,
// newline, ...) and DEL as \xNN / \u00NN; other UTF-8 as it is.
std::string Printable(std::string_view s);

// Renders rows under headers with columns padded to the widest cell, every
// cell Printable.
std::string RenderTable(const std::vector<std::string>& headers,
                        const std::vector<std::vector<std::string>>& rows);
// Quotes a CSV field when it holds a comma, quote or line break.
std::string CsvField(const std::string& field);
// Workload params as shown: "threads=16,tests=write" (keys sorted), "" for none.
std::string ParamsText(const google::protobuf::Map<std::string, std::string>& params);
// Rows under headers as a table (`empty_text` when there are no rows), as CSV
// (header line first, RFC 4180 quoting), or as `message` in proto JSON with
// the proto field names.
std::string RenderList(const std::vector<std::string>& headers,
                       const std::vector<std::vector<std::string>>& rows,
                       const google::protobuf::Message& message, OutputFormat format,
                       const std::string& empty_text);

}  // namespace farm::cli

#endif  // CLI_FORMAT_H_
