#include "bench/peer_protocol.h"

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace farm::bench {
namespace {

// The fields of each data row (header checked, blank lines skipped).
absl::StatusOr<std::vector<std::vector<std::string>>> Rows(const std::string& text,
                                                           const std::string& header) {
  std::vector<std::vector<std::string>> rows;
  int line_no = 0;
  bool seen_header = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!seen_header) {
      if (line != header) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_no, ": expected the header '", header, "'"));
      }
      seen_header = true;
      continue;
    }
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    if (fields.size() != static_cast<size_t>(std::count(header.begin(), header.end(), ',') + 1)) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": '", line, "'"));
    }
    rows.push_back(std::move(fields));
  }
  if (!seen_header) return absl::InvalidArgumentError(absl::StrCat("no header '", header, "'"));
  return rows;
}

absl::Status BadField(int row, const std::string& field) {
  return absl::InvalidArgumentError(
      absl::StrCat("data row ", row + 1, ": '", field, "' is not a number"));
}

}  // namespace

std::string PeerSeriesCsv(const std::vector<analyzer::Series>& trials) {
  std::string out = "trial,commit_index,repeat,value\n";
  for (size_t t = 0; t < trials.size(); ++t) {
    for (const analyzer::SeriesPoint& p : trials[t].points) {
      for (size_t r = 0; r < p.values.size(); ++r) {
        absl::StrAppend(&out, t, ",", p.commit_index, ",", r, ",",
                        absl::StrFormat("%.17g", p.values[r]), "\n");
      }
    }
  }
  return out;
}

absl::StatusOr<PeerSeries> ParsePeerSeriesCsv(const std::string& text) {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows =
      Rows(text, "trial,commit_index,repeat,value");
  if (!rows.ok()) return rows.status();
  PeerSeries out;
  for (size_t i = 0; i < rows->size(); ++i) {
    const auto& f = (*rows)[i];
    int trial = 0, commit = 0, repeat = 0;
    double value = 0;
    if (!absl::SimpleAtoi(f[0], &trial)) return BadField(static_cast<int>(i), f[0]);
    if (!absl::SimpleAtoi(f[1], &commit)) return BadField(static_cast<int>(i), f[1]);
    if (!absl::SimpleAtoi(f[2], &repeat)) return BadField(static_cast<int>(i), f[2]);
    if (!absl::SimpleAtod(f[3], &value)) return BadField(static_cast<int>(i), f[3]);
    out[trial].push_back({commit, value});
  }
  return out;
}

std::string PeerChangesCsv(const PeerChanges& changes) {
  std::string out = "trial,commit_index\n";
  for (const auto& [trial, commits] : changes) {
    for (int c : commits) absl::StrAppend(&out, trial, ",", c, "\n");
  }
  return out;
}

absl::StatusOr<PeerChanges> ParsePeerChangesCsv(const std::string& text) {
  absl::StatusOr<std::vector<std::vector<std::string>>> rows = Rows(text, "trial,commit_index");
  if (!rows.ok()) return rows.status();
  PeerChanges out;
  for (size_t i = 0; i < rows->size(); ++i) {
    const auto& f = (*rows)[i];
    int trial = 0, commit = 0;
    if (!absl::SimpleAtoi(f[0], &trial)) return BadField(static_cast<int>(i), f[0]);
    if (!absl::SimpleAtoi(f[1], &commit)) return BadField(static_cast<int>(i), f[1]);
    out[trial].push_back(commit);
  }
  return out;
}

void ScoreTrial(const std::vector<int>& measured, int culprit, const std::vector<int>& found,
                PeerScore& score) {
  ++score.trials;
  score.measured_commits += static_cast<int>(measured.size());
  bool recalled = false;
  // Two reports at one measured commit are one change.
  std::set<int> at;
  for (int c : found) {
    auto it = std::lower_bound(measured.begin(), measured.end(), c);
    if (it == measured.begin() || it == measured.end()) {
      ++score.false_alerts;  // before the first commit or past the last: no change there
      continue;
    }
    at.insert(*it);
  }
  for (int first_bad : at) {
    const int last_good = *(std::lower_bound(measured.begin(), measured.end(), first_bad) - 1);
    if (culprit > last_good && culprit <= first_bad) {
      recalled = true;
    } else {
      ++score.false_alerts;
    }
  }
  score.recalled += recalled ? 1 : 0;
}

}  // namespace farm::bench
