// Commit catalog files (docs/catalog.md) for the scheduler: the
// text is parsed by the emulator's catalog loader (emu/model/catalog.h, target
// farm_emu_model), the one catalog parser in the tree, and converted to
// the API's Catalog message that the scheduler stores in PostgreSQL.
//
// Contract: pure functions, thread-safe. Errors are kInvalidArgument whose
// message starts with "<source_name>:<line>: " (from the loader), e.g.
// `mine.yaml:4: duplicate commit id 'a' (first at mine.yaml:3)`. Each `set:`
// key is held to what a spec's is (lib/spec/table_checks.h CheckSetKey), so
// a catalog cannot queue jobs every agent would refuse; a commit's `expect:`
// entries are checked as farm-emu checks them (fields, platforms, modes,
// bands, and the workload's params against the emulator's tables). The
// expectations are not stored: the scheduler never runs them. Aliases may
// expand the text at most about four times (lib/spec/yaml_limits.h), the
// parsed catalog is at most kMaxCatalogBytes, and every string of it is
// NUL-free UTF-8 (scheduler/storable_text.h, naming the field).
#ifndef SCHEDULER_CATALOG_YAML_H_
#define SCHEDULER_CATALOG_YAML_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::scheduler {

// A parsed catalog's largest size: it is read back whole (GetCatalog).
inline constexpr size_t kMaxCatalogBytes = 32 << 20;

// `source_name` prefixes error messages (e.g. the file name). The catalog
// must be named (`catalog:`): the database keys catalogs by name.
absl::StatusOr<::iommufarm::v1::Catalog> ParseCatalogYaml(std::string_view yaml,
                                                          const std::string& source_name);

// Fills every commit's `resolved` with the settings accumulated from the
// first commit up to and including it.
void ResolveCatalog(::iommufarm::v1::Catalog* catalog);

}  // namespace farm::scheduler

#endif  // SCHEDULER_CATALOG_YAML_H_
