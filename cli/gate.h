// farmctl gate: a CI job's question "did this kernel regress?" answered
// with an exit status a pipeline can act on, as KernelCI's `kci-dev results
// gate` does:
//
//   0  no primary metric regressed beyond --threshold (each one's 95%
//      interval rules that out);
//   1  a regression: a primary metric changed for the worse, significantly
//      (its interval excludes no change) and by at least the threshold;
//   2  inconclusive: some interval straddles the threshold; the answer says
//      how many further runs per commit would decide it, and
//      --until-decided spends them within --budget;
//   3  infrastructure: the farm could not answer (unreachable scheduler, a
//      commit the catalog lacks, failed or cancelled jobs, no results, an
//      unwritable --junit file); the reason is printed.
//
// The gate measures SPEC's cells at the base and the candidate commit in
// one matrix (their jobs interleave), judges every primary metric
// (lib/stats/metric_roles.h) of known polarity per platform, workload and
// mode, and prints a table or JSON; --junit also writes JUnit XML, one test
// case per judged series.
//
// Thread-safety: RunGate uses its Commands, one per thread; the other
// functions are pure and thread-safe.
#ifndef CLI_GATE_H_
#define CLI_GATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/compare.h"

namespace farm::cli {

inline constexpr int kGatePass = 0;
inline constexpr int kGateRegression = 1;
inline constexpr int kGateInconclusive = 2;
inline constexpr int kGateInfrastructure = 3;

void AddGateCommand(CLI::App& app, Subcommands* out);

enum class GateCall { kPass, kRegression, kInconclusive };

struct GateRow {
  CompareRow compared;
  bool higher_is_better = true;
  // The change for the worse (positive: worse) and its 95% interval.
  double worse = 0;
  stats::Interval worse_ci;
  GateCall call = GateCall::kInconclusive;
  // Inconclusive: further runs per commit that would shrink the interval
  // enough to decide, if the spread stays as measured.
  int64_t further_runs = 0;
};

struct GateAnswer {
  std::vector<GateRow> rows;  // judged series: primary metrics of known polarity
  int exit_code = kGateInconclusive;
  int64_t further_runs = 0;          // the most any inconclusive row needs
  std::vector<CompareRow> compared;  // every series compared, judged or not
};

// Judges each primary metric row of `rows` against `threshold` (a fraction,
// 0.03 for 3%). No judged row is an infrastructure answer (exit 3).
GateAnswer JudgeGate(const std::vector<CompareRow>& rows, double threshold);

// `all`: also every compared series (FormatCompareTable with all).
std::string FormatGateTable(const GateAnswer& answer, const std::string& base,
                            const std::string& candidate, double threshold, bool all = false);
std::string FormatGateJson(const GateAnswer& answer, const std::string& base,
                           const std::string& candidate, double threshold,
                           const std::string& infrastructure_error = "");
// JUnit XML: a test case per judged row (a regression fails, an
// inconclusive one is skipped); an infrastructure answer is one errored case.
std::string FormatGateJunit(const GateAnswer& answer, double threshold,
                            const std::string& infrastructure_error = "");

// The gate's matrix: SPEC's cells at `base` and `candidate` (both in one
// commit list, interleaved by the scheduler), `repeats` runs each when
// positive (else the spec's). InvalidArgument for a spec with a patch.
absl::StatusOr<std::string> PlanGateSpec(const std::string& spec_yaml, const std::string& base,
                                         const std::string& candidate, int repeats);

struct GateArgs {
  std::string spec_path;
  std::string base, candidate;
  double threshold_pct = 3;
  bool until_decided = false;
  int budget = 20;  // further runs per commit that --until-decided may spend
  std::string junit_path;
  OutputFormat format = OutputFormat::kTable;
  bool all = false;  // table: also every compared series
};
int RunGate(Commands& commands, const GateArgs& args);

}  // namespace farm::cli

#endif  // CLI_GATE_H_
