#include "services/analyzer/bisect.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "lib/base/check.h"
#include "services/analyzer/mode_change.h"

namespace farm::analyzer {

Judgement JudgeCommit(std::span<const double> good, std::span<const double> bad,
                      std::span<const double> x, double alpha) {
  Judgement j;
  // One method for the three comparisons, from the noise of all three
  // samples (the references hold the most runs).
  const std::span<const double> groups[] = {good, bad, x};
  const stats::TwoSampleMethod method = stats::MethodFor(stats::DiagnoseNoise(groups).shape);
  if (method == stats::TwoSampleMethod::kWelch) {
    // Means, against the run-to-run variance of all three samples (one
    // benchmark on one kind of machine): Welch's test of a commit's first
    // few runs against many reference runs leans on the few, whose variance
    // bimodal noise often understates (stats.h PooledContrast).
    const stats::PooledVariance pooled = stats::PoolWithinVariance(groups);
    j.vs_good = stats::PooledContrast(good, x, pooled);
    j.vs_bad = stats::PooledContrast(bad, x, pooled);
  } else {
    j.vs_good = stats::Compare(good, x, 0.99, method).test;
    j.vs_bad = stats::Compare(bad, x, 0.99, method).test;
  }
  // The position in the method's location estimates (trimmed means, or
  // Hodges-Lehmann shifts from the good reference).
  const TwoSampleResult refs = stats::Compare(good, bad, 0.99, method).test;
  const double d = refs.mean_b - refs.mean_a;
  j.position = d == 0 ? 0.5 : (j.vs_good.mean_b - j.vs_good.mean_a) / d;
  const bool differs_from_good = j.vs_good.p_value < alpha;
  const bool differs_from_bad = j.vs_bad.p_value < alpha;
  // A deterministic model (no run-to-run variance anywhere) leaves nothing
  // for more repeats to settle: the position between the references decides.
  if (good.size() >= 2 && bad.size() >= 2 && x.size() >= 2 && Variance(good) == 0 &&
      Variance(bad) == 0 && Variance(x) == 0 && d != 0) {
    j.verdict = j.position < 0.5 ? "good" : "bad";
    return j;
  }
  if (differs_from_bad && j.position < 0.5 && (!differs_from_good || j.position < 0.25)) {
    j.verdict = "good";
  } else if (differs_from_good && j.position > 0.5 && (!differs_from_bad || j.position > 0.75)) {
    j.verdict = "bad";
  } else {
    j.verdict = j.position < 0.5 ? "weak-good" : "weak-bad";
  }
  return j;
}

namespace {

// The commit is significantly different from both references and at least
// the magnitude away from each (point estimates, relative to the good
// reference: splitting costs a bisect, so a part must clearly be there).
bool HoldsTwoChanges(std::span<const double> good, std::span<const double> bad,
                     std::span<const double> x, const Judgement& j, const BisectOptions& o) {
  if (j.vs_good.p_value >= o.alpha || j.vs_bad.p_value >= o.alpha) return false;
  if (j.position <= 0 || j.position >= 1) return false;
  const double g = Mean(good);
  if (g == 0) return false;
  const double m = Mean(x);
  return std::fabs(m - g) / std::fabs(g) >= o.magnitude &&
         std::fabs(Mean(bad) - m) / std::fabs(g) >= o.magnitude;
}

}  // namespace

int ConfirmationLooks(const BisectOptions& options) {
  int looks = 1;
  for (int r = std::max(1, options.confirm_repeats); r < options.max_confirm_repeats; r *= 2) {
    ++looks;
  }
  return looks;
}

Confirmation EvaluateConfirmation(std::span<const double> good, std::span<const double> bad,
                                  double expected_relative_change, const BisectOptions& options) {
  Confirmation c;
  const stats::Comparison cmp = stats::CompareByNoise(good, bad, options.interval_level);
  c.method = cmp.method;
  c.test = cmp.test;
  c.interval = cmp.interval;
  const bool same_direction = (c.test.relative_change < 0) == (expected_relative_change < 0);
  const int repeats = static_cast<int>(std::min(good.size(), bad.size()));
  const int looks = ConfirmationLooks(options);
  const double alpha = options.alpha / looks;
  const Interval judged =
      looks == 1
          ? c.interval
          : stats::Compare(good, bad, 1 - (1 - options.interval_level) / looks, c.method).interval;
  const MagnitudeCall magnitude = JudgeMagnitude(judged, options.magnitude);
  if (same_direction) {
    c.decision =
        DecideWithRepeats(c.test.p_value, magnitude, alpha, repeats, options.max_confirm_repeats);
  } else {
    const bool decided = magnitude == MagnitudeCall::kBelow || c.test.p_value < alpha ||
                         repeats >= options.max_confirm_repeats;
    c.decision = decided ? SampleDecision::kReject : SampleDecision::kMoreRepeats;
  }
  c.confirmed = c.decision == SampleDecision::kAccept;
  return c;
}

FixCheck JudgeFixCheck(std::span<const double> good, std::span<const double> later,
                       double regression_change, const BisectOptions& options) {
  FixCheck f;
  const stats::Comparison cmp = stats::CompareByNoise(good, later, options.interval_level);
  f.test = cmp.test;
  f.interval = cmp.interval;
  const bool worse =
      (f.test.relative_change < 0) == (regression_change < 0) && f.test.relative_change != 0;
  const bool still_bad = worse && f.test.p_value < options.alpha &&
                         JudgeMagnitude(f.interval, options.magnitude) != MagnitudeCall::kBelow;
  f.back = !still_bad;
  return f;
}

namespace {

// A run states a categorical value exactly: one run judges a commit. A
// measured one needs two to have a variance.
BisectOptions WithRepeatBounds(BisectOptions o) {
  o.initial_repeats = o.categorical ? 1 : std::max(2, o.initial_repeats);
  o.max_repeats = std::max(o.initial_repeats, o.max_repeats);
  return o;
}

}  // namespace

BisectPlanner::BisectPlanner(std::vector<std::string> commit_ids, int last_good_index,
                             int first_bad_index, BisectOptions options)
    : options_(WithRepeatBounds(options)),
      base_(last_good_index),
      commit_ids_(std::move(commit_ids)),
      good_ref_(last_good_index),
      bad_ref_(first_bad_index),
      lo_(last_good_index),
      hi_(first_bad_index) {
  FARM_DCHECK(first_bad_index > last_good_index, "bisect range must have first_bad > last_good");
  Advance();
}

BisectPlanner::BisectPlanner(std::vector<BisectCommit> commits, int good_index, int bad_index,
                             BisectOptions options)
    : options_(WithRepeatBounds(options)),
      base_(good_index),
      good_ref_(good_index),
      bad_ref_(bad_index),
      lo_(good_index),
      hi_(bad_index),
      graph_(true),
      graph_good_(good_index),
      graph_bad_(bad_index),
      goods_({good_index}),
      part_goods_({good_index}) {
  for (BisectCommit& c : commits) graph_commits_[c.index] = std::move(c);
  // Parents outside the bisect's commits are before its range.
  for (auto& [index, c] : graph_commits_) {
    std::erase_if(c.parents, [&](int p) { return !graph_commits_.contains(p) || p == index; });
  }
  FARM_DCHECK(graph_commits_.contains(good_index) && graph_commits_.contains(bad_index) &&
                  good_index != bad_index,
              "graph bisect needs both ends among its commits");
  Advance();
}

const std::string& BisectPlanner::CommitId(int index) const {
  static const std::string kEmpty;
  if (graph_) {
    auto it = graph_commits_.find(index);
    return it == graph_commits_.end() ? kEmpty : it->second.id;
  }
  const int i = index - base_;
  if (i < 0 || i >= static_cast<int>(commit_ids_.size())) return kEmpty;
  return commit_ids_[i];
}

const std::vector<double>& BisectPlanner::SamplesOf(int index) const {
  static const std::vector<double> kNone;
  auto it = samples_.find(index);
  return it == samples_.end() ? kNone : it->second;
}

void BisectPlanner::AddSamples(int commit_index, std::span<const double> values) {
  if (graph_ ? !graph_commits_.contains(commit_index)
             : (commit_index < good_ref_ || commit_index > bad_ref_)) {
    return;
  }
  auto& v = samples_[commit_index];
  v.insert(v.end(), values.begin(), values.end());
  Advance();
}

bool BisectPlanner::Skip(int commit_index) {
  if (done_) return false;
  if (graph_ ? (commit_index == hi_ || !Suspects().contains(commit_index))
             : (commit_index <= lo_ || commit_index >= hi_)) {
    return false;
  }
  skipped_.insert(commit_index);
  BisectStepRecord& s = OpenStepAt(commit_index);
  s.verdict = "skip";
  s.repeats = static_cast<int>(SamplesOf(commit_index).size());
  Advance();
  return true;
}

const BisectStepRecord* BisectPlanner::OpenStep() const {
  if (!steps_.empty() && steps_.back().verdict == "pending") return &steps_.back();
  return nullptr;
}

BisectStepRecord& BisectPlanner::OpenStepAt(int index) {
  const BisectStepRecord* open = OpenStep();
  if (open == nullptr || open->commit_index != index) {
    steps_.push_back(BisectStepRecord{static_cast<int>(steps_.size()) + 1, index, CommitId(index),
                                      "pending", 0, 0, 1, 0});
  }
  return steps_.back();
}

void BisectPlanner::RequestRuns(int index, int have, int more) {
  BisectStepRecord& s = OpenStepAt(index);
  if (s.repeats < have + more) runs_requested_ += have + more - std::max(s.repeats, have);
  s.repeats = have + more;
  pending_ = BisectRequest{index, CommitId(index), more};
}

bool BisectPlanner::RequestReferences() {
  for (int ref : {good_ref_, bad_ref_}) {
    const int n = static_cast<int>(SamplesOf(ref).size());
    if (n < (options_.categorical ? 1 : 2)) {
      pending_ = BisectRequest{ref, CommitId(ref), options_.initial_repeats - n};
      return true;
    }
  }
  return false;
}

std::set<int> BisectPlanner::AncestorsOf(int of) const {
  std::set<int> seen = {of};
  std::vector<int> todo = {of};
  while (!todo.empty()) {
    auto it = graph_commits_.find(todo.back());
    todo.pop_back();
    if (it == graph_commits_.end()) continue;
    for (int p : it->second.parents)
      if (seen.insert(p).second) todo.push_back(p);
  }
  return seen;
}

std::set<int> BisectPlanner::Suspects() const {
  std::set<int> good;
  for (int g : goods_) good.merge(AncestorsOf(g));
  std::set<int> out;
  for (int c : AncestorsOf(hi_))
    if (!good.contains(c)) out.insert(c);
  return out;
}

int BisectPlanner::GraphCandidate() const {
  // git bisect's choice: the suspect whose own ancestors among the suspects
  // (itself included) come nearest half of them, so either verdict leaves at
  // most about half. A skipped commit still counts in the halves.
  const std::set<int> suspects = Suspects();
  const int n = static_cast<int>(suspects.size());
  int best = -1, best_score = -1;
  for (int c : suspects) {  // ascending: the earlier wins a tie
    if (c == hi_ || skipped_.contains(c)) continue;
    int w = 0;
    for (int a : AncestorsOf(c)) w += suspects.contains(a) ? 1 : 0;
    const int score = std::min(w, n - w);
    if (score > best_score) {
      best = c;
      best_score = score;
    }
  }
  return best;
}

int BisectPlanner::GraphLastGood() const {
  auto it = graph_commits_.find(hi_);
  if (it == graph_commits_.end() || it->second.parents.empty()) return good_ref_;
  const int first = it->second.parents.front();
  return Suspects().contains(first) ? lo_ : first;
}

int BisectPlanner::Candidate() const {
  if (graph_) return GraphCandidate();
  const int mid = lo_ + (hi_ - lo_) / 2;
  for (int d = 0; d < hi_ - lo_; ++d) {
    for (int c : {mid - d, mid + d}) {
      if (c > lo_ && c < hi_ && !skipped_.contains(c)) return c;
    }
  }
  return -1;
}

void BisectPlanner::Advance() {
  pending_.reset();
  if (done_ || RequestReferences()) return;
  while (true) {
    const int next = Candidate();
    if (next < 0) {
      if (FinishRange()) continue;
      done_ = true;
      return;
    }
    if (static_cast<int>(steps_.size()) >= options_.max_steps) {
      done_ = true;
      failed_ = true;
      return;
    }
    if (!JudgeAndMove(next)) return;
  }
}

bool BisectPlanner::JudgeAndMove(int mid) {
  const std::vector<double>& x = SamplesOf(mid);
  const int n = static_cast<int>(x.size());
  if (n < options_.initial_repeats) {
    RequestRuns(mid, n, options_.initial_repeats - n);
    return false;
  }
  // Runs already asked for at this commit are still out: wait for them
  // (judging now would re-record the previous verdict, e.g. after a restart).
  if (const BisectStepRecord* open = OpenStep();
      open != nullptr && open->commit_index == mid && n < open->repeats) {
    pending_ = BisectRequest{mid, CommitId(mid), open->repeats - n};
    return false;
  }
  if (options_.categorical) {
    JudgeByValue(mid);
    return true;
  }
  const std::vector<double>& good = SamplesOf(good_ref_);
  const std::vector<double>& bad = SamplesOf(bad_ref_);
  const Judgement j = JudgeCommit(good, bad, x, options_.alpha);
  BisectStepRecord& s = OpenStepAt(mid);
  s.verdict = j.verdict;
  s.repeats = n;
  s.mean = Mean(x);
  s.relative_change = j.vs_good.relative_change;
  s.p_value = (j.position < 0.5) ? j.vs_bad.p_value : j.vs_good.p_value;
  // Two changes in the range: trusted from twice the first repeats (a
  // single culprit's midpoint rarely differs from both references by
  // chance twice). With no run-to-run variance the position rule above
  // decides, as before.
  const bool deterministic = Variance(good) == 0 && Variance(bad) == 0 && Variance(x) == 0;
  const bool two = !deterministic && HoldsTwoChanges(good, bad, x, j, options_);
  if (two && n < 2 * options_.initial_repeats && n < options_.max_repeats) {
    s.verdict = j.position < 0.5 ? "weak-good" : "weak-bad";
    RequestRuns(mid, n, std::min(n, options_.max_repeats - n));
    return false;
  }
  if (two) {
    // Part of the change is before mid, part after: bisect both, mid
    // being the bad reference of the first and the good one of the
    // second. Each part spans from its references, not from the current
    // bounds: the verdicts that moved them were judged against references
    // that mixed both changes (a commit with a small first change looks
    // "good" next to the whole change). Samples already taken are reused.
    s.verdict = "split";
    s.p_value = std::max(j.vs_good.p_value, j.vs_bad.p_value);
    std::vector<int> second_goods;
    if (graph_) {
      // The second part's suspects are after mid and after the part's goods.
      second_goods.assign(part_goods_.begin(), part_goods_.end());
      second_goods.push_back(mid);
      goods_ = part_goods_;
    }
    parts_.insert(parts_.begin(), Part{mid, bad_ref_, mid, bad_ref_, std::move(second_goods)});
    hi_ = mid;
    lo_ = good_ref_;
    bad_ref_ = mid;
    return true;
  }
  const bool weak = j.verdict.starts_with("weak");
  if (weak && n < options_.max_repeats) {
    // Not trusted: measure the same commit again with more repeats.
    RequestRuns(mid, n, std::min(n, options_.max_repeats - n));
    return false;
  }
  used_weak_ |= weak;
  if (j.verdict == "good" || j.verdict == "weak-good") {
    lo_ = mid;
    if (graph_) goods_.insert(mid);
  } else {
    hi_ = mid;
  }
  return true;
}

void BisectPlanner::JudgeByValue(int mid) {
  const std::vector<double>& x = SamplesOf(mid);
  const double value = ModalValue(x);
  const bool good = value == ModalValue(SamplesOf(good_ref_));
  BisectStepRecord& s = OpenStepAt(mid);
  s.verdict = good ? "good" : "bad";
  s.repeats = static_cast<int>(x.size());
  s.mean = value;
  s.p_value = 0;  // stated by the runs, not estimated
  s.relative_change = 0;
  if (good) {
    lo_ = mid;
    if (graph_) goods_.insert(mid);
  } else {
    hi_ = mid;
  }
}

bool BisectPlanner::FinishRange() {
  const int range_good = graph_ ? graph_good_ : base_;
  const int range_bad = graph_ ? graph_bad_ : base_ + static_cast<int>(commit_ids_.size()) - 1;
  const double g0 = Mean(SamplesOf(range_good));
  const double total = Mean(SamplesOf(range_bad)) - g0;
  const double part = Mean(SamplesOf(bad_ref_)) - Mean(SamplesOf(good_ref_));
  std::vector<int> skipped;
  int last_good = lo_;
  if (graph_) {
    for (int c : Suspects())
      if (c != hi_ && skipped_.contains(c)) skipped.push_back(c);
    last_good = GraphLastGood();
  } else {
    skipped.assign(skipped_.upper_bound(lo_), skipped_.lower_bound(hi_));
  }
  // A categorical value has no relative size: the one culprit is the change.
  const double change = options_.categorical || g0 == 0 ? 0 : part / std::fabs(g0);
  const double share = options_.categorical || total == 0 ? 1 : part / total;
  culprits_.push_back(Culprit{last_good, hi_, CommitId(hi_), change, share, std::move(skipped)});
  if (parts_.empty()) {
    // Named by the culprit with the largest share.
    const Culprit* main = &culprits_.front();
    for (const Culprit& c : culprits_)
      if (std::fabs(c.share) > std::fabs(main->share)) main = &c;
    lo_ = main->last_good_index;
    hi_ = main->index;
    return false;
  }
  const Part next = parts_.front();
  parts_.erase(parts_.begin());
  if (graph_) {
    goods_ = std::set<int>(next.goods.begin(), next.goods.end());
    part_goods_ = goods_;
  }
  good_ref_ = next.good_ref;
  bad_ref_ = next.bad_ref;
  lo_ = next.lo;
  hi_ = next.hi;
  return true;
}

std::vector<Culprit> BisectPlanner::Culprits() const {
  std::vector<Culprit> out = culprits_;
  // A state saved before culprits were tracked names its single first bad.
  if (out.empty() && done_ && !failed_) out.push_back(Culprit{lo_, hi_, CommitId(hi_), 0, 1, {}});
  std::sort(out.begin(), out.end(),
            [](const Culprit& a, const Culprit& b) { return a.index < b.index; });
  return out;
}

std::string BisectPlanner::ToJson() const {
  nlohmann::json j;
  j["options"] = {{"initial_repeats", options_.initial_repeats},
                  {"max_repeats", options_.max_repeats},
                  {"confirm_repeats", options_.confirm_repeats},
                  {"alpha", options_.alpha},
                  {"magnitude", options_.magnitude},
                  {"max_steps", options_.max_steps},
                  {"categorical", options_.categorical}};
  j["base"] = base_;
  j["commit_ids"] = commit_ids_;
  j["good_ref"] = good_ref_;
  j["bad_ref"] = bad_ref_;
  j["lo"] = lo_;
  j["hi"] = hi_;
  nlohmann::json samples = nlohmann::json::object();
  for (const auto& [idx, v] : samples_) samples[std::to_string(idx)] = v;
  j["samples"] = samples;
  j["skipped"] = skipped_;
  nlohmann::json steps = nlohmann::json::array();
  for (const BisectStepRecord& s : steps_) {
    steps.push_back({{"step", s.step},
                     {"commit_index", s.commit_index},
                     {"commit_id", s.commit_id},
                     {"verdict", s.verdict},
                     {"repeats", s.repeats},
                     {"mean", s.mean},
                     {"p_value", s.p_value},
                     {"relative_change", s.relative_change}});
  }
  j["steps"] = steps;
  j["done"] = done_;
  j["failed"] = failed_;
  j["used_weak"] = used_weak_;
  j["runs_requested"] = runs_requested_;
  nlohmann::json parts = nlohmann::json::array();
  for (const Part& p : parts_)
    parts.push_back({{"good_ref", p.good_ref},
                     {"bad_ref", p.bad_ref},
                     {"lo", p.lo},
                     {"hi", p.hi},
                     {"goods", p.goods}});
  j["parts"] = parts;
  if (graph_) {
    nlohmann::json commits = nlohmann::json::array();
    for (const auto& [index, c] : graph_commits_)
      commits.push_back({{"index", index}, {"id", c.id}, {"parents", c.parents}});
    j["graph"] = {{"commits", commits},
                  {"good", graph_good_},
                  {"bad", graph_bad_},
                  {"goods", goods_},
                  {"part_goods", part_goods_}};
  }
  nlohmann::json culprits = nlohmann::json::array();
  for (const Culprit& c : culprits_)
    culprits.push_back({{"last_good_index", c.last_good_index},
                        {"index", c.index},
                        {"commit_id", c.commit_id},
                        {"relative_change", c.relative_change},
                        {"share", c.share},
                        {"skipped", c.skipped}});
  j["culprits"] = culprits;
  return j.dump();
}

absl::StatusOr<BisectPlanner> BisectPlanner::FromJson(const std::string& json) {
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    BisectPlanner p;
    const auto& o = j.at("options");
    p.options_.initial_repeats = o.at("initial_repeats").get<int>();
    p.options_.max_repeats = o.at("max_repeats").get<int>();
    p.options_.confirm_repeats = o.at("confirm_repeats").get<int>();
    p.options_.alpha = o.at("alpha").get<double>();
    p.options_.magnitude = o.at("magnitude").get<double>();
    p.options_.max_steps = o.at("max_steps").get<int>();
    p.options_.categorical = o.value("categorical", false);
    p.base_ = j.at("base").get<int>();
    p.commit_ids_ = j.at("commit_ids").get<std::vector<std::string>>();
    p.good_ref_ = j.at("good_ref").get<int>();
    p.bad_ref_ = j.at("bad_ref").get<int>();
    p.lo_ = j.at("lo").get<int>();
    p.hi_ = j.at("hi").get<int>();
    for (const auto& [k, v] : j.at("samples").items())
      p.samples_[std::stoi(k)] = v.get<std::vector<double>>();
    // States saved before skips existed have no "skipped" keys.
    p.skipped_ = j.value("skipped", std::set<int>{});
    for (const auto& s : j.at("steps")) {
      p.steps_.push_back(
          BisectStepRecord{s.at("step").get<int>(), s.at("commit_index").get<int>(),
                           s.at("commit_id").get<std::string>(), s.at("verdict").get<std::string>(),
                           s.at("repeats").get<int>(), s.at("mean").get<double>(),
                           s.at("p_value").get<double>(), s.at("relative_change").get<double>()});
    }
    p.done_ = j.at("done").get<bool>();
    p.failed_ = j.at("failed").get<bool>();
    p.used_weak_ = j.at("used_weak").get<bool>();
    p.runs_requested_ = j.at("runs_requested").get<int>();
    // States saved before several culprits were tracked have neither key.
    for (const auto& q : j.value("parts", nlohmann::json::array()))
      p.parts_.push_back(Part{q.at("good_ref").get<int>(), q.at("bad_ref").get<int>(),
                              q.at("lo").get<int>(), q.at("hi").get<int>(),
                              q.value("goods", std::vector<int>{})});
    if (j.contains("graph")) {
      const auto& g = j.at("graph");
      p.graph_ = true;
      for (const auto& c : g.at("commits")) {
        BisectCommit bc{c.at("index").get<int>(), c.at("id").get<std::string>(),
                        c.at("parents").get<std::vector<int>>()};
        p.graph_commits_[bc.index] = std::move(bc);
      }
      p.graph_good_ = g.at("good").get<int>();
      p.graph_bad_ = g.at("bad").get<int>();
      p.goods_ = g.at("goods").get<std::set<int>>();
      p.part_goods_ = g.at("part_goods").get<std::set<int>>();
    }
    for (const auto& c : j.value("culprits", nlohmann::json::array()))
      p.culprits_.push_back(
          Culprit{c.at("last_good_index").get<int>(), c.at("index").get<int>(),
                  c.at("commit_id").get<std::string>(), c.at("relative_change").get<double>(),
                  c.at("share").get<double>(), c.value("skipped", std::vector<int>{})});
    if (p.graph_ ? !p.graph_commits_.contains(p.hi_) : (p.hi_ <= p.lo_ || p.lo_ < p.base_)) {
      return absl::InvalidArgumentError("bisect planner state: bad range");
    }
    p.Advance();
    return p;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(std::string("bisect planner state: ") + e.what());
  }
}

}  // namespace farm::analyzer
