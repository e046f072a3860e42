#include "lib/kbuild/kernel_builder.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "lib/base/file.h"
#include "lib/base/sha256.h"
#include "lib/kbuild/build_cache.h"
#include "lib/kbuild/build_progress.h"
#include "lib/kbuild/fragments.h"
#include "lib/kbuild/kconfig.h"
#include "lib/kbuild/patch_series.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kbuild {

namespace fs = std::filesystem;

namespace {

constexpr char kBuildUser[] = "farm";
constexpr char kBuildHost[] = "iommu-farm";
constexpr char kIdentityOrigin[] = "kernel builder";
// obj/ files of the builder's own: what the .config was made from, and the
// benchmark tool's command line and dependencies.
constexpr char kConfigStampName[] = ".farm-config-stamp";
constexpr char kToolCmdName[] = "dma_map_benchmark.cmd";
constexpr char kToolDepName[] = "dma_map_benchmark.d";

bool IsFullSha(absl::string_view rev) {
  if (rev.size() != 40) return false;
  for (char c : rev) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// `config` with every `CONFIG_X=m` line as `CONFIG_X=y`.
std::string ModulesBuiltIn(absl::string_view config) {
  std::string out;
  out.reserve(config.size());
  for (absl::string_view line : absl::StrSplit(config, '\n')) {
    if (absl::StartsWith(line, "CONFIG_") && absl::EndsWith(line, "=m")) {
      absl::StrAppend(&out, line.substr(0, line.size() - 1), "y\n");
    } else {
      absl::StrAppend(&out, line, "\n");
    }
  }
  out.pop_back();  // the newline after the last piece, which had none
  return out;
}

bool BaseIsFile(const std::string& base) {
  std::error_code ec;
  return absl::StrContains(base, '/') || fs::is_regular_file(base, ec);
}

// The kernel's ARCH (and the arch/ directory it selects), image target and
// image path under obj/ for a guest arch.
struct ArchInfo {
  const char* karch;
  const char* srcarch;
  const char* cross_compile;
  const char* image_target;
  const char* image_path;
};

absl::StatusOr<ArchInfo> ArchFor(const std::string& arch) {
  if (arch == kstore::kArchX86)
    return ArchInfo{"x86_64", "x86", "", "bzImage", "arch/x86/boot/bzImage"};
  if (arch == kstore::kArchArm64) {
    return ArchInfo{"arm64", "arm64", "aarch64-linux-gnu-", "Image", "arch/arm64/boot/Image"};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("arch '", arch, "' unknown (", kstore::kArchX86, ", ", kstore::kArchArm64, ")"));
}

// One build: the request, where it runs, and the log every step appends to.
class Build {
 public:
  Build(const BuildRequest& request, std::string* log)
      : req_(request),
        log_(log),
        start_(absl::Now()),
        deadline_(start_ + request.timeout),
        progress_(request.progress, start_, 0) {}

  absl::StatusOr<BuildResult> Run();

 private:
  absl::Status Prepare();
  absl::Status ResolveTools();
  absl::StatusOr<std::vector<Fragment>> ReadFragments() const;
  std::string TreeId() const;
  absl::Status SyncMirror();
  absl::Status CheckOut();
  absl::Status ApplyPatch();
  absl::Status Configure();
  absl::StatusOr<std::string> ConfigInputs();
  absl::StatusOr<std::string> ToolVersion(const std::string& tool);
  std::optional<std::string> KeptConfig(const std::string& inputs) const;
  absl::StatusOr<std::string> MergedConfig();
  absl::Status CheckConfig(const std::string& final_config) const;
  absl::Status Compile();
  std::string CompileBenchTool();
  bool BenchToolUpToDate(const fs::path& tool, const std::string& cmd) const;
  absl::Status RunMake(const std::vector<std::string>& targets,
                       std::function<void(std::string_view)> on_stdout = {});
  fs::path ObjectCountFile() const;
  int64_t ExpectedObjects(bool cold) const;
  void RecordObjects(bool cold);
  absl::StatusOr<kstore::KernelBuild> WriteStoreEntry(const std::string& release,
                                                      const std::string& bench_tool);

  // Runs argv (argv[0] resolved on PATH) in the build's environment,
  // logging it and (unless !log_output) its output; the build's deadline
  // bounds it.
  absl::StatusOr<process::ProcessResult> Exec(std::vector<std::string> argv, bool log_output = true,
                                              std::function<void(std::string_view)> on_stdout = {});
  // Exec that fails with the command's stderr unless it exits 0.
  absl::StatusOr<std::string> ExecOk(std::vector<std::string> argv);
  std::vector<std::string> GitIn(const std::string& dir) const { return {req_.git, "-C", dir}; }
  std::vector<std::string> MakeArgv() const;
  std::string CcArg() const {
    return absl::StrCat("CC=", ccache_.empty() ? "" : ccache_ + " ", compiler_);
  }
  void Log(absl::string_view text) {
    if (log_ != nullptr) absl::StrAppend(log_, text);
  }
  // The commit as the farm knows it: a try build's is its try id (the
  // patched commit's own sha exists only in the build directory).
  const std::string& FarmCommit() const {
    return req_.store_commit.empty() ? commit_ : req_.store_commit;
  }

  const BuildRequest& req_;
  std::string* log_;
  const absl::Time start_;
  const absl::Time deadline_;
  ArchInfo arch_{};
  std::string compiler_;  // "gcc" or the cross gcc, resolved
  std::string ccache_;    // "" when not used
  std::vector<Fragment> fragments_;
  std::vector<ConfigOption> requested_;
  std::string config_key_hash_;  // sha256 of the base and fragment texts
  std::string config_id_;
  std::string compiler_version_;  // the first line of `<compiler> --version`
  fs::path root_, mirror_, build_dir_, src_, obj_;
  std::string commit_;
  std::string timestamp_;
  std::string final_config_;
  ProgressReporter progress_;
};

absl::StatusOr<process::ProcessResult> Build::Exec(
    std::vector<std::string> argv, bool log_output,
    std::function<void(std::string_view)> on_stdout) {
  Log(absl::StrCat("$ ", absl::StrJoin(argv, " "), "\n"));
  process::ProcessOptions p;
  p.argv = std::move(argv);
  p.env = std::vector<std::string>{
      "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
      "LC_ALL=C",
      absl::StrCat("HOME=", root_.string()),
      absl::StrCat("CCACHE_DIR=", (root_ / "ccache").string()),
      absl::StrCat("CCACHE_BASEDIR=", build_dir_.string()),
      absl::StrCat("KBUILD_BUILD_TIMESTAMP=", timestamp_),
      absl::StrCat("KBUILD_BUILD_USER=", kBuildUser),
      absl::StrCat("KBUILD_BUILD_HOST=", kBuildHost),
  };
  p.timeout = deadline_ - absl::Now();
  if (p.timeout <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("kernel build of ", req_.rev, " ran past its ",
                                                    absl::FormatDuration(req_.timeout)));
  }
  p.cancelled = req_.cancelled;
  p.on_stdout = std::move(on_stdout);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
  if (!r.ok()) return r.status();
  if (log_output) Log(r->stdout_data);
  Log(r->stderr_data);
  if (r->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("kernel build of ", req_.rev, " ran past its ",
                                                    absl::FormatDuration(req_.timeout)));
  }
  if (r->cancelled) return absl::CancelledError(absl::StrCat("kernel build of ", req_.rev));
  return r;
}

absl::StatusOr<std::string> Build::ExecOk(std::vector<std::string> argv) {
  const std::string command = absl::StrJoin(argv, " ");
  absl::StatusOr<process::ProcessResult> r = Exec(std::move(argv));
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    return absl::InternalError(absl::StrCat(command, ": ", r->Describe(), ": ",
                                            absl::StripAsciiWhitespace(r->stderr_data)));
  }
  return r->stdout_data;
}

absl::StatusOr<std::vector<Fragment>> Build::ReadFragments() const {
  std::vector<Fragment> out;
  if (!req_.machine.empty()) {
    absl::StatusOr<std::vector<Fragment>> shipped = MachineFragments(req_.machine, req_.arch);
    if (!shipped.ok()) return shipped.status();
    out = *std::move(shipped);
  }
  if (req_.dma_map_bench) out.push_back(DmaMapBenchFragment());
  for (const std::string& path : req_.fragments) {
    absl::StatusOr<std::string> text = base::ReadFile(path);
    if (!text.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("fragment: ", text.status().message()));
    }
    out.push_back({path, *std::move(text)});
  }
  out.insert(out.end(), req_.inline_fragments.begin(), req_.inline_fragments.end());
  return out;
}

// A local tree is named by its absolute path, a remote one by its URL.
std::string Build::TreeId() const {
  std::error_code ec;
  if (fs::is_directory(req_.tree, ec)) {
    fs::path p = fs::canonical(req_.tree, ec);
    if (!ec) return p.string();
  }
  return req_.tree;
}

absl::Status Build::ResolveTools() {
  for (const std::string& tool : {req_.make, req_.git}) {
    if (absl::StatusOr<std::string> p = process::ResolveExecutable(tool); !p.ok()) {
      return p.status();
    }
  }
  absl::StatusOr<std::string> cc =
      process::ResolveExecutable(absl::StrCat(arch_.cross_compile, "gcc"));
  if (!cc.ok()) {
    return absl::NotFoundError(absl::StrCat("no compiler for ", req_.arch, ": ",
                                            cc.status().message(),
                                            " (scripts/install-deps installs it)"));
  }
  compiler_ = absl::StrCat(arch_.cross_compile, "gcc");
  if (req_.use_ccache && process::ResolveExecutable("ccache").ok()) ccache_ = "ccache";
  return absl::OkStatus();
}

absl::Status Build::Prepare() {
  absl::StatusOr<ArchInfo> arch = ArchFor(req_.arch);
  if (!arch.ok()) return arch.status();
  arch_ = *arch;
  if (req_.tree.empty() || req_.rev.empty() || req_.store_dir.empty()) {
    return absl::InvalidArgumentError("a kernel build needs a tree, a revision and a store");
  }
  if (!req_.store_commit.empty() && !kstore::IsPlainName(req_.store_commit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store commit '", req_.store_commit, "' is not a plain name"));
  }
  if (absl::Status s = ResolveTools(); !s.ok()) return s;
  absl::StatusOr<std::vector<Fragment>> fragments = ReadFragments();
  if (!fragments.ok()) return fragments.status();
  fragments_ = *std::move(fragments);
  std::vector<std::vector<ConfigOption>> parsed;
  for (const Fragment& f : fragments_) {
    parsed.push_back(ParseConfig(f.text, fs::path(f.name).filename().string()));
  }
  // The identity options last, so that no fragment can turn them back.
  parsed.push_back({{"CONFIG_LOCALVERSION", "\"\"", kIdentityOrigin},
                    {"CONFIG_LOCALVERSION_AUTO", "n", kIdentityOrigin}});
  requested_ = RequestedOptions(parsed);

  if (!req_.config_id.empty() && !kstore::IsPlainName(req_.config_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel config id '", req_.config_id, "' is not a plain name"));
  }
  std::string config_key = absl::StrCat(req_.arch, "\n", req_.base, "\n",
                                        req_.modules_built_in ? "modules built in\n" : "");
  if (!req_.base_text.empty()) {
    absl::StrAppend(&config_key, req_.base_text);
  } else if (BaseIsFile(req_.base)) {
    absl::StatusOr<std::string> base = base::ReadFile(req_.base);
    if (!base.ok())
      return absl::InvalidArgumentError(absl::StrCat("base config: ", base.status().message()));
    absl::StrAppend(&config_key, *base);
  }
  for (const Fragment& f : fragments_) absl::StrAppend(&config_key, "\n", f.name, "\n", f.text);
  config_key_hash_ = base::Sha256Hex(config_key);
  config_id_ = config_key_hash_.substr(0, 12);

  root_ = req_.cache_root.empty() ? DefaultCacheRoot() : req_.cache_root;
  const std::string tree_key = base::Sha256Hex(TreeId()).substr(0, 12);
  mirror_ = root_ / "mirrors" / (tree_key + ".git");
  build_dir_ = root_ / "builds" / absl::StrCat(tree_key, "-", req_.arch, "-", config_id_);
  src_ = build_dir_ / "src";
  obj_ = build_dir_ / "obj";
  std::error_code ec;
  fs::create_directories(root_ / "mirrors", ec);
  fs::create_directories(build_dir_, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("mkdir ", build_dir_.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// The mirror holds the revision: cloned once, fetched when the revision is
// not a commit id it already has.
absl::Status Build::SyncMirror() {
  std::error_code ec;
  if (!fs::exists(mirror_ / "HEAD", ec)) {
    fs::remove_all(mirror_, ec);
    absl::StatusOr<process::ProcessResult> r =
        Exec({req_.git, "clone", "--mirror", "--quiet", req_.tree, mirror_.string()});
    if (!r.ok()) return r.status();
    if (!r->ok()) {
      return absl::UnavailableError(absl::StrCat("cannot mirror ", req_.tree, ": ",
                                                 absl::StripAsciiWhitespace(r->stderr_data)));
    }
  }
  auto resolve = [&]() -> absl::StatusOr<process::ProcessResult> {
    std::vector<std::string> argv = GitIn(mirror_.string());
    argv.insert(argv.end(), {"rev-parse", "--verify", "--quiet", req_.rev + "^{commit}"});
    return Exec(argv);
  };
  absl::StatusOr<process::ProcessResult> r = resolve();
  if (!r.ok()) return r.status();
  if (!r->ok() || !IsFullSha(req_.rev)) {
    std::vector<std::string> fetch = GitIn(mirror_.string());
    fetch.insert(fetch.end(), {"fetch", "--quiet", "--prune", "origin"});
    absl::StatusOr<process::ProcessResult> f = Exec(fetch);
    if (!f.ok()) return f.status();
    if (!f->ok()) {
      return absl::UnavailableError(absl::StrCat("cannot fetch ", req_.tree, ": ",
                                                 absl::StripAsciiWhitespace(f->stderr_data)));
    }
    r = resolve();
    if (!r.ok()) return r.status();
  }
  if (!r->ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("revision '", req_.rev, "' is not a commit of ", req_.tree));
  }
  commit_ = std::string(absl::StripAsciiWhitespace(r->stdout_data));
  return absl::OkStatus();
}

// src/ is a worktree of the mirror, made once and checked out per commit so
// that only the files a commit changes get new times.
absl::Status Build::CheckOut() {
  std::error_code ec;
  if (!fs::exists(src_ / ".git", ec)) {
    fs::remove_all(src_, ec);
    std::vector<std::string> prune = GitIn(mirror_.string());
    prune.insert(prune.end(), {"worktree", "prune"});
    if (absl::StatusOr<std::string> p = ExecOk(prune); !p.ok()) return p.status();
    std::vector<std::string> add = GitIn(mirror_.string());
    add.insert(add.end(), {"worktree", "add", "--quiet", "--detach", src_.string(), commit_});
    if (absl::StatusOr<std::string> a = ExecOk(add); !a.ok()) return a.status();
  } else {
    std::vector<std::string> co = GitIn(src_.string());
    co.insert(co.end(), {"checkout", "--quiet", "--force", "--detach", commit_});
    if (absl::StatusOr<std::string> c = ExecOk(co); !c.ok()) return c.status();
  }
  std::vector<std::string> date = GitIn(src_.string());
  date.insert(date.end(), {"log", "-1", "--format=%cD", commit_});
  absl::StatusOr<std::string> d = ExecOk(date);
  if (!d.ok()) return d.status();
  timestamp_ = std::string(absl::StripAsciiWhitespace(*d));
  return req_.patch.empty() ? absl::OkStatus() : ApplyPatch();
}

// A try build: the patch applied on the checked-out revision and committed
// with a fixed identity and the revision's date, so one base and patch give
// one commit id and one `make kernelrelease` wherever they are built.
absl::Status Build::ApplyPatch() {
  absl::StatusOr<std::vector<SeriesPatch>> series = SplitPatchSeries(req_.patch);
  if (!series.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the patch: ", series.status().message()));
  }
  // A series applies in order, each patch over the ones before it.
  for (size_t i = 0; i < series->size(); ++i) {
    const SeriesPatch& p = (*series)[i];
    const fs::path file = build_dir_ / absl::StrCat("try-", i + 1, ".patch");
    if (absl::Status s = base::WriteFile(file.string(), p.text); !s.ok()) return s;
    std::vector<std::string> apply = GitIn(src_.string());
    apply.insert(apply.end(), {"apply", "--index", "--whitespace=nowarn", file.string()});
    absl::StatusOr<process::ProcessResult> a = Exec(apply);
    if (!a.ok()) return a.status();
    if (a->ok()) continue;
    const std::string why(absl::StripAsciiWhitespace(a->stderr_data));
    const std::string which =
        series->size() == 1
            ? "the patch"
            : absl::StrCat("patch ", i + 1, "/", series->size(),
                           p.subject.empty() ? "" : absl::StrCat(" (", p.subject, ")"));
    return absl::FailedPreconditionError(
        absl::StrCat(which, " does not apply to ", commit_, ": ", why.substr(0, why.find('\n'))));
  }
  std::vector<std::string> commit = {"env", "GIT_AUTHOR_DATE=" + timestamp_,
                                     "GIT_COMMITTER_DATE=" + timestamp_};
  const std::vector<std::string> git = GitIn(src_.string());
  commit.insert(commit.end(), git.begin(), git.end());
  commit.insert(
      commit.end(),
      {"-c", absl::StrCat("user.name=", kBuildUser), "-c",
       absl::StrCat("user.email=", kBuildUser, "@", kBuildHost), "commit", "--quiet", "--no-verify",
       "-m", absl::StrCat("try: ", req_.store_commit.empty() ? "patch" : req_.store_commit)});
  if (absl::StatusOr<std::string> c = ExecOk(commit); !c.ok()) return c.status();
  std::vector<std::string> head = GitIn(src_.string());
  head.insert(head.end(), {"rev-parse", "HEAD"});
  absl::StatusOr<std::string> h = ExecOk(head);
  if (!h.ok()) return h.status();
  commit_ = std::string(absl::StripAsciiWhitespace(*h));
  return absl::OkStatus();
}

std::vector<std::string> Build::MakeArgv() const {
  std::vector<std::string> argv = {req_.make, "-C", src_.string(), "O=" + obj_.string(),
                                   absl::StrCat("ARCH=", arch_.karch)};
  if (*arch_.cross_compile != '\0')
    argv.push_back(absl::StrCat("CROSS_COMPILE=", arch_.cross_compile));
  argv.push_back(CcArg());
  argv.push_back(absl::StrCat("LOCALVERSION=-g", commit_.substr(0, 12)));
  return argv;
}

// The base config, then the fragments merged over it.
absl::StatusOr<std::string> Build::MergedConfig() {
  std::error_code ec;
  fs::create_directories(obj_, ec);
  const std::string dot_config = (obj_ / ".config").string();
  if (!req_.base_text.empty()) {
    if (absl::Status s = base::WriteFile(dot_config, req_.base_text); !s.ok()) return s;
  } else if (BaseIsFile(req_.base)) {
    absl::StatusOr<std::string> base = base::ReadFile(req_.base);
    if (!base.ok()) return absl::InvalidArgumentError(base.status().message());
    if (absl::Status s = base::WriteFile(dot_config, *base); !s.ok()) return s;
  } else {
    if (absl::Status s = RunMake({req_.base}); !s.ok()) return s;
  }
  absl::StatusOr<std::string> base = base::ReadFile(dot_config);
  if (!base.ok()) return absl::InternalError(base.status().message());
  if (req_.modules_built_in) return MergeConfig(ModulesBuiltIn(*base), requested_);
  return MergeConfig(*base, requested_);
}

absl::Status Build::CheckConfig(const std::string& final_config) const {
  std::vector<OptionMismatch> mismatches = Mismatches(requested_, final_config);
  if (mismatches.empty()) return absl::OkStatus();
  absl::StatusOr<std::set<std::string>> known = KconfigSymbols(src_.string());
  if (!known.ok()) return known.status();
  absl::Status s = ExplainMismatches(mismatches, *known);
  if (s.ok()) return s;
  // The commit cannot be built with this config, as for a compile error:
  // permanent, and a bisect skips the commit.
  return absl::FailedPreconditionError(absl::StrCat("build failed at ", FarmCommit(),
                                                    ": config for ", req_.arch, ": ", s.message()));
}

// The first line `tool --version` prints, "none" for a tool not on PATH.
absl::StatusOr<std::string> Build::ToolVersion(const std::string& tool) {
  if (!process::ResolveExecutable(tool).ok()) return absl::StrCat(tool, ": none");
  absl::StatusOr<process::ProcessResult> r = Exec({tool, "--version"});
  if (!r.ok()) return r.status();
  const std::string out = absl::StrCat(r->stdout_data, r->stderr_data);
  return std::string(absl::StripAsciiWhitespace(out.substr(0, out.find('\n'))));
}

// What this commit's .config is made from, hashed: the base and fragments,
// the make variables, the tools Kconfig probes (their versions are config
// values: CONFIG_CC_VERSION_TEXT, CONFIG_LD_VERSION, CONFIG_PAHOLE_VERSION,
// CONFIG_RUST_IS_AVAILABLE), and the tree's files the config targets and
// kconfig read (every Kconfig*, scripts/, kernel/configs/, the arch's
// configs and Makefiles, the top Makefile) by their blob ids in the
// checked-out index. Equal inputs make an equal .config.
absl::StatusOr<std::string> Build::ConfigInputs() {
  std::string key = absl::StrCat(config_key_hash_, "\nARCH=", arch_.karch,
                                 " CROSS_COMPILE=", arch_.cross_compile, " ", CcArg(), "\n");
  for (const std::string& tool :
       {compiler_, absl::StrCat(arch_.cross_compile, "ld"), std::string("pahole"),
        std::string("rustc"), std::string("bindgen")}) {
    absl::StatusOr<std::string> v = ToolVersion(tool);
    if (!v.ok()) return v.status();
    if (tool == compiler_) compiler_version_ = *v;
    absl::StrAppend(&key, *v, "\n");
  }
  const std::string arch_dir = absl::StrCat("arch/", arch_.srcarch);
  std::vector<std::string> files = GitIn(src_.string());
  files.insert(files.end(), {"ls-files", "-s", "--", ":(glob)**/Kconfig*", "scripts",
                             "kernel/configs", arch_dir + "/configs",
                             absl::StrCat(":(glob)", arch_dir, "/Makefile*"), "Makefile"});
  absl::StatusOr<process::ProcessResult> r = Exec(files, /*log_output=*/false);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    return absl::InternalError(absl::StrCat("git ls-files in ", src_.string(), ": ",
                                            absl::StripAsciiWhitespace(r->stderr_data)));
  }
  absl::StrAppend(&key, r->stdout_data);
  return base::Sha256Hex(key);
}

// The .config an earlier build of this directory made from `inputs`, if it
// is still there as that build left it.
std::optional<std::string> Build::KeptConfig(const std::string& inputs) const {
  absl::StatusOr<std::string> stamp = base::ReadFile((obj_ / kConfigStampName).string());
  absl::StatusOr<std::string> config = base::ReadFile((obj_ / ".config").string());
  if (!stamp.ok() || !config.ok()) return std::nullopt;
  if (*stamp != absl::StrCat("inputs ", inputs, "\nconfig ", base::Sha256Hex(*config), "\n")) {
    return std::nullopt;
  }
  return *std::move(config);
}

// A bisect step rarely changes what the .config is made from: then the
// .config is kept as it is (its time too, so make does not run kconfig's
// syncconfig either), which saves the three kconfig runs (tinyconfig's two,
// olddefconfig) and their compiler probes.
absl::Status Build::Configure() {
  absl::StatusOr<std::string> inputs = ConfigInputs();
  if (!inputs.ok()) return inputs.status();
  if (std::optional<std::string> kept = KeptConfig(*inputs); kept.has_value()) {
    Log("the config's inputs are unchanged: obj/.config is kept\n");
    final_config_ = *std::move(kept);
    return CheckConfig(final_config_);
  }
  const fs::path stamp = obj_ / kConfigStampName;
  std::error_code ec;
  fs::remove(stamp, ec);  // a config step cut short leaves no stamp behind
  absl::StatusOr<std::string> merged = MergedConfig();
  if (!merged.ok()) return merged.status();
  const std::string dot_config = (obj_ / ".config").string();
  if (absl::Status s = base::WriteFile(dot_config, *merged); !s.ok()) return s;
  if (absl::Status s = RunMake({"olddefconfig"}); !s.ok()) return s;
  absl::StatusOr<std::string> final_config = base::ReadFile(dot_config);
  if (!final_config.ok()) return absl::InternalError(final_config.status().message());
  final_config_ = *std::move(final_config);
  if (absl::Status s = CheckConfig(final_config_); !s.ok()) return s;
  return base::WriteFile(stamp.string(), absl::StrCat("inputs ", *inputs, "\nconfig ",
                                                      base::Sha256Hex(final_config_), "\n"));
}

absl::Status Build::Compile() {
  const int jobs = req_.jobs > 0 ? req_.jobs : std::max(1u, std::thread::hardware_concurrency());
  progress_.Phase(BuildPhase::kCompile, absl::Now());
  return RunMake({absl::StrCat("-j", jobs), arch_.image_target}, [this](std::string_view piece) {
    progress_.MakeOutput(absl::string_view(piece.data(), piece.size()), absl::Now());
  });
}

// The object count of the build directory's last cold build, beside the
// builds (an eviction of the directory leaves it).
fs::path Build::ObjectCountFile() const {
  return root_ / "stats" / absl::StrCat(build_dir_.filename().string(), ".objects");
}

// A cold build compiles every object: as many as the last cold one did.
int64_t Build::ExpectedObjects(bool cold) const {
  if (!cold) return 0;
  absl::StatusOr<std::string> text = base::ReadFile(ObjectCountFile().string());
  int64_t n = 0;
  if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &n)) return 0;
  return n;
}

void Build::RecordObjects(bool cold) {
  if (!cold || progress_.objects() == 0) return;
  std::error_code ec;
  fs::create_directories(ObjectCountFile().parent_path(), ec);
  (void)base::WriteFile(ObjectCountFile().string(), absl::StrCat(progress_.objects(), "\n"));
}

// The tree's DMA-API benchmark tool (tools/testing/selftests/dma), static
// so that it runs in the guest's busybox root, built with the kernel's
// compiler. Its Makefile's include path (the installed uapi headers, then
// include/) is kept: -idirafter puts include/ behind the toolchain's uapi
// headers, which `linux/types.h` must come from, while `linux/map_benchmark.h`
// (v6.0+; older tools define the ioctl themselves) is found in the tree. A
// tree without the tool, or a tool that does not build, leaves the build
// without it: the kernel is still good for fio, and dma-map-bench jobs on it
// fail saying so. Returns the tool's path, or "".
std::string Build::CompileBenchTool() {
  const fs::path source = src_ / "tools/testing/selftests/dma/dma_map_benchmark.c";
  std::error_code ec;
  if (!fs::is_regular_file(source, ec)) {
    Log("no tools/testing/selftests/dma/dma_map_benchmark.c: the build has no benchmark tool\n");
    return "";
  }
  const fs::path tool = obj_ / "farm-tools" / "dma_map_benchmark";
  const fs::path cmd_file = tool.parent_path() / kToolCmdName;
  fs::create_directories(tool.parent_path(), ec);
  const std::vector<std::string> argv = {compiler_,
                                         "-static",
                                         "-O2",
                                         "-idirafter",
                                         (src_ / "include").string(),
                                         "-MD",
                                         "-MF",
                                         (tool.parent_path() / kToolDepName).string(),
                                         "-o",
                                         tool.string(),
                                         source.string()};
  const std::string cmd = absl::StrCat(absl::StrJoin(argv, " "), "\n", compiler_version_, "\n");
  if (BenchToolUpToDate(tool, cmd)) {
    Log("dma_map_benchmark is up to date\n");
    return tool.string();
  }
  fs::remove(cmd_file, ec);
  absl::StatusOr<process::ProcessResult> r = Exec(argv);
  if (!r.ok() || !r->ok()) {
    Log(absl::StrCat("dma_map_benchmark did not build (",
                     r.ok() ? FirstErrorLine(r->stderr_data) : r.status().message(),
                     "): the build has no benchmark tool\n"));
    return "";
  }
  if (!base::WriteFile(cmd_file.string(), cmd).ok()) fs::remove(cmd_file, ec);
  return tool.string();
}

// As make decides: the tool was built by the same command and compiler, and
// no file its dependency list (gcc -MD) names is newer than it; a checkout
// gives the files a commit changes new times.
bool Build::BenchToolUpToDate(const fs::path& tool, const std::string& cmd) const {
  absl::StatusOr<std::string> kept = base::ReadFile((tool.parent_path() / kToolCmdName).string());
  absl::StatusOr<std::string> deps = base::ReadFile((tool.parent_path() / kToolDepName).string());
  if (!kept.ok() || *kept != cmd || !deps.ok()) return false;
  std::error_code ec;
  const fs::file_time_type built = fs::last_write_time(tool, ec);
  if (ec) return false;
  // "target: dep dep \\\n dep ...": every word after the first colon.
  const size_t colon = deps->find(": ");
  if (colon == std::string::npos) return false;
  int count = 0;
  for (absl::string_view dep : absl::StrSplit(absl::string_view(*deps).substr(colon + 2),
                                              absl::ByAnyChar(" \\\n"), absl::SkipEmpty())) {
    const fs::file_time_type t = fs::last_write_time(fs::path(std::string(dep)), ec);
    if (ec || t > built) return false;
    ++count;
  }
  return count > 0;
}

// A make run that fails is the commit's: it does not build with this config.
absl::Status Build::RunMake(const std::vector<std::string>& targets,
                            std::function<void(std::string_view)> on_stdout) {
  std::vector<std::string> argv = MakeArgv();
  argv.insert(argv.end(), targets.begin(), targets.end());
  absl::StatusOr<process::ProcessResult> r = Exec(argv, true, std::move(on_stdout));
  if (!r.ok()) return r.status();
  if (r->ok()) return absl::OkStatus();
  // make O= names sources relative to obj/ ("../src/drivers/...") or by
  // absolute path: the reason names them as the tree does.
  const std::string line =
      absl::StrReplaceAll(FirstErrorLine(absl::StrCat(r->stderr_data, "\n", r->stdout_data)),
                          {{src_.string() + "/", ""}, {"../src/", ""}});
  return absl::FailedPreconditionError(absl::StrCat("build failed at ", FarmCommit(), ": ", line));
}

absl::StatusOr<kstore::KernelBuild> Build::WriteStoreEntry(const std::string& release,
                                                           const std::string& bench_tool) {
  std::error_code ec;
  fs::create_directories(req_.store_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", req_.store_dir, ": ", ec.message()));
  absl::StatusOr<process::ScopedTempDir> scratch =
      process::ScopedTempDir::Create(req_.store_dir, ".kbuild-");
  if (!scratch.ok()) return scratch.status();
  const fs::path work = scratch->path();
  fs::copy_file(obj_ / arch_.image_path, work / "vmlinuz", ec);
  if (ec) return absl::InternalError(absl::StrCat("copy ", arch_.image_path, ": ", ec.message()));
  if (absl::Status s = base::WriteFile((work / "config").string(), final_config_); !s.ok())
    return s;
  kstore::KernelBuild b;
  if (!bench_tool.empty()) {
    fs::copy_file(bench_tool, work / "dma_map_benchmark", ec);
    if (ec) return absl::InternalError(absl::StrCat("copy dma_map_benchmark: ", ec.message()));
    b.dma_map_benchmark = "dma_map_benchmark";
  }
  b.commit = FarmCommit();
  b.release = release;
  b.arch = req_.arch;
  b.image = "vmlinuz";
  b.config = "config";
  b.tree = req_.tree;
  b.config_hash = base::Sha256Hex(final_config_);
  for (const Fragment& f : fragments_) b.fragments.push_back(fs::path(f.name).filename().string());
  b.compiler = compiler_version_;
  b.kernel_config = req_.config_id;
  b.build_seconds = absl::StrFormat("%.1f", absl::ToDoubleSeconds(absl::Now() - start_));
  if (absl::Status s =
          base::WriteFile((work / kstore::kManifestName).string(), kstore::FormatManifest(b));
      !s.ok()) {
    return s;
  }
  fs::permissions(work,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  const fs::path target =
      fs::path(req_.store_dir) /
      absl::StrCat(b.commit, "-", req_.arch, req_.config_id.empty() ? "" : "-", req_.config_id);
  // An earlier build of the commit is swapped out in one step; the scratch
  // directory then holds it and goes with it.
  const bool replace = fs::exists(target, ec);
  const int rc =
      replace ? ::renameat2(AT_FDCWD, work.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE)
              : ::rename(work.c_str(), target.c_str());
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("rename into ", target.string(), ": ", std::strerror(errno)));
  }
  b.dir = target.string();
  return b;
}

absl::StatusOr<BuildResult> Build::Run() {
  if (absl::Status s = Prepare(); !s.ok()) return s;
  {
    absl::StatusOr<DirLock> mirror_lock =
        DirLock::Acquire(mirror_.string() + ".lock", req_.timeout);
    if (!mirror_lock.ok()) return mirror_lock.status();
    if (absl::Status s = SyncMirror(); !s.ok()) return s;
  }
  absl::StatusOr<DirLock> lock = DirLock::Acquire(build_dir_.string() + ".lock", req_.timeout);
  if (!lock.ok()) return lock.status();
  std::error_code ec;
  fs::create_directories(build_dir_, ec);  // an eviction may have taken it while we waited
  BuildResult result;
  result.reused_build_dir = fs::exists(obj_ / ".config", ec);
  {
    absl::StatusOr<DirLock> mirror_lock =
        DirLock::Acquire(mirror_.string() + ".lock", req_.timeout);
    if (!mirror_lock.ok()) return mirror_lock.status();
    if (absl::Status s = CheckOut(); !s.ok()) return s;
  }
  TouchLastUse(build_dir_.string());
  const bool cold = !result.reused_build_dir;
  progress_ = ProgressReporter(req_.progress, start_, ExpectedObjects(cold));
  progress_.Begin(absl::Now());
  if (absl::Status s = Configure(); !s.ok()) return s;
  if (absl::Status s = Compile(); !s.ok()) return s;
  RecordObjects(cold);
  std::vector<std::string> release_argv = MakeArgv();
  release_argv.insert(release_argv.end(), {"-s", "kernelrelease"});
  absl::StatusOr<std::string> release = ExecOk(release_argv);
  if (!release.ok()) return release.status();
  result.release = std::string(absl::StripAsciiWhitespace(*release));
  progress_.Phase(BuildPhase::kTool, absl::Now());
  const std::string tool = CompileBenchTool();
  progress_.Phase(BuildPhase::kStore, absl::Now());
  absl::StatusOr<kstore::KernelBuild> entry = WriteStoreEntry(result.release, tool);
  if (!entry.ok()) return entry.status();
  result.build = *std::move(entry);
  result.commit = commit_;
  result.build_dir = build_dir_.string();
  TouchLastUse(build_dir_.string());
  result.evicted =
      EvictLeastRecentlyUsed((root_ / "builds").string(), req_.cache_max_bytes, build_dir_.string())
          .removed;
  result.wall_time = absl::Now() - start_;
  return result;
}

}  // namespace

std::string FirstErrorLine(absl::string_view output) {
  std::vector<absl::string_view> lines = absl::StrSplit(output, '\n', absl::SkipWhitespace());
  for (absl::string_view line : lines) {
    for (absl::string_view marker :
         {": error: ", ": fatal error: ", "undefined reference to", ": syntax error"}) {
      if (absl::StrContains(line, marker)) return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  for (absl::string_view line : lines) {
    if (absl::StrContains(line, "*** ")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return lines.empty() ? "" : std::string(absl::StripAsciiWhitespace(lines.back()));
}

absl::StatusOr<BuildResult> BuildKernel(const BuildRequest& request, std::string* log) {
  return Build(request, log).Run();
}

}  // namespace farm::kbuild
