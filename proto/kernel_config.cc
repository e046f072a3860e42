#include "proto/kernel_config.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/base/sha256.h"
#include "proto/kernel_offers.h"

namespace farm::proto {

namespace pb = ::iommufarm::v1;

namespace {

constexpr size_t kIdDigits = 16;

bool IsSymbol(absl::string_view s) {
  if (!absl::StartsWith(s, "CONFIG_") || s.size() == 7) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

enum class LineKind { kOption, kIgnored, kBad };

// A config line: an option (its normal form in *option), a comment or
// blank, or anything else.
LineKind ClassifyLine(absl::string_view line, std::string* option) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty()) return LineKind::kIgnored;
  if (line[0] == '#') {
    absl::string_view rest = line.substr(1);
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (absl::ConsumeSuffix(&rest, " is not set") && IsSymbol(rest)) {
      *option = absl::StrCat("# ", rest, " is not set");
      return LineKind::kOption;
    }
    return LineKind::kIgnored;
  }
  const size_t eq = line.find('=');
  if (eq == absl::string_view::npos || eq + 1 == line.size() || !IsSymbol(line.substr(0, eq))) {
    return LineKind::kBad;
  }
  *option = std::string(line);
  return LineKind::kOption;
}

// Problems of one config text (`field` names it).
void CheckLines(const std::string& field, const std::string& text,
                std::vector<std::pair<std::string, std::string>>* out) {
  int number = 0;
  int bad = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    std::string option;
    if (ClassifyLine(line, &option) != LineKind::kBad) continue;
    if (++bad > 3) continue;  // the first few are enough to see what it is
    std::string shown(absl::StripAsciiWhitespace(line).substr(0, 60));
    out->emplace_back(field, absl::StrCat("line ", number, " is not CONFIG_X=value or '# CONFIG_X ",
                                          "is not set': \"", absl::CEscape(shown), "\""));
  }
  if (bad > 3) out->emplace_back(field, absl::StrCat("... ", bad - 3, " more such lines"));
}

void AppendOptions(absl::string_view text, std::string* out) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::string option;
    if (ClassifyLine(line, &option) == LineKind::kOption) absl::StrAppend(out, option, "\n");
  }
}

bool IsTarget(absl::string_view base) {
  for (const std::string& t : KernelConfigTargets()) {
    if (t == base) return true;
  }
  return false;
}

}  // namespace

const std::vector<std::string>& KernelConfigTargets() {
  static const auto* targets =
      new std::vector<std::string>{"tinyconfig", "defconfig", "allnoconfig"};
  return *targets;
}

bool IsDefaultKernelConfig(const pb::KernelConfig& config) {
  return config.base().empty() && config.base_text().empty() && config.fragments().empty();
}

std::vector<std::pair<std::string, std::string>> CheckKernelConfig(const pb::KernelConfig& config) {
  std::vector<std::pair<std::string, std::string>> out;
  if (IsDefaultKernelConfig(config)) return out;
  size_t bytes = config.base_text().size();
  if (config.base().empty() && config.base_text().empty()) {
    out.emplace_back("kernel_config.base",
                     absl::StrCat("required: ", absl::StrJoin(KernelConfigTargets(), ", "),
                                  " or a config file"));
  } else if (config.base_text().empty() && !IsTarget(config.base())) {
    out.emplace_back("kernel_config.base",
                     absl::StrCat("unknown base \"", absl::CEscape(config.base()),
                                  "\": ", absl::StrJoin(KernelConfigTargets(), ", "),
                                  ", or a config file (a path with '/' or ending in .config, "
                                  "which farmctl reads)"));
  } else if (!config.base_text().empty()) {
    CheckLines("kernel_config.base", config.base_text(), &out);
  }
  if (config.fragments_size() > kMaxKernelConfigFragments) {
    out.emplace_back(
        "kernel_config.fragments",
        absl::StrCat(config.fragments_size(), " fragments, at most ", kMaxKernelConfigFragments));
  }
  for (int i = 0; i < config.fragments_size(); ++i) {
    const pb::ConfigFragment& f = config.fragments(i);
    const std::string field = absl::StrCat("kernel_config.fragments[", i, "]");
    bytes += f.text().size();
    std::string option;
    bool any = false;
    for (absl::string_view line : absl::StrSplit(f.text(), '\n')) {
      if (ClassifyLine(line, &option) == LineKind::kOption) any = true;
    }
    if (f.text().empty()) {
      out.emplace_back(field, absl::StrCat("\"", absl::CEscape(f.name()),
                                           "\" was not read: farmctl submit reads the fragment "
                                           "files a spec names, relative to the spec"));
      continue;
    }
    CheckLines(field, f.text(), &out);
    if (!any) out.emplace_back(field, "sets no option");
  }
  if (bytes > kMaxKernelConfigBytes) {
    out.emplace_back("kernel_config", absl::StrCat(bytes, " bytes of base and fragments, at most ",
                                                   kMaxKernelConfigBytes));
  }
  return out;
}

std::string KernelConfigId(const pb::KernelConfig& config) {
  if (IsDefaultKernelConfig(config)) return "";
  std::string input = "kernel-config 1\n";
  if (config.base_text().empty()) {
    absl::StrAppend(&input, "base ", config.base(), "\n");
  } else {
    absl::StrAppend(&input, "base-file\n");
    AppendOptions(config.base_text(), &input);
  }
  for (const pb::ConfigFragment& f : config.fragments()) {
    absl::StrAppend(&input, "fragment\n");
    AppendOptions(f.text(), &input);
  }
  return base::Sha256Hex(input).substr(0, kIdDigits);
}

std::string BuildConfigId(std::string_view config_id, bool dma_map_bench) {
  if (!dma_map_bench) return std::string(config_id);
  return config_id.empty() ? "dma-map-bench"
                           : absl::StrCat(absl::string_view(config_id.data(), config_id.size()),
                                          "+dma-map-bench");
}

bool IsDmaMapBenchBuild(std::string_view build_config_id) {
  return absl::EndsWith(absl::string_view(build_config_id.data(), build_config_id.size()),
                        "dma-map-bench");
}

std::string HostBuildConfigId(std::string_view config_id) {
  return config_id.empty()
             ? "host"
             : absl::StrCat(absl::string_view(config_id.data(), config_id.size()), "+host");
}

bool IsHostBuild(std::string_view build_config_id) {
  absl::string_view id(build_config_id.data(), build_config_id.size());
  absl::ConsumeSuffix(&id, "dma-map-bench");
  absl::ConsumeSuffix(&id, "+");
  return id == "host" || absl::EndsWith(id, "+host");
}

std::string JobConfigId(const pb::Job& job) {
  auto it = job.workload().params().find(kKernelConfigParam);
  return it == job.workload().params().end() ? "" : it->second;
}

std::string JobBuildConfigId(const pb::Job& job) {
  std::string id = JobConfigId(job);
  if (!id.empty() && FindVmPlatform(job.platform()) == nullptr) id = HostBuildConfigId(id);
  return BuildConfigId(id, job.executor() == pb::EXECUTOR_DMA_MAP_BENCH);
}

std::string EncodeKernelConfig(const pb::KernelConfig& config) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(config, &out);
  return out;
}

absl::StatusOr<pb::KernelConfig> DecodeKernelConfig(std::string_view text) {
  pb::KernelConfig out;
  if (!google::protobuf::TextFormat::ParseFromString(std::string(text), &out)) {
    return absl::InvalidArgumentError("the build job's kernel_config_text does not parse");
  }
  return out;
}

}  // namespace farm::proto
