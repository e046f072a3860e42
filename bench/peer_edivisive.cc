// peer_edivisive: the reference peer of bench/peer_compare, E-divisive with
// means (bench/edivisive.h) behind the peer file protocol
// (bench/peer_protocol.h): reads every trial's runs from INPUT, treats each
// run as one point in time order, as Otava treats a test's results, and
// writes the first commit of each new segment to OUTPUT.
#include <cstdio>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/edivisive.h"
#include "bench/peer_protocol.h"
#include "lib/base/file.h"

namespace {

using farm::bench::EDivisiveOptions;

struct Flags {
  std::string input, output;
  EDivisiveOptions e;
};

// Each trial's change points as the commits whose runs begin the new
// segments; a segment that begins inside a commit's repeats names it.
farm::bench::PeerChanges Detect(const farm::bench::PeerSeries& series, const EDivisiveOptions& e) {
  farm::bench::PeerChanges out;
  for (const auto& [trial, runs] : series) {
    std::vector<double> x;
    for (const auto& [commit, value] : runs) x.push_back(value);
    std::set<int> commits;
    for (int at : farm::bench::EDivisive(x, e)) commits.insert(runs[at].first);
    out[trial].assign(commits.begin(), commits.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"E-divisive with means over the peer protocol's series (docs/analyzer.md)"};
  app.add_option("INPUT", f.input, "series CSV (trial,commit_index,repeat,value)")->required();
  app.add_option("OUTPUT", f.output, "changes CSV to write (trial,commit_index)")->required();
  app.add_option("--significance", f.e.significance, "permutation test level")
      ->capture_default_str();
  app.add_option("--permutations", f.e.permutations, "permutations per test")
      ->capture_default_str();
  app.add_option("--min-size", f.e.min_size, "fewest points a segment keeps")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<std::string> text = farm::base::ReadFile(f.input);
  if (!text.ok()) {
    std::fprintf(stderr, "peer_edivisive: %s\n", text.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<farm::bench::PeerSeries> series = farm::bench::ParsePeerSeriesCsv(*text);
  if (!series.ok()) {
    std::fprintf(stderr, "peer_edivisive: %s: %s\n", f.input.c_str(),
                 series.status().ToString().c_str());
    return 1;
  }
  const absl::Status written =
      farm::base::WriteFile(f.output, farm::bench::PeerChangesCsv(Detect(*series, f.e)));
  if (!written.ok()) {
    std::fprintf(stderr, "peer_edivisive: %s\n", written.ToString().c_str());
    return 1;
  }
  return 0;
}
