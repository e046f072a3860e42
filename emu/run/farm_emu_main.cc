// farm-emu: command line front end of the emulation core.
//   farm-emu run --platform P --kernel ID --mode M --workload W [--param k=v]...
//                [--set key=value]... [--catalog FILE] [--seed N]
//                [--format json|text|kernel|fio-json|iozone]
//   farm-emu list platforms|workloads|commits|params [--platform P] [--kernel ID]
//   farm-emu check-catalog [--catalog FILE] [--commit ID] [--jobs N]
//   farm-emu fidelity   (the current platforms against published figures: the
//                        table docs/fidelity.md carries)
// Exit codes: 0 success, 1 emulation failure (check-catalog: a finding the
// catalog does not mark as known), 2 usage error.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "emu/model/catalog.h"
#include "emu/model/kernel.h"
#include "emu/model/model_config.h"
#include "emu/model/platform.h"
#include "emu/run/catalog_check.h"
#include "emu/run/platform_fidelity.h"
#include "emu/run/run.h"
#include "emu/workloads/workload.h"
#include "lib/iommu_mode/iommu_mode.h"

namespace {

constexpr int kUsageError = 2;

bool SplitKv(const std::string& s, std::map<std::string, std::string>& out, const char* flag) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0) {
    std::cerr << "farm-emu: " << flag << " expects key=value, got '" << s << "'\n";
    return false;
  }
  out[s.substr(0, eq)] = s.substr(eq + 1);
  return true;
}

int ExitFor(const absl::Status& s) {
  std::cerr << "farm-emu: " << s.message() << "\n";
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kUnimplemented:
      return kUsageError;
    default:
      return 1;
  }
}

void ListPlatforms() {
  for (const farm::emu::Platform& p : farm::emu::AllPlatforms()) {
    std::string devs;
    for (const auto& d : p.devices) {
      const std::string attach =
          d.attach == farm::emu::DeviceAttach::kNone ? ", no IOMMU"
          : d.attach == farm::emu::DeviceAttach::kIdentity
              ? absl::StrCat(", ",
                             farm::iommu_mode::DomainType(farm::iommu_mode::Mode::kPassthrough))
              : "";
      std::string link = d.link_gbps > 0 ? absl::StrCat(", ", d.link_gbps, " Gb/s") : "";
      if (d.pcie_lanes > 0) {
        absl::StrAppend(
            &link, ", PCIe ", d.pcie_gen, ".0 x", d.pcie_lanes, " ",
            absl::StrFormat("%.2f", farm::emu::PcieLinkBytesPerSec(d.pcie_gen, d.pcie_lanes) / 1e9),
            " GB/s");
      }
      if (d.media_read_bytes_per_s > 0) {
        absl::StrAppend(&link, absl::StrFormat(", media %.1f GB/s read %.1f GB/s write",
                                               d.media_read_bytes_per_s / 1e9,
                                               d.media_write_bytes_per_s / 1e9));
      }
      absl::StrAppend(&devs, devs.empty() ? "" : ", ", d.name, " (node ", d.node, link, attach,
                      ")");
    }
    std::cout << p.name << "\n  " << p.description << "\n  cpus " << p.topology.num_cpus
              << ", PCIe lanes "
              << (p.pcie_lanes > 0 ? absl::StrCat(p.pcie_lanes) : std::string("not published"))
              << ", nodes " << p.topology.num_nodes() << ", iommu " << p.settings.at("iommu.type")
              << ", irq chip " << farm::emu::IrqChipName(p.irq_chip) << ", devices: " << devs
              << "\n";
  }
}

void ListWorkloads() {
  for (const farm::emu::WorkloadInfo& w : farm::emu::AllWorkloads()) {
    std::cout << w.name << "\n  " << w.description << "\n";
    std::cout << "  run-to-run CV (noise.cv=workload, the default): " << w.noise_cv
              << (w.noise_cv > 0 ? " (source: docs/fidelity.md)" : " (no published repeats found)")
              << "\n";
    for (const farm::emu::WorkloadParam& p : w.params) {
      std::cout << "  --param " << p.name << "="
                << (p.default_value.empty() ? "''" : p.default_value) << "\t" << p.meaning << "\n";
    }
  }
}

// The commit catalog (emu/model/catalog.h): --catalog FILE, else $FARM_EMU_CATALOG,
// else the shipped linux-iommu.yaml.
int ListCommits(const std::string& catalog_path) {
  std::string path = catalog_path;
  if (path.empty()) {
    absl::StatusOr<std::string> def = farm::emu::DefaultCatalogPath();
    if (!def.ok()) return ExitFor(def.status());
    path = *def;
  }
  absl::StatusOr<farm::emu::Catalog> catalog =
      farm::emu::Catalog::LoadFile(path, farm::emu::CheckModelKey);
  if (!catalog.ok()) return ExitFor(catalog.status());
  std::cout << "catalog " << catalog->name() << " (" << path
            << "), oldest first; settings accumulate (aliases: stock-2016 = v4.6, "
               "patched-2016 = aa4732406e12, latest/default = the last entry)\n";
  for (const farm::emu::CatalogCommit& c : catalog->commits()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : c.set) kv.push_back(absl::StrCat(k, "=", v));
    std::cout << c.id << "\t" << c.subject << "\n";
    if (!kv.empty()) std::cout << "\tset: " << absl::StrJoin(kv, ", ") << "\n";
  }
  return 0;
}

int ListParams(const std::string& platform, const std::string& kernel) {
  const farm::emu::ModelConfig* resolved = nullptr;
  absl::StatusOr<farm::emu::ModelConfig> cfg;
  if (!platform.empty()) {
    farm::emu::RunSpec spec;
    spec.platform = platform;
    spec.kernel = kernel.empty() ? "latest" : kernel;
    cfg = farm::emu::ResolveModel(spec);
    if (!cfg.ok()) return ExitFor(cfg.status());
    resolved = &*cfg;
  }
  for (const farm::emu::ParamSpec& p : farm::emu::AllParams()) {
    std::cout << p.key << " = " << (resolved ? resolved->Get(p.key) : p.default_value);
    if (!p.unit.empty()) std::cout << " " << p.unit;
    if (resolved) std::cout << "  (default " << p.default_value << ")";
    if (!p.choices.empty()) std::cout << "  [" << absl::StrJoin(p.choices, "|") << "]";
    std::cout << "\n    " << p.description << "\n";
  }
  return 0;
}

// `farm-emu run`: one emulation, its result printed in --format.
struct RunFlags {
  farm::emu::RunSpec spec;
  std::vector<std::string> params, sets;
  std::string format = "json";
};

CLI::App* AddRunCommand(CLI::App& app, RunFlags* f) {
  CLI::App* run = app.add_subcommand("run", "run one emulation and print its result");
  run->add_option("--platform", f->spec.platform, "platform (farm-emu list platforms)")->required();
  run->add_option("--kernel", f->spec.kernel,
                  "kernel: a commit of the catalog (tag, or commit id: full or >= 7 hex "
                  "digits; farm-emu list commits), stock-2016, patched-2016, latest, raw keys "
                  "k=v,..., or ID+k=v,...")
      ->capture_default_str();
  run->add_option("--mode", f->spec.mode,
                  absl::StrCat("IOMMU mode: ", farm::iommu_mode::WordList()))
      ->required();
  run->add_option("--workload", f->spec.workload, "workload (farm-emu list workloads)")->required();
  run->add_option("--param", f->params, "workload parameter k=v (repeatable)");
  run->add_option("--set", f->sets,
                  "model key override key=value (repeatable; farm-emu list params)");
  run->add_option("--catalog", f->spec.catalog,
                  "commit catalog YAML (default: $FARM_EMU_CATALOG, else the shipped "
                  "emu/model/catalogs/linux-iommu.yaml)");
  run->add_option("--seed", f->spec.seed, "RNG seed; same inputs and seed give the same output")
      ->capture_default_str();
  run->add_option("--format", f->format,
                  "output format: json, text, kernel (dma-map-bench: the kernel tool's three "
                  "lines), fio-json (fio-nvme, nvmf-target: fio's JSON report) or iozone "
                  "(iozone-nfsrdma: iozone's throughput report)")
      ->check(CLI::IsMember({"json", "text", "kernel", "fio-json", "iozone"}))
      ->capture_default_str();
  return run;
}

// `farm-emu list`: the registries and the commit catalog.
struct ListFlags {
  std::string what, list_platform, list_kernel, list_catalog;
};

CLI::App* AddListCommand(CLI::App& app, ListFlags* f) {
  CLI::App* list = app.add_subcommand("list", "list platforms, workloads, commits or params");
  list->add_option("what", f->what, "platforms | workloads | commits | params")
      ->required()
      ->check(CLI::IsMember({"platforms", "workloads", "commits", "params"}));
  list->add_option("--platform", f->list_platform,
                   "with params: show values resolved for this platform");
  list->add_option("--kernel", f->list_kernel, "with params and --platform: resolve this kernel");
  list->add_option("--catalog", f->list_catalog, "with commits: list this catalog file instead");
  return list;
}

int List(const ListFlags& f) {
  if (f.what == "platforms") ListPlatforms();
  if (f.what == "workloads") ListWorkloads();
  if (f.what == "commits") return ListCommits(f.list_catalog);
  if (f.what == "params") return ListParams(f.list_platform, f.list_kernel);
  return 0;
}

// `farm-emu check-catalog`: every `expect:` of the catalog against the model
// (emu/run/catalog_check.h), one table.
CLI::App* AddCheckCatalogCommand(CLI::App& app, farm::emu::CatalogCheckOptions* o) {
  CLI::App* check = app.add_subcommand(
      "check-catalog",
      "run every commit of the catalog that records what was reported about its performance "
      "(expect:) against its baseline and print model vs report; exits 1 on a disagreement "
      "the catalog does not mark model_todo, or on a model_todo the model now meets");
  check->add_option("--catalog", o->catalog,
                    "commit catalog YAML (default: $FARM_EMU_CATALOG, else the shipped one)");
  check->add_option("--commit", o->commit, "check only this commit's expectations");
  check->add_option("--jobs", o->jobs, "emulations at once (default: the host's CPUs)")
      ->check(CLI::Range(1, 256));
  return check;
}

int CheckCatalogCommand(const farm::emu::CatalogCheckOptions& o) {
  absl::StatusOr<std::vector<farm::emu::CatalogCheckRow>> rows = farm::emu::CheckCatalog(o);
  if (!rows.ok()) return ExitFor(rows.status());
  std::cout << farm::emu::FormatCatalogCheck(*rows);
  return farm::emu::CatalogCheckFailed(*rows) ? 1 : 0;
}

int Run(RunFlags& f) {  // fills f.spec from --param / --set
  for (const std::string& p : f.params) {
    if (!SplitKv(p, f.spec.params, "--param")) return kUsageError;
  }
  for (const std::string& s : f.sets) {
    if (!SplitKv(s, f.spec.sets, "--set")) return kUsageError;
  }
  if (f.format == "kernel" && f.spec.workload != "dma-map-bench") {
    std::cerr << "farm-emu: --format kernel is only defined for dma-map-bench\n";
    return kUsageError;
  }
  if (f.format == "fio-json" && f.spec.workload != "fio-nvme" && f.spec.workload != "nvmf-target") {
    std::cerr << "farm-emu: --format fio-json is only defined for fio-nvme and nvmf-target\n";
    return kUsageError;
  }
  if (f.format == "iozone" && f.spec.workload != "iozone-nfsrdma") {
    std::cerr << "farm-emu: --format iozone is only defined for iozone-nfsrdma\n";
    return kUsageError;
  }
  auto result = farm::emu::RunEmulation(f.spec);
  if (!result.ok()) return ExitFor(result.status());
  if (f.format == "json") {
    std::cout << farm::emu::FormatJson(*result);
  } else if (f.format == "text") {
    std::cout << farm::emu::FormatText(*result);
  } else {
    auto k = farm::emu::FormatKernel(*result);
    if (!k.ok()) return ExitFor(k.status());
    std::cout << *k;
  }
  return 0;
}

// `farm-emu fidelity`: runs every published row of the current platforms and
// prints the table docs/fidelity.md carries verbatim.
int Fidelity() {
  absl::StatusOr<std::vector<farm::emu::PlatformFidelityRow>> rows =
      farm::emu::PlatformsTodayFidelity();
  if (!rows.ok()) return ExitFor(rows.status());
  std::cout << farm::emu::FormatPlatformFidelity(*rows);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "farm-emu: IOMMU / DMA-API emulation core of iommu-farm. Discrete-event simulation of "
      "virtual CPUs running the kernel's DMA mapping paths (IOVA allocator, rcache, page "
      "tables, flush queues, VT-d QI, SMMUv3 cmdq, MMU-500 TLB sync) on an emulated "
      "platform."};
  app.require_subcommand(1);
  RunFlags run_flags;
  AddRunCommand(app, &run_flags);
  ListFlags list_flags;
  CLI::App* list = AddListCommand(app, &list_flags);
  farm::emu::CatalogCheckOptions check_options;
  CLI::App* check = AddCheckCatalogCommand(app, &check_options);
  CLI::App* fidelity = app.add_subcommand(
      "fidelity",
      "run the current platforms' rows against their published figures and print the table "
      "docs/fidelity.md carries");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kUsageError;
  }
  if (check->parsed()) return CheckCatalogCommand(check_options);
  if (fidelity->parsed()) return Fidelity();
  return list->parsed() ? List(list_flags) : Run(run_flags);
}
