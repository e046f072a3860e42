#include "cli/kernels.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/file.h"
#include "lib/kbuild/fragments.h"
#include "nlohmann/json.hpp"
#include "proto/kernel_config.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

namespace {

// The options of `farmctl kernels build` (lib/kbuild/kernel_builder.h).
void AddKernelsBuildOptions(CLI::App* build, kbuild::BuildRequest* request, std::string* log_file,
                            double* cache_gib) {
  std::vector<std::string> machines;
  for (const kbuild::MachineModel& m : kbuild::MachineModels()) {
    machines.push_back(m.name);
  }
  const std::string models = absl::StrJoin(machines, ", ");
  // The farm's build jobs' config: its build directory is the one they reuse.
  machines.push_back(kbuild::kAllMachines);
  machines.push_back(kbuild::kHostMachine);
  build->add_option("--tree", request->tree, "the kernel git tree: a local repository or a URL")
      ->required();
  build->add_option("--rev", request->rev, "any git revision of the tree (branch, tag, commit)")
      ->required();
  build
      ->add_option("--machine", request->machine,
                   "vm machine model whose shipped fragment is merged: " + models +
                       ", or all (every model of the arch, as the farm's build jobs do), or "
                       "host (a lab host's kernel: the host fragment of --arch, the base's "
                       "modules built in, stored as a host platform's build jobs store it)")
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
  build->add_flag("--dma-map-bench", request->dma_map_bench,
                  "also merge the shipped dma-map-bench fragment (CONFIG_DMA_MAP_BENCHMARK, "
                  "v5.11+), which a kernel that runs dma-map-bench jobs needs");
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

void FinishKernelsBuildRequest(double cache_gib, kbuild::BuildRequest* request) {
  request->cache_max_bytes = static_cast<std::uint64_t>(cache_gib * (1u << 30));
  request->modules_built_in = request->machine == kbuild::kHostMachine;
  if (!request->arch.empty()) return;
  request->arch = kstore::kArchX86;
  for (const kbuild::MachineModel& m : kbuild::MachineModels()) {
    if (request->machine == m.name) request->arch = m.arch;
  }
}

}  // namespace

void AddKernelsCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    std::string store;
    std::string list_format;
    std::string deb;
    std::string commit;
    std::string catalog = "linux-iommu";
    bool replace = false;
    kbuild::BuildRequest build_request;
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
  out->push_back({import, [a](Commands& c) {
                    return RunKernelsImport(c, a->store, a->deb, a->commit, a->replace);
                  }});

  auto* list = kernels->add_subcommand(
      "list", "list a local kernel store's builds in catalog order (oldest version first)");
  list->add_option("--store", a->store, "kernel store directory")->required();
  AddOutputOption(list, &a->list_format,
                  "table, csv or json (json carries every manifest field of each build)");
  out->push_back(
      {list, [a](Commands& c) { return RunKernelsList(c, a->store, ToFormat(a->list_format)); }});

  auto* catalog = kernels->add_subcommand(
      "catalog",
      "add a kernel store's commits (with their kernel releases in the subject) to a catalog "
      "on the server; commits it already holds are kept");
  catalog->add_option("--store", a->store, "kernel store directory")->required();
  catalog->add_option("--catalog", a->catalog, "catalog to extend or create (default linux-iommu)");
  out->push_back(
      {catalog, [a](Commands& c) { return RunKernelsCatalog(c, a->store, a->catalog); }});

  a->build_request.arch.clear();  // from --machine unless given
  auto* build = kernels->add_subcommand(
      "build",
      "build one commit of a kernel git tree into a local kernel store, without a farm: make "
      "O= in a build directory per (tree, arch, config) reused from commit to commit, the "
      "config a base plus the machine model's shipped fragment plus --fragment files, then "
      "olddefconfig; refused when olddefconfig drops an option a fragment asked for "
      "(docs/kernels.md, \"Building kernels\")");
  AddKernelsBuildOptions(build, &a->build_request, &a->build_log, &a->build_cache_gib);
  out->push_back({build, [a](Commands& c) {
                    FinishKernelsBuildRequest(a->build_cache_gib, &a->build_request);
                    return RunKernelsBuild(c, a->build_request, a->build_log);
                  }});
}

int RunKernelsImport(Commands& commands, const std::string& store, const std::string& deb,
                     const std::string& commit, bool replace) {
  kstore::DebImport request;
  request.deb = deb;
  request.commit = commit;
  request.replace = replace;
  absl::StatusOr<kstore::KernelBuild> b = kstore::ImportDeb(store, request);
  if (!b.ok()) return commands.Fail(absl::StrCat("kernels import ", deb), b.status());
  commands.out() << "imported " << b->commit << " (" << b->arch << "): " << b->release
                 << (b->modules.empty() ? "" : ", modules") << (b->config.empty() ? "" : ", config")
                 << " in " << b->dir << "\n";
  return 0;
}

int RunKernelsList(Commands& commands, const std::string& store, OutputFormat format) {
  absl::StatusOr<kstore::StoreListing> listing = kstore::ReadStore(store);
  if (!listing.ok()) return commands.Fail("kernels list", listing.status());
  for (const std::string& p : listing->problems)
    commands.err() << "farmctl: skipped: " << p << "\n";
  commands.out() << FormatKernelBuilds(kstore::CatalogOrder(std::move(listing->builds)), format);
  return 0;
}

int RunKernelsCatalog(Commands& commands, const std::string& store, const std::string& catalog) {
  absl::StatusOr<kstore::StoreListing> listing = kstore::ReadStore(store);
  if (!listing.ok()) return commands.Fail("kernels catalog", listing.status());
  for (const std::string& p : listing->problems)
    commands.err() << "farmctl: skipped: " << p << "\n";
  if (listing->builds.empty()) {
    return commands.Fail("kernels catalog", absl::InvalidArgumentError(absl::StrCat(
                                                "kernel store ", store, " holds no build")));
  }
  pb::ImportGitCatalogRequest request = KernelCatalogRequest(listing->builds, catalog, store);
  pb::ImportGitCatalogResponse response;
  auto ctx = commands.UnaryContext();
  grpc::Status status = commands.jobs().ImportGitCatalog(ctx.get(), request, &response);
  if (!status.ok()) return commands.Fail("ImportGitCatalog", client::ToAbsl(status));
  commands.out() << "catalog " << response.catalog().name() << ": added " << response.added()
                 << " of " << request.commits_size() << " kernel commits from " << store << "\n";
  for (const pb::CatalogCommit& c : request.commits()) {
    commands.out() << "  " << c.id() << "\t" << c.subject() << "\n";
  }
  return 0;
}

namespace {

// The id the farm's build jobs give a kernel of this base and these
// fragments (proto/kernel_config.h), so that a spec's `kernel_config`
// naming them runs on it: "" for tinyconfig alone (the agents' default);
// a host build's with "+host".
absl::StatusOr<std::string> ConfigIdOf(const kbuild::BuildRequest& request) {
  pb::KernelConfig config;
  if (request.base != "tinyconfig" || !request.fragments.empty()) {
    config.set_base(std::filesystem::path(request.base).filename().string());
    if (request.base.find('/') != std::string::npos || absl::EndsWith(request.base, ".config")) {
      absl::StatusOr<std::string> text = base::ReadFile(request.base);
      if (!text.ok()) return text.status();
      config.set_base_text(*text);
    }
    for (const std::string& path : request.fragments) {
      absl::StatusOr<std::string> text = base::ReadFile(path);
      if (!text.ok()) return text.status();
      pb::ConfigFragment* f = config.add_fragments();
      f->set_name(std::filesystem::path(path).filename().string());
      f->set_text(*text);
    }
  }
  std::string id = proto::KernelConfigId(config);
  if (request.machine == kbuild::kHostMachine) id = proto::HostBuildConfigId(id);
  return proto::BuildConfigId(id, request.dma_map_bench);
}

}  // namespace

int RunKernelsBuild(Commands& commands, const kbuild::BuildRequest& given,
                    const std::string& log_file) {
  kbuild::BuildRequest request = given;
  absl::StatusOr<std::string> config_id = ConfigIdOf(request);
  if (!config_id.ok()) return commands.Fail("kernels build", config_id.status());
  request.config_id = *config_id;
  std::string log;
  absl::StatusOr<kbuild::BuildResult> r = kbuild::BuildKernel(request, &log);
  if (!log_file.empty()) {
    if (!base::WriteFile(log_file, log).ok()) {
      commands.err() << "farmctl: cannot write the build log to " << log_file << "\n";
    }
  }
  if (!r.ok()) {
    // The build's own last lines, for the context of its first error.
    std::vector<absl::string_view> lines = absl::StrSplit(log, '\n', absl::SkipWhitespace());
    const size_t from = lines.size() > 20 ? lines.size() - 20 : 0;
    for (size_t i = from; i < lines.size(); ++i) commands.err() << "  " << lines[i] << "\n";
    commands.err() << "farmctl: kernels build " << request.rev << ": "
                   << absl::StatusCodeToString(r.status().code()) << ": " << r.status().message()
                   << "\n";
    return 1;
  }
  commands.out() << "built " << r->commit << " (" << r->build.arch << "): " << r->release << " in "
                 << r->build.dir << "\n"
                 << "  " << absl::StrFormat("%.1f", absl::ToDoubleSeconds(r->wall_time))
                 << " s, build directory " << r->build_dir
                 << (r->reused_build_dir ? " (reused)" : " (fresh)") << "\n";
  for (const std::string& d : r->evicted) commands.out() << "  evicted " << d << "\n";
  return 0;
}

pb::ImportGitCatalogRequest KernelCatalogRequest(const std::vector<kstore::KernelBuild>& builds,
                                                 const std::string& catalog,
                                                 const std::string& store_dir) {
  pb::ImportGitCatalogRequest request;
  request.set_catalog(catalog);
  request.set_range(absl::StrCat("kstore:", store_dir));
  // Builds of one commit for several architectures make one catalog commit.
  std::map<std::string, pb::CatalogCommit*> by_id;
  std::map<std::string, std::vector<std::string>> releases;
  std::map<std::string, std::string> versions;
  for (const kstore::KernelBuild& b : kstore::CatalogOrder(builds)) {
    if (by_id.count(b.commit) == 0) {
      pb::CatalogCommit* c = request.add_commits();
      c->set_id(b.commit);
      by_id[b.commit] = c;
    }
    releases[b.commit].push_back(b.release);
    if (versions[b.commit].empty()) versions[b.commit] = b.version;
  }
  for (auto& [id, c] : by_id) {
    std::string subject = absl::StrCat("kernel ", absl::StrJoin(releases[id], ", "));
    if (!versions[id].empty()) absl::StrAppend(&subject, " (", versions[id], ")");
    c->set_subject(subject);
  }
  return request;
}

namespace {

nlohmann::ordered_json BuildJson(const kstore::KernelBuild& b) {
  nlohmann::ordered_json o;
  for (const auto& [key, value] : std::vector<std::pair<const char*, const std::string*>>{
           {"commit", &b.commit},
           {"release", &b.release},
           {"arch", &b.arch},
           {"image", &b.image},
           {"initrd", &b.initrd},
           {"config", &b.config},
           {"modules", &b.modules},
           {"version", &b.version},
           {"source", &b.source},
           {"tree", &b.tree},
           {"config_hash", &b.config_hash},
           {"compiler", &b.compiler},
           {"build_seconds", &b.build_seconds},
           {"dma_map_benchmark", &b.dma_map_benchmark},
           {"dir", &b.dir}}) {
    o[key] = *value;
  }
  o["fragments"] = b.fragments;
  return o;
}

}  // namespace

std::string FormatKernelBuilds(const std::vector<kstore::KernelBuild>& builds,
                               OutputFormat format) {
  if (format == OutputFormat::kJson) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const kstore::KernelBuild& b : builds) array.push_back(BuildJson(b));
    return array.dump(2) + "\n";
  }
  if (format == OutputFormat::kCsv) {
    std::string out = "commit,arch,release,version,dir,image,initrd,config,modules\n";
    for (const kstore::KernelBuild& b : builds) {
      std::vector<std::string> cells;
      for (const std::string* f : {&b.commit, &b.arch, &b.release, &b.version, &b.dir, &b.image,
                                   &b.initrd, &b.config, &b.modules}) {
        cells.push_back(CsvField(*f));
      }
      absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
    }
    return out;
  }
  std::string out = "COMMIT\tARCH\tRELEASE\tVERSION\tDIR\n";
  for (const kstore::KernelBuild& b : builds) {
    absl::StrAppend(&out, b.commit, "\t", b.arch, "\t", b.release, "\t",
                    b.version.empty() ? "-" : b.version, "\t", b.dir, "\n");
  }
  return out;
}

}  // namespace farm::cli
