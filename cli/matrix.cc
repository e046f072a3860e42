#include "cli/matrix.h"

#include <filesystem>
#include <limits>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/base/file.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_yaml.h"

namespace farm::cli {
namespace {

// The checks of a spec that need no scheduler (lib/spec), run before the
// submit so every problem shows at once without a round trip. The size cap
// is the scheduler's (--max-spec-bytes); catalogs and counts are checked there.
absl::Status CheckSpecLocally(const std::string& yaml) {
  spec::SpecLimits limits;
  limits.max_spec_bytes = std::numeric_limits<size_t>::max();
  return spec::ParseMatrixSpec(yaml, limits).status();
}

int FollowMatrix(Commands& commands, int64_t matrix_id) {
  // The final line reports the whole wait. The server's rate covers only its
  // last watch stream (0 when the matrix was done before it began), so the
  // final rate is measured here; the matrix was just submitted, so every
  // finished job finished during the wait.
  const absl::Time started = absl::Now();
  auto final_progress = commands.WaitForMatrix(matrix_id, [&](const pb::MatrixProgress& p) {
    if (!p.done()) {
      commands.PrintProgress(p);
      return;
    }
    const pb::MatrixCounts& c = p.counts();
    pb::MatrixProgress last = p;
    last.set_jobs_per_second(JobsPerSecond(c.succeeded() + c.failed() + c.cancelled(),
                                           absl::ToDoubleSeconds(absl::Now() - started)));
    commands.PrintProgress(last);
  });
  if (!final_progress.ok()) {
    return commands.Fail(absl::StrCat("WatchMatrix ", matrix_id), final_progress.status());
  }
  const auto& counts = final_progress->counts();
  if (final_progress->state() == pb::MATRIX_STATE_COMPLETED && counts.failed() == 0) {
    return 0;
  }
  commands.err() << "farmctl: matrix " << matrix_id << " ended "
                 << MatrixStateName(final_progress->state()) << ": " << counts.failed()
                 << " failed, " << counts.cancelled() << " cancelled of " << counts.total() << "\n"
                 << FetchFailures(commands, matrix_id, "  ");
  return 1;
}

}  // namespace

void AddMatrixCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string submit_file;
    bool submit_wait = false, submit_dry = false;
    std::optional<int64_t> status_matrix;
    std::string status_format;
    int64_t watch_matrix = 0;
    int64_t cancel_matrix = 0;
    std::string cancel_reason = "cancelled by farmctl";
  };
  auto a = std::make_shared<Args>();
  auto* submit = app.add_subcommand("submit", "submit a matrix spec (YAML)");
  submit->add_option("FILE", a->submit_file, "matrix spec file ('-': standard input)")->required();
  submit->add_flag("--wait", a->submit_wait,
                   "follow the matrix with a progress line on stderr until it "
                   "ends; exit 1 if any job failed or was cancelled");
  submit->add_flag("--dry-run", a->submit_dry, "validate and expand on the server, create nothing");
  out->push_back({submit, [a](Commands& c) {
                    return RunSubmit(c, a->submit_file, a->submit_wait, a->submit_dry);
                  }});

  auto* status = app.add_subcommand(
      "status",
      "show one matrix (with the progress of the kernel builds running for it), or list "
      "recent matrices");
  status->add_option("MATRIX", a->status_matrix, "matrix id");
  AddOutputOption(status, &a->status_format,
                  "table, csv or json (with MATRIX: csv and json give it as a one-row list)");
  out->push_back({status, [a](Commands& c) {
                    return RunStatus(c, a->status_matrix, ToFormat(a->status_format));
                  }});

  auto* watch = app.add_subcommand(
      "watch",
      "print a progress line per update until the matrix ends; while a kernel build runs for "
      "it, the line ends with the build's phase, objects compiled (of ~the last cold build's), "
      "elapsed and time left");
  watch->add_option("MATRIX", a->watch_matrix, "matrix id")->required();
  out->push_back({watch, [a](Commands& c) { return RunWatch(c, a->watch_matrix); }});

  auto* cancel = app.add_subcommand("cancel", "cancel a matrix's unfinished jobs");
  cancel->add_option("MATRIX", a->cancel_matrix, "matrix id")->required();
  cancel->add_option("--reason", a->cancel_reason, "reason recorded with the jobs");
  out->push_back(
      {cancel, [a](Commands& c) { return RunCancel(c, a->cancel_matrix, a->cancel_reason); }});
}

namespace {

bool NamesAFile(const std::string& base) {
  return base.find('/') != std::string::npos || absl::EndsWith(base, ".config");
}

absl::Status ReadConfigFile(const std::filesystem::path& dir, const std::string& field,
                            const std::string& name, std::string* text) {
  const std::filesystem::path p =
      std::filesystem::path(name).is_absolute() ? std::filesystem::path(name) : dir / name;
  absl::StatusOr<std::string> read = base::ReadFile(p.string());
  if (!read.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", read.status().message()));
  }
  if (read->empty())
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", p.string(), " is empty"));
  *text = *std::move(read);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ReadKernelConfigFiles(const std::string& yaml,
                                                  const std::string& spec_path) {
  spec::SpecLimits limits;
  limits.max_spec_bytes = std::numeric_limits<size_t>::max();
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(yaml, limits);
  // A spec that does not map is left to the checks that say why.
  if (!spec.ok() || !spec->has_kernel_config()) return yaml;
  pb::KernelConfig* k = spec->mutable_kernel_config();
  const std::filesystem::path dir = spec_path == "-"
                                        ? std::filesystem::path(".")
                                        : std::filesystem::path(spec_path).parent_path();
  bool read = false;
  if (k->base_text().empty() && NamesAFile(k->base())) {
    if (absl::Status s =
            ReadConfigFile(dir, "kernel_config.base", k->base(), k->mutable_base_text());
        !s.ok()) {
      return s;
    }
    read = true;
  }
  for (int i = 0; i < k->fragments_size(); ++i) {
    pb::ConfigFragment* f = k->mutable_fragments(i);
    if (!f->text().empty()) continue;
    if (absl::Status s = ReadConfigFile(dir, absl::StrCat("kernel_config.fragments[", i, "]"),
                                        f->name(), f->mutable_text());
        !s.ok()) {
      return s;
    }
    read = true;
  }
  return read ? spec::MatrixSpecToYaml(*spec) : yaml;
}

int RunSubmit(Commands& commands, const std::string& path, bool wait, bool dry_run) {
  absl::StatusOr<std::string> yaml = ReadInputFile(path);
  if (!yaml.ok()) return commands.Fail("submit", yaml.status());
  yaml = ReadKernelConfigFiles(*yaml, path);
  if (!yaml.ok()) return commands.Fail(absl::StrCat("submit ", path), yaml.status());
  if (absl::Status local = CheckSpecLocally(*yaml); !local.ok()) {
    return commands.Fail(absl::StrCat("submit ", path), local);
  }
  absl::StatusOr<pb::SubmitMatrixResponse> response = commands.SubmitSpec(*yaml, dry_run);
  if (!response.ok()) return commands.Fail(absl::StrCat("submit ", path), response.status());
  for (const auto& warning : response->warnings()) {
    commands.err() << "farmctl: warning: " << warning << "\n";
  }
  const pb::Matrix& m = response->matrix();
  if (dry_run) {
    // A dry run creates nothing; the expansion's size is in counts.total.
    commands.out() << "dry run: " << path << " is valid: matrix '" << m.name() << "' would create "
                   << m.counts().total() << " jobs\n";
    return 0;
  }
  commands.out() << "submitted matrix " << m.id() << " (" << m.name()
                 << "): " << response->jobs_created() << " jobs\n";
  if (response->build_job_ids_size() > 0) {
    commands.out() << "waiting for " << response->build_job_ids_size() << " kernel builds";
    if (response->build_matrix_id() != 0)
      commands.out() << " (build matrix " << response->build_matrix_id() << ")";
    commands.out() << "\n";
  }
  commands.out() << std::flush;
  if (!wait) return 0;
  return FollowMatrix(commands, m.id());
}

int RunStatus(Commands& commands, std::optional<int64_t> matrix_id, OutputFormat format) {
  if (matrix_id.has_value()) {
    pb::GetMatrixRequest request;
    request.set_matrix_id(*matrix_id);
    pb::Matrix matrix;
    auto ctx = commands.UnaryContext();
    grpc::Status status = commands.jobs().GetMatrix(ctx.get(), request, &matrix);
    if (!status.ok()) {
      return commands.Fail(absl::StrCat("GetMatrix ", *matrix_id), client::ToAbsl(status));
    }
    // csv and json render the one matrix as a one-row list, so scripts read
    // `status` and `status MATRIX` alike.
    commands.out() << (format == OutputFormat::kTable ? FormatMatrixDetail(matrix)
                                                      : FormatMatrixList({matrix}, format));
    return 0;
  }
  pb::ListMatricesRequest request;
  request.set_limit(50);
  pb::ListMatricesResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().ListMatrices(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("ListMatrices", client::ToAbsl(status));
  commands.out() << FormatMatrixList({response.matrices().begin(), response.matrices().end()},
                                     format);
  return 0;
}

int RunWatch(Commands& commands, int64_t matrix_id) {
  // watch prints to stdout: following the matrix is its whole output.
  auto final_progress = commands.WaitForMatrix(matrix_id, [&commands](const pb::MatrixProgress& p) {
    commands.out() << FormatProgressLine(p) << "\n" << std::flush;
  });
  if (!final_progress.ok()) {
    return commands.Fail(absl::StrCat("WatchMatrix ", matrix_id), final_progress.status());
  }
  return final_progress->state() == pb::MATRIX_STATE_COMPLETED ? 0 : 1;
}

int RunCancel(Commands& commands, int64_t matrix_id, const std::string& reason) {
  pb::CancelMatrixRequest request;
  request.set_matrix_id(matrix_id);
  request.set_reason(reason);
  pb::CancelMatrixResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().CancelMatrix(ctx.get(), request, &response);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("CancelMatrix ", matrix_id), client::ToAbsl(status));
  }
  commands.out() << "matrix " << matrix_id << ": " << response.jobs_cancelled()
                 << " jobs cancelled, state " << MatrixStateName(response.matrix().state()) << "\n";
  return 0;
}

std::string FormatMatrixList(const std::vector<pb::Matrix>& matrices, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListMatricesResponse message;
  for (const auto& m : matrices) {
    const auto& c = m.counts();
    rows.push_back({absl::StrCat(m.id()), m.name(), MatrixStateName(m.state()),
                    absl::StrCat(c.total()), absl::StrCat(c.succeeded()), absl::StrCat(c.failed()),
                    absl::StrCat(c.queued() + c.leased()), m.platform(),
                    FormatTimestamp(m.created_at()),
                    m.submitted_by().empty() ? "-" : m.submitted_by()});
    *message.add_matrices() = m;
  }
  return RenderList({"id", "name", "state", "jobs", "succeeded", "failed", "pending", "platform",
                     "created", "submitter"},
                    rows, message, format, "no matrices\n");
}

std::string FormatMatrixDetail(const pb::Matrix& m) {
  const auto& c = m.counts();
  return absl::StrCat(
      "matrix ", m.id(), " ", Printable(m.name()), "\n",
      "  state:     ", MatrixStateName(m.state()), "\n", "  catalog:   ", Printable(m.catalog()),
      "\n", "  platform:  ", Printable(m.platform()), "\n", "  jobs:      ", c.total(), " total, ",
      c.queued(), " queued, ", c.leased(), " leased, ", c.succeeded(), " succeeded, ", c.failed(),
      " failed, ", c.cancelled(), " cancelled\n",
      c.waiting_for_build() > 0
          ? absl::StrCat("  waiting:   ", c.waiting_for_build(),
                         " queued jobs waiting for kernel build (see the build matrix)\n")
          : "",
      "  created:   ", FormatTimestamp(m.created_at()), "\n",
      "  finished:  ", FormatTimestamp(m.finished_at()), "\n",
      m.analysis().empty() ? "" : absl::StrCat("  analysis:  ", Printable(m.analysis()), "\n"),
      m.submitted_by().empty()
          ? ""
          : absl::StrCat("  submitted by: ", Printable(m.submitted_by()), "\n"),
      m.failures().empty() ? "" : absl::StrCat("  why:\n", FormatFailures(m, "    ")),
      FormatBuilding(m, "  "));
}

std::string FormatBuilding(const pb::Matrix& m, const std::string& indent) {
  std::string out;
  for (const pb::JobProgress& p : m.building()) {
    absl::StrAppend(&out, indent, FormatBuildProgress(p), " (job ", p.job_id(), ")\n");
  }
  return out;
}

std::string FormatFailures(const pb::Matrix& m, const std::string& indent) {
  std::string out;
  for (const pb::JobFailure& f : m.failures()) {
    // A reason of several lines (a lab host's console tail) goes on under
    // its first, indented.
    const std::string reason = absl::StrReplaceAll(PrintableLines(f.reason()),
                                                   {{"\n", absl::StrCat("\n", indent, "    ")}});
    absl::StrAppend(&out, indent, f.jobs(),
                    f.state() == pb::JOB_STATE_CANCELLED ? " cancelled" : " failed", " (first job ",
                    f.first_job_id(), "): ", reason, "\n");
  }
  return out;
}

std::string FetchFailures(Commands& commands, int64_t matrix_id, const std::string& indent) {
  pb::GetMatrixRequest request;
  request.set_matrix_id(matrix_id);
  pb::Matrix matrix;
  auto ctx = commands.UnaryContext();
  if (!commands.jobs().GetMatrix(ctx.get(), request, &matrix).ok()) return "";
  return FormatFailures(matrix, indent);
}

}  // namespace farm::cli
