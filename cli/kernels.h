// farmctl's kernel store commands (lib/kstore, docs/kernels.md): kernels
// import, list, catalog, build. Their flags (AddKernelsCommands), what each
// does, and farmctl's view of a store: the catalog commits a store's builds
// stand for, and the table `farmctl kernels list` prints.
//
// Thread-safety: the Run* functions use their Commands (cli/commands.h),
// one per thread; KernelCatalogRequest and FormatKernelBuilds are pure
// functions of their arguments, thread-safe.
#ifndef CLI_KERNELS_H_
#define CLI_KERNELS_H_

#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/commands.h"
#include "cli/format.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kstore/kernel_store.h"

namespace farm::cli {

void AddKernelsCommands(CLI::App& app, Subcommands* out);

// import and list work on the local store only; catalog adds the store's
// commits to a catalog on the server.
int RunKernelsImport(Commands& commands, const std::string& store, const std::string& deb,
                     const std::string& commit, bool replace);
int RunKernelsList(Commands& commands, const std::string& store, OutputFormat format);
int RunKernelsCatalog(Commands& commands, const std::string& store, const std::string& catalog);
// Builds one commit of a kernel tree into the local store (lib/kbuild),
// without a farm; the build's whole output goes to `log_file` when given.
int RunKernelsBuild(Commands& commands, const kbuild::BuildRequest& request,
                    const std::string& log_file);

// The request that adds `builds` to `catalog` (ImportGitCatalog, which
// appends the commits the catalog does not hold yet and records the source
// as "git:kstore:<store_dir>"): one commit per commit id, in
// kstore::CatalogOrder, its subject naming the kernel release(s) and the
// package version, e.g. "kernel 6.1.0-57-cloud-amd64 (6.1.192-3)". The
// commits carry no model settings, so in the emulator they inherit the
// state of the commit before them.
iommufarm::v1::ImportGitCatalogRequest KernelCatalogRequest(
    const std::vector<kstore::KernelBuild>& builds, const std::string& catalog,
    const std::string& store_dir);

// The table is one line per build: commit, arch, release, version,
// directory (tab separated, with a header line). CSV has those columns and
// the build's files; JSON is an array of objects with every manifest field
// and the directory.
std::string FormatKernelBuilds(const std::vector<kstore::KernelBuild>& builds,
                               OutputFormat format = OutputFormat::kTable);

}  // namespace farm::cli

#endif  // CLI_KERNELS_H_
