#include "cli/regressions.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/number_format.h"

namespace farm::cli {

namespace {

// A server older than the metric_rank field sends it empty: unknown, not primary.
std::string RankName(const pb::Regression& r) {
  return r.metric_rank().empty() ? "-" : r.metric_rank();
}

// A mode change's effective modes, "lazy -> strict"; "" for a performance
// finding.
std::string ModeChangeText(const pb::Regression& r) {
  if (r.change_class() != pb::CHANGE_CLASS_MODE_CHANGED || r.per_mode_size() == 0) return "";
  const pb::ModeEffect& e = r.per_mode(0);
  return absl::StrCat(ModeName(static_cast<int>(e.before())), " -> ",
                      ModeName(static_cast<int>(e.after())));
}

// The change: the modes of a mode change, else the relative change.
std::string ChangeCell(const pb::Regression& r) {
  const std::string modes = ModeChangeText(r);
  return modes.empty() ? proto::RelativeChangeText(r.magnitude()) : modes;
}

// A regression's culprits, largest share or not, in commit order:
// "c062db039f40 (43%), c588072bba6b (57%)"; the single culprit_id when the
// server sends no list (one culprit, or a server older than the list).
std::string CulpritsCell(const pb::Regression& r) {
  if (r.culprits_size() <= 1) return r.culprit_id().empty() ? "-" : r.culprit_id();
  std::vector<std::string> named;
  for (const pb::Culprit& c : r.culprits()) {
    named.push_back(absl::StrFormat("%s (%.0f%%)", c.commit_id(), 100.0 * c.share()));
  }
  return absl::StrJoin(named, ", ");
}

// "fio (matrix 12)", "emulator", or "-" before the confirmation ran.
std::string ConfirmedByCell(const pb::Regression& r) {
  if (r.confirmed_by().empty()) return "-";
  if (r.confirm_matrix_id() == 0) return r.confirmed_by();
  return absl::StrCat(r.confirmed_by(), " (matrix ", r.confirm_matrix_id(), ")");
}

// The workload and, when the series has any, its params: two runs of one
// workload with other params are two series.
std::string WorkloadCell(const pb::Regression& r) {
  const std::string p = ParamsText(r.params());
  return p.empty() ? r.workload() : absl::StrCat(r.workload(), "{", p, "}");
}

// "c062db039f40:0.43;c588072bba6b:0.57": every culprit with its share.
std::string CulpritsCsv(const google::protobuf::RepeatedPtrField<pb::Culprit>& culprits) {
  std::vector<std::string> out;
  for (const pb::Culprit& c : culprits) {
    out.push_back(absl::StrFormat("%s:%.17g", c.commit_id(), c.share()));
  }
  return absl::StrJoin(out, ";");
}

// A change's commit range; a decay is the runs of one commit.
std::string RangeCell(const pb::Regression& r) {
  if (r.kind() == "decay") return absl::StrCat("decay in runs of ", r.first_bad());
  return absl::StrCat(r.last_good(), "..", r.first_bad());
}

// The regression group, "-" when it is in none.
std::string GroupCell(const pb::Regression& r) {
  return r.group_id() == 0 ? "-" : absl::StrCat(r.group_id());
}

}  // namespace

void AddRegressionCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    bool all = false;
    int64_t group = 0;
    std::string list_format;
    int64_t show_id = 0;
    std::string show_format;
    int64_t mark_id = 0;
    std::string mark_state, mark_note;
  };
  auto a = std::make_shared<Args>();
  auto* regressions = app.add_subcommand("regressions", "list detected regressions");
  regressions->add_flag("--all", a->all,
                        "include closed ones (fixed, false-positive, rejected, ignored) "
                        "and improvements");
  regressions->add_option("--group", a->group,
                          "only the members of this regression group (its bisect and alert "
                          "stand for all of them)");
  AddOutputOption(regressions, &a->list_format,
                  "table, csv or json; every format carries the metric rank (primary: "
                  "the workload's throughput metric; secondary: latency, hit rate, CPU "
                  "time)");
  out->push_back({regressions, [a](Commands& c) {
                    return RunRegressions(c, a->all, ToFormat(a->list_format), a->group);
                  }});

  auto* regression = app.add_subcommand("regression", "one regression");
  regression->require_subcommand(1);
  auto* show = regression->add_subcommand("show", "show a regression");
  show->add_option("ID", a->show_id, "regression id")->required();
  AddOutputOption(show, &a->show_format,
                  "table, csv or json; every format names each culprit with its share");
  out->push_back({show, [a](Commands& c) {
                    return RunRegressionShow(c, a->show_id, ToFormat(a->show_format));
                  }});

  auto* mark = regression->add_subcommand(
      "mark",
      "triage a regression: acknowledged silences its alert in Alertmanager; ignored resolves "
      "it and the same change is not reported again; fixed resolves it and the analyzer "
      "checks that the catalog's latest commit is back to the old level; false-positive "
      "resolves it; reopen makes it confirmed again (alert firing, silence removed)");
  mark->add_option("ID", a->mark_id, "regression id")->required();
  // The states a user may set; the others are the analyzer's.
  const std::vector<std::string> markable = {
      proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FIXED),
      proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FALSE_POSITIVE),
      proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_ACKNOWLEDGED),
      proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_IGNORED), kReopen};
  mark->add_option("STATE", a->mark_state, absl::StrJoin(markable, ", "))
      ->required()
      ->check(CLI::IsMember(markable));
  mark->add_option("--note", a->mark_note,
                   "note kept with the regression (replaces the analyzer's note; the "
                   "metric rank is its own field and is kept)");
  out->push_back({mark, [a](Commands& c) {
                    return RunRegressionMark(c, a->mark_id, a->mark_state, a->mark_note);
                  }});
}

int RunRegressions(Commands& commands, bool all, OutputFormat format, int64_t group) {
  pb::ListRegressionsRequest request;
  request.set_include_closed(all);
  request.set_include_improvements(all);
  request.set_group_id(group);
  absl::StatusOr<std::vector<pb::Regression>> listed = commands.ListAllRegressions(request);
  if (!listed.ok()) return commands.Fail("ListRegressions", listed.status());
  const std::vector<pb::Regression>& regs = *listed;
  commands.out() << (format == OutputFormat::kJson  ? FormatRegressionsJson(regs)
                     : format == OutputFormat::kCsv ? FormatRegressionsCsv(regs)
                                                    : FormatRegressionsTable(regs));
  return 0;
}

int RunRegressionShow(Commands& commands, int64_t regression_id, OutputFormat format) {
  pb::GetRegressionRequest request;
  request.set_regression_id(regression_id);
  pb::Regression reg;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.analysis().GetRegression(ctx.get(), request, &reg);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("GetRegression ", regression_id), client::ToAbsl(status));
  }
  commands.out() << (format == OutputFormat::kJson  ? FormatRegressionJson(reg)
                     : format == OutputFormat::kCsv ? FormatRegressionsCsv({reg})
                                                    : FormatRegression(reg));
  return 0;
}

int RunRegressionMark(Commands& commands, int64_t regression_id, const std::string& state,
                      const std::string& note) {
  pb::UpdateRegressionRequest request;
  request.set_regression_id(regression_id);
  request.set_note(note);
  if (state == kReopen) {
    request.set_reopen(true);
  } else {
    absl::StatusOr<pb::RegressionState> parsed = ParseRegressionMark(state);
    if (!parsed.ok()) return commands.Fail("regression mark", parsed.status());
    request.set_state(*parsed);
  }
  pb::Regression reg;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.analysis().UpdateRegression(ctx.get(), request, &reg);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("UpdateRegression ", regression_id), client::ToAbsl(status));
  }
  commands.out() << "regression " << reg.id() << " is now " << RegressionStateName(reg.state())
                 << (reg.metric_rank().empty() ? "" : " (" + reg.metric_rank() + " metric)")
                 << "\n";
  return 0;
}

absl::StatusOr<pb::RegressionState> ParseRegressionMark(const std::string& s) {
  // Only the triage states are a user's to set; the analyzer owns the rest.
  switch (pb::RegressionState state = proto::RegressionStateFromName(s)) {
    case pb::REGRESSION_STATE_FIXED:
    case pb::REGRESSION_STATE_FALSE_POSITIVE:
    case pb::REGRESSION_STATE_ACKNOWLEDGED:
    case pb::REGRESSION_STATE_IGNORED:
      return state;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("state '", s, "' is not one of fixed, false-positive, acknowledged, ignored"));
}

std::string FormatRegressionsTable(const std::vector<pb::Regression>& regs) {
  if (regs.empty()) return "no regressions\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : regs) {
    rows.push_back({absl::StrCat(r.id()), RegressionStateName(r.state()), r.platform(),
                    WorkloadCell(r), r.metric(), RankName(r),
                    r.overhead_series() ? "overhead" : ModeName(r.mode()), ChangeCell(r),
                    RangeCell(r), CulpritsCell(r), r.alert_firing() ? "firing" : "-",
                    ConfirmedByCell(r), GroupCell(r)});
  }
  return RenderTable({"id", "state", "platform", "workload", "metric", "rank", "series", "change",
                      "range", "culprit", "alert", "confirmed by", "group"},
                     rows);
}

std::string FormatRegressionsCsv(const std::vector<pb::Regression>& regs) {
  std::string out =
      "id,state,platform,workload,metric,rank,primary_metrics,series,change,p_value,last_good,"
      "first_bad,culprit,alert,note,confirmed_by,confirm_matrix_id,culprits,params,"
      "group_id\n";
  for (const auto& r : regs) {
    absl::StrAppend(
        &out,
        absl::StrJoin({absl::StrCat(r.id()),
                       RegressionStateName(r.state()),
                       CsvField(r.platform()),
                       CsvField(r.workload()),
                       CsvField(r.metric()),
                       CsvField(RankName(r)),
                       CsvField(absl::StrJoin(r.primary_metrics(), ";")),
                       r.overhead_series() ? std::string("overhead") : ModeName(r.mode()),
                       FormatExactNumber(r.magnitude()),
                       FormatExactNumber(r.p_value()),
                       CsvField(r.last_good()),
                       CsvField(r.first_bad()),
                       CsvField(r.culprit_id()),
                       r.alert_firing() ? std::string("firing") : std::string(),
                       CsvField(r.note()),
                       CsvField(r.confirmed_by()),
                       absl::StrCat(r.confirm_matrix_id()),
                       CsvField(CulpritsCsv(r.culprits())),
                       CsvField(ParamsText(r.params())),
                       absl::StrCat(r.group_id())},
                      ","),
        "\n");
  }
  return out;
}

std::string FormatRegressionsJson(const std::vector<pb::Regression>& regs) {
  pb::ListRegressionsResponse wrapper;
  for (const auto& r : regs) *wrapper.add_regressions() = r;
  return ProtoToJson(wrapper) + "\n";
}

std::string FormatRegression(const pb::Regression& r) {
  std::string out = absl::StrCat(
      "regression ", r.id(), " (", RegressionStateName(r.state()), ")\n",
      "  platform/workload/metric: ", r.platform(), " / ", WorkloadCell(r), " / ", r.metric(), "\n",
      "  rank:      ", RankName(r),
      r.primary_metrics_size() > 0
          ? absl::StrCat(" (primary metrics: ", absl::StrJoin(r.primary_metrics(), ", "), ")")
          : std::string(),
      "\n", "  series:    ", r.overhead_series() ? "overhead ratio (mode/off)" : ModeName(r.mode()),
      "\n", "  catalog:   ", r.catalog(), "\n",
      r.kind() == "decay"
          ? absl::StrCat("  decay:     within the runs of ", r.first_bad(), " (", r.note(), ")\n")
          : absl::StrCat("  range:     ", r.last_good(), " (last good) .. ", r.first_bad(),
                         " (first bad)\n"),
      ModeChangeText(r).empty()
          ? absl::StrFormat("  change:    %+.2f%% (p = %.3g)\n", 100.0 * r.magnitude(), r.p_value())
          : absl::StrCat("  change:    effective mode ", ModeChangeText(r), " (mode_changed)\n"),
      "  culprit:   ",
      r.culprit_id().empty() ? "-" : absl::StrCat(r.culprit_id(), " \"", r.culprit_subject(), "\""),
      "\n", "  alert:     ", r.alert_firing() ? "firing" : "not firing", "\n",
      "  detected:  ", FormatTimestamp(r.detected_at()), "\n");
  if (r.culprits_size() > 1) absl::StrAppend(&out, CulpritsTable(r.culprits()));
  if (r.bisect_id() != 0) absl::StrAppend(&out, "  bisect:    ", r.bisect_id(), "\n");
  if (r.group_id() != 0) {
    absl::StrAppend(&out, "  group:     ", r.group_id(), " (farmctl regressions --group ",
                    r.group_id(), ")\n");
  }
  if (!r.confirmed_by().empty()) {
    absl::StrAppend(&out, "  confirmed: by ", ConfirmedByCell(r),
                    r.confirm_note().empty() ? "" : ": " + r.confirm_note(), "\n");
  }
  if (!r.fix_check().empty()) {
    absl::StrAppend(&out, "  fix check: ", r.fix_check(),
                    r.fix_check_commit().empty()
                        ? std::string()
                        : absl::StrFormat(" at %s (%+.2f%% vs last good)", r.fix_check_commit(),
                                          100.0 * r.fix_check_change()),
                    "\n");
  }
  if (!r.note().empty()) absl::StrAppend(&out, "  note:      ", r.note(), "\n");
  if (r.per_mode_size() > 0 && ModeChangeText(r).empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& e : r.per_mode()) {
      rows.push_back({ModeName(e.mode()), FormatNumber(e.before()), FormatNumber(e.after()),
                      absl::StrFormat("%+.2f%%", 100.0 * e.relative_change()),
                      absl::StrFormat("%.3g", e.p_value())});
    }
    absl::StrAppend(&out, RenderTable({"mode", "before", "after", "change", "p"}, rows));
  }
  return out;
}

std::string FormatRegressionJson(const pb::Regression& reg) { return ProtoToJson(reg) + "\n"; }

// One row per culprit, for the detail views; empty when there is no list.
std::string CulpritsTable(const google::protobuf::RepeatedPtrField<pb::Culprit>& culprits) {
  if (culprits.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const pb::Culprit& c : culprits) {
    rows.push_back({c.commit_id(), absl::StrFormat("%.0f%%", 100.0 * c.share()),
                    absl::StrFormat("%+.2f%%", 100.0 * c.relative_change()),
                    c.last_good().empty() ? "-" : c.last_good(), c.subject()});
  }
  return absl::StrCat(absl::StrFormat("  culprits:  %d\n", culprits.size()),
                      RenderTable({"culprit", "share", "change", "last good", "subject"}, rows));
}

}  // namespace farm::cli
