// kernel_builder: builds one commit of a kernel git tree into a kernel-store
// build (lib/kstore), the way the vm and kexec providers boot them.
//
// The tree is a local git repository or a URL git can reach; the builder
// keeps a mirror of it (<cache>/mirrors/<tree-id>.git, fetched when a
// revision is not a commit it already holds) and, per (tree, arch, config),
// one build directory <cache>/builds/<tree-id>-<arch>-<config-id> holding a
// worktree of the mirror (src/) and the `make O=` output (obj/). The
// directory is reused from commit to commit (the worktree is checked out, so
// only the files a commit changed get new times and make rebuilds only
// them), locked while a build uses it (build_cache.h), and the cache is kept
// under a byte bound by least-recently-used eviction after each build.
//
// The config: the base (a make target such as tinyconfig or defconfig, or a
// file copied to .config), then the fragments merged as merge_config.sh does
// (kconfig.h), then `make olddefconfig`; every option a fragment asked for
// must hold afterwards. The .config is kept as it is, without running any
// of that, when what it is made from is unchanged since the build directory
// last made it: the base and fragments, the toolchain's versions, and the
// tree's files kconfig reads (every Kconfig*, scripts/, kernel/configs/, the
// arch's configs and Makefiles, the top Makefile), so a bisect step that
// changes none of them spends no time in kconfig. The identity is
// reproducible: KBUILD_BUILD_TIMESTAMP is the commit's committer date, user
// and host are fixed, LOCALVERSION is -g<12 hex digits of the commit> with
// CONFIG_LOCALVERSION_AUTO off, so one commit and config give one `make
// kernelrelease`. x86_64 builds bzImage; aarch64 cross-compiles Image with
// aarch64-linux-gnu-gcc. ccache is used when installed (CCACHE_DIR
// <cache>/ccache). Modules are not built: the shipped fragments build what a
// guest needs in. The tree's DMA-API benchmark tool
// (tools/testing/selftests/dma/dma_map_benchmark.c) is built static with the
// same compiler and stored beside the image when the tree has it (again only
// when a file it includes changed, as make decides).
//
// The result is written to <store>/<commit>-<arch> (-<config id> for a
// config other than the default) under a temporary name
// and swapped into place (renameat2 RENAME_EXCHANGE), so a reader sees the
// old build or the new one, never half of one.
//
// Thread-safety: BuildKernel is reentrant; concurrent builds of one build
// directory wait for its lock, of one tree serialize on the mirror's lock
// for fetch and worktree changes only. Blocking: it runs make to the end.
//
// Progress: while make compiles, its output is read as it comes
// (build_progress.h) and reported through BuildRequest.progress with the
// objects compiled and, for a build that starts with an empty build
// directory, the object count of the last such build of that directory
// (kept in <cache>/stats/<build directory name>.objects), so the report
// reads "n of ~N objects".
#ifndef LIB_KBUILD_KERNEL_BUILDER_H_
#define LIB_KBUILD_KERNEL_BUILDER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/kbuild/build_progress.h"
#include "lib/kbuild/fragments.h"
#include "lib/kstore/kernel_store.h"

namespace farm::kbuild {

struct BuildRequest {
  std::string tree;  // a local git repository or a git URL
  std::string rev;   // any revision git rev-parse resolves to a commit
  std::string arch = kstore::kArchX86;
  std::string machine;  // a shipped fragment's model (fragments.h); "" for none
  // A make target (tinyconfig, defconfig, ...) or, when it names an existing
  // file or holds a '/', a config file.
  std::string base = "tinyconfig";
  // The base config's text when it is given rather than read (a build job's
  // kernel_config); `base` then only names it.
  std::string base_text;
  // The base's modules are built in: every `CONFIG_X=m` of the base (a file
  // or a make target's output) is read as `=y` before the fragments merge.
  // The builder builds no modules, so without it a host's config would lose
  // its modular drivers (its root device among them) instead of booting
  // without an initramfs.
  bool modules_built_in = false;
  // Merge the shipped dma-map-bench fragment (CONFIG_DMA_MAP_BENCHMARK)
  // after the machine's: a dma-map-bench job boots the kernel.
  bool dma_map_bench = false;
  std::vector<std::string> fragments;      // fragment files, merged after the machine's
  std::vector<Fragment> inline_fragments;  // given as text, merged after `fragments`
  // The build config id (proto/kernel_config.h): the store entry is then
  // <commit>-<arch>-<config_id> and its manifest's kernel_config says it;
  // "" for the default config (<commit>-<arch>).
  std::string config_id;
  std::string store_dir;   // the kernel store the build goes to
  std::string cache_root;  // "" for DefaultCacheRoot()
  std::uint64_t cache_max_bytes = std::uint64_t{20} << 30;
  int jobs = 0;               // make -j; 0 for the number of CPUs
  std::string make = "make";  // a name on PATH or a path (tests give a fake)
  std::string git = "git";
  bool use_ccache = true;                   // when ccache is on PATH
  absl::Duration timeout = absl::Hours(3);  // the whole build
  std::function<bool()> cancelled;          // may be empty; polled while make runs
  // A try job's patch (a unified diff, `git apply`): applied on `rev` and
  // committed with a fixed identity and the revision's committer date, so
  // one base and patch give one commit id; the build is then that commit's.
  std::string patch;
  // The commit the store entry is named by and its manifest records; ""
  // for the commit built. A try build is stored under its try id
  // (proto/try_commit.h), which the jobs waiting for it carry.
  std::string store_commit;
  // May be empty: the build's progress (build_progress.h), on the calling
  // thread, on each phase change and at most every 15 s while make compiles.
  std::function<void(const BuildProgress&)> progress;
};

struct BuildResult {
  kstore::KernelBuild build;         // the store entry written
  std::string commit;                // the full commit id
  std::string release;               // `make -s kernelrelease`
  std::string build_dir;             // the cache's build directory
  bool reused_build_dir = false;     // it held an earlier build's output
  std::vector<std::string> evicted;  // cache directories removed after the build
  absl::Duration wall_time;
};

// Builds `request`. Every command and its output is appended to `log` (the
// build job's raw output), whether the build succeeds or not; `log` may be
// null. Errors:
// - InvalidArgument: an unknown arch or machine, a base or fragment file
//   that does not read, a revision the tree does not have;
// - FailedPrecondition (permanent for this commit and config), every one
//   "build failed at <sha>: <why>" so that a bisect skips the commit: a
//   fragment option the tree's Kconfig does not define (named), options
//   olddefconfig dropped (listed), or the commit does not build (the first
//   compiler or kconfig error line);
// - Unavailable: the tree cannot be fetched, or the build directory's lock
//   is held past the timeout; DeadlineExceeded / Cancelled for a build
//   stopped by `timeout` / `cancelled`;
// - NotFound: make, git or the compiler is missing; Internal: I/O.
absl::StatusOr<BuildResult> BuildKernel(const BuildRequest& request, std::string* log);

// The line a failed build's output is reported by: the first compiler,
// linker or kconfig error (": error: ", ": fatal error: ", "undefined
// reference to", ": syntax error"), else the first make "***" line, else
// the last non-blank line; "" for blank output.
std::string FirstErrorLine(absl::string_view output);

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_KERNEL_BUILDER_H_
