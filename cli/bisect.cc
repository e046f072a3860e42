#include "cli/bisect.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/number_format.h"
#include "cli/regressions.h"

namespace farm::cli {

void AddBisectCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    int64_t id = 0;
    bool by_id = false;
    std::string format;
  };
  auto a = std::make_shared<Args>();
  auto* bisect = app.add_subcommand("bisect", "show the bisect of a regression");
  bisect->add_option("ID", a->id, "regression id (or bisect id with --bisect-id)")->required();
  bisect->add_flag("--bisect-id", a->by_id, "ID is a bisect id, not a regression id");
  AddOutputOption(bisect, &a->format, "table, csv (one row per step) or json");
  out->push_back(
      {bisect, [a](Commands& c) { return RunBisect(c, a->id, a->by_id, ToFormat(a->format)); }});
}

int RunBisect(Commands& commands, int64_t id, bool id_is_bisect, OutputFormat format) {
  pb::GetBisectRequest request;
  if (id_is_bisect) {
    request.set_bisect_id(id);
  } else {
    request.set_regression_id(id);
  }
  pb::Bisect bisect;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.analysis().GetBisect(ctx.get(), request, &bisect);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("GetBisect ", id), client::ToAbsl(status));
  }
  commands.out() << (format == OutputFormat::kJson  ? FormatBisectJson(bisect)
                     : format == OutputFormat::kCsv ? FormatBisectCsv(bisect)
                                                    : FormatBisectTable(bisect));
  return 0;
}

std::string StepRanOn(const pb::BisectStep& step) {
  if (step.executor().empty()) return "-";
  return step.real_kernel() ? absl::StrCat(step.executor(), " on real kernels") : step.executor();
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
                    absl::StrFormat("%.3g", s.p_value()), StepRanOn(s)});
  }
  if (rows.empty()) return out + "  no steps yet\n";
  return out + RenderTable({"step", "commit", "index", "verdict", "repeats", "mean", "change", "p",
                            "ran on"},
                           rows);
}

std::string FormatBisectJson(const pb::Bisect& bisect) { return ProtoToJson(bisect) + "\n"; }

std::string FormatBisectCsv(const pb::Bisect& b) {
  std::string out =
      "bisect,regression,state,culprit,step,commit,index,verdict,repeats,mean,change,p,"
      "executor,real_kernel\n";
  const std::string prefix = absl::StrCat(b.id(), ",", b.regression_id(), ",", CsvField(b.state()),
                                          ",", CsvField(b.culprit_id()), ",");
  for (const auto& s : b.steps()) {
    absl::StrAppend(&out, prefix, s.step(), ",", CsvField(s.commit_id()), ",", s.commit_index(),
                    ",", CsvField(s.verdict()), ",", s.repeats(), ",", FormatExactNumber(s.mean()),
                    ",", FormatExactNumber(s.relative_change()), ",",
                    FormatExactNumber(s.p_value()), ",", CsvField(s.executor()), ",",
                    s.real_kernel() ? "true" : "false", "\n");
  }
  return out;
}

}  // namespace farm::cli
