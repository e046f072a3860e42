#include "bench/analyzer_trials.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "iommufarm/v1/farm.pb.h"

namespace farm::bench {
namespace {

namespace pb = ::iommufarm::v1;
using analyzer::BisectOptions;
using analyzer::BisectPlanner;
using analyzer::DetectOptions;
using analyzer::Polarity;
using analyzer::Series;
using analyzer::SeriesPoint;

struct Farm {
  std::mt19937_64 rng;
  int culprit;  // -1: no shift
  double shift;
  double cv;
  Noise kind = Noise::kGaussian;
  std::normal_distribution<double> normal{0, 1};
  std::uniform_real_distribution<double> uniform{0, 1};
  int runs = 0;
  // One run's noise in units of cv.
  double Deviation() {
    switch (kind) {
      case Noise::kOutliers:
        return normal(rng) - (uniform(rng) < 0.02 ? 8 : 0);
      case Noise::kBimodal:
        return (uniform(rng) < 0.5 ? -0.9 : 0.9) + 0.436 * normal(rng);
      case Noise::kGaussian:
      case Noise::kDrift:
        break;
    }
    return normal(rng);
  }
  std::vector<double> Run(int commit, int repeats) {
    double level = 1000 * (culprit >= 0 && commit >= culprit ? 1 + shift : 1);
    if (kind == Noise::kDrift) level *= 1 - 0.02 * commit / (kCatalog - 1);
    std::vector<double> v;
    for (int i = 0; i < repeats; ++i) v.push_back(level * (1 + cv * Deviation()));
    runs += repeats;
    return v;
  }
};

Series Measure(Farm& farm) {
  Series s;
  s.key = {"sim", "sim", "throughput", "strict", false};
  s.polarity = Polarity::kHigherIsBetter;
  for (int c = 0; c < kCatalog; c += kStride)
    s.points.push_back(SeriesPoint{c, "c" + std::to_string(c), farm.Run(c, kRepeats)});
  return s;
}

struct Outcome {
  bool hit = false;  // a confirmed change whose interval holds the culprit
  // Before confirmation: candidates (suggestive included), and whether one's
  // interval holds the culprit. The detector alone, judged on the bulk.
  int candidates = 0;
  bool candidate_hit = false;
  //! Every change the pipeline recorded, in its state after triage.
  std::vector<pb::Regression> regressions;
  bool bisected = false;
  bool bisect_exact = false;
  int bisect_runs = 0;
  int top_up_runs = 0;  // the bulk's extra repeats
  //! False alerts: regressions triaged false-positive.
  int false_alerts() const {
    int n = 0;
    for (const pb::Regression& r : regressions)
      n += r.state() == pb::REGRESSION_STATE_FALSE_POSITIVE;
    return n;
  }
};

// Records a change over commits [last_good, first_bad] as the analyzer does
// (CONFIRMED, or REJECTED when its confirmation failed), then triages a
// confirmed one from the planted truth: FALSE_POSITIVE unless the range
// holds the culprit. Returns whether it holds it.
bool RecordAndTriage(Outcome& o, const Farm& farm, int last_good, int first_bad, bool confirmed) {
  pb::Regression& r = o.regressions.emplace_back();
  r.set_id(static_cast<int64_t>(o.regressions.size()));
  r.set_last_good("c" + std::to_string(last_good));
  r.set_first_bad("c" + std::to_string(first_bad));
  r.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
  r.set_state(confirmed ? pb::REGRESSION_STATE_CONFIRMED : pb::REGRESSION_STATE_REJECTED);
  if (!confirmed) return false;
  const bool holds = farm.culprit > last_good && farm.culprit <= first_bad;
  if (!holds) r.set_state(pb::REGRESSION_STATE_FALSE_POSITIVE);
  return holds;
}

// The bulk's top-up: the commits around a split the scan finds suggestive
// measured again, each with as many repeats as it holds, until none asks.
void TopUp(Farm& farm, Series& s, const DetectOptions& dopt) {
  for (;;) {
    const auto requests = analyzer::TopUpRequests({s}, dopt);
    if (requests.empty()) return;
    std::set<int> measured;  // a commit in two requests' ranges is measured once
    for (const auto& r : requests) {
      for (SeriesPoint& p : s.points) {
        if (!std::binary_search(r.commit_indices.begin(), r.commit_indices.end(), p.commit_index) ||
            !measured.insert(p.commit_index).second) {
          continue;
        }
        const std::vector<double> more = farm.Run(p.commit_index, r.repeats);
        p.values.insert(p.values.end(), more.begin(), more.end());
      }
    }
  }
}

Outcome RunAnalyzer(Farm& farm, Series s, const DetectOptions& dopt, const BisectOptions& bopt) {
  Outcome o;
  const int bulk = farm.runs;
  TopUp(farm, s, dopt);
  o.top_up_runs = farm.runs - bulk;
  for (const auto& cp : analyzer::DetectCandidates({s}, dopt)) {
    ++o.candidates;
    if (farm.culprit > cp.last_good_index && farm.culprit <= cp.first_bad_index) {
      o.candidate_hit = true;
    }
    const int before = farm.runs;
    // Confirmation: interleaved re-runs of both ends, doubled while the
    // result is undecided.
    std::vector<double> good, bad;
    auto interleave = [&](int rounds) {
      for (int r = 0; r < rounds; ++r) {
        good.push_back(farm.Run(cp.last_good_index, 1)[0]);
        bad.push_back(farm.Run(cp.first_bad_index, 1)[0]);
      }
    };
    interleave(bopt.confirm_repeats);
    analyzer::Confirmation c = analyzer::EvaluateConfirmation(good, bad, cp.relative_change, bopt);
    while (c.decision == analyzer::SampleDecision::kMoreRepeats) {
      interleave(static_cast<int>(good.size()));
      c = analyzer::EvaluateConfirmation(good, bad, cp.relative_change, bopt);
    }
    if (!RecordAndTriage(o, farm, cp.last_good_index, cp.first_bad_index, c.confirmed)) continue;
    o.hit = true;
    std::vector<std::string> ids;
    for (int i = cp.last_good_index; i <= cp.first_bad_index; ++i)
      ids.push_back("c" + std::to_string(i));
    BisectPlanner p(ids, cp.last_good_index, cp.first_bad_index, bopt);
    p.AddSamples(cp.last_good_index, good);
    p.AddSamples(cp.first_bad_index, bad);
    while (p.Next().has_value()) {
      const auto req = *p.Next();
      p.AddSamples(req.commit_index, farm.Run(req.commit_index, req.repeats));
    }
    o.bisected = true;
    o.bisect_exact = p.FirstBadIndex() == farm.culprit;
    o.bisect_runs = farm.runs - before;
  }
  return o;
}

Outcome RunBaseline(const Farm& farm, const Series& s, const DetectOptions& dopt) {
  Outcome o;
  for (size_t i = 1; i < s.points.size(); ++i) {
    const auto r = analyzer::WelchTTest(s.points[i - 1].values, s.points[i].values);
    if (r.p_value >= dopt.alpha || std::fabs(r.relative_change) < dopt.magnitude) continue;
    // No confirmation step: every detection is an alert.
    if (RecordAndTriage(o, farm, s.points[i - 1].commit_index, s.points[i].commit_index,
                        /*confirmed=*/true)) {
      o.hit = true;
    }
  }
  return o;
}

}  // namespace

const char* NoiseName(Noise n) {
  switch (n) {
    case Noise::kOutliers:
      return "outliers";
    case Noise::kBimodal:
      return "bimodal";
    case Noise::kDrift:
      return "drift";
    case Noise::kGaussian:
      break;
  }
  return "gaussian";
}

std::optional<Noise> ParseNoise(std::string_view name) {
  for (Noise n : kNoises)
    if (name == NoiseName(n)) return n;
  return std::nullopt;
}

analyzer::Series BulkSeries(std::mt19937_64& rng, int culprit, double shift, double cv,
                            Noise kind) {
  Farm farm{std::mt19937_64(rng()), culprit, shift, cv, kind};
  return Measure(farm);
}

int RandomCulprit(std::mt19937_64& rng) { return 1 + static_cast<int>(rng() % (kCatalog - 1)); }

NoiseCell MeasureNoise(std::mt19937_64& master, int trials, double cv, Noise kind,
                       const DetectOptions& dopt, const BisectOptions& bopt) {
  int fa = 0, fa_base = 0;
  long noise_runs = 0, candidates = 0;
  for (int t = 0; t < trials; ++t) {
    Farm farm{std::mt19937_64(master()), -1, 0, cv, kind};
    const Series s = Measure(farm);
    const int bulk = farm.runs;
    const Outcome o = RunAnalyzer(farm, s, dopt, bopt);
    fa += o.false_alerts();
    candidates += o.candidates;
    noise_runs += farm.runs - bulk;
    fa_base += RunBaseline(farm, s, dopt).false_alerts();
  }
  NoiseCell c;
  c.per100 = 100.0 * fa / (static_cast<double>(trials) * kMeasured);
  c.per100_base = 100.0 * fa_base / (static_cast<double>(trials) * kMeasured);
  c.runs_per_trial = static_cast<double>(noise_runs) / trials;
  c.candidates_per_trial = static_cast<double>(candidates) / trials;
  return c;
}

ShiftCell MeasureShift(std::mt19937_64& master, int trials, double shift, double cv, Noise kind,
                       const DetectOptions& dopt, const BisectOptions& bopt) {
  int hits = 0, base_hits = 0, bisected = 0, exact = 0, candidate_hits = 0;
  long runs = 0;
  for (int t = 0; t < trials; ++t) {
    std::mt19937_64 rng(master());
    const int culprit = RandomCulprit(rng);
    Farm farm{std::move(rng), culprit, shift, cv, kind};
    const Series s = Measure(farm);
    const Outcome o = RunAnalyzer(farm, s, dopt, bopt);
    const Outcome b = RunBaseline(farm, s, dopt);
    hits += o.hit;
    candidate_hits += o.candidate_hit;
    base_hits += b.hit;
    bisected += o.bisected;
    exact += o.bisect_exact;
    if (o.bisected) runs += o.bisect_runs + o.top_up_runs;
  }
  ShiftCell c;
  c.recall = static_cast<double>(hits) / trials;
  c.candidate_recall = static_cast<double>(candidate_hits) / trials;
  c.baseline_recall = static_cast<double>(base_hits) / trials;
  c.bisect_exact = bisected ? static_cast<double>(exact) / bisected : 0;
  c.runs_per_detection = bisected ? static_cast<double>(runs) / bisected : 0;
  return c;
}

}  // namespace farm::bench
