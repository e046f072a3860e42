// farmctl compare: two sides of results -- two matrices, or two commits of
// one matrix (or of two) -- compared series by series, as MMTests'
// compare-kernels and Perfherder's compare view do: per (platform, workload
// with its params, mode, metric[/phase]) measured on both sides, the means,
// the relative change with its 95% interval and p (Welch on means, or
// Yuen's trimmed means where some runs lie far out, as the analyzer
// chooses: lib/stats/stats.h CompareByNoise), and whether it
// changed by the analyzer's rule (p < 0.01 and an interval reaching 3%).
//
// farmctl try: a base and a patch measured together (PlanTry), answered
// with compare. The flags of both (AddCompareCommands) and what they do
// against a farm.
//
// Thread-safety: RunCompare and RunTry use their Commands
// (cli/commands.h), one per thread; the other functions are pure functions
// over results already fetched, thread-safe.
#ifndef CLI_COMPARE_H_
#define CLI_COMPARE_H_

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/environment_diff.h"
#include "cli/format.h"
#include "cli/monitor_diff.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/stats/stats.h"

namespace farm::cli {

// compare, then try.
void AddCompareCommands(CLI::App& app, Subcommands* out);

// Side A: matrix_a (at commit_a when given); side B: matrix_b, or matrix_a
// again when 0 (at commit_b when given). `html_path` not empty: also writes
// FormatCompareHtml there.
// `all`: the table shows every series, not only the headline.
int RunCompare(Commands& commands, int64_t matrix_a, int64_t matrix_b, const std::string& commit_a,
               const std::string& commit_b, OutputFormat format, const std::string& html_path = "",
               bool all = false);
// A --patch file the farm can carry in a spec: text, UTF-8, no NUL byte,
// no binary diff, within proto::kMaxPatchBytes; InvalidArgument saying why
// not otherwise.
absl::Status CheckPatchText(std::string_view patch);
// A try job (PlanTry): submits, waits, answers with the comparison of base
// and patch (`html_path` not empty: also compare's HTML page there). A
// patch side without results (its build failed: the patch does not apply
// or does not build) answers with the jobs' failure reasons instead.
int RunTry(Commands& commands, const std::string& spec_path,
           const std::map<std::string, std::string>& set, const std::string& patch_commit,
           const std::string& patch_path, OutputFormat format, const std::string& html_path = "",
           bool all = false);

struct CompareRow {
  std::string platform;
  std::string workload;
  std::string params;  // "threads=16,..." (keys sorted), "" for none
  std::string mode;
  std::string metric;  // "metric" or "metric/phase"
  std::string unit;
  int64_t n_a = 0, n_b = 0;
  double mean_a = 0, mean_b = 0;
  double change = 0;              // (mean_b - mean_a) / |mean_a| (stats::kFromZero from 0)
  stats::Interval ci;             // 95% interval of `change`
  double p_value = 1;             // two-sided, by `method`
  bool changed = false;           // p < 0.01 and the interval reaches 3%
  double half_a = 0, half_b = 0;  // 95% half-widths of each side's mean (NaN: one run)
  // The test the runs' noise called for (stats::CompareByNoise): "welch" on
  // means, or "yuen" on 20% trimmed means where some run lies far out.
  std::string method = "welch";
  // One of its workload's primary metrics (lib/stats/metric_roles.h): the
  // headline a person reads first; the rest are shown with --all.
  bool primary = true;
  // The IOMMU's cost at a glance: each side's mean over the same series in
  // mode `off` on that side (1.0 = no overhead; NaN where the side has no
  // `off` run of the series, and for `off` itself).
  double of_off_a = std::numeric_limits<double>::quiet_NaN();
  double of_off_b = std::numeric_limits<double>::quiet_NaN();
};

// A try job: "base + patch" as the matrices that measure it. The spec names
// one commit, the base. An emulator patch is `set` (model keys over the
// spec's `set:`): two matrices, base and patch, submitted together so their
// jobs run interleaved (the scheduler's round robin across matrices) and
// paired (the same seeds). A real patch is `patch_commit` (a commit of the
// tree the kernel builder builds): one matrix of both commits; or `patch`,
// a patch file's text: one matrix with the spec's `patch:`, in which the
// farm builds the base with the patch applied as the base's try commit
// (proto/try_commit.h).
struct TryPlan {
  std::vector<std::string> specs_yaml;  // one or two, in submission order
  // The sides as CommitIs matches them; patch_commit "" for a `set` patch.
  std::string base_commit, patch_commit;
};
absl::StatusOr<TryPlan> PlanTry(const std::string& spec_yaml,
                                const std::map<std::string, std::string>& set,
                                const std::string& patch_commit, const std::string& patch = "");

// A job's full commit id `id` is `wanted`: the same, a unique abbreviation
// of 7+ characters (as a spec may name it), or for a try commit a try
// commit of such an abbreviation with the same patch.
bool CommitIs(std::string_view id, std::string_view wanted);

// The results of `commit` ("" = all of them), matched by CommitIs.
std::vector<iommufarm::v1::Result> AtCommit(const std::vector<iommufarm::v1::Result>& results,
                                            const std::string& commit);

// "-3.1% .. -0.4%", or "-" for an interval that is not finite (one run).
std::string ChangeIntervalText(const stats::Interval& ci);
// A share of `off` (CompareRow::of_off_*) as "61.3%", or "-".
std::string ShareOfOffText(double share);
// "dma-map-bench{threads=16}", or the workload alone without params.
std::string WorkloadLabel(const CompareRow& r);

// Every series with samples on both sides, sorted by platform, workload,
// params, metric, then mode in the enum's order (off, passthrough, strict,
// lazy); `primary` and `of_off_*` filled in.
std::vector<CompareRow> CompareSides(const std::vector<iommufarm::v1::Result>& a,
                                     const std::vector<iommufarm::v1::Result>& b);

// "worse" / "better" for a changed series whose metric has a polarity
// (lib/stats/metric_roles.h), "changed" for one without, "-" otherwise.
std::string VerdictText(const CompareRow& r);

// `label_a` / `label_b` name the sides ("matrix 12", "v5.11 in matrix 12").
// The table leads with the headline: per cell and mode its primary metrics
// with each side's share of `off`; `all` adds every other series. Its last
// lines count what changed among both, so nothing hidden goes unmentioned.
// `monitors` is the sides' monitor diff (CompareMonitors, monitor_diff.h),
// shown after the series: its own table; in CSV a second table after a
// blank line (only when it has rows); in JSON the "monitors" array.
// `environment` is the sides' IOMMU environment diff (CompareEnvironments,
// environment_diff.h), shown last in the same way (in CSV a table after a
// blank line when any group was compared; in JSON the "environment" array
// and "environment_groups").
std::string FormatCompareTable(const std::vector<CompareRow>& rows, const std::string& label_a,
                               const std::string& label_b,
                               const std::vector<MonitorRow>& monitors = {}, bool all = false,
                               const EnvironmentDiff& environment = {});
std::string FormatCompareCsv(const std::vector<CompareRow>& rows,
                             const std::vector<MonitorRow>& monitors = {},
                             const EnvironmentDiff& environment = {});
// One self-contained HTML page (the report's style, cli/report.h): the
// table, the monitor and environment diffs' tables, then per series a plot
// of both sides' means with their 95% bands.
std::string FormatCompareHtml(const std::vector<CompareRow>& rows, const std::string& label_a,
                              const std::string& label_b,
                              const std::vector<MonitorRow>& monitors = {},
                              const EnvironmentDiff& environment = {});
std::string FormatCompareJson(const std::vector<CompareRow>& rows, const std::string& label_a,
                              const std::string& label_b,
                              const std::vector<MonitorRow>& monitors = {},
                              const EnvironmentDiff& environment = {});

}  // namespace farm::cli

#endif  // CLI_COMPARE_H_
