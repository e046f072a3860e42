#include "cli/report_mail.h"

#include <algorithm>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/compare.h"
#include "cli/format.h"
#include "cli/number_format.h"
#include "lib/spec/spec_yaml.h"
#include "proto/names.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

// The culprit a mail names: the bisect's, or the range's first bad commit.
std::string Culprit(const pb::Regression& r) {
  return r.culprit_id().empty() ? r.first_bad() : r.culprit_id();
}

// The culprit's catalog entry; nullptr when the catalog lacks it.
const pb::CatalogCommit* CulpritEntry(const ReportSources& s, const pb::Regression& r) {
  const std::string culprit = Culprit(r);
  for (const pb::CatalogCommit& c : s.commits)
    if (c.id() == culprit) return &c;
  return nullptr;
}

// The culprit's subject as the analyzer recorded it with the bisect, else
// its catalog entry's.
std::string CulpritSubject(const ReportSources& s, const pb::Regression& r) {
  if (!r.culprit_id().empty() && !r.culprit_subject().empty()) return r.culprit_subject();
  const pb::CatalogCommit* c = CulpritEntry(s, r);
  return c == nullptr ? "" : c->subject();
}

// "author:" as git recorded it (catalogs imported from git); a hand-written
// catalog entry names none, and the mail says so rather than leave it out.
std::string AuthorLine(const ReportSources& s, const pb::Regression& r) {
  const pb::CatalogCommit* c = CulpritEntry(s, r);
  return absl::StrCat(
      "author:     ",
      c == nullptr || c->author().empty() ? "not recorded in the catalog" : c->author(), "\n");
}

std::string ModeText(const pb::Regression& r) {
  return r.overhead_series() ? absl::StrCat(proto::ModeName(r.mode()), "/off")
                             : proto::ModeName(r.mode());
}

// RFC 2047: a header of other than ASCII as one UTF-8 base64 word.
std::string HeaderText(const std::string& text) {
  const bool ascii =
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
  if (ascii) return text;
  return absl::StrCat("=?UTF-8?B?", absl::Base64Escape(text), "?=");
}

std::string Headers(const ReportSources& s, const pb::Regression& r, const MailOptions& o) {
  const std::string subject = CulpritSubject(s, r);
  std::string out = absl::StrCat("From: ", o.from, "\n");
  if (!o.to.empty()) absl::StrAppend(&out, "To: ", absl::StrJoin(o.to, ", "), "\n");
  if (!o.cc.empty()) absl::StrAppend(&out, "Cc: ", absl::StrJoin(o.cc, ", "), "\n");
  absl::StrAppend(
      &out, "Subject: ",
      HeaderText(absl::StrCat(
          "[iommu-farm] [", r.catalog(), "] ", Culprit(r),
          subject.empty() ? "" : absl::StrCat(" (\"", subject, "\")"), ": ", r.workload(), ".",
          r.metric(), " ", proto::RelativeChangeText(r.magnitude()),
          r.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT ? " improvement" : " regression", " (",
          ModeText(r), ", ", r.platform(), ")")),
      "\n");
  if (!o.date.empty()) absl::StrAppend(&out, "Date: ", o.date, "\n");
  absl::StrAppend(&out, "Message-ID: <iommu-farm.regression-", r.id(), ".matrix-", s.matrix.id(),
                  "@iommu-farm>\n", "MIME-Version: 1.0\n",
                  "Content-Type: text/plain; charset=UTF-8\n",
                  "Content-Transfer-Encoding: 8bit\n\n");
  return out;
}

std::string Introduction(const ReportSources& s, const pb::Regression& r) {
  const std::string culprit = Culprit(r);
  const std::string subject = CulpritSubject(s, r);
  int steps = 0;
  for (const pb::Bisect& b : s.bisects)
    if (b.regression_id() == r.id()) steps = b.steps_size();
  const std::string found = !r.culprit_id().empty()
                                ? absl::StrCat("bisected in ", steps, " steps")
                                : "not bisected: the first bad commit of the range is named";
  std::string out = absl::StrCat(
      "Hello,\n\niommu-farm measured a ", proto::RelativeChangeText(r.magnitude()), " ",
      r.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT ? "improvement" : "regression", " of ",
      r.workload(), ".", r.metric(), " (", ModeText(r), ") on ", r.platform(), " at:\n\n",
      "commit:     ", culprit, subject.empty() ? "" : absl::StrCat(" (\"", subject, "\")"), "\n",
      AuthorLine(s, r), "range:      ", r.last_good(), "..", r.first_bad(),
      " (last good..first bad), ", found, "\n", "catalog:    ", r.catalog(), "\n",
      "testcase:   ", r.workload(), "\n");
  if (!r.params().empty()) absl::StrAppend(&out, "parameters: ", ParamsText(r.params()), "\n");
  absl::StrAppend(&out, "platform:   ", r.platform(), " (executor ",
                  proto::ExecutorName(s.matrix.executor()), ")\n", "matrix:     ", s.matrix.id(),
                  " \"", s.matrix.name(), "\"\n");
  if (!r.confirmed_by().empty()) {
    absl::StrAppend(&out, "confirmed:  by ", r.confirmed_by(),
                    r.confirm_note().empty() ? "" : absl::StrCat(": ", r.confirm_note()), "\n");
  }
  return out;
}

// Last good against first bad of the matrix, per mode: the workload's
// primary metrics and the regression's own.
std::string MeasurementTable(const ReportSources& s, const pb::Regression& r) {
  std::vector<CompareRow> rows =
      CompareSides(AtCommit(s.results, r.last_good()), AtCommit(s.results, r.first_bad()));
  const std::string params = ParamsText(r.params());
  std::erase_if(rows, [&](const CompareRow& c) {
    const std::string metric = c.metric.substr(0, c.metric.find('/'));
    return c.platform != r.platform() || c.workload != r.workload() || c.params != params ||
           !(c.primary || c.metric == r.metric() || metric == r.metric());
  });
  if (rows.empty()) {
    return absl::StrCat("The matrix holds no runs of ", r.last_good(), " and ", r.first_bad(),
                        " of this cell to tabulate.\n");
  }
  std::vector<std::vector<std::string>> cells;
  for (const CompareRow& c : rows) {
    cells.push_back({c.mode, c.metric, c.unit, absl::StrCat(c.n_a, "/", c.n_b),
                     FormatNumber(c.mean_a), FormatNumber(c.mean_b),
                     proto::RelativeChangeText(c.change), ChangeIntervalText(c.ci),
                     ShareOfOffText(c.of_off_b), VerdictText(c)});
  }
  return absl::StrCat(r.last_good(), " (last good) against ", r.first_bad(),
                      " (first bad), per mode:\n\n",
                      RenderTable({"mode", "metric", "unit", "runs", r.last_good(), r.first_bad(),
                                   "change", "95% interval", "of off", "verdict"},
                                  cells));
}

std::string BisectLog(const ReportSources& s, const pb::Regression& r) {
  for (const pb::Bisect& b : s.bisects) {
    if (b.regression_id() == r.id()) return RenderTableText(BisectStepsTable(s, b));
  }
  return "";
}

std::string Indented(const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::StrAppend(&out, line.empty() ? "" : "  ", line, "\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReproduceSpecYaml(const ReportSources& s, const pb::Regression& r) {
  spec::SpecLimits unbounded;
  unbounded.max_spec_bytes = std::numeric_limits<size_t>::max();
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(s.matrix.spec_yaml(), unbounded);
  if (!spec.ok()) return spec.status();
  pb::Workload workload;
  workload.set_name(r.workload());
  *workload.mutable_params() = r.params();
  spec->set_name(absl::StrCat("reproduce regression ", r.id()));
  spec->clear_platform();
  spec->add_platform(r.platform());
  spec->clear_commit_range();
  spec->mutable_commit_list()->clear_ids();
  spec->mutable_commit_list()->add_ids(r.last_good());
  spec->mutable_commit_list()->add_ids(Culprit(r));
  spec->clear_modes();
  if (r.overhead_series()) spec->add_modes(pb::IOMMU_MODE_OFF);
  spec->add_modes(r.mode());
  spec->clear_workloads();
  *spec->add_workloads() = workload;
  spec->clear_analysis();
  return spec::MatrixSpecToYaml(*spec);
}

absl::StatusOr<std::string> FormatRegressionMail(const ReportSources& s, const MailOptions& o) {
  const pb::Regression* r = FocusRegression(s);
  if (r == nullptr) return absl::InvalidArgumentError("a mail reports one regression");
  std::string out =
      absl::StrCat(Headers(s, *r, o), Introduction(s, *r), "\n", MeasurementTable(s, *r), "\n");
  if (const std::string log = BisectLog(s, *r); !log.empty()) absl::StrAppend(&out, log, "\n");
  if (absl::StatusOr<std::string> yaml = ReproduceSpecYaml(s, *r); yaml.ok()) {
    absl::StrAppend(&out, "To reproduce (farmctl gate exits 1 while the regression holds):\n\n",
                    Indented(absl::StrCat("farmctl gate - --base ", r->last_good(), " --candidate ",
                                          Culprit(*r), " <<'EOF'\n", *yaml,
                                          absl::EndsWith(*yaml, "\n") ? "" : "\n", "EOF")),
                    "\n");
  }
  absl::StrAppend(&out,
                  "If you fix the issue in a separate patch/commit (i.e. not just a new version "
                  "of\nthe same patch/commit), kindly add following tags\n",
                  "| Reported-by: ", o.from, "\n");
  if (!o.report_url.empty()) {
    std::string base = o.report_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    absl::StrAppend(&out, "| Link: ", base, "/regressions/", r->id(), "\n");
  }
  absl::StrAppend(&out, "\n-- \niommu-farm ", s.farm_version, ", regression ", r->id(), "\n");
  return out;
}

}  // namespace farm::cli
