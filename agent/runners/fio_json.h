// fio_json: the one parser of fio's --output-format=json report, shared by
// the agent's real fio runs and the emulator's `--format fio-json` output.
//
// Contract: ParseFioJson is a pure function of its input (no I/O, no global
// state) and is safe to call from any thread. Text printed before the JSON
// object (fio warnings such as "fio: file hash not empty on exit") and after
// it is tolerated; the first '{' that starts a line and opens a valid JSON
// object (of the first 64 such lines) begins the report.
// Errors: InvalidArgument when no JSON object is found, when it is not valid
// JSON, or when required fields ("fio version", "jobs") are missing or of the
// wrong type. Missing optional fields (percentiles, trim) are left at zero;
// numbers past a field's type are its range's end.
#ifndef AGENT_RUNNERS_FIO_JSON_H_
#define AGENT_RUNNERS_FIO_JSON_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace farm::runners {

// Completion latency of one direction, in nanoseconds (fio's clat_ns).
struct FioLatency {
  double mean_ns = 0;
  double p50_ns = 0;
  double p99_ns = 0;
  double p999_ns = 0;  // 99.9th percentile
};

// One direction (read, write or trim) of one fio job.
struct FioDirection {
  std::uint64_t io_bytes = 0;
  std::uint64_t total_ios = 0;
  double iops = 0;
  double bw_kib_s = 0;  // fio's "bw" field: KiB/s
  std::uint64_t runtime_ms = 0;
  FioLatency clat;

  // fio reports every direction; one with no I/O did not run.
  bool active() const { return io_bytes > 0 || total_ios > 0; }
};

struct FioJob {
  std::string name;
  int error = 0;  // fio's per-job errno; non-zero means the job failed
  std::uint64_t job_runtime_ms = 0;
  FioDirection read;
  FioDirection write;
  FioDirection trim;
};

struct FioReport {
  std::string fio_version;  // e.g. "fio-3.33"
  std::vector<FioJob> jobs;
};

// Parses fio's JSON report; see the file comment for what is tolerated.
absl::StatusOr<FioReport> ParseFioJson(absl::string_view text);

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_FIO_JSON_H_
