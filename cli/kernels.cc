#include "cli/kernels.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

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
