#include "lib/kstore/kernel_store.h"

#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/file.h"
#include "lib/base/utf8.h"
#include "lib/process/process.h"
#include "lib/process/scoped_temp_dir.h"

namespace farm::kstore {

namespace fs = std::filesystem;

namespace {

constexpr const char* kKeys[] = {
    "commit",       "release",   "arch",     "image",         "initrd",
    "config",       "modules",   "version",  "source",        "tree",
    "config_hash",  "fragments", "compiler", "build_seconds", "dma_map_benchmark",
    "kernel_config"};

std::string Join(const std::string& dir, const std::string& rel) {
  return rel.empty() ? "" : (fs::path(dir) / rel).string();
}

bool SafeRelative(absl::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "..") return false;
  }
  return true;
}

// The manifest-less layout: DIR/<release>/vmlinuz with `arch` beside it.
absl::StatusOr<KernelBuild> ReadBareBuild(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / "vmlinuz", ec)) {
    return absl::NotFoundError(
        absl::StrCat(dir.string(), ": no ", kManifestName, " and no vmlinuz"));
  }
  KernelBuild b;
  b.dir = dir.string();
  b.release = dir.filename().string();
  if (!IsPlainName(b.release)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.string(), ": directory name is not a kernel release"));
  }
  b.commit = b.release;
  b.image = "vmlinuz";
  b.arch = kArchX86;
  if (absl::StatusOr<std::string> arch = base::ReadFile((dir / "arch").string()); arch.ok()) {
    b.arch = std::string(absl::StripAsciiWhitespace(*arch));
  }
  if (b.arch != kArchX86 && b.arch != kArchArm64) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir.string(), "/arch: unknown architecture '", b.arch, "'"));
  }
  if (fs::is_regular_file(dir / "config", ec)) b.config = "config";
  if (fs::is_directory(dir / "modules", ec)) b.modules = "modules";
  return b;
}

}  // namespace

std::string KernelBuild::ImagePath() const { return Join(dir, image); }
std::string KernelBuild::InitrdPath() const { return Join(dir, initrd); }
std::string KernelBuild::ConfigPath() const { return Join(dir, config); }
std::string KernelBuild::ModulesPath() const { return Join(dir, modules); }
std::string KernelBuild::DmaMapBenchmarkPath() const { return Join(dir, dma_map_benchmark); }

bool IsPlainName(absl::string_view name) {
  if (name.empty() || name.size() > 200 || name.front() == '.' || name.front() == '-') {
    return false;
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '+' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<KernelBuild> ParseManifest(absl::string_view text, absl::string_view origin) {
  auto fail = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", what));
  };
  // YAML is UTF-8; other bytes would be replaced when the manifest is
  // written again, and its values go into protobuf strings.
  if (!base::IsValidUtf8(std::string_view(text.data(), text.size())))
    return fail("not YAML: not UTF-8 text");
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(absl::StrCat("not YAML: line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return fail("expected a mapping of keys (commit, release, arch, image, ...)");
  std::map<std::string, std::string> values;
  std::vector<std::string> fragments;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return fail(
          absl::StrCat("unknown key '", key, "' (known: ", absl::StrJoin(kKeys, ", "), ")"));
    }
    if (key == "fragments" && kv.second.IsSequence()) {
      for (const auto& f : kv.second) {
        if (!f.IsScalar()) return fail("'fragments' must be a list of names");
        fragments.push_back(f.Scalar());
      }
      continue;
    }
    if (!kv.second.IsScalar()) return fail(absl::StrCat("'", key, "' must be a single value"));
    values[key] = kv.second.Scalar();
  }
  for (const char* required : {"commit", "release", "arch", "image"}) {
    if (values[required].empty()) return fail(absl::StrCat("missing '", required, "'"));
  }
  KernelBuild b;
  b.commit = values["commit"];
  b.release = values["release"];
  b.arch = values["arch"];
  b.image = values["image"];
  b.initrd = values["initrd"];
  b.config = values["config"];
  b.modules = values["modules"];
  b.version = values["version"];
  b.source = values["source"];
  b.tree = values["tree"];
  b.config_hash = values["config_hash"];
  b.fragments = std::move(fragments);
  b.compiler = values["compiler"];
  b.build_seconds = values["build_seconds"];
  b.dma_map_benchmark = values["dma_map_benchmark"];
  b.kernel_config = values["kernel_config"];
  if (!b.kernel_config.empty() && !IsPlainName(b.kernel_config)) {
    return fail(absl::StrCat("kernel_config '", b.kernel_config, "' is not a plain id"));
  }
  if (!IsPlainName(b.commit)) {
    return fail(absl::StrCat("commit '", b.commit,
                             "' is not a plain id ([A-Za-z0-9._+-], not starting with . or -)"));
  }
  if (!IsPlainName(b.release)) {
    return fail(absl::StrCat("release '", b.release, "' is not a kernel release name"));
  }
  if (b.arch != kArchX86 && b.arch != kArchArm64) {
    return fail(absl::StrCat("arch '", b.arch, "' unknown (", kArchX86, ", ", kArchArm64, ")"));
  }
  for (const auto& [key, path] : {std::pair<const char*, std::string>{"image", b.image},
                                  {"initrd", b.initrd},
                                  {"config", b.config},
                                  {"modules", b.modules},
                                  {"dma_map_benchmark", b.dma_map_benchmark}}) {
    if (!path.empty() && !SafeRelative(path)) {
      return fail(absl::StrCat("'", key, "' path '", path,
                               "' must be relative to the build directory, without '..'"));
    }
  }
  return b;
}

std::string FormatManifest(const KernelBuild& b) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) out << YAML::Key << key << YAML::Value << value;
  };
  put("commit", b.commit);
  put("release", b.release);
  put("arch", b.arch);
  put("image", b.image);
  put("initrd", b.initrd);
  put("config", b.config);
  put("modules", b.modules);
  put("version", b.version);
  put("source", b.source);
  put("tree", b.tree);
  put("config_hash", b.config_hash);
  if (!b.fragments.empty()) {
    out << YAML::Key << "fragments" << YAML::Value << YAML::Flow << b.fragments;
  }
  put("compiler", b.compiler);
  put("build_seconds", b.build_seconds);
  put("dma_map_benchmark", b.dma_map_benchmark);
  put("kernel_config", b.kernel_config);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<KernelBuild> ReadBuild(const std::string& build_dir) {
  const fs::path dir(build_dir);
  const std::string manifest = (dir / kManifestName).string();
  std::error_code ec;
  if (!fs::exists(manifest, ec)) return ReadBareBuild(dir);
  absl::StatusOr<std::string> text = base::ReadFile(manifest);
  if (!text.ok()) return text.status();
  absl::StatusOr<KernelBuild> b = ParseManifest(*text, manifest);
  if (!b.ok()) return b.status();
  b->dir = dir.string();
  if (!fs::is_regular_file(b->ImagePath(), ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(manifest, ": image '", b->image, "' is not a file in ", build_dir));
  }
  return b;
}

absl::StatusOr<StoreListing> ReadStore(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("kernel store '", dir, "' is not a directory"));
  }
  std::vector<fs::path> dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().front() == '.') continue;
    if (e.is_directory(ec)) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  StoreListing out;
  // (commit, arch, kernel_config) -> dir
  std::map<std::tuple<std::string, std::string, std::string>, std::string> seen;
  for (const fs::path& d : dirs) {
    absl::StatusOr<KernelBuild> b = ReadBuild(d.string());
    if (!b.ok()) {
      out.problems.push_back(std::string(b.status().message()));
      continue;
    }
    auto [it, fresh] = seen.emplace(std::make_tuple(b->commit, b->arch, b->kernel_config), b->dir);
    if (!fresh) {
      out.problems.push_back(
          absl::StrCat(d.string(), ": commit ", b->commit, " (", b->arch,
                       b->kernel_config.empty() ? "" : ", kernel config " + b->kernel_config,
                       ") already has the build in ", it->second));
      continue;
    }
    out.builds.push_back(*std::move(b));
  }
  std::sort(out.builds.begin(), out.builds.end(), [](const KernelBuild& a, const KernelBuild& b) {
    return std::tie(a.commit, a.arch, a.kernel_config) <
           std::tie(b.commit, b.arch, b.kernel_config);
  });
  return out;
}

int CompareVersions(absl::string_view a, absl::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = absl::ascii_isdigit(static_cast<unsigned char>(a[i]));
    const bool db = absl::ascii_isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ei = i, ej = j;
      while (ei < a.size() && absl::ascii_isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && absl::ascii_isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      absl::string_view na = a.substr(i, ei - i), nb = b.substr(j, ej - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size() ? -1 : 1;
      if (int c = na.compare(nb); c != 0) return c < 0 ? -1 : 1;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j] ? -1 : 1;
      ++i;
      ++j;
    }
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

std::vector<KernelBuild> CatalogOrder(std::vector<KernelBuild> builds) {
  auto key = [](const KernelBuild& b) -> const std::string& {
    return b.version.empty() ? b.release : b.version;
  };
  std::stable_sort(builds.begin(), builds.end(), [&](const KernelBuild& a, const KernelBuild& b) {
    if (int c = CompareVersions(key(a), key(b)); c != 0) return c < 0;
    return a.commit < b.commit;
  });
  return builds;
}

bool ConfigEnabled(absl::string_view config_text, absl::string_view symbol) {
  for (absl::string_view line : absl::StrSplit(config_text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::StartsWith(line, symbol) && line.substr(symbol.size()) == "=y") return true;
  }
  return false;
}

bool BuildConfigEnabled(const KernelBuild& build, absl::string_view symbol) {
  if (build.config.empty()) return false;
  absl::StatusOr<std::string> text = base::ReadFile(build.ConfigPath());
  return text.ok() && ConfigEnabled(*text, symbol);
}

absl::StatusOr<KernelBuild> ImportDeb(const std::string& store_dir, const DebImport& request) {
  if (!IsPlainName(request.commit)) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit '", request.commit,
                     "' is not a plain id ([A-Za-z0-9._+-], not starting with . or -)"));
  }
  std::error_code ec;
  if (!fs::is_regular_file(request.deb, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("'", request.deb, "' is not a file"));
  }
  auto dpkg = [&](std::vector<std::string> args) -> absl::StatusOr<std::string> {
    process::ProcessOptions p;
    p.argv = {request.dpkg_deb};
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.timeout = absl::Minutes(5);
    absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
    if (!r.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(request.dpkg_deb, ": ", r.status().message()));
    }
    if (!r->ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(absl::StrJoin(p.argv, " "), ": ", r->Describe(), ": ",
                       absl::StripAsciiWhitespace(r->stderr_data)));
    }
    return r->stdout_data;
  };
  absl::StatusOr<std::string> fields =
      dpkg({"-f", request.deb, "Package", "Version", "Architecture"});
  if (!fields.ok()) return fields.status();
  std::map<std::string, std::string> f;
  for (absl::string_view line : absl::StrSplit(*fields, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    f[std::string(kv.first)] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  std::string arch;
  if (f["Architecture"] == "amd64") arch = kArchX86;
  if (f["Architecture"] == "arm64") arch = kArchArm64;
  if (arch.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(request.deb, ": architecture '",
                                                   f["Architecture"],
                                                   "' is not one the farm boots (amd64, arm64)"));
  }

  fs::create_directories(store_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", store_dir, ": ", ec.message()));
  const fs::path target = fs::path(store_dir) / absl::StrCat(request.commit, "-", arch);
  // The key is (commit, arch), wherever its directory is.
  fs::path existing;
  if (absl::StatusOr<StoreListing> listing = ReadStore(store_dir); listing.ok()) {
    for (const KernelBuild& b : listing->builds) {
      if (b.commit == request.commit && b.arch == arch && b.kernel_config.empty()) {
        existing = b.dir;
      }
    }
  }
  if (!existing.empty() && !request.replace) {
    return absl::AlreadyExistsError(absl::StrCat("commit ", request.commit, " (", arch,
                                                 ") already has a build in ", existing.string(),
                                                 " (--replace to overwrite)"));
  }
  absl::StatusOr<process::ScopedTempDir> scratch =
      process::ScopedTempDir::Create(store_dir, ".import-");
  if (!scratch.ok()) return scratch.status();
  const fs::path work = scratch->path();

  const fs::path root = work / "root";
  if (absl::StatusOr<std::string> x = dpkg({"-x", request.deb, root.string()}); !x.ok()) {
    return x.status();
  }
  std::vector<std::string> releases;
  for (const fs::directory_entry& e : fs::directory_iterator(root / "boot", ec)) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "vmlinuz-") || absl::StartsWith(name, "vmlinux-")) {
      releases.push_back(name.substr(8));
    }
  }
  if (releases.size() != 1 || !IsPlainName(releases[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        request.deb, ": expected one boot/vmlinuz-<release>, found ",
        releases.empty() ? "none (not a linux-image package?)" : absl::StrJoin(releases, ", ")));
  }
  KernelBuild b;
  b.commit = request.commit;
  b.release = releases[0];
  b.arch = arch;
  b.image = "vmlinuz";
  b.version = f["Version"];
  b.source = fs::path(request.deb).filename().string();
  const fs::path out = work / "build";
  fs::create_directories(out, ec);
  const fs::path boot = root / "boot";
  fs::path image = boot / ("vmlinuz-" + b.release);
  if (!fs::exists(image, ec)) image = boot / ("vmlinux-" + b.release);
  fs::rename(image, out / "vmlinuz", ec);
  if (ec) return absl::InternalError(absl::StrCat("move ", image.string(), ": ", ec.message()));
  if (fs::is_regular_file(boot / ("config-" + b.release), ec)) {
    fs::rename(boot / ("config-" + b.release), out / "config", ec);
    if (ec) return absl::InternalError(absl::StrCat("move config: ", ec.message()));
    b.config = "config";
  }
  for (const char* modules_root : {"lib/modules", "usr/lib/modules"}) {
    const fs::path m = root / modules_root / b.release;
    if (fs::is_directory(m, ec)) {
      fs::rename(m, out / "modules", ec);
      if (ec) return absl::InternalError(absl::StrCat("move modules: ", ec.message()));
      b.modules = "modules";
      break;
    }
  }
  if (absl::Status s = base::WriteFile((out / kManifestName).string(), FormatManifest(b));
      !s.ok()) {
    return s;
  }
  fs::permissions(out,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  // The replaced build is moved aside first, so that the rename below is the
  // step that makes the new one visible.
  for (const fs::path& old : {existing, target}) {
    if (old.empty() || !fs::exists(old, ec)) continue;
    fs::rename(old, work / "replaced", ec);
    if (ec) return absl::InternalError(absl::StrCat("move ", old.string(), ": ", ec.message()));
    fs::remove_all(work / "replaced", ec);
  }
  fs::rename(out, target, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("rename into ", target.string(), ": ", ec.message()));
  b.dir = target.string();
  return b;
}

}  // namespace farm::kstore
