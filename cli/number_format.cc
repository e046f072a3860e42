#include "cli/number_format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace farm::cli {

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e15 || a < 1e-3)) return absl::StrFormat("%.4g", v);
  if (a < 10000) return a >= 1000 ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.4g", v);
  // Four significant digits before the smallest prefix that keeps the
  // rounded figure under 1000: 20.01k, 793.7k, 999950 -> 1.000M.
  static constexpr struct {
    double scale;
    const char* prefix;
  } kPrefixes[] = {{1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}};
  for (const auto& p : kPrefixes) {
    const double scaled = a / p.scale;
    if (scaled >= 999.95 && p.scale < 1e12) continue;
    const int decimals = scaled >= 99.995 ? 1 : scaled >= 9.9995 ? 2 : 3;
    return absl::StrFormat("%s%.*f%s", v < 0 ? "-" : "", decimals, scaled, p.prefix);
  }
  return absl::StrFormat("%.4g", v);
}

std::string FormatExactNumber(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace farm::cli
