#include "cli/number_format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace farm::cli {

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e12 || a < 1e-3)) return absl::StrFormat("%.4g", v);
  if (a >= 1000) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

std::string FormatExactNumber(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace farm::cli
