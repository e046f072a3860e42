#include "cli/catalog.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/git_import.h"
#include "cli/measured_costs.h"

namespace farm::cli {

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
  out->push_back({list, [a](Commands& c) { return RunCatalogList(c, ToFormat(a->list_format)); }});

  auto* show = catalog->add_subcommand("show", "show a catalog's commits");
  show->add_option("NAME", a->show_name, "catalog name")->required();
  show->add_flag("--resolve", a->show_resolve, "also fetch each commit's accumulated model state");
  AddOutputOption(show, &a->show_format,
                  "table, csv (one row per commit) or json (the catalog message)");
  out->push_back({show, [a](Commands& c) {
                    return RunCatalogShow(c, a->show_name, a->show_resolve,
                                          ToFormat(a->show_format));
                  }});

  auto* load = catalog->add_subcommand("load", "load a catalog YAML file");
  load->add_option("FILE", a->load_file, "catalog file")->required();
  load->add_flag("--replace", a->load_replace, "replace an existing catalog of the same name");
  out->push_back(
      {load, [a](Commands& c) { return RunCatalogLoad(c, a->load_file, a->load_replace); }});

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
  out->push_back({measure, [a](Commands& c) {
                    return RunCatalogMeasure(c, a->measure_matrix, a->measure_reference,
                                             a->measure_name, a->measure_mode, a->measure_print);
                  }});

  auto* git = catalog->add_subcommand(
      "import-git",
      "add commit A and every commit of A..B, merged branches included (parents first, each "
      "with its parents), to a catalog; commits without settings inherit their history's state");
  git->add_option("--repo", a->git_repo, "path of the git work tree")->required();
  git->add_option("--range", a->git_range, "commit range A..B")->required();
  git->add_option("--catalog", a->git_catalog, "catalog to extend or create (default linux-iommu)");
  out->push_back({git, [a](Commands& c) {
                    return RunCatalogImportGit(c, a->git_repo, a->git_range, a->git_catalog);
                  }});
}

int RunCatalogList(Commands& commands, OutputFormat format) {
  pb::ListCatalogsResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().ListCatalogs(ctx.get(), {}, &response);
  if (!status.ok()) return commands.Fail("ListCatalogs", client::ToAbsl(status));
  // ListCatalogs omits the commits (by contract), so each catalog is fetched
  // to count them; catalogs are few.
  std::vector<pb::Catalog> catalogs;
  for (const pb::Catalog& summary : response.catalogs()) {
    pb::GetCatalogRequest request;
    request.set_name(summary.name());
    pb::Catalog catalog;
    auto get_ctx = commands.UnaryContext();
    status = commands.jobs().GetCatalog(get_ctx.get(), request, &catalog);
    if (!status.ok()) {
      return commands.Fail(absl::StrCat("GetCatalog ", summary.name()), client::ToAbsl(status));
    }
    catalogs.push_back(std::move(catalog));
  }
  commands.out() << FormatCatalogList(catalogs, format);
  return 0;
}

int RunCatalogShow(Commands& commands, const std::string& name, bool resolve, OutputFormat format) {
  pb::GetCatalogRequest request;
  request.set_name(name);
  request.set_resolve(resolve);
  pb::Catalog catalog;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().GetCatalog(ctx.get(), request, &catalog);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("GetCatalog ", name), client::ToAbsl(status));
  }
  commands.out() << FormatCatalog(catalog, format);
  return 0;
}

int RunCatalogLoad(Commands& commands, const std::string& path, bool replace) {
  absl::StatusOr<std::string> yaml = ReadInputFile(path);
  if (!yaml.ok()) return commands.Fail("catalog load", yaml.status());
  pb::LoadCatalogRequest request;
  request.set_yaml(*yaml);
  request.set_source_name(path);
  request.set_replace(replace);
  pb::LoadCatalogResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().LoadCatalog(ctx.get(), request, &response);
  if (!status.ok()) {
    return commands.Fail(absl::StrCat("LoadCatalog ", path), client::ToAbsl(status));
  }
  commands.out() << "loaded catalog " << response.catalog().name() << ": "
                 << response.catalog().commits_size() << " commits\n";
  return 0;
}

int RunCatalogMeasure(Commands& commands, int64_t matrix_id, const std::string& reference,
                      const std::string& name, const std::string& mode, bool print_only) {
  const pb::IommuMode m = proto::ModeFromName(mode);
  if (m == pb::IOMMU_MODE_UNSPECIFIED) {
    return commands.Fail("catalog measure",
                         absl::InvalidArgumentError(absl::StrCat(
                             "--mode ", mode, ": expected off, passthrough, strict or lazy")));
  }
  absl::StatusOr<std::vector<pb::Result>> results = commands.FetchResults(matrix_id, false);
  if (!results.ok()) return commands.Fail(absl::StrCat("GetResults ", matrix_id), results.status());
  absl::StatusOr<Measurement> measured = MeasureCommits(*results, m);
  if (!measured.ok())
    return commands.Fail(absl::StrCat("catalog measure ", matrix_id), measured.status());
  pb::GetCatalogRequest get;
  get.set_name(results->front().job().catalog());
  pb::Catalog source;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().GetCatalog(ctx.get(), get, &source);
  if (!status.ok())
    return commands.Fail(absl::StrCat("GetCatalog ", get.name()), client::ToAbsl(status));
  const std::string catalog = name.empty() ? absl::StrCat(source.name(), "-measured") : name;
  absl::StatusOr<std::string> yaml = MeasuredCatalogYaml(source, catalog, *measured, reference);
  if (!yaml.ok()) return commands.Fail("catalog measure", yaml.status());
  if (print_only) {
    commands.out() << *yaml;
    return 0;
  }
  pb::LoadCatalogRequest load;
  load.set_yaml(*yaml);
  load.set_source_name(absl::StrCat("measured:matrix ", matrix_id));
  load.set_replace(true);
  pb::LoadCatalogResponse loaded;
  auto load_ctx = commands.UnaryContext();
  status = commands.jobs().LoadCatalog(load_ctx.get(), load, &loaded);
  if (!status.ok()) return commands.Fail("LoadCatalog", client::ToAbsl(status));
  commands.out() << "loaded catalog " << catalog << ": " << loaded.catalog().commits_size()
                 << " commits, " << measured->commits.size() << " measured at icount shift "
                 << measured->icount_shift << " against " << reference << "\n";
  commands.out() << FormatMeasurement(source, *measured);
  return 0;
}

int RunCatalogImportGit(Commands& commands, const std::string& repo, const std::string& range,
                        const std::string& catalog) {
  auto commits = GitRangeLog(repo, range);
  if (!commits.ok()) return commands.Fail(absl::StrCat("git log ", range), commits.status());
  pb::ImportGitCatalogRequest request;
  request.set_catalog(catalog);
  request.set_range(range);
  for (auto& c : *commits) *request.add_commits() = std::move(c);
  pb::ImportGitCatalogResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().ImportGitCatalog(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("ImportGitCatalog", client::ToAbsl(status));
  commands.out() << "catalog " << response.catalog().name() << ": added " << response.added()
                 << " of " << request.commits_size() << " commits from " << range << "\n";
  return 0;
}

std::string FormatCatalogList(const std::vector<pb::Catalog>& catalogs, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  pb::ListCatalogsResponse message;
  for (const auto& c : catalogs) {
    rows.push_back(
        {c.name(), absl::StrCat(c.commits_size()), c.source(), FormatTimestamp(c.loaded_at())});
    *message.add_catalogs() = c;
  }
  return RenderList({"name", "commits", "source", "loaded"}, rows, message, format,
                    "no catalogs\n");
}

std::string FormatCatalog(const pb::Catalog& catalog, OutputFormat format) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : catalog.commits()) {
    std::map<std::string, std::string> set(c.set().begin(), c.set().end());
    std::vector<std::string> kv;
    for (const auto& [k, v] : set) kv.push_back(absl::StrCat(k, "=", v));
    rows.push_back({absl::StrCat(c.index()), c.id(), c.subject(), absl::StrJoin(kv, " ")});
  }
  const std::string list =
      RenderList({"#", "id", "subject", "set"}, rows, catalog, format, "no commits\n");
  if (format != OutputFormat::kTable) return list;
  return absl::StrCat("catalog ", Printable(catalog.name()), " (", Printable(catalog.source()),
                      "), ", catalog.commits_size(), " commits\n", list);
}

}  // namespace farm::cli
