// kbuild_bench: the kernel builder (lib/kbuild) on the test tree
// (scripts/make-test-kernel-tree) with the farm's build-job config (the base,
// tinyconfig, plus every machine model's fragments of the architecture, as
// agent/executors/kbuild_executor builds), in a private cache under --dir.
// Per architecture, in this order:
//
//   clean, cold ccache   the planted commit's parent in an empty cache: the
//                        mirror, the worktree checkout, the config, the build
//   incremental          the planted commit after it in the same build
//                        directory: a bisect step changing one file in
//                        drivers/iommu/
//   clean, warm ccache   the parent again after the build directory is
//                        removed, the ccache kept
//   incremental          the planted commit again, after the warm build
//
// then the sizes of the build directory (obj/ and the src/ worktree), the
// ccache and the image. Each time comes with the load average when it
// started (the machine is shared), the CPU time of make and all it ran
// (what the build costs whatever else runs), the objects make compiled and
// the ccache hits and misses, and the ratios of wall and CPU time to the
// architecture's cold clean build, measured in the same run.
//
//   build/bin/kbuild_bench --dir DIR [--arch x86_64|aarch64]... [--tree DIR]
//                          [--jobs N]
//
// --dir must be new, empty or an earlier run's (it holds .kbuild_bench):
// its cache and store are removed first. The farm's own cache
// (/var/cache/iommu-farm/kbuild) is refused. Without --arch: x86_64, and
// aarch64 when aarch64-linux-gnu-gcc is installed. Run it niced
// (`nice -n 19`) on a shared machine: make inherits the niceness.
#include <stdlib.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "lib/kbuild/build_cache.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kernel_builder.h"
#include "lib/kbuild/test_tree.h"
#include "lib/process/process.h"

namespace {

namespace fs = std::filesystem;
namespace kbuild = ::farm::kbuild;
namespace process = ::farm::process;

constexpr char kMarker[] = ".kbuild_bench";

int Fail(const std::string& what) {
  std::fprintf(stderr, "kbuild_bench: %s\n", what.c_str());
  return 1;
}

std::uintmax_t TreeBytes(const fs::path& dir) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  }
  return total;
}

std::string Mib(std::uintmax_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string Duration(double seconds) {
  if (seconds < 60) return absl::StrFormat("%.1f s", seconds);
  return absl::StrFormat("%d:%04.1f", static_cast<int>(seconds) / 60,
                         seconds - 60 * (static_cast<int>(seconds) / 60));
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one;
}

// `ccache --print-stats` counters of the builder's ccache, or {} when there
// is no ccache.
std::map<std::string, long> CcacheStats(const std::string& ccache_dir, bool zero) {
  process::ProcessOptions p;
  p.argv = {"ccache", zero ? "--zero-stats" : "--print-stats"};
  p.env = std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "CCACHE_DIR=" + ccache_dir};
  std::map<std::string, long> out;
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
  if (!r.ok() || !r->ok() || zero) return out;
  for (absl::string_view line : absl::StrSplit(r->stdout_data, '\n', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    long v = 0;
    if (kv.size() == 2 && absl::SimpleAtoi(kv[1], &v)) out[kv[0]] = v;
  }
  return out;
}

struct Row {
  std::string arch, what, commit, load;
  double seconds = 0;
  double cpu_seconds = 0;  // user + system of make and everything it ran
  int compiled = 0;        // CC and AS lines of make's output
  long hits = -1, misses = -1;
};

// CPU time of the waited-for children (make waits for its own): what a
// build costs whatever else the machine runs.
double ChildrenCpuSeconds() {
  struct rusage u {};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// Objects make built: its "  CC " and "  AS " lines (kbuild's quiet output).
int CompiledObjects(const std::string& log) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StartsWith(line, "  CC ") || absl::StartsWith(line, "  AS ")) ++n;
  }
  return n;
}

class Bench {
 public:
  Bench(std::string dir, kbuild::TestTree tree, int jobs)
      : dir_(std::move(dir)), tree_(std::move(tree)), jobs_(jobs) {}

  // One build of `commit` for `arch`, appended to rows_.
  absl::StatusOr<kbuild::BuildResult> Build(const std::string& arch, const std::string& what,
                                            const std::string& commit) {
    kbuild::BuildRequest req;
    req.tree = tree_.dir;
    req.rev = commit;
    req.arch = arch;
    req.machine = kbuild::kAllMachines;
    req.base = "tinyconfig";
    req.store_dir = (fs::path(dir_) / "store").string();
    req.cache_root = CacheRoot();
    req.jobs = jobs_;
    Row row{arch, what, commit.substr(0, 12), LoadAverage()};
    CcacheStats(CcacheDir(), /*zero=*/true);
    std::fprintf(stderr, "kbuild_bench: %s %s: %s (load %s)...\n", arch.c_str(), what.c_str(),
                 row.commit.c_str(), row.load.c_str());
    std::string log;
    const double cpu_before = ChildrenCpuSeconds();
    absl::StatusOr<kbuild::BuildResult> r = kbuild::BuildKernel(req, &log);
    row.cpu_seconds = ChildrenCpuSeconds() - cpu_before;
    std::ofstream(fs::path(dir_) / absl::StrCat("log-", rows_.size(), "-", arch, ".txt")) << log;
    if (!r.ok()) return r.status();
    row.seconds = absl::ToDoubleSeconds(r->wall_time);
    row.compiled = CompiledObjects(log);
    std::map<std::string, long> stats = CcacheStats(CcacheDir(), /*zero=*/false);
    if (!stats.empty()) {
      row.hits = stats["direct_cache_hit"] + stats["preprocessed_cache_hit"];
      row.misses = stats["cache_miss"];
    }
    std::fprintf(stderr, "kbuild_bench:   %s in %s (%s of CPU), %d objects compiled\n",
                 r->release.c_str(), Duration(row.seconds).c_str(),
                 Duration(row.cpu_seconds).c_str(), row.compiled);
    rows_.push_back(row);
    return r;
  }

  // Clean cold, incremental, clean warm, incremental for `arch`; then sizes.
  absl::Status Arch(const std::string& arch, const std::string& parent) {
    absl::StatusOr<kbuild::BuildResult> cold = Build(arch, "clean, cold ccache", parent);
    if (!cold.ok()) return cold.status();
    absl::StatusOr<kbuild::BuildResult> step = Build(arch, "incremental", tree_.planted);
    if (!step.ok()) return step.status();
    const fs::path build_dir = step->build_dir;
    const std::uintmax_t obj = TreeBytes(build_dir / "obj"), src = TreeBytes(build_dir / "src");
    std::error_code ec;
    fs::remove_all(build_dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("rm ", build_dir.string(), ": ", ec.message()));
    absl::StatusOr<kbuild::BuildResult> warm = Build(arch, "clean, warm ccache", parent);
    if (!warm.ok()) return warm.status();
    step = Build(arch, "incremental", tree_.planted);
    if (!step.ok()) return step.status();
    sizes_.push_back(absl::StrCat(arch, ": build directory obj/ ", Mib(obj), ", src/ ", Mib(src),
                                  "; image ", Mib(fs::file_size(step->build.ImagePath(), ec))));
    return absl::OkStatus();
  }

  void Print() const {
    std::printf("%-8s %-20s %-12s %5s %10s %8s %10s %8s %9s %13s\n", "arch", "build", "commit",
                "load", "wall", "vs cold", "cpu", "vs cold", "compiled", "ccache h/m");
    std::map<std::string, const Row*> cold;
    for (const Row& r : rows_) {
      if (!cold.count(r.arch)) cold[r.arch] = &r;
      const std::string cc = r.hits < 0 ? "-" : absl::StrCat(r.hits, "/", r.misses);
      std::printf("%-8s %-20s %-12s %5s %10s %8.3f %10s %8.3f %9d %13s\n", r.arch.c_str(),
                  r.what.c_str(), r.commit.c_str(), r.load.c_str(), Duration(r.seconds).c_str(),
                  r.seconds / cold[r.arch]->seconds, Duration(r.cpu_seconds).c_str(),
                  r.cpu_seconds / cold[r.arch]->cpu_seconds, r.compiled, cc.c_str());
    }
    for (const std::string& s : sizes_) std::printf("%s\n", s.c_str());
    std::printf("ccache (all architectures): %s\n", Mib(TreeBytes(CcacheDir())).c_str());
  }

 private:
  std::string CacheRoot() const { return (fs::path(dir_) / "cache").string(); }
  std::string CcacheDir() const { return (fs::path(CacheRoot()) / "ccache").string(); }

  const std::string dir_;
  const kbuild::TestTree tree_;
  const int jobs_;
  std::vector<Row> rows_;
  std::vector<std::string> sizes_;
};

// --dir is the bench's: new, empty, or marked by an earlier run; never the
// farm's cache. Its cache and store are removed.
absl::Status PrepareDir(const fs::path& dir) {
  std::error_code ec;
  const fs::path farm_cache = kbuild::DefaultCacheRoot();
  const fs::path abs = fs::weakly_canonical(dir, ec);
  for (fs::path p = abs; !p.empty() && p != p.parent_path(); p = p.parent_path()) {
    if (p == fs::weakly_canonical(farm_cache, ec)) {
      return absl::InvalidArgumentError(absl::StrCat("--dir ", dir.string(), " is in the farm's ",
                                                     "build cache ", farm_cache.string()));
    }
  }
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec) && !fs::exists(dir / kMarker, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dir ", dir.string(), " is neither empty nor an earlier kbuild_bench run's"));
  }
  fs::create_directories(dir, ec);
  std::ofstream(dir / kMarker) << "kbuild_bench's directory: its contents are removed\n";
  fs::remove_all(dir / "cache", ec);
  fs::remove_all(dir / "store", ec);
  if (ec) return absl::InternalError(absl::StrCat("clear ", dir.string(), ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbuild_bench: clean, warm and incremental kernel builds of the test tree"};
  std::string dir, tree_dir;
  std::vector<std::string> arches;
  int jobs = 0;
  app.add_option("--dir", dir, "the bench's own directory (cache, store, build logs)")->required();
  app.add_option("--arch", arches, "x86_64 or aarch64 (repeatable; default: both when possible)")
      ->check(CLI::IsMember({"x86_64", "aarch64"}));
  app.add_option("--tree", tree_dir,
                 "the test tree (default: scripts/make-test-kernel-tree's, made when missing)");
  app.add_option("--jobs,-j", jobs, "make -j (default: the number of CPUs)");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<kbuild::TestTree> tree =
      kbuild::MakeTestTree(std::string(FARM_SOURCE_DIR) + "/scripts/make-test-kernel-tree");
  if (!tree.ok()) return Fail(std::string(tree.status().message()));
  if (!tree_dir.empty()) tree->dir = tree_dir;
  std::string parent;
  for (size_t i = 1; i < tree->commits.size(); ++i) {
    if (tree->commits[i] == tree->planted) parent = tree->commits[i - 1];
  }
  if (parent.empty()) return Fail("the test tree's report names no parent of the planted commit");
  if (arches.empty()) {
    arches.push_back("x86_64");
    if (process::ResolveExecutable("aarch64-linux-gnu-gcc").ok()) arches.push_back("aarch64");
  }
  if (absl::Status s = PrepareDir(dir); !s.ok()) return Fail(std::string(s.message()));

  Bench bench(dir, *tree, jobs);
  std::printf(
      "kbuild_bench: test tree %s, %s -> %s (planted), config tinyconfig + every machine "
      "model's fragments of the arch, make -j%s\n",
      tree->dir.c_str(), parent.substr(0, 12).c_str(), tree->planted.substr(0, 12).c_str(),
      jobs > 0 ? std::to_string(jobs).c_str() : "<CPUs>");
  for (const std::string& arch : arches) {
    if (absl::Status s = bench.Arch(arch, parent); !s.ok()) {
      bench.Print();
      return Fail(absl::StrCat(arch, ": ", s.message()));
    }
  }
  bench.Print();
  return 0;
}
