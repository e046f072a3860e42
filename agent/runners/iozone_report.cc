#include "agent/runners/iozone_report.h"

#include <cctype>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace farm::runners {
namespace {

struct Label {
  const char* label;
  const char* name;
};
// iozone's throughput-mode labels (iozone.c, throughput_test()).
constexpr Label kLabels[] = {
    {"initial writers", "write"},
    {"rewriters", "rewrite"},
    {"readers", "read"},
    {"re-readers", "reread"},
    {"reverse readers", "bkwdread"},
    {"stride readers", "strideread"},
    {"random readers", "randread"},
    {"mixed workload", "mixed"},
    {"random writers", "randwrite"},
    {"pwrite writers", "pwrite"},
    {"pread readers", "pread"},
    {"fwriters", "fwrite"},
    {"re-fwriters", "frewrite"},
    {"freaders", "fread"},
    {"re-freaders", "freread"},
    {"record rewriters", "recrewrite"},
};

// A line as an error quotes it: cut, so a huge line makes a short message.
std::string QuoteLine(absl::string_view line) {
  constexpr size_t kMaxLine = 200;
  if (line.size() <= kMaxLine) return absl::StrCat("\"", line, "\"");
  return absl::StrCat("\"", line.substr(0, kMaxLine), "\" (", line.size(), " bytes)");
}

// "= 4732581.09 kB/sec" -> value and unit.
absl::Status ParseValue(absl::string_view rhs, absl::string_view line, double* value,
                        std::string* unit) {
  rhs = absl::StripAsciiWhitespace(rhs);
  std::vector<absl::string_view> parts =
      absl::StrSplit(rhs, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (parts.empty() || !absl::SimpleAtod(parts[0], value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone report: no number in line ", QuoteLine(line)));
  }
  if (unit != nullptr) {
    *unit = parts.size() > 1 ? std::string(parts[1]) : std::string();
  }
  return absl::OkStatus();
}

// Removes e-mail quoting ("> > ") and surrounding whitespace.
absl::string_view CleanLine(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  while (absl::ConsumePrefix(&line, ">")) {
    line = absl::StripAsciiWhitespace(line);
  }
  return line;
}

// "12 initial writers \t= 4732581.09 kB/sec" (after "throughput for").
absl::Status ParseHeadline(absl::string_view rest, absl::string_view line, IozoneTest* test,
                           double* value) {
  const size_t eq = rest.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone report: no '=' in line ", QuoteLine(line)));
  }
  absl::string_view lhs = absl::StripAsciiWhitespace(rest.substr(0, eq));
  std::vector<absl::string_view> words =
      absl::StrSplit(lhs, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  int n = 0;
  if (words.size() < 2 || !absl::SimpleAtoi(words[0], &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("iozone report: no process count and test in line ", QuoteLine(line)));
  }
  words.erase(words.begin());
  test->processes = n;
  test->label = absl::AsciiStrToLower(absl::StrJoin(words, " "));
  test->name = IozoneTestName(test->label);
  std::string unit;
  absl::Status s = ParseValue(rest.substr(eq + 1), line, value, &unit);
  // The line was lower-cased for matching; restore iozone's spelling.
  test->unit = absl::StrContains(unit, "ops") ? "ops/sec" : "kB/sec";
  return s;
}

}  // namespace

std::string IozoneTestName(absl::string_view label) {
  const std::string lower = absl::AsciiStrToLower(label);
  for (const Label& l : kLabels) {
    if (lower == l.label) return l.name;
  }
  std::vector<absl::string_view> words =
      absl::StrSplit(lower, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  return absl::StrJoin(words, "-");
}

const IozoneTest* IozoneReport::Find(absl::string_view name) const {
  for (const IozoneTest& t : tests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::map<std::string, IozoneTest> IozoneReport::ByName() const {
  std::map<std::string, IozoneTest> out;
  for (const IozoneTest& t : tests) out.emplace(t.name, t);
  return out;
}

absl::StatusOr<std::vector<IozoneReport>> ParseIozoneReports(absl::string_view text) {
  std::vector<IozoneReport> runs;
  std::string version;
  std::set<std::string> seen;  // test names of the current run
  IozoneTest* current = nullptr;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    const absl::string_view line = CleanLine(raw);
    const std::string lower = absl::AsciiStrToLower(line);
    absl::string_view rest = lower;
    if (absl::ConsumePrefix(&rest, "version $revision:")) {
      version = std::string(
          absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripAsciiWhitespace(rest), "$")));
      continue;
    }
    if (absl::ConsumePrefix(&rest, "children see throughput for")) {
      IozoneTest test;
      double value = 0;
      if (absl::Status s = ParseHeadline(rest, line, &test, &value); !s.ok()) {
        return s;
      }
      test.children = value;
      if (runs.empty() || seen.count(test.name) > 0) {
        runs.emplace_back();
        seen.clear();
      }
      seen.insert(test.name);
      runs.back().tests.push_back(std::move(test));
      current = &runs.back().tests.back();
      continue;
    }
    if (current == nullptr) continue;
    double* field = nullptr;
    if (absl::ConsumePrefix(&rest, "parent sees throughput for")) {
      IozoneTest parent;
      double value = 0;
      if (absl::Status s = ParseHeadline(rest, line, &parent, &value); !s.ok()) {
        return s;
      }
      current->parent = value;
      continue;
    }
    if (absl::ConsumePrefix(&rest, "min throughput per process")) {
      field = &current->min_per_process;
    } else if (absl::ConsumePrefix(&rest, "max throughput per process")) {
      field = &current->max_per_process;
    } else if (absl::ConsumePrefix(&rest, "avg throughput per process")) {
      field = &current->avg_per_process;
    } else if (absl::ConsumePrefix(&rest, "min xfer")) {
      field = &current->min_xfer_kb;
    } else {
      continue;
    }
    const size_t eq = rest.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("iozone report: no '=' in line ", QuoteLine(line)));
    }
    if (absl::Status s = ParseValue(rest.substr(eq + 1), line, field, nullptr); !s.ok()) {
      return s;
    }
  }
  if (runs.empty()) {
    return absl::InvalidArgumentError(
        "iozone report: no \"Children see throughput for N ...\" line found "
        "(was iozone run in throughput mode, -t N?)");
  }
  for (IozoneReport& r : runs) r.version = version;
  return runs;
}

absl::StatusOr<IozoneReport> ParseIozoneReport(absl::string_view text) {
  absl::StatusOr<std::vector<IozoneReport>> runs = ParseIozoneReports(text);
  if (!runs.ok()) return runs.status();
  IozoneReport merged = std::move(runs->front());
  for (size_t i = 1; i < runs->size(); ++i) {
    for (IozoneTest& t : (*runs)[i].tests) merged.tests.push_back(std::move(t));
  }
  return merged;
}

}  // namespace farm::runners
