// emu/model/kernel.h: what `--kernel ID [--catalog FILE]` resolves to.
//
// A kernel is a set of model-key settings. ResolveKernel() is the single
// entry point the CLI, the run driver and the agent use; it accepts:
//  - a commit of the commit catalog (emu/model/catalog.h): a tag (v5.11) or a
//    commit id, full or abbreviated; its settings accumulated over every
//    entry before it. The aliases "stock-2016" (v4.6), "patched-2016"
//    (aa4732406e12) and "latest"/"default" (the catalog's last entry) name
//    catalog entries too;
//  - raw model keys "k=v,k2=v2", applied on top of the registry defaults;
//  - "ID+k=v,...": a commit's settings with extra keys on top.
// The catalog is `catalog_path`, else $FARM_EMU_CATALOG, else the shipped
// emu/model/catalogs/linux-iommu.yaml (DefaultCatalogPath); its keys are
// checked against the model-key registry. Errors: NotFound for an unknown
// commit or when no catalog is found; the loader's "<file>:<line>: " errors
// for a bad catalog; InvalidArgument for malformed raw keys.
// Thread-safety: reentrant. A loaded catalog is kept per path (process-wide,
// under a mutex) and reused while the file holds the same text; an edited
// file is parsed again.
#ifndef EMU_MODEL_KERNEL_H_
#define EMU_MODEL_KERNEL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace farm::emu {

absl::StatusOr<std::map<std::string, std::string>> ResolveKernel(const std::string& id,
                                                                 const std::string& catalog_path);

}  // namespace farm::emu

#endif  // EMU_MODEL_KERNEL_H_
