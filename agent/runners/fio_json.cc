#include "agent/runners/fio_json.h"

#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace farm::runners {
namespace {

using nlohmann::json;

// Lines starting with '{' tried as the report: fio prints a few warnings
// before it, not this many.
constexpr int kMaxObjectTries = 64;
// The most of the parser's message an error quotes.
constexpr size_t kMaxQuoted = 300;

// Returns the length of the balanced JSON object starting at text[0] == '{',
// or nullopt when it never closes. String-aware, so braces inside job names
// or option values do not count.
std::optional<size_t> ObjectExtent(absl::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::nullopt;
}

double Number(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return 0;
  return it->get<double>();
}

// A JSON number as a count: negatives are 0 and what is past the type's
// range is its end (the cast alone would be undefined).
std::uint64_t Unsigned(const json& obj, const char* key) {
  const double v = Number(obj, key);
  if (!(v > 0)) return 0;
  if (v >= 0x1p64) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(v);
}

int Int(const json& obj, const char* key) {
  const double v = Number(obj, key);
  if (v >= std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  if (v <= std::numeric_limits<int>::min()) return std::numeric_limits<int>::min();
  return static_cast<int>(v);
}

// fio prints percentile keys as "%f" ("99.900000"); match numerically so a
// different precision in another fio version still parses.
double Percentile(const json& percentiles, double wanted) {
  for (auto it = percentiles.begin(); it != percentiles.end(); ++it) {
    double key = 0;
    try {
      key = std::stod(it.key());
    } catch (const std::exception&) {
      continue;
    }
    if (key > wanted - 1e-6 && key < wanted + 1e-6 && it->is_number()) {
      return it->get<double>();
    }
  }
  return 0;
}

FioLatency ParseLatency(const json& dir) {
  FioLatency lat;
  double scale = 1;
  auto it = dir.find("clat_ns");
  if (it == dir.end()) {
    // fio 2.x reported "clat" in microseconds.
    it = dir.find("clat");
    scale = 1000;
  }
  if (it == dir.end() || !it->is_object()) return lat;
  lat.mean_ns = Number(*it, "mean") * scale;
  auto pct = it->find("percentile");
  if (pct != it->end() && pct->is_object()) {
    lat.p50_ns = Percentile(*pct, 50) * scale;
    lat.p99_ns = Percentile(*pct, 99) * scale;
    lat.p999_ns = Percentile(*pct, 99.9) * scale;
  }
  return lat;
}

FioDirection ParseDirection(const json& job, const char* key) {
  FioDirection d;
  auto it = job.find(key);
  if (it == job.end() || !it->is_object()) return d;
  d.io_bytes = Unsigned(*it, "io_bytes");
  d.total_ios = Unsigned(*it, "total_ios");
  d.iops = Number(*it, "iops");
  d.bw_kib_s = Number(*it, "bw");
  d.runtime_ms = Unsigned(*it, "runtime");
  d.clat = ParseLatency(*it);
  return d;
}

absl::StatusOr<FioReport> FromJson(const json& root) {
  if (!root.is_object()) {
    return absl::InvalidArgumentError("fio json: top level is not an object");
  }
  FioReport report;
  auto version = root.find("fio version");
  if (version == root.end() || !version->is_string()) {
    return absl::InvalidArgumentError("fio json: missing string field \"fio version\"");
  }
  report.fio_version = version->get<std::string>();
  auto jobs = root.find("jobs");
  if (jobs == root.end() || !jobs->is_array()) {
    return absl::InvalidArgumentError("fio json: missing array field \"jobs\"");
  }
  for (const json& j : *jobs) {
    if (!j.is_object()) {
      return absl::InvalidArgumentError("fio json: a job is not an object");
    }
    FioJob job;
    auto name = j.find("jobname");
    if (name != j.end() && name->is_string()) job.name = name->get<std::string>();
    job.error = Int(j, "error");
    job.job_runtime_ms = Unsigned(j, "job_runtime");
    job.read = ParseDirection(j, "read");
    job.write = ParseDirection(j, "write");
    job.trim = ParseDirection(j, "trim");
    report.jobs.push_back(std::move(job));
  }
  return report;
}

}  // namespace

absl::StatusOr<FioReport> ParseFioJson(absl::string_view text) {
  absl::Status last_error = absl::InvalidArgumentError("fio json: no JSON object found in output");
  // Try each '{' that opens a line: warnings come before the report, and a
  // warning could itself contain braces mid-line.
  // Each try scans to the object's end, at worst the text's: a bounded
  // number of them keeps a text of many unclosed '{' lines linear.
  int tries = 0;
  for (size_t pos = 0; pos < text.size() && tries < kMaxObjectTries; ++pos) {
    if (text[pos] != '{' || (pos > 0 && text[pos - 1] != '\n')) continue;
    ++tries;
    std::optional<size_t> len = ObjectExtent(text.substr(pos));
    if (!len) {
      last_error =
          absl::InvalidArgumentError("fio json: JSON object is truncated (no closing brace)");
      continue;
    }
    json root;
    try {
      root = json::parse(text.substr(pos, *len));
    } catch (const json::exception& e) {
      // nlohmann quotes the last token read, which may be long.
      last_error = absl::InvalidArgumentError(
          absl::StrCat("fio json: ", absl::string_view(e.what()).substr(0, kMaxQuoted)));
      continue;
    }
    return FromJson(root);
  }
  return last_error;
}

}  // namespace farm::runners
