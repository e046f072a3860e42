#include "cli/report_command.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/base/file.h"

namespace farm::cli {

namespace {

// `status` with what failed in front, its code kept.
absl::Status Context(const std::string& what, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

void AddReportCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    std::optional<int64_t> matrix, regression, mail;
    std::string file, serve;
    ReportServer::Tls tls;
    MailOptions mail_options;
  };
  auto a = std::make_shared<Args>();
  auto* report = app.add_subcommand(
      "report",
      "write one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched): a "
      "plain-text summary, per workload and metric the series over commits per mode with 95% "
      "confidence bands and the overhead ratio mode/off, change points and culprits marked "
      "with their subjects, the bisect steps, the results table, host facts and versions");
  auto* matrix_opt = report->add_option("MATRIX", a->matrix, "matrix id: report the whole matrix");
  report
      ->add_option("--regression", a->regression,
                   "regression id: report that regression (its matrix's series of its workload "
                   "and metric, its bisect) instead of a matrix")
      ->excludes(matrix_opt);
  auto* mail =
      report
          ->add_option("--mail", a->mail,
                       "regression id: write that regression as a plain-text mail instead, in "
                       "the 0-day bot's form (culprit and change in the subject, before/after "
                       "per mode with 95% intervals, bisect log, reproduce command, "
                       "Reported-by and Link trailers), ready for git send-email")
          ->excludes(matrix_opt);
  report->add_option("--to", a->mail_options.to, "--mail: a To address (repeatable)")->needs(mail);
  report->add_option("--cc", a->mail_options.cc, "--mail: a Cc address (repeatable)")->needs(mail);
  report->add_option("--from", a->mail_options.from, "--mail: the From and Reported-by address")
      ->capture_default_str()
      ->needs(mail);
  report
      ->add_option("--report-url", a->mail_options.report_url,
                   "--mail: the report server's base URL (farm-analyzer --report-url), for "
                   "the Link trailer")
      ->needs(mail);
  auto* output = report->add_option(
      "--output,-o", a->file, "file to write: HTML, or with --mail the message ('-': stdout)");
  auto* serve = report
                    ->add_option("--serve", a->serve,
                                 "HOST:PORT: serve every report over HTTP instead, rendered per "
                                 "request: /regressions/ID and /matrices/ID (the links of "
                                 "farm-analyzer --report-url); readers see what this farmctl's "
                                 "token may see, so listen on loopback or give a certificate")
                    ->excludes(matrix_opt)
                    ->excludes(output);
  report->add_option("--serve-tls-cert", a->tls.cert_file, "PEM certificate: serve HTTPS")
      ->needs(serve);
  report->add_option("--serve-tls-key", a->tls.key_file, "PEM private key of --serve-tls-cert")
      ->needs(serve);
  report->callback([a] {
    if (!a->serve.empty()) {
      if (a->regression) throw CLI::ValidationError("report", "--serve serves every regression");
      return;
    }
    if (a->mail) {
      if (a->regression) throw CLI::ValidationError("report", "--mail names the regression");
      if (a->file.empty()) a->file = "-";
      return;
    }
    if (!a->matrix && !a->regression) {
      throw CLI::ValidationError("report",
                                 "give MATRIX, --regression ID or --mail ID (or --serve)");
    }
    if (a->file.empty()) throw CLI::ValidationError("report", "--output is required");
  });
  out->push_back({report, [a](Commands& c) {
                    if (!a->serve.empty()) return RunReportServe(c, a->serve, a->tls);
                    if (a->mail) return RunReportMail(c, *a->mail, a->mail_options, a->file);
                    return RunReport(c, a->matrix.value_or(0), a->regression, a->file);
                  }});
}

absl::StatusOr<ReportSources> GatherReport(Commands& commands, int64_t matrix_id,
                                           std::optional<int64_t> regression_id) {
  ReportSources sources;
  sources.farm_version = FARM_VERSION;
  sources.generated_at =
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone());
  if (regression_id.has_value()) {
    pb::GetRegressionRequest request;
    request.set_regression_id(*regression_id);
    pb::Regression reg;
    auto ctx = commands.UnaryContext();
    grpc::Status status = commands.analysis().GetRegression(ctx.get(), request, &reg);
    if (!status.ok()) {
      return Context(absl::StrCat("GetRegression ", *regression_id), client::ToAbsl(status));
    }
    matrix_id = reg.matrix_id();
    sources.focus_regression = reg.id();
    sources.regressions.push_back(std::move(reg));
  } else {
    pb::ListRegressionsRequest request;
    request.set_matrix_id(matrix_id);
    request.set_include_closed(true);
    request.set_include_improvements(true);
    absl::StatusOr<std::vector<pb::Regression>> listed = commands.ListAllRegressions(request);
    if (!listed.ok()) return Context("ListRegressions", listed.status());
    sources.regressions = *std::move(listed);
  }
  {
    pb::GetMatrixRequest request;
    request.set_matrix_id(matrix_id);
    auto ctx = commands.UnaryContext();
    grpc::Status status = commands.jobs().GetMatrix(ctx.get(), request, &sources.matrix);
    if (!status.ok()) return Context(absl::StrCat("GetMatrix ", matrix_id), client::ToAbsl(status));
  }
  absl::StatusOr<std::vector<pb::Result>> results = commands.FetchResults(matrix_id, false);
  if (!results.ok()) return Context(absl::StrCat("GetResults ", matrix_id), results.status());
  sources.results = std::move(*results);
  {
    pb::GetCatalogRequest request;
    request.set_name(sources.matrix.catalog());
    pb::Catalog catalog;
    auto ctx = commands.UnaryContext();
    grpc::Status status = commands.jobs().GetCatalog(ctx.get(), request, &catalog);
    if (!status.ok()) {
      return Context(absl::StrCat("GetCatalog ", request.name()), client::ToAbsl(status));
    }
    sources.commits.assign(catalog.commits().begin(), catalog.commits().end());
  }
  for (const pb::Regression& reg : sources.regressions) {
    if (reg.bisect_id() == 0) continue;
    pb::GetBisectRequest request;
    request.set_bisect_id(reg.bisect_id());
    pb::Bisect bisect;
    auto ctx = commands.UnaryContext();
    grpc::Status status = commands.analysis().GetBisect(ctx.get(), request, &bisect);
    if (!status.ok()) {
      return Context(absl::StrCat("GetBisect ", reg.bisect_id()), client::ToAbsl(status));
    }
    sources.bisects.push_back(std::move(bisect));
  }
  return sources;
}

absl::StatusOr<std::string> ReportHtml(Commands& commands, int64_t matrix_id,
                                       std::optional<int64_t> regression_id) {
  absl::StatusOr<ReportSources> sources = GatherReport(commands, matrix_id, regression_id);
  if (!sources.ok()) return sources.status();
  return RenderReportHtml(BuildReport(*sources));
}

int RunReport(Commands& commands, int64_t matrix_id, std::optional<int64_t> regression_id,
              const std::string& output_path) {
  absl::StatusOr<ReportSources> sources = GatherReport(commands, matrix_id, regression_id);
  if (!sources.ok()) return commands.Fail("report", sources.status());
  const ReportData report = BuildReport(*sources);
  const std::string html = RenderReportHtml(report);
  if (output_path == "-") {
    commands.out() << html;
    return 0;
  }
  if (!base::WriteFile(output_path, html).ok()) {
    return commands.Fail(
        "report", absl::PermissionDeniedError(absl::StrCat("cannot write '", output_path, "'")));
  }
  commands.out() << "wrote " << output_path << ": " << report.plots.size() << " plots, "
                 << sources->regressions.size() << " regressions, " << sources->bisects.size()
                 << " bisects, " << sources->results.size() << " results\n";
  return 0;
}

int RunReportMail(Commands& commands, int64_t regression_id, MailOptions options,
                  const std::string& output_path) {
  absl::StatusOr<ReportSources> sources = GatherReport(commands, 0, regression_id);
  if (!sources.ok()) return commands.Fail("report --mail", sources.status());
  options.date = absl::FormatTime("%a, %d %b %Y %H:%M:%S +0000", absl::Now(), absl::UTCTimeZone());
  absl::StatusOr<std::string> mail = FormatRegressionMail(*sources, options);
  if (!mail.ok()) return commands.Fail("report --mail", mail.status());
  if (output_path == "-") {
    commands.out() << *mail;
    return 0;
  }
  if (absl::Status written = base::WriteFile(output_path, *mail); !written.ok()) {
    return commands.Fail(absl::StrCat("report --mail: ", output_path), written);
  }
  commands.out() << "wrote " << output_path << " (git send-email " << output_path << ")\n";
  return 0;
}

int RunReportServe(Commands& commands, const std::string& listen, const ReportServer::Tls& tls) {
  absl::StatusOr<std::unique_ptr<ReportServer>> server = ReportServer::Start(
      listen,
      [&commands](int64_t matrix_id, std::optional<int64_t> regression_id) {
        return ReportHtml(commands, matrix_id, regression_id);
      },
      tls);
  if (!server.ok()) return commands.Fail("report --serve", server.status());
  commands.out() << "serving reports on " << (tls.cert_file.empty() ? "http" : "https") << "://"
                 << listen.substr(0, listen.rfind(':')) << ":" << (*server)->port()
                 << " (/regressions/ID, /matrices/ID)" << std::endl;
  (*server)->Wait();
  return 0;
}

}  // namespace farm::cli
