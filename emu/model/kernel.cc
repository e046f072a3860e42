#include "emu/model/kernel.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "emu/model/catalog.h"
#include "emu/model/model_config.h"
#include "lib/base/file.h"

namespace farm::emu {
namespace {

// A catalog file as last loaded, reused while the file holds the same text.
// Parsing the shipped catalog (its `expect:` entries included) costs more
// than a short run's whole model, and every run resolves its kernel through
// it; reading the file to compare is cheap. (Size and modification time
// would not do: a rewrite within one timestamp tick keeps both.)
struct LoadedCatalog {
  std::string text;
  std::shared_ptr<const Catalog> catalog;
};

class CatalogCache {
 public:
  absl::StatusOr<std::shared_ptr<const Catalog>> Load(const std::string& path) {
    absl::StatusOr<std::string> text = base::ReadFile(path);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat("cannot open catalog file '", path, "'"));
    }
    {
      absl::MutexLock lock(&mu_);
      if (auto it = loaded_.find(path); it != loaded_.end() && it->second.text == *text) {
        return it->second.catalog;
      }
    }
    // Commit keys are checked against the model-key registry.
    absl::StatusOr<Catalog> catalog = Catalog::LoadString(*text, path, CheckModelKey);
    if (!catalog.ok()) return catalog.status();
    auto shared = std::make_shared<const Catalog>(*std::move(catalog));
    absl::MutexLock lock(&mu_);
    loaded_[path] = LoadedCatalog{*std::move(text), shared};
    return shared;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, LoadedCatalog> loaded_ ABSL_GUARDED_BY(mu_);
};

CatalogCache& Cache() {
  static CatalogCache* cache = new CatalogCache();  // never destroyed: runs may outlive main
  return *cache;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ResolveKernel(const std::string& id,
                                                                 const std::string& catalog_path) {
  std::string base = id;
  std::string extra;
  if (size_t plus = id.find('+'); plus != std::string::npos) {
    base = id.substr(0, plus);
    extra = id.substr(plus + 1);
  } else if (id.find('=') != std::string::npos) {
    base = "";
    extra = id;
  }
  std::map<std::string, std::string> out;
  if (base == "stock-2016") base = "v4.6";
  if (base == "patched-2016") base = "aa4732406e12";
  if (!base.empty()) {
    // Commit ids and tags resolve through the commit catalog (emu/model/catalog.h):
    // --catalog FILE, else $FARM_EMU_CATALOG, else the shipped linux-iommu.yaml.
    // Its keys are checked against the model-key registry.
    std::string path = catalog_path;
    if (path.empty()) {
      absl::StatusOr<std::string> def = farm::emu::DefaultCatalogPath();
      if (!def.ok()) return def.status();
      path = *def;
    }
    absl::StatusOr<std::shared_ptr<const Catalog>> catalog = Cache().Load(path);
    if (!catalog.ok()) return catalog.status();
    if (base == "latest" || base == "default") base = (*catalog)->commits().back().id;
    absl::StatusOr<farm::emu::ResolvedCommit> r = (*catalog)->Resolve(base);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("--kernel: ", r.status().message(),
                                                          " (catalog ", path, ")"));
    }
    out = std::move(r->settings);
  }
  if (!extra.empty()) {
    auto kv = ParseKeyValues(extra);
    if (!kv.ok()) return kv.status();
    for (const auto& [k, v] : *kv) out[k] = v;
  }
  return out;
}

}  // namespace farm::emu
