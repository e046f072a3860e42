// farmctl's catalog commands: catalog list, show, load, measure, import-git.
// Their flags (AddCatalogCommands), what each does against a farm, and the
// catalog views. The git history and the measured costs they turn into
// catalogs are cli/git_import.h and cli/measured_costs.h.
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; the Format* functions are pure and reentrant.
#ifndef CLI_CATALOG_H_
#define CLI_CATALOG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

void AddCatalogCommands(CLI::App& app, Subcommands* out);

int RunCatalogList(Commands& commands, OutputFormat format);
int RunCatalogShow(Commands& commands, const std::string& name, bool resolve, OutputFormat format);
int RunCatalogLoad(Commands& commands, const std::string& path, bool replace);
// A measured catalog (cli/measured_costs.h) from the `mode` runs of a real
// dma-map-bench matrix, the deltas over `reference`, loaded as `name`
// (replacing one of that name; "" = "<catalog>-measured"), or only printed.
int RunCatalogMeasure(Commands& commands, int64_t matrix_id, const std::string& reference,
                      const std::string& name, const std::string& mode, bool print_only);
int RunCatalogImportGit(Commands& commands, const std::string& repo, const std::string& range,
                        const std::string& catalog);

// Counts each catalog's commits, so the catalogs must carry them (GetCatalog;
// ListCatalogs omits them).
std::string FormatCatalogList(const std::vector<pb::Catalog>& catalogs,
                              OutputFormat format = OutputFormat::kTable);
// The table (a header line, then one row per commit), CSV of the commits, or
// the catalog message as JSON.
std::string FormatCatalog(const pb::Catalog& catalog, OutputFormat format = OutputFormat::kTable);

}  // namespace farm::cli

#endif  // CLI_CATALOG_H_
