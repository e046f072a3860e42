#include "lib/toolspec/params.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace farm::toolspec {
namespace {

absl::Status Bad(absl::string_view key, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("param '", key, "': ", why, " (got \"", value, "\")"));
}

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::uint64_t> ParseBytes(absl::string_view key, absl::string_view value,
                                         std::uint64_t min, std::uint64_t max) {
  std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  absl::string_view s = v;
  // Suffix: k/m/g/t with optional "ib" or "b".
  if (!absl::ConsumeSuffix(&s, "ib")) absl::ConsumeSuffix(&s, "b");
  std::uint64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
        mult = 1ull << 10;
        break;
      case 'm':
        mult = 1ull << 20;
        break;
      case 'g':
        mult = 1ull << 30;
        break;
      case 't':
        mult = 1ull << 40;
        break;
      default:
        break;
    }
    if (mult != 1) s.remove_suffix(1);
  }
  std::uint64_t n = 0;
  if (!AllDigits(s) || !absl::SimpleAtoi(s, &n)) {
    return Bad(key, value, "expected a size like 4096, 4k, 64m or 1g (binary multiples)");
  }
  if (n > max / mult) {
    return Bad(key, value, absl::StrCat("must be at most ", max, " bytes"));
  }
  const std::uint64_t bytes = n * mult;
  if (bytes < min || bytes > max) {
    return Bad(key, value, absl::StrCat("must be between ", min, " and ", max, " bytes"));
  }
  return bytes;
}

absl::StatusOr<std::int64_t> ParseInt(absl::string_view key, absl::string_view value,
                                      std::int64_t min, std::int64_t max) {
  absl::string_view s = absl::StripAsciiWhitespace(value);
  std::int64_t n = 0;
  if (!AllDigits(s) || !absl::SimpleAtoi(s, &n)) {
    return Bad(key, value, "expected a non-negative integer");
  }
  if (n < min || n > max) {
    return Bad(key, value, absl::StrCat("must be between ", min, " and ", max));
  }
  return n;
}

absl::StatusOr<std::int64_t> ParseSeconds(absl::string_view key, absl::string_view value,
                                          std::int64_t min, std::int64_t max) {
  std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  absl::string_view s = v;
  std::int64_t mult = 1;
  if (absl::ConsumeSuffix(&s, "s")) {
  } else if (absl::ConsumeSuffix(&s, "m")) {
    mult = 60;
  } else if (absl::ConsumeSuffix(&s, "h")) {
    mult = 3600;
  }
  std::int64_t n = 0;
  if (!AllDigits(s) || !absl::SimpleAtoi(s, &n)) {
    return Bad(key, value, "expected whole seconds like 10, 30s, 2m or 1h");
  }
  if (n > max / mult || n * mult < min) {
    return Bad(key, value, absl::StrCat("must be between ", min, " and ", max, " seconds"));
  }
  return n * mult;
}

absl::StatusOr<bool> ParseBool(absl::string_view key, absl::string_view value) {
  const std::string v = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return Bad(key, value, "expected 1/0, true/false, yes/no or on/off");
}

absl::StatusOr<std::vector<std::string>> ParseList(absl::string_view key, absl::string_view value) {
  absl::string_view s = absl::StripAsciiWhitespace(value);
  if (absl::ConsumePrefix(&s, "[") && !absl::ConsumeSuffix(&s, "]")) {
    return Bad(key, value, "unbalanced '['");
  }
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(s, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'') &&
        item.back() == item.front()) {
      item = item.substr(1, item.size() - 2);
    }
    if (item.empty()) return Bad(key, value, "empty list item");
    out.emplace_back(absl::AsciiStrToLower(item));
  }
  return out;
}

absl::Status CheckCpuList(absl::string_view key, absl::string_view value) {
  if (value.empty()) return Bad(key, value, "empty CPU list");
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    if (range.size() > 2) return Bad(key, value, "expected CPU list like 0-3,8");
    std::int64_t lo = 0, hi = 0;
    if (!AllDigits(range[0]) || !absl::SimpleAtoi(range[0], &lo) ||
        (range.size() == 2 &&
         (!AllDigits(range[1]) || !absl::SimpleAtoi(range[1], &hi) || hi < lo)) ||
        lo > 65535 || hi > 65535) {
      return Bad(key, value, "expected CPU list like 0-3,8");
    }
  }
  return absl::OkStatus();
}

absl::Status RefuseParam(absl::string_view tool, absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(tool, " param '", key, "' refused: ", why));
}

absl::Status CheckJobFootprint(absl::string_view tool, absl::string_view what,
                               std::uint64_t footprint) {
  if (footprint <= kMaxJobFootprintBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      tool, ": ", what, " = ", footprint, " bytes is more than a job may lay out on its target (",
      kMaxJobFootprintBytes, " bytes, 1 TiB)"));
}

}  // namespace farm::toolspec
