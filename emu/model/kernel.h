// emu/model/kernel.h: what `--kernel ID [--catalog FILE]` resolves to.
//
// A kernel is a set of model-key settings. Until the commit-catalog loader
// (emu/catalog.*, next issue) exists, a small built-in list of commits and
// tags from docs/iommu.md stands in for it; it has the catalog's semantics:
// oldest first, each entry's `set` accumulates over the ones before it, and
// resolving an id returns the accumulated settings up to that entry.
// ResolveKernel() is the single entry point the CLI and the agent use, so the
// catalog can replace the built-in list without touching callers.
// Thread-safety: the built-in list is immutable.
#ifndef EMU_MODEL_KERNEL_H_
#define EMU_MODEL_KERNEL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace farm::emu {

struct CommitEntry {
  std::string id;
  std::string subject;
  std::map<std::string, std::string> set;
};

//! The built-in commit list, oldest first.
const std::vector<CommitEntry>& BuiltinCommits();

//! Accumulated settings for `id` over an ordered commit list; NotFound when
//! `id` is not in it.
absl::StatusOr<std::map<std::string, std::string>> AccumulateSettings(
    const std::vector<CommitEntry>& commits, const std::string& id);

//! Resolves --kernel. Accepts:
//!  - a built-in id or tag (e.g. v4.6, 9257b4a206fc, v5.11) and the aliases
//!    "stock-2016" (v4.6), "patched-2016" (aa4732406e12), "latest"/"default";
//!  - raw model keys "k=v,k2=v2" applied on top of the registry defaults;
//!  - "ID+k=v,..." : a commit's settings with extra keys on top.
//! With a non-empty `catalog_path` it returns Unimplemented until the catalog
//! loader lands.
absl::StatusOr<std::map<std::string, std::string>> ResolveKernel(const std::string& id,
                                                                 const std::string& catalog_path);

}  // namespace farm::emu

#endif  // EMU_MODEL_KERNEL_H_
