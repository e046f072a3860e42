// testing/fuzz: seeded, bounded property tests of the parsers that read text
// from outside (the *_fuzz_test.cc files). A Mutator turns valid seed inputs
// into hostile ones -- byte flips, truncations, insertions of special bytes
// and tokens (NUL, 0xff, control characters, huge numbers, "nan", "inf",
// "-1", deep nesting), line edits and splices of two seeds -- and RunFuzz
// runs a property over a fixed number of them, so a run is repeatable.
//
// FARM_FUZZ_CASES and FARM_FUZZ_SEED override every test's case count and
// seed, so a longer run of one test is one command (testing/README.md,
// "Fuzz tests of the parsers"). A failing case is reported with its index, the seed and the
// input, C-escaped.
//
// Test-only; header-only. Thread-safety: a Mutator is one thread's.
#ifndef TESTING_FUZZ_H_
#define TESTING_FUZZ_H_

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace farm::testing {

struct FuzzConfig {
  int cases = 0;
  uint64_t seed = 0;
};

// `default_cases` cases from `default_seed`, unless FARM_FUZZ_CASES /
// FARM_FUZZ_SEED say otherwise.
inline FuzzConfig FuzzConfigFromEnv(int default_cases, uint64_t default_seed = 20261205) {
  FuzzConfig c{default_cases, default_seed};
  if (const char* v = std::getenv("FARM_FUZZ_CASES"); v != nullptr) {
    int n = 0;
    if (absl::SimpleAtoi(v, &n) && n >= 0) c.cases = n;
  }
  if (const char* v = std::getenv("FARM_FUZZ_SEED"); v != nullptr) {
    uint64_t s = 0;
    if (absl::SimpleAtoi(v, &s)) c.seed = s;
  }
  return c;
}

// An input as a failure message shows it: C-escaped, the middle cut when long.
inline std::string FuzzShow(const std::string& input, size_t max = 2000) {
  if (input.size() <= max) return absl::StrCat("\"", absl::CEscape(input), "\"");
  return absl::StrCat("\"", absl::CEscape(input.substr(0, max / 2)), "\" ... (", input.size() - max,
                      " bytes) ... \"", absl::CEscape(input.substr(input.size() - max / 2)), "\"");
}

// Tokens every parser meets: bytes and words that tend to break one.
inline const std::vector<std::string>& FuzzSpecialTokens() {
  static const auto* tokens = new std::vector<std::string>{
      std::string(1, '\0'),
      "\xff",
      "\x01",
      "\x1b[2J",
      "\x7f",
      "\r",
      "\n",
      "\r\n",
      "\t",
      " ",
      "\xc3\x28",          // invalid UTF-8
      "\xef\xbb\xbf",      // BOM
      "\xe2\x80\xae",      // right-to-left override
      "\xf0\x9f\x92\xa9",  // four-byte UTF-8
      "-1",
      "0",
      "-0",
      "nan",
      "NaN",
      "inf",
      "-inf",
      "1e308",
      "1e-400",
      "-9223372036854775809",
      "18446744073709551616",
      "99999999999999999999999999999999999999",
      "0x7fffffff",
      "2147483648",
      "4294967296",
      "1.5",
      "true",
      "null",
      "~",
      "\"",
      "'",
      "\\",
      "\\u0000",
      ":",
      ",",
      "#",
      "%",
      "&a ",
      "*a",
      "!!binary ",
      "---\n",
      "...\n",
      "{",
      "}",
      "[",
      "]",
      "- ",
      "? ",
      "|\n",
      ">-\n",
      "..",
      "../",
      "/",
      "$(id)",
      "${HOME}",
      "%s%n",
      std::string(300, '['),
      std::string(3000, '{'),
      std::string(200, '-') + " ",
      std::string(5000, 'a'),
      std::string(70000, '9'),
  };
  return *tokens;
}

class Mutator {
 public:
  // `seeds`: valid inputs to start from (at least one). `dictionary`: the
  // area's own words (keys, section names), inserted like special tokens.
  Mutator(uint64_t seed, std::vector<std::string> seeds, std::vector<std::string> dictionary = {})
      : rng_(seed), seeds_(std::move(seeds)), dictionary_(std::move(dictionary)) {}

  std::mt19937_64& rng() { return rng_; }

  // A number in [0, n), 0 when n is 0.
  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  bool OneIn(size_t n) { return Below(n) == 0; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

  const std::string& Seed() { return Pick(seeds_); }

  // A seed with 1..6 mutations (one case in 16 is a seed as it is).
  std::string Next() {
    std::string s = Seed();
    if (OneIn(16)) return s;
    const size_t n = 1 + Below(6);
    for (size_t i = 0; i < n; ++i) Mutate(s);
    return s;
  }

  // One random edit of `s`.
  void Mutate(std::string& s) {
    switch (Below(12)) {
      case 0:  // flip a bit
        if (!s.empty()) s[Below(s.size())] ^= static_cast<char>(1 << Below(8));
        break;
      case 1:  // a random byte
        if (!s.empty()) s[Below(s.size())] = static_cast<char>(Below(256));
        break;
      case 2:  // truncate
        s.resize(Below(s.size() + 1));
        break;
      case 3:
      case 4:  // a special token
        s.insert(Below(s.size() + 1), Pick(FuzzSpecialTokens()));
        break;
      case 5:  // a word of the area's own
        s.insert(Below(s.size() + 1),
                 dictionary_.empty() ? Pick(FuzzSpecialTokens()) : Pick(dictionary_));
        break;
      case 6:  // replace a word (a run of non-space) with a token
        ReplaceWord(s);
        break;
      case 7: {  // delete a range
        const size_t at = Below(s.size() + 1);
        s.erase(at, Below(s.size() - at + 1));
        break;
      }
      case 8: {  // repeat a range
        const size_t at = Below(s.size() + 1);
        const std::string piece = s.substr(at, Below(64));
        const size_t times = 1 + Below(8);
        for (size_t i = 0; i < times; ++i) s.insert(at, piece);
        break;
      }
      case 9:  // splice: this one's head, another seed's tail
      {
        const std::string& other = Seed();
        s = s.substr(0, Below(s.size() + 1)) + other.substr(Below(other.size() + 1));
        break;
      }
      case 10:
        EditLines(s);
        break;
      default:  // a random short string of any bytes
      {
        std::string junk(1 + Below(16), '\0');
        for (char& c : junk) c = static_cast<char>(Below(256));
        s.insert(Below(s.size() + 1), junk);
        break;
      }
    }
  }

 private:
  void ReplaceWord(std::string& s) {
    if (s.empty()) return;
    size_t at = Below(s.size());
    while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) ++at;
    size_t end = at;
    while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
    const std::string& with =
        !dictionary_.empty() && OneIn(2) ? Pick(dictionary_) : Pick(FuzzSpecialTokens());
    s.replace(at, end - at, with);
  }

  // Duplicate, delete or swap whole lines: the structure of line formats.
  void EditLines(std::string& s) {
    std::vector<std::string> lines;
    size_t from = 0;
    while (from < s.size()) {
      size_t nl = s.find('\n', from);
      if (nl == std::string::npos) nl = s.size() - 1;
      lines.push_back(s.substr(from, nl - from + 1));
      from = nl + 1;
    }
    if (lines.empty()) return;
    const size_t i = Below(lines.size()), j = Below(lines.size());
    switch (Below(3)) {
      case 0:
        lines.insert(lines.begin() + i, lines[j]);
        break;
      case 1:
        lines.erase(lines.begin() + i);
        break;
      default:
        std::swap(lines[i], lines[j]);
    }
    s.clear();
    for (const std::string& l : lines) s += l;
  }

  std::mt19937_64 rng_;
  std::vector<std::string> seeds_;
  std::vector<std::string> dictionary_;
};

// Runs `property` on `config.cases` inputs of `next` (a Mutator's Next, or a
// structure-aware generator), stopping at the first case with a failure;
// each failure names the case, the seed and the input. Fails too when one
// case used more than `max_case_ms` of CPU (a parser that hangs): CPU, not
// wall time, so a machine busy with other builds does not fail it. Prints
// the count and the times, for the record of a longer run.
inline void RunFuzz(const FuzzConfig& config, const std::function<std::string()>& next,
                    const std::function<void(const std::string&)>& property,
                    double max_case_ms = 2000) {
  const auto cpu_ms = [] { return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC; };
  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_ms();
  double slowest = 0;
  for (int i = 0; i < config.cases; ++i) {
    const std::string input = next();
    SCOPED_TRACE(absl::StrCat("fuzz case ", i, " of seed ", config.seed, " (FARM_FUZZ_SEED), ",
                              input.size(), " bytes: ", FuzzShow(input)));
    const double t = cpu_ms();
    property(input);
    const double took = cpu_ms() - t;
    slowest = std::max(slowest, took);
    ASSERT_LT(took, max_case_ms) << "CPU ms for one case (a hang?)";
    if (::testing::Test::HasFailure()) return;
  }
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - wall_start);
  std::cout << "fuzz: " << config.cases << " cases, seed " << config.seed << ", "
            << static_cast<int64_t>(cpu_ms() - cpu_start) << " ms CPU (" << wall.count()
            << " ms wall), slowest case " << static_cast<int64_t>(slowest) << " ms CPU\n";
}

}  // namespace farm::testing

#endif  // TESTING_FUZZ_H_
