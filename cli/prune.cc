#include "cli/prune.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace farm::cli {
namespace {

// A whole prune may take many transactions; farmctl waits this long.
constexpr absl::Duration kPruneTimeout = absl::Hours(2);

std::string KeptRegressionText(const pb::PruneResponse& r) {
  std::string text = absl::StrCat(r.kept_for_regressions());
  if (r.kept_regression_matrices_size() == 0) return text;
  absl::StrAppend(&text, " (matrices ", absl::StrJoin(r.kept_regression_matrices(), " "),
                  r.kept_regression_matrices_size() < r.kept_for_regressions() ? " ..." : "", ")");
  return text;
}

}  // namespace

absl::StatusOr<absl::Duration> ParsePruneAge(const std::string& text) {
  absl::string_view v = text;
  absl::Duration d;
  int64_t days = 0;
  if (absl::ConsumeSuffix(&v, "d") && absl::SimpleAtoi(v, &days)) {
    d = absl::Hours(24) * days;
  } else if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--older-than \"", text, "\": want e.g. 180d, 36h or 90m"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("--older-than \"", text, "\" is not positive"));
  }
  return d;
}

void AddPruneCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string older_than, format;
    bool raw_only = false, dry_run = false, keep_used = false;
    int keep = 0;
  };
  auto a = std::make_shared<Args>();
  auto* prune = app.add_subcommand(
      "prune",
      "delete (admin) matrices that finished before --older-than with their jobs, results, "
      "samples and raw output, or with --raw-only only their raw tool output; keeps the newest "
      "--keep-per-series of every analyser series, those holding a kernel build a queued job "
      "waits for, and every unfinished one; refuses, deleting nothing, when matrices a regression "
      "or its bisect uses are older than --older-than, unless --keep-used (docs/scheduler.md "
      "\"Retention\")");
  prune->add_option("--older-than", a->older_than, "age, e.g. 180d, 36h (at least 1h)")->required();
  prune->add_flag("--raw-only", a->raw_only,
                  "empty only the raw tool output (samples and rows stay; `results --raw` then "
                  "says it was pruned)");
  prune->add_flag("--dry-run", a->dry_run, "report what would go, delete nothing");
  prune->add_flag("--keep-used", a->keep_used,
                  "keep the matrices a regression or its bisect uses and delete the rest, "
                  "instead of refusing");
  prune->add_option("--keep-per-series", a->keep,
                    "matrices kept per analyser series (default and least: 100, the analyzer's "
                    "history depth)");
  AddOutputOption(prune, &a->format);
  out->push_back({prune, [a](Commands& c) {
                    absl::StatusOr<absl::Duration> age = ParsePruneAge(a->older_than);
                    if (!age.ok()) return c.Fail("prune", age.status());
                    pb::PruneRequest request;
                    request.mutable_older_than()->set_seconds(absl::ToInt64Seconds(*age));
                    request.set_raw_only(a->raw_only);
                    request.set_dry_run(a->dry_run);
                    request.set_keep_used(a->keep_used);
                    request.set_keep_per_series(a->keep);
                    return RunPrune(c, request, ToFormat(a->format));
                  }});
}

int RunPrune(Commands& commands, const pb::PruneRequest& request, OutputFormat format) {
  auto ctx = client::NewContext(commands.options(), kPruneTimeout);
  pb::PruneResponse response;
  grpc::Status status = commands.retention().Prune(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("Prune", client::ToAbsl(status));
  commands.out() << FormatPruneReport(response, format);
  return 0;
}

std::string FormatPruneReport(const pb::PruneResponse& r, OutputFormat format) {
  const pb::PruneCounts& c = r.pruned();
  const std::string went = r.dry_run() ? "would go" : "went";
  std::vector<std::vector<std::string>> rows = {
      {"matrices", went, absl::StrCat(c.matrices())},
      {"jobs", went, absl::StrCat(c.jobs())},
      {"results", went, absl::StrCat(c.results())},
      {"samples", went, absl::StrCat(c.samples())},
      {"raw outputs", went, absl::StrCat(c.raw_outputs())},
      {"raw bytes", went, absl::StrCat(c.raw_bytes())},
      {"matrices", "kept: a regression uses them", KeptRegressionText(r)},
  };
  if (!r.raw_only()) {  // rows stay in a raw-only prune: these keep only rows
    rows.push_back({"matrices", absl::StrCat("kept: newest ", r.history_depth(), " of a series"),
                    absl::StrCat(r.kept_for_history())});
    rows.push_back(
        {"matrices", "kept: hold a needed kernel build", absl::StrCat(r.kept_for_builds())});
  }
  rows.push_back({"matrices", "kept: unfinished", absl::StrCat(r.unfinished())});
  std::string head;
  if (format == OutputFormat::kTable) {
    head = absl::StrCat(r.dry_run() ? "dry run: " : "", r.raw_only() ? "raw output of " : "",
                        "matrices finished before ", FormatTimestamp(r.cutoff()),
                        r.dry_run() ? "" : absl::StrCat(" (", r.batches(), " transactions)"), "\n");
  }
  return head + RenderList({"rows", "fate", "count"}, rows, r, format, "");
}

}  // namespace farm::cli
