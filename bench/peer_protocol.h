// The file protocol between bench/peer_compare and a peer change-point
// detector (docs/analyzer.md "A peer side by side"), and the scoring both
// detectors get.
//
// Input, one CSV file: every trial's series, one row per run in time order
// (a commit's repeats together, commits ascending):
//     trial,commit_index,repeat,value
// Trials are independent series; a peer detects over each on its own.
// Output, one CSV file the peer writes: one row per change it finds, the
// first commit (as commit_index, one of its trial's commits) of the new
// level:
//     trial,commit_index
// A header line is required in both; a row that does not parse is an error
// naming its line.
//
// Pure functions; thread-safe.
#ifndef BENCH_PEER_PROTOCOL_H_
#define BENCH_PEER_PROTOCOL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/analyzer/detect.h"

namespace farm::bench {

// trial -> its runs in time order: (commit_index, value).
using PeerSeries = std::map<int, std::vector<std::pair<int, double>>>;
// trial -> the first commits of the changes found.
using PeerChanges = std::map<int, std::vector<int>>;

std::string PeerSeriesCsv(const std::vector<analyzer::Series>& trials);
absl::StatusOr<PeerSeries> ParsePeerSeriesCsv(const std::string& text);
std::string PeerChangesCsv(const PeerChanges& changes);
absl::StatusOr<PeerChanges> ParsePeerChangesCsv(const std::string& text);

// Detections over noise and planted shifts, counted alike for every
// detector: a change reported at measured commit c (a commit between two
// measured ones counts at the next measured one) holds the culprit when
// the culprit lies after the measured commit before c and at or before c.
// A trial is recalled when one of its changes holds the culprit; every
// other change is a false alert.
struct PeerScore {
  int trials = 0, recalled = 0, false_alerts = 0, measured_commits = 0;
  double recall() const { return trials ? static_cast<double>(recalled) / trials : 0; }
  double false_per100() const {
    return measured_commits ? 100.0 * false_alerts / measured_commits : 0;
  }
};
// `measured`: the trial's measured commit indices, ascending; `culprit` -1
// for a trial without a shift.
void ScoreTrial(const std::vector<int>& measured, int culprit, const std::vector<int>& found,
                PeerScore& score);

}  // namespace farm::bench

#endif  // BENCH_PEER_PROTOCOL_H_
