// farmctl: the iommu-farm command line client. Parses flags and hands each
// subcommand to farm::cli::Commands.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "lib/client/client.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/service/flags.h"
#include "proto/names.h"

namespace {

// --output,-o on a list command: one of farm::cli::OutputFormatNames(); any
// other value is a usage error (exit 2) that lists them.
CLI::Option* AddOutputOption(CLI::App* command, std::string* format,
                             const std::string& description = "table, csv or json") {
  *format = "table";
  return command->add_option("--output,-o", *format, description)
      ->check(CLI::IsMember(farm::cli::OutputFormatNames()));
}

farm::cli::OutputFormat ToFormat(const std::string& s) {
  // Parsing already checked the value against OutputFormatNames().
  return farm::cli::ParseOutputFormat(s).value_or(farm::cli::OutputFormat::kTable);
}

// The options of `farmctl kernels build` (lib/kbuild/kernel_builder.h).
void AddKernelsBuildOptions(CLI::App* build, farm::kbuild::BuildRequest* request,
                            std::string* log_file, double* cache_gib) {
  std::vector<std::string> machines;
  for (const farm::kbuild::MachineModel& m : farm::kbuild::MachineModels()) {
    machines.push_back(m.name);
  }
  const std::string models = absl::StrJoin(machines, ", ");
  // The farm's build jobs' config: its build directory is the one they reuse.
  machines.push_back(farm::kbuild::kAllMachines);
  build->add_option("--tree", request->tree, "the kernel git tree: a local repository or a URL")
      ->required();
  build->add_option("--rev", request->rev, "any git revision of the tree (branch, tag, commit)")
      ->required();
  build
      ->add_option("--machine", request->machine,
                   "vm machine model whose shipped fragment is merged: " + models +
                       ", or all (every model of the arch, as the farm's build jobs do)")
      ->check(CLI::IsMember(machines));
  build
      ->add_option("--arch", request->arch,
                   "x86_64 or aarch64 (cross-compiled with aarch64-linux-gnu-gcc); default: "
                   "the machine model's, else x86_64")
      ->check(CLI::IsMember({"x86_64", "aarch64"}));
  build->add_option("--base", request->base,
                    "base config: a make target (tinyconfig, defconfig, ...) or a config file "
                    "(default tinyconfig)");
  build->add_option("--fragment", request->fragments,
                    "a config fragment merged after the machine model's (repeatable; a later "
                    "one wins)");
  build
      ->add_option("--store", request->store_dir,
                   "kernel store the build is written to, as <commit>-<arch>")
      ->required();
  build->add_option("--cache", request->cache_root,
                    "cache root: tree mirrors, build directories, ccache (default "
                    "/var/cache/iommu-farm/kbuild when writable, else "
                    "~/.cache/iommu-farm/kbuild)");
  build
      ->add_option("--cache-max-gib", *cache_gib,
                   "bound on the build directories; the least recently used go first "
                   "(default 20)")
      ->check(CLI::PositiveNumber);
  build->add_option("--jobs,-j", request->jobs, "make -j (default: the number of CPUs)")
      ->check(CLI::NonNegativeNumber);
  build->add_option("--log", *log_file, "write the build's whole output to this file");
}

void FinishKernelsBuildRequest(double cache_gib, farm::kbuild::BuildRequest* request) {
  request->cache_max_bytes = static_cast<std::uint64_t>(cache_gib * (1u << 30));
  if (!request->arch.empty()) return;
  request->arch = farm::kstore::kArchX86;
  for (const farm::kbuild::MachineModel& m : farm::kbuild::MachineModels()) {
    if (request->machine == m.name) request->arch = m.arch;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farmctl: submit and follow iommu-farm matrices, read results, agents, "
      "catalogs, kernel stores and regressions, write HTML reports.\nExit status: 0 ok, 1 server "
      "or I/O error "
      "(or a --wait matrix with failed jobs), 2 usage error."};
  app.require_subcommand(1);
  farm::client::ClientOptions options;
  options.server = farm::client::kDefaultServer;
  app.add_option("--server", options.server,
                 "scheduler address HOST:PORT, or several IP:PORT separated by commas "
                 "(schedulers sharing one database; calls fail over between them)")
      ->capture_default_str()
      ->envname("FARM_SERVER");
  farm::client::SecurityFlags security;
  farm::client::AddSecurityOptions(app, &security);

  // submit
  std::string submit_file;
  bool submit_wait = false, submit_dry = false;
  auto* submit = app.add_subcommand("submit", "submit a matrix spec (YAML)");
  submit->add_option("FILE", submit_file, "matrix spec file")->required();
  submit->add_flag("--wait", submit_wait,
                   "follow the matrix with a progress line on stderr until it "
                   "ends; exit 1 if any job failed or was cancelled");
  submit->add_flag("--dry-run", submit_dry, "validate and expand on the server, create nothing");

  // status / watch / cancel
  std::optional<int64_t> status_matrix;
  auto* status = app.add_subcommand("status", "show one matrix, or list recent matrices");
  status->add_option("MATRIX", status_matrix, "matrix id");
  std::string status_format;
  AddOutputOption(status, &status_format,
                  "table, csv or json (with MATRIX: csv and json give it as a one-row list)");
  int64_t watch_matrix = 0;
  auto* watch =
      app.add_subcommand("watch", "print a progress line per update until the matrix ends");
  watch->add_option("MATRIX", watch_matrix, "matrix id")->required();
  int64_t cancel_matrix = 0;
  std::string cancel_reason = "cancelled by farmctl";
  auto* cancel = app.add_subcommand("cancel", "cancel a matrix's unfinished jobs");
  cancel->add_option("MATRIX", cancel_matrix, "matrix id")->required();
  cancel->add_option("--reason", cancel_reason, "reason recorded with the jobs");

  // results
  int64_t results_matrix = 0;
  std::string results_format;
  bool results_raw = false;
  auto* results =
      app.add_subcommand("results",
                         "a matrix's results: table = per commit x mode x workload [x platform] "
                         "n, mean and 95% confidence interval of the main metric; csv/json = "
                         "every sample, written as the results arrive");
  results->add_option("MATRIX", results_matrix, "matrix id")->required();
  AddOutputOption(results, &results_format);
  results->add_flag("--raw", results_raw,
                    "with --output json: include each run's raw tool output (fetched one result "
                    "at a time)");

  // raw-output
  int64_t raw_job = 0;
  int raw_attempt = 0;
  auto* raw_output = app.add_subcommand(
      "raw-output", "write one result's raw tool output to stdout, verbatim, as it streams in");
  raw_output->add_option("JOB", raw_job, "job id (the job_id of `results --output json`)")
      ->required()
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  raw_output
      ->add_option("--attempt", raw_attempt, "the result of this attempt (default: the latest)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));

  // token create / list / revoke
  auto* token = app.add_subcommand("token", "API tokens (admin): create, list, revoke");
  token->require_subcommand(1);
  std::string token_name, token_role;
  auto* token_create = token->add_subcommand(
      "create", "create a token; prints the secret once on stdout (only its hash is stored)");
  token_create->add_option("--name", token_name, "principal name (an agent token: the agent name)")
      ->required();
  token_create->add_option("--role", token_role, "viewer, submitter, agent or admin")
      ->required()
      ->check(CLI::IsMember({"viewer", "submitter", "agent", "admin"}));
  auto* token_list = token->add_subcommand("list", "list tokens (never their secrets)");
  std::string revoke_name;
  auto* token_revoke = token->add_subcommand("revoke", "revoke the live token NAME");
  token_revoke->add_option("NAME", revoke_name, "token name")->required();

  auto* agents = app.add_subcommand("agents", "list registered agents");
  std::string agents_format;
  AddOutputOption(agents, &agents_format);

  // catalog
  auto* catalog = app.add_subcommand("catalog", "commit catalogs");
  catalog->require_subcommand(1);
  auto* catalog_list = catalog->add_subcommand("list", "list catalogs with their commit counts");
  std::string catalog_list_format;
  AddOutputOption(catalog_list, &catalog_list_format,
                  "table, csv or json (json carries each catalog's commits)");
  std::string show_name;
  bool show_resolve = false;
  auto* catalog_show = catalog->add_subcommand("show", "show a catalog's commits");
  catalog_show->add_option("NAME", show_name, "catalog name")->required();
  catalog_show->add_flag("--resolve", show_resolve,
                         "also fetch each commit's accumulated model state");
  std::string load_file;
  bool load_replace = false;
  auto* catalog_load = catalog->add_subcommand("load", "load a catalog YAML file");
  catalog_load->add_option("FILE", load_file, "catalog file")->required();
  catalog_load->add_flag("--replace", load_replace, "replace an existing catalog of the same name");
  std::string git_repo, git_range, git_catalog = "linux-iommu";
  auto* catalog_git = catalog->add_subcommand(
      "import-git",
      "add commit A and the first-parent commits of A..B (oldest first) to a catalog; "
      "commits without settings inherit the state of the one before");
  catalog_git->add_option("--repo", git_repo, "path of the git work tree")->required();
  catalog_git->add_option("--range", git_range, "commit range A..B")->required();
  catalog_git->add_option("--catalog", git_catalog,
                          "catalog to extend or create (default linux-iommu)");

  // kernel stores
  std::string kernels_store;
  std::string kernels_deb;
  std::string kernels_commit;
  std::string kernels_catalog = "linux-iommu";
  bool kernels_replace = false;
  auto* kernels =
      app.add_subcommand("kernels", "kernel stores: kernel builds per commit id (docs/kernels.md)");
  kernels->require_subcommand(1);
  auto* kernels_import = kernels->add_subcommand(
      "import",
      "add a Debian linux-image .deb to a local kernel store as the build of --commit "
      "(image, config and modules extracted with dpkg-deb)");
  kernels_import->add_option("--store", kernels_store, "kernel store directory")->required();
  kernels_import->add_option("deb", kernels_deb, "the linux-image-*.deb")->required();
  kernels_import->add_option("--commit", kernels_commit, "commit id the kernel is built from")
      ->required();
  kernels_import->add_flag("--replace", kernels_replace,
                           "replace the commit's build for that architecture");
  auto* kernels_list = kernels->add_subcommand("list", "list a local kernel store's builds");
  kernels_list->add_option("--store", kernels_store, "kernel store directory")->required();
  auto* kernels_catalog_cmd = kernels->add_subcommand(
      "catalog",
      "add a kernel store's commits (with their kernel releases in the subject) to a catalog "
      "on the server; commits it already holds are kept");
  kernels_catalog_cmd->add_option("--store", kernels_store, "kernel store directory")->required();
  kernels_catalog_cmd->add_option("--catalog", kernels_catalog,
                                  "catalog to extend or create (default linux-iommu)");
  farm::kbuild::BuildRequest build_request;
  build_request.arch.clear();  // from --machine unless given
  std::string build_log;
  double build_cache_gib = 20;
  auto* kernels_build = kernels->add_subcommand(
      "build",
      "build one commit of a kernel git tree into a local kernel store, without a farm: make "
      "O= in a build directory per (tree, arch, config) reused from commit to commit, the "
      "config a base plus the machine model's shipped fragment plus --fragment files, then "
      "olddefconfig; refused when olddefconfig drops an option a fragment asked for "
      "(docs/kernels.md, \"Building kernels\")");
  AddKernelsBuildOptions(kernels_build, &build_request, &build_log, &build_cache_gib);

  // analysis
  bool regs_all = false;
  std::string regs_format;
  auto* regressions = app.add_subcommand("regressions", "list detected regressions");
  regressions->add_flag("--all", regs_all,
                        "include closed ones (fixed, false-positive, rejected, ignored) "
                        "and improvements");
  AddOutputOption(regressions, &regs_format,
                  "table, csv or json; every format carries the metric rank (primary: "
                  "the workload's throughput metric; secondary: latency, hit rate, CPU "
                  "time)");
  auto* regression = app.add_subcommand("regression", "one regression");
  regression->require_subcommand(1);
  int64_t reg_show_id = 0;
  auto* reg_show = regression->add_subcommand("show", "show a regression");
  reg_show->add_option("ID", reg_show_id, "regression id")->required();
  std::string reg_show_format;
  AddOutputOption(reg_show, &reg_show_format,
                  "table, csv or json; every format names each culprit with its share");
  int64_t reg_mark_id = 0;
  std::string reg_mark_state, reg_mark_note;
  auto* reg_mark = regression->add_subcommand(
      "mark",
      "triage a regression: acknowledged silences its alert in Alertmanager; ignored resolves "
      "it and the same change is not reported again; fixed resolves it and the analyzer "
      "checks that the catalog's latest commit is back to the old level; false-positive "
      "resolves it; reopen makes it confirmed again (alert firing, silence removed)");
  reg_mark->add_option("ID", reg_mark_id, "regression id")->required();
  // The states a user may set; the others are the analyzer's.
  const std::vector<std::string> markable = {
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FIXED),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FALSE_POSITIVE),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_ACKNOWLEDGED),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_IGNORED),
      farm::cli::Commands::kReopen};
  reg_mark->add_option("STATE", reg_mark_state, absl::StrJoin(markable, ", "))
      ->required()
      ->check(CLI::IsMember(markable));
  reg_mark->add_option("--note", reg_mark_note,
                       "note kept with the regression (replaces the analyzer's note; the "
                       "metric rank is its own field and is kept)");
  int64_t bisect_id = 0;
  bool bisect_by_id = false;
  std::string bisect_format = "table";
  auto* bisect = app.add_subcommand("bisect", "show the bisect of a regression");
  bisect->add_option("ID", bisect_id, "regression id (or bisect id with --bisect-id)")->required();
  bisect->add_flag("--bisect-id", bisect_by_id, "ID is a bisect id, not a regression id");
  bisect->add_option("--output,-o", bisect_format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));

  // report
  std::optional<int64_t> report_matrix, report_regression;
  std::string report_file;
  auto* report = app.add_subcommand(
      "report",
      "write one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched): a "
      "plain-text summary, per workload and metric the series over commits per mode with 95% "
      "confidence bands and the overhead ratio mode/off, change points and culprits marked "
      "with their subjects, the bisect steps, the results table, host facts and versions");
  auto* report_matrix_opt =
      report->add_option("MATRIX", report_matrix, "matrix id: report the whole matrix");
  report
      ->add_option("--regression", report_regression,
                   "regression id: report that regression (its matrix's series of its workload "
                   "and metric, its bisect) instead of a matrix")
      ->excludes(report_matrix_opt);
  report->add_option("--output,-o", report_file, "HTML file to write ('-': stdout)")->required();
  report->callback([&] {
    if (!report_matrix && !report_regression) {
      throw CLI::ValidationError("report", "give MATRIX or --regression ID");
    }
  });

  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;
  if (absl::Status st = farm::client::ApplySecurity(security, &options); !st.ok()) {
    std::cerr << "farmctl: " << st.message() << "\n";
    return 2;
  }

  farm::cli::Commands commands(options, std::cout, std::cerr);
  if (*submit) return commands.RunSubmit(submit_file, submit_wait, submit_dry);
  if (*status) return commands.RunStatus(status_matrix, ToFormat(status_format));
  if (*watch) return commands.RunWatch(watch_matrix);
  if (*cancel) return commands.RunCancel(cancel_matrix, cancel_reason);
  if (*results) return commands.RunResults(results_matrix, ToFormat(results_format), results_raw);
  if (*raw_output) return commands.RunRawOutput(raw_job, raw_attempt);
  if (*token_create) return commands.RunTokenCreate(token_name, token_role);
  if (*token_list) return commands.RunTokenList();
  if (*token_revoke) return commands.RunTokenRevoke(revoke_name);
  if (*agents) return commands.RunAgents(ToFormat(agents_format));
  if (*catalog_list) return commands.RunCatalogList(ToFormat(catalog_list_format));
  if (*catalog_show) return commands.RunCatalogShow(show_name, show_resolve);
  if (*catalog_load) return commands.RunCatalogLoad(load_file, load_replace);
  if (*catalog_git) return commands.RunCatalogImportGit(git_repo, git_range, git_catalog);
  if (*kernels_import) {
    return commands.RunKernelsImport(kernels_store, kernels_deb, kernels_commit, kernels_replace);
  }
  if (*kernels_list) return commands.RunKernelsList(kernels_store);
  if (*kernels_catalog_cmd) return commands.RunKernelsCatalog(kernels_store, kernels_catalog);
  if (*kernels_build) {
    FinishKernelsBuildRequest(build_cache_gib, &build_request);
    return commands.RunKernelsBuild(build_request, build_log);
  }
  if (*regressions) return commands.RunRegressions(regs_all, ToFormat(regs_format));
  if (*reg_show) return commands.RunRegressionShow(reg_show_id, ToFormat(reg_show_format));
  if (*reg_mark) return commands.RunRegressionMark(reg_mark_id, reg_mark_state, reg_mark_note);
  if (*bisect) return commands.RunBisect(bisect_id, bisect_by_id, ToFormat(bisect_format));
  if (*report) {
    return commands.RunReport(report_matrix.value_or(0), report_regression, report_file);
  }
  std::cerr << app.help();
  return 2;
}
