#include "agent/health_baseline.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/base/file.h"

namespace farm::agent {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

absl::StatusOr<HealthBaseline> HealthBaseline::Load(const std::string& path) {
  HealthBaseline b(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return b;
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) return text.status();
  // The file is the agent's own; anything unexpected in it is corruption.
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  if (!j.is_object()) return bad("not a JSON object");
  if (!j.contains("version") || j["version"] != kVersion) {
    return bad(absl::StrCat("not version ", kVersion));
  }
  if (!j.contains("figures") || !j["figures"].is_object()) return bad("no \"figures\" object");
  for (const auto& [key, list] : j["figures"].items()) {
    if (!list.is_array()) return bad(absl::StrCat("figures of \"", key, "\" are not a list"));
    std::vector<double>& out = b.figures_[key];
    for (const nlohmann::json& v : list) {
      if (!v.is_number() || v.get<double>() < 0) {
        return bad(absl::StrCat("a figure of \"", key, "\" is not a number >= 0"));
      }
      out.push_back(v.get<double>());
    }
    if (out.size() > static_cast<size_t>(kKept)) out.erase(out.begin(), out.end() - kKept);
  }
  return b;
}

HealthBaseline::Verdict HealthBaseline::Judge(const std::string& key, double figure, double band) {
  std::vector<double>& kept = figures_[key];
  Verdict v;
  if (band > 0 && kept.size() >= static_cast<size_t>(kNeeded)) {
    const double median = Median(kept);
    v.ok = figure >= band * median;
    v.line = absl::StrFormat("%s %.0f, %s %.0f x %.2f (median of this host's last %d)", key, figure,
                             v.ok ? "at least" : "below", median, band, kept.size());
  } else {
    v.line = absl::StrFormat("%s %.0f (%d of the %d figures a baseline needs)", key, figure,
                             kept.size(), kNeeded);
  }
  if (!v.ok) return v;
  kept.push_back(figure);
  if (kept.size() > static_cast<size_t>(kKept)) kept.erase(kept.begin());
  return v;
}

absl::Status HealthBaseline::Save() const {
  nlohmann::json j;
  j["version"] = kVersion;
  j["figures"] = nlohmann::json::object();
  for (const auto& [key, list] : figures_) {
    if (!list.empty()) j["figures"][key] = list;
  }
  return base::WriteFileAtomically(path_, j.dump(1) + "\n", 0644);
}

}  // namespace farm::agent
