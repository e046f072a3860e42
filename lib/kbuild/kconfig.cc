#include "lib/kbuild/kconfig.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace farm::kbuild {

namespace fs = std::filesystem;

namespace {

bool IsSymbolChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool IsSymbol(absl::string_view s) {
  if (!absl::StartsWith(s, "CONFIG_") || s.size() == 7) return false;
  for (char c : s) {
    if (!IsSymbolChar(c)) return false;
  }
  return true;
}

std::string Origin(const ConfigOption& o) {
  return o.origin.empty() ? "" : absl::StrCat(" (from ", o.origin, ")");
}

}  // namespace

std::optional<ConfigOption> ParseConfigLine(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (absl::ConsumePrefix(&line, "# ")) {
    if (!absl::ConsumeSuffix(&line, " is not set") || !IsSymbol(line)) return std::nullopt;
    return ConfigOption{std::string(line), "n", ""};
  }
  const size_t eq = line.find('=');
  if (eq == absl::string_view::npos || !IsSymbol(line.substr(0, eq))) return std::nullopt;
  return ConfigOption{std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)), ""};
}

std::string FormatConfigOption(const ConfigOption& option) {
  if (option.value == "n") return absl::StrCat("# ", option.symbol, " is not set");
  return absl::StrCat(option.symbol, "=", option.value);
}

std::vector<ConfigOption> ParseConfig(absl::string_view text, absl::string_view origin) {
  std::vector<ConfigOption> out;
  std::map<std::string, size_t> index;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::optional<ConfigOption> o = ParseConfigLine(line);
    if (!o) continue;
    o->origin = std::string(origin);
    auto [it, fresh] = index.emplace(o->symbol, out.size());
    if (fresh) {
      out.push_back(*std::move(o));
    } else {
      out[it->second] = *std::move(o);
    }
  }
  return out;
}

std::vector<ConfigOption> RequestedOptions(
    const std::vector<std::vector<ConfigOption>>& fragments) {
  std::vector<ConfigOption> out;
  std::map<std::string, size_t> index;
  for (const std::vector<ConfigOption>& fragment : fragments) {
    for (const ConfigOption& o : fragment) {
      auto [it, fresh] = index.emplace(o.symbol, out.size());
      if (fresh) {
        out.push_back(o);
      } else {
        out[it->second] = o;
      }
    }
  }
  return out;
}

std::string MergeConfig(absl::string_view base, const std::vector<ConfigOption>& requested) {
  std::set<std::string> replaced;
  for (const ConfigOption& o : requested) replaced.insert(o.symbol);
  std::string out;
  for (absl::string_view line : absl::StrSplit(base, '\n', absl::SkipEmpty())) {
    std::optional<ConfigOption> o = ParseConfigLine(line);
    if (o && replaced.count(o->symbol) > 0) continue;
    absl::StrAppend(&out, line, "\n");
  }
  for (const ConfigOption& o : requested) absl::StrAppend(&out, FormatConfigOption(o), "\n");
  return out;
}

std::vector<OptionMismatch> Mismatches(const std::vector<ConfigOption>& requested,
                                       absl::string_view final_config) {
  std::map<std::string, std::string> have;
  for (ConfigOption& o : ParseConfig(final_config)) have[o.symbol] = std::move(o.value);
  std::vector<OptionMismatch> out;
  for (const ConfigOption& want : requested) {
    auto it = have.find(want.symbol);
    if (it == have.end()) {
      out.push_back({want, "n", true});
    } else if (it->second != want.value) {
      out.push_back({want, it->second, false});
    }
  }
  return out;
}

absl::StatusOr<std::set<std::string>> KconfigSymbols(const std::string& source_dir) {
  std::set<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(source_dir, fs::directory_options::skip_permission_denied,
                                      ec);
  if (ec) return absl::InternalError(absl::StrCat("read ", source_dir, ": ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("read ", source_dir, ": ", ec.message()));
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec)) {
      if (name == ".git") it.disable_recursion_pending();
      continue;
    }
    if (!absl::StartsWith(name, "Kconfig") || !it->is_regular_file(ec)) continue;
    std::ifstream in(it->path());
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view l = absl::StripLeadingAsciiWhitespace(line);
      if (!absl::ConsumePrefix(&l, "config") && !absl::ConsumePrefix(&l, "menuconfig")) continue;
      if (l.empty() || (l.front() != ' ' && l.front() != '\t')) continue;
      l = absl::StripAsciiWhitespace(l);
      size_t end = 0;
      while (end < l.size() && IsSymbolChar(l[end])) ++end;
      if (end > 0) out.insert(absl::StrCat("CONFIG_", l.substr(0, end)));
    }
  }
  return out;
}

absl::Status ExplainMismatches(const std::vector<OptionMismatch>& mismatches,
                               const std::set<std::string>& known_symbols) {
  std::vector<std::string> unknown, dropped;
  for (const OptionMismatch& m : mismatches) {
    if (known_symbols.count(m.wanted.symbol) == 0) {
      unknown.push_back(absl::StrCat(m.wanted.symbol, Origin(m.wanted)));
    } else if (!(m.absent && m.wanted.value == "n")) {
      dropped.push_back(absl::StrCat(FormatConfigOption(m.wanted), Origin(m.wanted),
                                     "; olddefconfig left ", m.got));
    }
  }
  if (!unknown.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config options the tree's Kconfig does not define: ", absl::StrJoin(unknown, ", ")));
  }
  if (!dropped.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("olddefconfig dropped options the fragments ask for (their dependencies "
                     "are off): ",
                     absl::StrJoin(dropped, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace farm::kbuild
