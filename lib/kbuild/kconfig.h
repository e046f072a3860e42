// kconfig: the kernel's .config text as the kernel builder handles it. Merges
// a base config with fragments the way scripts/kconfig/merge_config.sh does
// (a later line for a symbol replaces every earlier one), and checks that the
// config `make olddefconfig` wrote still holds what the fragments asked for.
//
// Pure functions of their arguments (KconfigSymbols reads the tree); all
// thread-safe. A value is kept as written ("y", "m", "\"str\"", "0x10"); an
// option a config turns off ("# CONFIG_X is not set") has the value "n".
#ifndef LIB_KBUILD_KCONFIG_H_
#define LIB_KBUILD_KCONFIG_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::kbuild {

struct ConfigOption {
  std::string symbol;  // "CONFIG_BLK_DEV_NVME"
  std::string value;   // "y", "m", a number or a quoted string; "n" when not set
  std::string origin;  // the fragment that asked for it; "" for a .config line
};

// The option one line sets: "CONFIG_X=v" or "# CONFIG_X is not set";
// nullopt for a comment, a blank or any other line.
std::optional<ConfigOption> ParseConfigLine(absl::string_view line);

// "CONFIG_X=v", or "# CONFIG_X is not set" for "n".
std::string FormatConfigOption(const ConfigOption& option);

// The options of a .config or fragment, later lines of a symbol replacing
// earlier ones, in the order each symbol first appears. `origin` is copied
// into each.
std::vector<ConfigOption> ParseConfig(absl::string_view text, absl::string_view origin = "");

// The options `fragments` ask for, merged in order (the last one of a
// symbol wins, naming its fragment).
std::vector<ConfigOption> RequestedOptions(const std::vector<std::vector<ConfigOption>>& fragments);

// merge_config.sh: `base`'s lines without the symbols `requested` sets, then
// the requested options; the input of `make olddefconfig`.
std::string MergeConfig(absl::string_view base, const std::vector<ConfigOption>& requested);

// A requested option the final config does not hold as asked.
struct OptionMismatch {
  ConfigOption wanted;
  std::string got;      // the final value; "n" when not set
  bool absent = false;  // the final config has no line for it
};

// The requested options `final_config` does not hold. An option asked off
// and absent is listed too (absent with got "n"): only the tree's Kconfig
// can tell an unknown symbol from one whose dependencies are off.
std::vector<OptionMismatch> Mismatches(const std::vector<ConfigOption>& requested,
                                       absl::string_view final_config);

// Every symbol the tree's Kconfig files define (`config X`, `menuconfig X`),
// as "CONFIG_X". Internal when `source_dir` cannot be read.
absl::StatusOr<std::set<std::string>> KconfigSymbols(const std::string& source_dir);

// OK when every mismatch is an option asked off whose symbol is known but
// absent. Else InvalidArgument naming each symbol the tree does not know
// ("config options the tree's Kconfig does not define: CONFIG_X (from
// f.config)"), or FailedPrecondition listing the options olddefconfig
// dropped ("...: CONFIG_X=y (from f.config); olddefconfig left n").
absl::Status ExplainMismatches(const std::vector<OptionMismatch>& mismatches,
                               const std::set<std::string>& known_symbols);

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_KCONFIG_H_
