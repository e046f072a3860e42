#include "cli/kernels.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::string FormatKernelBuilds(const std::vector<kstore::KernelBuild>& builds) {
  std::string out = "COMMIT\tARCH\tRELEASE\tVERSION\tDIR\n";
  for (const kstore::KernelBuild& b : builds) {
    absl::StrAppend(&out, b.commit, "\t", b.arch, "\t", b.release, "\t",
                    b.version.empty() ? "-" : b.version, "\t", b.dir, "\n");
  }
  return out;
}

}  // namespace farm::cli
