// farmctl: the iommu-farm command line client. Parses flags and hands each
// subcommand to farm::cli::Commands.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

// A subcommand and what running it does once the command line is parsed.
// Its arguments live in the closure, which CLI11's options write into.
struct Subcommand {
  CLI::App* app;
  std::function<int(farm::cli::Commands&)> run;
};
using Subcommands = std::vector<Subcommand>;

// The flags every subcommand shares: where the scheduler is and how to reach
// it securely.
struct GlobalFlags {
  farm::client::ClientOptions options;
  farm::client::SecurityFlags security;
};

void AddGlobalOptions(CLI::App& app, GlobalFlags* flags) {
  flags->options.server = farm::client::kDefaultServer;
  app.add_option("--server", flags->options.server,
                 "scheduler address HOST:PORT, or several IP:PORT separated by commas "
                 "(schedulers sharing one database; calls fail over between them)")
      ->capture_default_str()
      ->envname("FARM_SERVER");
  farm::client::AddSecurityOptions(app, &flags->security);
}

// submit, status, watch, cancel.
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
  out->push_back({submit, [a](farm::cli::Commands& c) {
                    return c.RunSubmit(a->submit_file, a->submit_wait, a->submit_dry);
                  }});

  auto* status = app.add_subcommand("status", "show one matrix, or list recent matrices");
  status->add_option("MATRIX", a->status_matrix, "matrix id");
  AddOutputOption(status, &a->status_format,
                  "table, csv or json (with MATRIX: csv and json give it as a one-row list)");
  out->push_back({status, [a](farm::cli::Commands& c) {
                    return c.RunStatus(a->status_matrix, ToFormat(a->status_format));
                  }});

  auto* watch =
      app.add_subcommand("watch", "print a progress line per update until the matrix ends");
  watch->add_option("MATRIX", a->watch_matrix, "matrix id")->required();
  out->push_back({watch, [a](farm::cli::Commands& c) { return c.RunWatch(a->watch_matrix); }});

  auto* cancel = app.add_subcommand("cancel", "cancel a matrix's unfinished jobs");
  cancel->add_option("MATRIX", a->cancel_matrix, "matrix id")->required();
  cancel->add_option("--reason", a->cancel_reason, "reason recorded with the jobs");
  out->push_back({cancel, [a](farm::cli::Commands& c) {
                    return c.RunCancel(a->cancel_matrix, a->cancel_reason);
                  }});
}

// results, raw-output.
void AddResultCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    int64_t results_matrix = 0;
    std::string results_format;
    bool results_raw = false;
    int64_t raw_job = 0;
    int raw_attempt = 0;
  };
  auto a = std::make_shared<Args>();
  auto* results =
      app.add_subcommand("results",
                         "a matrix's results: table = per commit x mode x workload [x platform] "
                         "n, mean and 95% confidence interval of the main metric; csv/json = "
                         "every sample, written as the results arrive");
  results->add_option("MATRIX", a->results_matrix, "matrix id")->required();
  AddOutputOption(results, &a->results_format);
  results->add_flag("--raw", a->results_raw,
                    "with --output json: include each run's raw tool output (fetched one result "
                    "at a time)");
  out->push_back({results, [a](farm::cli::Commands& c) {
                    return c.RunResults(a->results_matrix, ToFormat(a->results_format),
                                        a->results_raw);
                  }});

  auto* raw_output = app.add_subcommand(
      "raw-output", "write one result's raw tool output to stdout, verbatim, as it streams in");
  raw_output->add_option("JOB", a->raw_job, "job id (the job_id of `results --output json`)")
      ->required()
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  raw_output
      ->add_option("--attempt", a->raw_attempt, "the result of this attempt (default: the latest)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  out->push_back({raw_output, [a](farm::cli::Commands& c) {
                    return c.RunRawOutput(a->raw_job, a->raw_attempt);
                  }});
}

// token create / list / revoke.
void AddTokenCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string name, role;
    std::string revoke_name;
    std::string list_format;
  };
  auto a = std::make_shared<Args>();
  auto* token = app.add_subcommand("token", "API tokens (admin): create, list, revoke");
  token->require_subcommand(1);
  auto* create = token->add_subcommand(
      "create", "create a token; prints the secret once on stdout (only its hash is stored)");
  create->add_option("--name", a->name, "principal name (an agent token: the agent name)")
      ->required();
  create
      ->add_option("--role", a->role,
                   "viewer (reads), submitter (reads, submit; cancel and triage its own), "
                   "agent (the agent calls only, as agent --name) or admin (everything)")
      ->required()
      ->check(CLI::IsMember({"viewer", "submitter", "agent", "admin"}));
  out->push_back(
      {create, [a](farm::cli::Commands& c) { return c.RunTokenCreate(a->name, a->role); }});
  auto* list = token->add_subcommand("list", "list tokens (never their secrets)");
  AddOutputOption(list, &a->list_format);
  out->push_back(
      {list, [a](farm::cli::Commands& c) { return c.RunTokenList(ToFormat(a->list_format)); }});
  auto* revoke = token->add_subcommand("revoke", "revoke the live token NAME");
  revoke->add_option("NAME", a->revoke_name, "token name")->required();
  out->push_back(
      {revoke, [a](farm::cli::Commands& c) { return c.RunTokenRevoke(a->revoke_name); }});
}

void AddAgentsCommand(CLI::App& app, Subcommands* out) {
  auto format = std::make_shared<std::string>();
  auto* agents = app.add_subcommand("agents", "list registered agents");
  AddOutputOption(agents, format.get());
  out->push_back(
      {agents, [format](farm::cli::Commands& c) { return c.RunAgents(ToFormat(*format)); }});
}

// catalog list / show / load / import-git.
void AddCatalogCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string list_format;
    std::string show_name;
    bool show_resolve = false;
    std::string show_format;
    std::string load_file;
    bool load_replace = false;
    std::string git_repo, git_range, git_catalog = "linux-iommu";
    int64_t measure_matrix = 0;
    std::string measure_reference, measure_name, measure_mode = "strict";
    bool measure_print = false;
  };
  auto a = std::make_shared<Args>();
  auto* catalog = app.add_subcommand("catalog", "commit catalogs");
  catalog->require_subcommand(1);
  auto* list = catalog->add_subcommand("list", "list catalogs with their commit counts");
  AddOutputOption(list, &a->list_format,
                  "table, csv or json (json carries each catalog's commits)");
  out->push_back(
      {list, [a](farm::cli::Commands& c) { return c.RunCatalogList(ToFormat(a->list_format)); }});

  auto* show = catalog->add_subcommand("show", "show a catalog's commits");
  show->add_option("NAME", a->show_name, "catalog name")->required();
  show->add_flag("--resolve", a->show_resolve, "also fetch each commit's accumulated model state");
  AddOutputOption(show, &a->show_format,
                  "table, csv (one row per commit) or json (the catalog message)");
  out->push_back({show, [a](farm::cli::Commands& c) {
                    return c.RunCatalogShow(a->show_name, a->show_resolve,
                                            ToFormat(a->show_format));
                  }});

  auto* load = catalog->add_subcommand("load", "load a catalog YAML file");
  load->add_option("FILE", a->load_file, "catalog file")->required();
  load->add_flag("--replace", a->load_replace, "replace an existing catalog of the same name");
  out->push_back({load, [a](farm::cli::Commands& c) {
                    return c.RunCatalogLoad(a->load_file, a->load_replace);
                  }});

  auto* measure = catalog->add_subcommand(
      "measure",
      "a catalog whose commits carry their own measured software cost: from a real "
      "dma-map-bench matrix run in instruction-counted guests (--vm-accel tcg-icount), each "
      "commit's map and unmap instructions beyond REFERENCE's become its sw.map_delta_insns / "
      "sw.unmap_delta_insns; loaded as <catalog>-measured (or --name), replacing it");
  measure->add_option("MATRIX", a->measure_matrix, "the dma-map-bench matrix")->required();
  measure->add_option("--reference", a->measure_reference, "the commit the deltas are over")
      ->required();
  measure->add_option("--name", a->measure_name, "the measured catalog's name");
  measure->add_option("--mode", a->measure_mode, "the runs' IOMMU mode")->capture_default_str();
  measure->add_flag("--print", a->measure_print, "print the catalog YAML instead of loading it");
  out->push_back({measure, [a](farm::cli::Commands& c) {
                    return c.RunCatalogMeasure(a->measure_matrix, a->measure_reference,
                                               a->measure_name, a->measure_mode, a->measure_print);
                  }});

  auto* git = catalog->add_subcommand(
      "import-git",
      "add commit A and the first-parent commits of A..B (oldest first) to a catalog; "
      "commits without settings inherit the state of the one before");
  git->add_option("--repo", a->git_repo, "path of the git work tree")->required();
  git->add_option("--range", a->git_range, "commit range A..B")->required();
  git->add_option("--catalog", a->git_catalog, "catalog to extend or create (default linux-iommu)");
  out->push_back({git, [a](farm::cli::Commands& c) {
                    return c.RunCatalogImportGit(a->git_repo, a->git_range, a->git_catalog);
                  }});
}

// kernels import / list / catalog / build.
void AddKernelsCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string store;
    std::string list_format;
    std::string deb;
    std::string commit;
    std::string catalog = "linux-iommu";
    bool replace = false;
    farm::kbuild::BuildRequest build_request;
    std::string build_log;
    double build_cache_gib = 20;
  };
  auto a = std::make_shared<Args>();
  auto* kernels =
      app.add_subcommand("kernels", "kernel stores: kernel builds per commit id (docs/kernels.md)");
  kernels->require_subcommand(1);
  auto* import = kernels->add_subcommand(
      "import",
      "add a Debian linux-image .deb to a local kernel store as the build of --commit "
      "(image, config and modules extracted with dpkg-deb)");
  import->add_option("--store", a->store, "kernel store directory")->required();
  import->add_option("deb", a->deb, "the linux-image-*.deb")->required();
  import->add_option("--commit", a->commit, "commit id the kernel is built from")->required();
  import->add_flag("--replace", a->replace, "replace the commit's build for that architecture");
  out->push_back({import, [a](farm::cli::Commands& c) {
                    return c.RunKernelsImport(a->store, a->deb, a->commit, a->replace);
                  }});

  auto* list = kernels->add_subcommand(
      "list", "list a local kernel store's builds in catalog order (oldest version first)");
  list->add_option("--store", a->store, "kernel store directory")->required();
  AddOutputOption(list, &a->list_format,
                  "table, csv or json (json carries every manifest field of each build)");
  out->push_back({list, [a](farm::cli::Commands& c) {
                    return c.RunKernelsList(a->store, ToFormat(a->list_format));
                  }});

  auto* catalog = kernels->add_subcommand(
      "catalog",
      "add a kernel store's commits (with their kernel releases in the subject) to a catalog "
      "on the server; commits it already holds are kept");
  catalog->add_option("--store", a->store, "kernel store directory")->required();
  catalog->add_option("--catalog", a->catalog, "catalog to extend or create (default linux-iommu)");
  out->push_back(
      {catalog, [a](farm::cli::Commands& c) { return c.RunKernelsCatalog(a->store, a->catalog); }});

  a->build_request.arch.clear();  // from --machine unless given
  auto* build = kernels->add_subcommand(
      "build",
      "build one commit of a kernel git tree into a local kernel store, without a farm: make "
      "O= in a build directory per (tree, arch, config) reused from commit to commit, the "
      "config a base plus the machine model's shipped fragment plus --fragment files, then "
      "olddefconfig; refused when olddefconfig drops an option a fragment asked for "
      "(docs/kernels.md, \"Building kernels\")");
  AddKernelsBuildOptions(build, &a->build_request, &a->build_log, &a->build_cache_gib);
  out->push_back({build, [a](farm::cli::Commands& c) {
                    FinishKernelsBuildRequest(a->build_cache_gib, &a->build_request);
                    return c.RunKernelsBuild(a->build_request, a->build_log);
                  }});
}

// regressions, regression show / mark.
void AddRegressionCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    bool all = false;
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
  AddOutputOption(regressions, &a->list_format,
                  "table, csv or json; every format carries the metric rank (primary: "
                  "the workload's throughput metric; secondary: latency, hit rate, CPU "
                  "time)");
  out->push_back({regressions, [a](farm::cli::Commands& c) {
                    return c.RunRegressions(a->all, ToFormat(a->list_format));
                  }});

  auto* regression = app.add_subcommand("regression", "one regression");
  regression->require_subcommand(1);
  auto* show = regression->add_subcommand("show", "show a regression");
  show->add_option("ID", a->show_id, "regression id")->required();
  AddOutputOption(show, &a->show_format,
                  "table, csv or json; every format names each culprit with its share");
  out->push_back({show, [a](farm::cli::Commands& c) {
                    return c.RunRegressionShow(a->show_id, ToFormat(a->show_format));
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
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FIXED),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_FALSE_POSITIVE),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_ACKNOWLEDGED),
      farm::proto::RegressionStateName(iommufarm::v1::REGRESSION_STATE_IGNORED),
      farm::cli::Commands::kReopen};
  mark->add_option("STATE", a->mark_state, absl::StrJoin(markable, ", "))
      ->required()
      ->check(CLI::IsMember(markable));
  mark->add_option("--note", a->mark_note,
                   "note kept with the regression (replaces the analyzer's note; the "
                   "metric rank is its own field and is kept)");
  out->push_back({mark, [a](farm::cli::Commands& c) {
                    return c.RunRegressionMark(a->mark_id, a->mark_state, a->mark_note);
                  }});
}

void AddCompareCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    int64_t a = 0, b = 0;
    std::vector<std::string> commits;
    std::string format, html;
  };
  auto a = std::make_shared<Args>();
  auto* compare = app.add_subcommand(
      "compare",
      "compare two matrices, or two commits (of one matrix or of two), series by series: per "
      "platform, workload with its params, metric and mode the means, the change with its 95% "
      "interval (Welch), p, and 'changed' when p < 0.01 and the interval reaches 3%");
  compare->add_option("A", a->a, "matrix id of side A")->required();
  compare->add_option("B", a->b, "matrix id of side B (default: A, with --commits)");
  compare->add_option("--commits", a->commits, "COMMIT_A COMMIT_B: compare these two commits")
      ->expected(2);
  compare->add_option("--html", a->html,
                      "also write one self-contained HTML page (the table and a plot per "
                      "series) to FILE");
  AddOutputOption(compare, &a->format, "table, csv or json");
  compare->callback([a] {
    if ((a->b == 0 || a->b == a->a) && a->commits.empty()) {
      throw CLI::ValidationError("compare", "give matrix B, or --commits COMMIT_A COMMIT_B");
    }
  });
  out->push_back({compare, [a](farm::cli::Commands& c) {
                    const bool by_commit = a->commits.size() == 2;
                    return c.RunCompare(a->a, a->b, by_commit ? a->commits[0] : "",
                                        by_commit ? a->commits[1] : "", ToFormat(a->format),
                                        a->html);
                  }});
}

void AddTryCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string spec;
    std::vector<std::string> set;
    std::string patch_commit, patch, format;
  };
  auto a = std::make_shared<Args>();
  auto* try_job = app.add_subcommand(
      "try",
      "a try job: base + patch in one command. SPEC names one commit, the base. --set "
      "KEY=VALUE (emulator model keys) runs a base and a patch matrix together, interleaved "
      "and with the same seeds; --patch-commit ID (a commit the kernel builder builds) runs "
      "one matrix of both commits; --patch FILE (a unified diff) runs one matrix of the base "
      "and the base with the patch applied, built by the farm's kernel builder (real "
      "executors). Waits, then prints compare's answer for patch vs base");
  try_job->add_option("SPEC", a->spec, "matrix spec YAML file ('-': standard input)")->required();
  auto* set = try_job->add_option("--set", a->set, "KEY=VALUE model key of the patch (repeatable)");
  auto* commit =
      try_job->add_option("--patch-commit", a->patch_commit, "the patch as a commit of the tree")
          ->excludes(set);
  try_job
      ->add_option("--patch", a->patch,
                   "the patch as a file (git diff / format-patch; '-': standard input), applied "
                   "on the base by the farm")
      ->excludes(set)
      ->excludes(commit);
  AddOutputOption(try_job, &a->format, "table, csv or json");
  out->push_back({try_job, [a](farm::cli::Commands& c) {
                    std::map<std::string, std::string> set;
                    for (const std::string& kv : a->set) {
                      const size_t eq = kv.find('=');
                      if (eq == std::string::npos || eq == 0) {
                        std::cerr << "farmctl: try: --set " << kv << ": expected KEY=VALUE\n";
                        return 2;
                      }
                      set[kv.substr(0, eq)] = kv.substr(eq + 1);
                    }
                    return c.RunTry(a->spec, set, a->patch_commit, a->patch, ToFormat(a->format));
                  }});
}

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
  out->push_back({bisect, [a](farm::cli::Commands& c) {
                    return c.RunBisect(a->id, a->by_id, ToFormat(a->format));
                  }});
}

void AddReportCommand(CLI::App& app, Subcommands* out) {
  struct Args {
    std::optional<int64_t> matrix, regression;
    std::string file, serve;
    farm::cli::ReportServer::Tls tls;
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
  auto* output = report->add_option("--output,-o", a->file, "HTML file to write ('-': stdout)");
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
    if (!a->matrix && !a->regression) {
      throw CLI::ValidationError("report", "give MATRIX or --regression ID (or --serve)");
    }
    if (a->file.empty()) throw CLI::ValidationError("report", "--output is required");
  });
  out->push_back({report, [a](farm::cli::Commands& c) {
                    if (!a->serve.empty()) return c.RunReportServe(a->serve, a->tls);
                    return c.RunReport(a->matrix.value_or(0), a->regression, a->file);
                  }});
}

// Every subcommand, in the order --help lists them.
Subcommands AddSubcommands(CLI::App& app) {
  Subcommands out;
  AddMatrixCommands(app, &out);
  AddResultCommands(app, &out);
  AddTokenCommands(app, &out);
  AddAgentsCommand(app, &out);
  AddCatalogCommands(app, &out);
  AddKernelsCommands(app, &out);
  AddRegressionCommands(app, &out);
  AddBisectCommand(app, &out);
  AddCompareCommand(app, &out);
  AddTryCommand(app, &out);
  AddReportCommand(app, &out);
  return out;
}

// The client's options with the security flags applied; an error is a usage
// error (exit 2), its message the line to print.
absl::StatusOr<farm::client::ClientOptions> ResolveClientOptions(const GlobalFlags& flags) {
  farm::client::ClientOptions options = flags.options;
  if (absl::Status st = farm::client::ApplySecurity(flags.security, &options); !st.ok()) {
    return st;
  }
  return options;
}

// Runs the one subcommand the command line chose.
int RunChosen(const Subcommands& subcommands, farm::cli::Commands& commands, const CLI::App& app) {
  for (const Subcommand& s : subcommands) {
    if (*s.app) return s.run(commands);
  }
  std::cerr << app.help();
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farmctl: submit and follow iommu-farm matrices, read results, agents, "
      "catalogs, kernel stores and regressions, write HTML reports.\nExit status: 0 ok, 1 server "
      "or I/O error "
      "(or a --wait matrix with failed jobs), 2 usage error."};
  app.require_subcommand(1);
  GlobalFlags flags;
  AddGlobalOptions(app, &flags);
  const Subcommands subcommands = AddSubcommands(app);
  if (std::optional<int> exit = farm::service::ParseCommandLine(app, argc, argv)) return *exit;

  absl::StatusOr<farm::client::ClientOptions> options = ResolveClientOptions(flags);
  if (!options.ok()) {
    std::cerr << "farmctl: " << options.status().message() << "\n";
    return 2;
  }
  farm::cli::Commands commands(*options, std::cout, std::cerr);
  return RunChosen(subcommands, commands, app);
}
