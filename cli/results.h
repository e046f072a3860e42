// farmctl's result commands: results (a matrix's results as the summary
// table, or every sample as CSV or JSON) and raw-output (one result's raw
// tool output). Their flags (AddResultCommands), what each does against a
// farm, and the results' output forms. The table's statistics are the shared
// ones of cli/format.h (Summarize, ComputeMeanCi).
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; the Format* functions are pure and reentrant; a
// ResultsStreamWriter is not thread-safe.
#ifndef CLI_RESULTS_H_
#define CLI_RESULTS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddResultCommands(CLI::App& app, Subcommands* out);

// With raw and kJson, each result's raw output comes through
// GetRawOutput, one result at a time; a result whose raw output retention
// dropped carries "raw_output_pruned" instead, and a note on stderr counts
// them.
int RunResults(Commands& commands, int64_t matrix_id, OutputFormat format, bool raw);
// Writes one result's raw output (attempt 0: the job's latest result) to
// `out` verbatim, chunk by chunk as it arrives; exit 1 with RawPrunedText
// on stderr when retention dropped it.
int RunRawOutput(Commands& commands, int64_t job_id, int attempt);

// What farmctl says of a raw output retention dropped at `at`.
std::string RawPrunedText(const google::protobuf::Timestamp& at);

// The text table. Platform and phase columns appear only when the results
// have more than one platform / any phase.
std::string FormatResultsTable(const std::vector<pb::Result>& results);
// The kernels real runs ran under (results with guest facts from a booted
// kernel: vm or kexec; emulator runs are left out): per commit, booted
// release, requested mode, the device's group type, the effective mode,
// machine and accel, how many runs. A run whose effective mode is not the one
// asked for is marked, since its figures answer another question. "" when no
// result ran on a real kernel.
std::string FormatKernelRunsTable(const std::vector<pb::Result>& results);
// The IOMMU environments real runs had (HostFacts.iommu_environment; fio,
// iozone, dma-map-bench; results recorded without one are left out): per
// platform, agent and digest, the series key's 12 hex digits, the
// environment's summary (cli/environment_diff.h) and how many runs. An agent
// with more than one environment is named below the table, since its
// results split into that many series. "" when no result has one.
std::string FormatEnvironmentsTable(const std::vector<pb::Result>& results);
// One row per sample, header first; RFC 4180 quoting.
std::string FormatResultsCsv(const std::vector<pb::Result>& results);
// A JSON array, one object per result with its job cell and every sample;
// iommu_environment (the proto's JSON) when the result has one; raw_output
// included when the results carry it.
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

}  // namespace farm::cli

#endif  // CLI_RESULTS_H_
