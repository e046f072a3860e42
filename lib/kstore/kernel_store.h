// kernel_store: kernels per commit. A kernel store is a directory of kernel
// builds, one build directory each, keyed by the catalog commit id the
// kernel was built from. Each build directory holds a manifest,
// `kernel.yaml` (format in docs/kernels.md, "Kernel store"):
//
//   commit: v6.1.192                # required: the commit id jobs name
//   release: 6.1.0-57-cloud-arm64   # required: the kernel's `uname -r`
//   arch: aarch64                   # required: x86_64 or aarch64
//   image: vmlinuz                  # required: the bootable image
//   initrd: initrd.img              # optional: its initramfs (bare-metal kexec)
//   config: config                  # optional: the kernel's .config
//   modules: modules                # optional: its lib/modules/<release>
//   version: 6.1.192-3              # optional: orders builds in a catalog
//   source: linux-image-6.1.0-57-cloud-arm64_6.1.192-3_arm64.deb  # optional
//
// A build the kernel builder (lib/kbuild) made also says how it was made:
//
//   tree: https://git.kernel.org/...linux.git   # the source tree
//   config_hash: 3f2a...                        # sha256 of the final .config
//   fragments: [q35-intel-iommu.config]         # config fragments, in order
//   compiler: gcc (Debian 12.2.0-14) 12.2.0
//   build_seconds: 43.2                         # the build's wall time
//   dma_map_benchmark: dma_map_benchmark        # optional: the tree's
//       tools/testing/selftests/dma tool, built static for the guest
//   kernel_config: 3f0c1d2e4a5b6c7d             # optional: the build config
//       id (proto/kernel_config.h); absent for the default config
//
// Paths are relative to the build directory and stay inside it. A build
// directory without a manifest but with a `vmlinuz` (the layout
// scripts/fetch-test-kernels wrote before it wrote manifests:
// DIR/<release>/vmlinuz, `arch` and `config` beside it) reads as the build
// whose commit and release are the directory's name. Directories starting
// with '.' are work in progress and skipped.
//
// A build is keyed by (commit, arch, kernel_config): one commit may have a
// build per guest architecture and kernel config.
//
// ImportDeb turns a Debian linux-image package into a build (dpkg-deb -x;
// the image from boot/vmlinuz-<release>, boot/config-<release>, the modules
// from lib/modules/<release>), written under a temporary name and renamed
// into place, so a reader never sees half a build.
//
// Thread-safety: free functions over the file system, reentrant; concurrent
// imports of different commits are safe, of the same commit the last rename
// wins. Errors: absl::Status; a manifest error names the file and the key.
#ifndef LIB_KSTORE_KERNEL_STORE_H_
#define LIB_KSTORE_KERNEL_STORE_H_

#include <string>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::kstore {

inline constexpr char kManifestName[] = "kernel.yaml";
inline constexpr char kArchX86[] = "x86_64";
inline constexpr char kArchArm64[] = "aarch64";

struct KernelBuild {
  std::string commit;
  std::string release;
  std::string arch;
  std::string image;    // relative to dir
  std::string initrd;   // relative to dir; "" when the build has none
  std::string config;   // relative to dir; "" when the build has none
  std::string modules;  // relative to dir; "" when the build has none
  std::string version;  // "" when the manifest names none
  std::string source;
  std::string tree;                    // "" for a build not made from a tree
  std::string config_hash;             // "" when unknown
  std::vector<std::string> fragments;  // file names; empty when none
  std::string compiler;                // "" when unknown
  std::string build_seconds;           // "" when unknown
  std::string dma_map_benchmark;       // relative to dir; "" when the build has none
  std::string kernel_config;           // the build config id; "" for the default
  std::string dir;                     // the build directory (filled by ReadBuild / ReadStore)

  std::string ImagePath() const;
  std::string InitrdPath() const;           // "" when no initrd
  std::string ConfigPath() const;           // "" when no config
  std::string ModulesPath() const;          // "" when no modules
  std::string DmaMapBenchmarkPath() const;  // "" when the build has no tool
};

// Parses a manifest. `origin` names it in errors ("DIR/kernel.yaml: ...").
// InvalidArgument for text that is not UTF-8 or YAML that does not parse, a
// missing or empty required key, an unknown key, a non-scalar value, a
// commit id or release that is not a plain name ([A-Za-z0-9._+-], not starting with '.' or '-'), an
// unknown arch, or a path that is absolute or climbs out with "..".
absl::StatusOr<KernelBuild> ParseManifest(absl::string_view text, absl::string_view origin);

// The manifest text of `build` (keys in the order above; empty optional keys
// left out). ParseManifest(FormatManifest(b)) gives b back (dir aside).
std::string FormatManifest(const KernelBuild& build);

// True for a plain commit id / release name (see ParseManifest).
bool IsPlainName(absl::string_view name);

// One build directory: its manifest, or the manifest-less layout above.
// NotFound when it has neither; the manifest's errors otherwise; also
// InvalidArgument when the image the manifest names is not a regular file.
absl::StatusOr<KernelBuild> ReadBuild(const std::string& build_dir);

struct StoreListing {
  std::vector<KernelBuild> builds;    // sorted by (commit, arch, kernel_config), one per key
  std::vector<std::string> problems;  // builds skipped, each with its reason
};

// Every build of the store at `dir`. NotFound when `dir` is not a directory.
// A build that does not read, or that repeats a (commit, arch, kernel_config) already
// listed (in directory-name order), is skipped and named in `problems`.
absl::StatusOr<StoreListing> ReadStore(const std::string& dir);

// Builds in catalog order, oldest first: by `version` (else release) in
// natural order (digit runs compared as numbers), then by commit.
std::vector<KernelBuild> CatalogOrder(std::vector<KernelBuild> builds);

// Natural order of two version strings: <0, 0, >0.
int CompareVersions(absl::string_view a, absl::string_view b);

// True when the .config text sets `symbol` to y ("CONFIG_AMD_IOMMU=y").
bool ConfigEnabled(absl::string_view config_text, absl::string_view symbol);

// Whether `build`'s config sets `symbol` to y; false when it has no config
// or the config does not read.
bool BuildConfigEnabled(const KernelBuild& build, absl::string_view symbol);

struct DebImport {
  std::string deb;     // a linux-image-*.deb
  std::string commit;  // the commit id the build is keyed by
  bool replace = false;
  std::string dpkg_deb = "dpkg-deb";  // a name on PATH or a path
};

// Imports a Debian linux-image package as the build of `request.commit`
// for the package's architecture, in `store_dir`/<commit>-<arch> (the store
// directory is made when missing; a replaced build's directory goes).
// InvalidArgument for a bad commit id, a file that is not a linux-image
// package (no boot/vmlinuz-<release>) or an architecture the farm does not
// boot; AlreadyExists when (commit, arch) has a build and !replace;
// FailedPrecondition when dpkg-deb is missing or fails; Internal for I/O.
absl::StatusOr<KernelBuild> ImportDeb(const std::string& store_dir, const DebImport& request);

}  // namespace farm::kstore

#endif  // LIB_KSTORE_KERNEL_STORE_H_
