// peer_compare: the project's change-point detector and a peer detector
// side by side at equal budget. Each cell (noise shape, planted shift or
// none, CV) draws `--trials` seeded bulk series (bench/analyzer_trials.h:
// every 8th of 97 commits measured, 5 runs each); both detectors see the
// same runs and nothing more -- no top-up, no confirmation re-runs -- and
// are scored alike (bench/peer_protocol.h): recall, and false alerts per 100
// measured commits. The peer runs as a separate program over the file
// protocol (`PEER [ARGS...] INPUT OUTPUT`), so any tool fits behind a small
// wrapper; the default is bench/peer_edivisive (E-divisive with means, the
// method Apache Otava runs). docs/analyzer.md "A peer side by side" has the
// protocol and the figures.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/analyzer_trials.h"
#include "bench/peer_protocol.h"
#include "lib/base/file.h"
#include "lib/process/process.h"

namespace {

using farm::bench::Noise;
using farm::bench::PeerScore;

struct Flags {
  std::string peer;
  std::vector<std::string> peer_args;
  int trials = 200;
  uint64_t seed = 20261205;
  std::string noise;  // "": every shape
  std::string dir;
};

struct Cell {
  Noise kind;
  double shift;  // 0: noise only
  double cv;
};

// Per noise shape: noise alone and the goals' shift at CV 2% and 5%.
std::vector<Cell> Cells(const std::string& only) {
  std::vector<Cell> out;
  for (Noise kind : farm::bench::kNoises) {
    if (!only.empty() && only != farm::bench::NoiseName(kind)) continue;
    for (const auto& [shift, cv] : std::vector<std::pair<double, double>>{
             {0, 0.02}, {-0.03, 0.02}, {0, 0.05}, {-0.05, 0.05}}) {
      out.push_back({kind, shift, cv});
    }
  }
  return out;
}

struct Trials {
  std::vector<farm::analyzer::Series> series;
  std::vector<int> culprits;  // -1: none
};

Trials Draw(std::mt19937_64& master, int n, const Cell& c) {
  Trials t;
  for (int i = 0; i < n; ++i) {
    std::mt19937_64 rng(master());
    const int culprit = c.shift != 0 ? farm::bench::RandomCulprit(rng) : -1;
    t.culprits.push_back(culprit);
    t.series.push_back(farm::bench::BulkSeries(rng, culprit, c.shift, c.cv, c.kind));
  }
  return t;
}

std::vector<int> Measured(const farm::analyzer::Series& s) {
  std::vector<int> out;
  for (const auto& p : s.points) out.push_back(p.commit_index);
  return out;
}

PeerScore Ours(const Trials& t) {
  const farm::analyzer::DetectOptions dopt;
  PeerScore score;
  for (size_t i = 0; i < t.series.size(); ++i) {
    std::vector<int> found;
    for (const auto& cp : farm::analyzer::DetectAll({t.series[i]}, dopt))
      found.push_back(cp.first_bad_index);
    farm::bench::ScoreTrial(Measured(t.series[i]), t.culprits[i], found, score);
  }
  return score;
}

absl::StatusOr<PeerScore> Peer(const Flags& f, const Trials& t, const std::string& name) {
  const std::string input = absl::StrCat(f.dir, "/", name, ".csv");
  const std::string output = absl::StrCat(f.dir, "/", name, ".out.csv");
  if (absl::Status s = farm::base::WriteFile(input, farm::bench::PeerSeriesCsv(t.series)); !s.ok())
    return s;
  farm::process::ProcessOptions o;
  o.argv = {f.peer};
  o.argv.insert(o.argv.end(), f.peer_args.begin(), f.peer_args.end());
  o.argv.push_back(input);
  o.argv.push_back(output);
  absl::StatusOr<farm::process::ProcessResult> run = farm::process::RunProcess(o);
  if (!run.ok()) return run.status();
  if (!run->ok()) {
    return absl::InternalError(
        absl::StrCat("the peer ", f.peer, " ended with ", run->Describe(), ": ", run->stderr_data));
  }
  absl::StatusOr<std::string> text = farm::base::ReadFile(output);
  if (!text.ok()) return text.status();
  absl::StatusOr<farm::bench::PeerChanges> changes = farm::bench::ParsePeerChangesCsv(*text);
  if (!changes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(output, ": ", changes.status().message()));
  }
  PeerScore score;
  for (size_t i = 0; i < t.series.size(); ++i) {
    auto it = changes->find(static_cast<int>(i));
    farm::bench::ScoreTrial(Measured(t.series[i]), t.culprits[i],
                            it == changes->end() ? std::vector<int>{} : it->second, score);
  }
  return score;
}

std::string Recall(const Cell& c, const PeerScore& s) {
  return c.shift == 0 ? "     -" : absl::StrFormat("%5.1f%%", 100 * s.recall());
}

int Run(const Flags& f) {
  std::printf(
      "peer_compare: %d trials a cell, seed %llu; both detectors see the same bulk series "
      "(%d commits x %d runs) and nothing more\npeer: %s\n",
      f.trials, static_cast<unsigned long long>(f.seed), farm::bench::kMeasured,
      farm::bench::kRepeats, f.peer.c_str());
  std::printf("%-9s %6s %5s | %13s | %19s | %9s\n", "noise", "shift", "cv", "recall ours peer",
              "false/100 ours peer", "peer secs");
  std::mt19937_64 master(f.seed);
  int index = 0;
  for (const Cell& c : Cells(f.noise)) {
    const Trials t = Draw(master, f.trials, c);
    const PeerScore ours = Ours(t);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<PeerScore> peer = Peer(f, t, absl::StrCat("cell", index++));
    if (!peer.ok()) {
      std::fprintf(stderr, "peer_compare: %s\n", peer.status().ToString().c_str());
      return 1;
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%-9s %5.0f%% %4.0f%% | %6s %6s | %9.2f %9.2f | %9.1f\n",
                farm::bench::NoiseName(c.kind), 100 * c.shift, 100 * c.cv, Recall(c, ours).c_str(),
                Recall(c, *peer).c_str(), ours.false_per100(), peer->false_per100(), secs);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  f.peer = (std::filesystem::path(argv[0]).parent_path() / "peer_edivisive").string();
  CLI::App app{
      "the project's detector and a peer detector on the same seeded series at equal budget "
      "(docs/analyzer.md \"A peer side by side\")"};
  app.add_option("--peer", f.peer, "the peer program, run as PEER [ARGS...] INPUT OUTPUT")
      ->capture_default_str();
  app.add_option("--peer-arg", f.peer_args, "an argument for the peer before INPUT (repeatable)");
  app.add_option("--trials", f.trials, "trials per cell")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--seed", f.seed, "the trials' master seed")->capture_default_str();
  app.add_option("--noise", f.noise, "one noise shape: gaussian, outliers, bimodal or drift")
      ->check(CLI::IsMember({"gaussian", "outliers", "bimodal", "drift"}));
  app.add_option("--dir", f.dir, "where the protocol files go (default: a new temp dir, removed)");
  CLI11_PARSE(app, argc, argv);
  const bool own_dir = f.dir.empty();
  if (own_dir) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "peer-compare-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("peer_compare: mkdtemp");
      return 1;
    }
    f.dir = tmpl;
  }
  const int rc = Run(f);
  if (own_dir) std::filesystem::remove_all(f.dir);
  return rc;
}
