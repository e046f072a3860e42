#include "emu/model/kernel.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "emu/model/catalog.h"
#include "emu/model/model_config.h"

namespace farm::emu {

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
    absl::StatusOr<farm::emu::Catalog> catalog = farm::emu::Catalog::LoadFile(path, CheckModelKey);
    if (!catalog.ok()) return catalog.status();
    if (base == "latest" || base == "default") base = catalog->commits().back().id;
    absl::StatusOr<farm::emu::ResolvedCommit> r = catalog->Resolve(base);
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
