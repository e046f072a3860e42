#include "agent/kernels/module_deps.h"

#include <elf.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "lib/base/file.h"

namespace farm::kernels {

namespace fs = std::filesystem;

namespace {

// Whether the build's config sets `symbol` to m (a loadable module).
bool ConfigIsModule(const kstore::KernelBuild& build, absl::string_view symbol) {
  if (build.config.empty()) return false;
  const std::string text = base::ReadFileOrEmpty(build.ConfigPath());
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, symbol) && line == "=m") return true;
  }
  return false;
}

// modprobe's spelling of a module name: '-' and '_' are the same.
std::string ModuleKey(absl::string_view name) { return absl::StrReplaceAll(name, {{"-", "_"}}); }

}  // namespace

absl::StatusOr<ModuleNeeds> ModuleDepends(absl::string_view elf) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("not a kernel module: ", why));
  };
  if (elf.size() < sizeof(Elf64_Ehdr) || elf.substr(0, 4) != ELFMAG ||
      elf[EI_CLASS] != ELFCLASS64) {
    return bad("no ELF64 header");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > elf.size() ||
      eh.e_shnum > (elf.size() - eh.e_shoff) / sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum) {
    return bad("section headers out of the file");
  }
  auto section = [&](std::size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  auto body = [&](const Elf64_Shdr& sh) -> absl::StatusOr<absl::string_view> {
    if (sh.sh_offset > elf.size() || sh.sh_size > elf.size() - sh.sh_offset) {
      return bad("section out of the file");
    }
    return elf.substr(sh.sh_offset, sh.sh_size);
  };
  absl::StatusOr<absl::string_view> names = body(section(eh.e_shstrndx));
  if (!names.ok()) return names.status();
  for (std::size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = section(i);
    if (sh.sh_name >= names->size()) continue;
    absl::string_view name = names->substr(sh.sh_name);
    name = name.substr(0, name.find('\0'));
    if (name != ".modinfo") continue;
    absl::StatusOr<absl::string_view> info = body(sh);
    if (!info.ok()) return info.status();
    ModuleNeeds needs;
    for (absl::string_view entry : absl::StrSplit(*info, '\0')) {
      if (absl::ConsumePrefix(&entry, "depends=")) {
        for (absl::string_view d : absl::StrSplit(entry, ',', absl::SkipEmpty())) {
          needs.depends.emplace_back(d);
        }
      } else if (absl::ConsumePrefix(&entry, "softdep=")) {
        // "pre: a b post: c": the names after pre: up to the next keyword.
        bool pre = false;
        for (absl::string_view w : absl::StrSplit(entry, ' ', absl::SkipEmpty())) {
          if (absl::EndsWith(w, ":")) {
            pre = w == "pre:";
          } else if (pre) {
            needs.soft_pre.emplace_back(w);
          }
        }
      }
    }
    return needs;
  }
  return bad("no .modinfo section");
}

absl::StatusOr<std::vector<std::string>> GuestModules(const kstore::KernelBuild& build,
                                                      bool scratch_fs) {
  std::vector<std::string> wanted;
  if (ConfigIsModule(build, "CONFIG_BLK_DEV_NVME")) wanted.push_back("nvme");
  if (scratch_fs && ConfigIsModule(build, "CONFIG_EXT4_FS")) wanted.push_back("ext4");
  if (wanted.empty()) return std::vector<std::string>();
  const std::string dir = build.ModulesPath();
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "kernel ", build.release, " builds ", absl::StrJoin(wanted, " and "),
        " as modules, but its store build has no modules directory (import the .deb with its "
        "modules)"));
  }
  std::map<std::string, std::string> index;  // ModuleKey -> path
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".ko")
      index.emplace(ModuleKey(it->path().stem().string()), it->path().string());
  }
  std::vector<std::string> order;
  std::set<std::string> done, visiting;
  std::function<absl::Status(const std::string&, bool)> visit = [&](const std::string& name,
                                                                    bool soft) {
    const std::string key = ModuleKey(name);
    if (done.count(key)) return absl::OkStatus();
    auto it = index.find(key);
    if (it == index.end() && soft) return absl::OkStatus();
    if (!visiting.insert(key).second) {
      return absl::FailedPreconditionError(absl::StrCat("module ", name, " depends on itself"));
    }
    if (it == index.end()) {
      return absl::FailedPreconditionError(absl::StrCat("kernel ", build.release, " needs module ",
                                                        name, ", which is not under ", dir));
    }
    const std::string elf = base::ReadFileOrEmpty(it->second);
    absl::StatusOr<ModuleNeeds> needs = ModuleDepends(elf);
    if (!needs.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(it->second, ": ", needs.status().message()));
    }
    for (const std::string& d : needs->soft_pre) {
      if (absl::Status s = visit(d, true); !s.ok()) return s;
    }
    for (const std::string& d : needs->depends) {
      if (absl::Status s = visit(d, false); !s.ok()) return s;
    }
    done.insert(key);
    order.push_back(it->second);
    return absl::OkStatus();
  };
  for (const std::string& w : wanted) {
    if (absl::Status s = visit(w, false); !s.ok()) return s;
  }
  return order;
}

}  // namespace farm::kernels
