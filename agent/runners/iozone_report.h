// iozone_report: the one parser of iozone's throughput-mode (-t) text
// report, shared by the agent's real iozone runs and the emulator's
// `--format iozone` output.
//
// Contract: pure functions, no I/O, safe from any thread. The parser reads
// the block iozone prints per test:
//   Children see throughput for 12 initial writers = 4732581.09 kB/sec
//   Parent sees throughput for 12 initial writers = 4646810.21 kB/sec
//   Min throughput per process = 387764.34 kB/sec
//   Max throughput per process = 399655.47 kB/sec
//   Avg throughput per process = 394381.76 kB/sec
//   Min xfer = 1017344.00 kB
// with any amount of whitespace or tabs, and ignores every other line
// (banner, "CPU utilization", mail quoting prefixes such as "> ").
// Errors: InvalidArgument when no "Children see throughput" line is found or
// a recognised line has no parsable number (the message quotes the line's
// first 200 bytes).
#ifndef AGENT_RUNNERS_IOZONE_REPORT_H_
#define AGENT_RUNNERS_IOZONE_REPORT_H_

#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace farm::runners {

// Numbers of one iozone test (one "Children see ..." block). Throughputs are
// in `unit` (iozone prints kB/sec by default, ops/sec with -O).
struct IozoneTest {
  std::string name;   // short name: write, rewrite, read, reread, randread...
  std::string label;  // iozone's words: "initial writers", "re-readers"
  int processes = 0;  // the N in "throughput for N initial writers"
  std::string unit;   // "kB/sec" or "ops/sec"
  double children = 0;
  double parent = 0;
  double min_per_process = 0;
  double max_per_process = 0;
  double avg_per_process = 0;
  double min_xfer_kb = 0;
};

// One run's report, tests in the order iozone printed them.
struct IozoneReport {
  std::string version;  // "3.489" when the banner is present, else empty
  std::vector<IozoneTest> tests;

  // The test with short name `name`, or nullptr.
  const IozoneTest* Find(absl::string_view name) const;
  // test short name -> numbers.
  std::map<std::string, IozoneTest> ByName() const;
};

// Maps iozone's label ("initial writers", "random readers", "re-readers") to
// the short test name used for sample phases and IozoneSpec tests; labels it
// does not know become lower-case words joined by '-'.
std::string IozoneTestName(absl::string_view label);

// Parses one run. When a test name repeats (several runs pasted together),
// the later block overwrites nothing: it is appended; use ParseIozoneReports
// to split such text into runs.
absl::StatusOr<IozoneReport> ParseIozoneReport(absl::string_view text);

// Splits text holding several runs one after another (as in a mailing-list
// post comparing commits) into one report per run: a new run starts whenever
// a test name already seen in the current run appears again.
absl::StatusOr<std::vector<IozoneReport>> ParseIozoneReports(absl::string_view text);

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_IOZONE_REPORT_H_
