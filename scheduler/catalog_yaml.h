// Commit catalog files (design.md "Commit catalogs"): YAML with `catalog:`
// and `commits:` (oldest first; each {id, subject, set: {key: value}}).
//
// Contract: pure functions, thread-safe. Parse errors name the field path
// (e.g. `commits[3].id: duplicate "v5.10"`), all reported at once in one
// kInvalidArgument. Unknown extra keys are ignored so the emulator's own
// richer catalog files load too. The scheduler keeps its own light parser
// on purpose: it must not link the emulator.
#ifndef SCHEDULER_CATALOG_YAML_H_
#define SCHEDULER_CATALOG_YAML_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::scheduler {

// `source_name` prefixes error messages (e.g. the file name).
absl::StatusOr<::iommufarm::v1::Catalog> ParseCatalogYaml(std::string_view yaml,
                                                          const std::string& source_name);

// Fills every commit's `resolved` with the settings accumulated from the
// first commit up to and including it.
void ResolveCatalog(::iommufarm::v1::Catalog* catalog);

}  // namespace farm::scheduler

#endif  // SCHEDULER_CATALOG_YAML_H_
