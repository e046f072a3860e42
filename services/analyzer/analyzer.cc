#include "services/analyzer/analyzer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"
#include "services/analyzer/stats.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

using json = nlohmann::json;

void Log(const std::string& msg) {
  std::fprintf(stderr, "%s farm-analyzer: %s\n",
               absl::FormatTime("%H:%M:%S", absl::Now(), absl::UTCTimeZone()).c_str(), msg.c_str());
}

json SpecToJson(const SeriesSpec& s) {
  return {{"catalog", s.catalog},
          {"platform", s.platform},
          {"workload", s.workload},
          {"params", json::parse(s.params_json, nullptr, false)},
          {"model_set", json::parse(s.model_set_json, nullptr, false)},
          {"executor", s.executor},
          {"metric", s.metric},
          {"phase", s.phase},
          {"mode", s.mode},
          {"overhead", s.overhead}};
}

SeriesSpec SpecFromJson(const json& j) {
  SeriesSpec s;
  s.catalog = j.at("catalog").get<std::string>();
  s.platform = j.at("platform").get<std::string>();
  s.workload = j.at("workload").get<std::string>();
  s.params_json = j.at("params").dump();
  s.model_set_json = j.at("model_set").dump();
  s.executor = j.at("executor").get<int>();
  s.metric = j.at("metric").get<std::string>();
  s.phase = j.at("phase").get<std::string>();
  s.mode = j.at("mode").get<std::string>();
  s.overhead = j.at("overhead").get<bool>();
  return s;
}

// As stored (the enum's number); specs without one ran on the emulator.
std::string ExecutorName(int e) {
  const pb::Executor kind =
      pb::Executor_IsValid(e) ? static_cast<pb::Executor>(e) : pb::EXECUTOR_UNSPECIFIED;
  return proto::ExecutorName(kind == pb::EXECUTOR_UNSPECIFIED ? pb::EXECUTOR_EMULATOR : kind);
}

// Seeds kept below 2^31 so every YAML reader takes them as plain integers.
uint64_t SubmissionSeed(int64_t bisect_id, int seq) {
  return (static_cast<uint64_t>(bisect_id) * 7919u + static_cast<uint64_t>(seq) * 104729u) %
             2000000000u +
         1;
}

std::string Percent(double rel) { return absl::StrFormat("%+.1f%%", rel * 100); }

// How recently an agent must have sent a heartbeat for its kernel offers to
// count when the executor of a confirmation is chosen.
constexpr absl::Duration kLiveAgent = absl::Minutes(2);

json RealConfirmToJson(const RealConfirm& c) {
  return {{"executor", c.executor},
          {"workload", c.workload},
          {"params", json::parse(c.params_json, nullptr, false)},
          {"catalog", c.catalog},
          {"platform", c.platform},
          {"repeats", c.repeats},
          {"max_repeats", c.max_repeats},
          {"metric", c.metric},
          {"phase", c.phase}};
}

RealConfirm RealConfirmFromJson(const json& j) {
  RealConfirm c;
  c.executor = j.at("executor").get<int>();
  c.workload = j.at("workload").get<std::string>();
  c.params_json = j.at("params").dump();
  c.catalog = j.at("catalog").get<std::string>();
  c.platform = j.at("platform").get<std::string>();
  c.repeats = j.at("repeats").get<int>();
  c.max_repeats = j.at("max_repeats").get<int>();
  c.metric = j.at("metric").get<std::string>();
  c.phase = j.at("phase").get<std::string>();
  return c;
}

}  // namespace

std::vector<double> SeriesValuesAt(const std::vector<SampleRow>& samples, const SeriesSpec& spec,
                                   const std::string& commit_id) {
  std::vector<double> out;
  std::map<std::pair<int64_t, int>, std::pair<std::vector<double>, std::vector<double>>> pairs;
  for (const SampleRow& s : samples) {
    if (s.commit_id != commit_id || s.platform != spec.platform || s.workload != spec.workload ||
        s.metric != spec.metric || s.phase != spec.phase)
      continue;
    if (!spec.overhead) {
      if (s.mode == spec.mode) out.push_back(s.value);
      continue;
    }
    auto& p = pairs[{s.matrix_id, s.repeat}];
    if (s.mode == spec.mode) p.first.push_back(s.value);
    if (s.mode == proto::ModeName(pb::IOMMU_MODE_OFF)) p.second.push_back(s.value);
  }
  for (const auto& [key, p] : pairs) {
    if (p.first.empty() || p.second.empty()) continue;
    const double off = Mean(p.second);
    if (off != 0) out.push_back(Mean(p.first) / off);
  }
  return out;
}

std::optional<RealConfirm> RealConfirmFromSpecYaml(const std::string& spec_yaml) {
  try {
    const YAML::Node root = YAML::Load(spec_yaml);
    if (!root.IsMap() || !root["analysis"] || !root["analysis"].IsMap()) return std::nullopt;
    const YAML::Node c = root["analysis"]["confirm"];
    if (!c || !c.IsMap()) return std::nullopt;
    RealConfirm out;
    const pb::Executor executor = c["executor"]
                                      ? proto::ExecutorFromName(c["executor"].as<std::string>())
                                      : pb::EXECUTOR_UNSPECIFIED;
    if (executor != pb::EXECUTOR_FIO && executor != pb::EXECUTOR_IOZONE) return std::nullopt;
    out.executor = executor;
    json params = json::object();
    const YAML::Node w = c["workload"];
    if (w && w.IsScalar()) out.workload = w.as<std::string>();
    if (w && w.IsMap()) {
      if (w["name"]) out.workload = w["name"].as<std::string>();
      if (w["params"] && w["params"].IsMap()) {
        for (const auto& kv : w["params"]) {
          // Lists are comma-joined, as the scheduler stores workload params.
          std::string v;
          if (kv.second.IsSequence()) {
            for (const auto& item : kv.second) v += (v.empty() ? "" : ",") + item.as<std::string>();
          } else {
            v = kv.second.as<std::string>();
          }
          params[kv.first.as<std::string>()] = v;
        }
      }
    }
    if (out.workload.empty()) return std::nullopt;
    out.params_json = params.dump();
    if (c["catalog"]) out.catalog = c["catalog"].as<std::string>();
    if (c["platform"]) out.platform = c["platform"].as<std::string>();
    if (c["repeats"]) out.repeats = c["repeats"].as<int>();
    out.max_repeats = c["max_repeats"] ? c["max_repeats"].as<int>() : out.repeats;
    std::string metric = c["metric"] ? c["metric"].as<std::string>() : "";
    if (metric.empty()) {
      metric = proto::DefaultConfirmMetric(
          executor, params.contains("rw") ? params["rw"].get<std::string>() : "");
    }
    if (metric.empty()) return std::nullopt;
    const size_t slash = metric.find('/');
    out.metric = metric.substr(0, slash);
    out.phase = slash == std::string::npos ? "" : metric.substr(slash + 1);
    return out;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

SeriesSpec RealConfirmSpec(const SeriesSpec& emulated, const RealConfirm& c) {
  SeriesSpec s;
  s.catalog = c.catalog.empty() ? emulated.catalog : c.catalog;
  s.platform = c.platform.empty() ? emulated.platform : c.platform;
  s.workload = c.workload;
  s.params_json = c.params_json;
  s.model_set_json = "{}";
  s.executor = c.executor;
  s.metric = c.metric;
  s.phase = c.phase;
  s.mode = emulated.mode;
  s.overhead = emulated.overhead;
  return s;
}

std::string MissingKernels(const std::vector<pb::KernelOffer>& offers, const SeriesSpec& real,
                           const std::vector<std::string>& commits) {
  std::vector<std::string> modes = {real.mode};
  if (real.overhead) modes.push_back(proto::ModeName(pb::IOMMU_MODE_OFF));
  const json params = json::parse(real.params_json, nullptr, false);
  std::vector<std::string> missing;
  for (const std::string& commit : commits) {
    for (const std::string& mode : modes) {
      pb::Job job;
      job.set_commit_id(commit);
      job.set_mode(proto::ModeFromName(mode));
      job.set_executor(static_cast<pb::Executor>(real.executor));
      if (params.is_object()) {
        for (const auto& [k, v] : params.items()) {
          (*job.mutable_workload()->mutable_params())[k] =
              v.is_string() ? v.get<std::string>() : v.dump();
        }
      }
      if (proto::FindOffer(offers, job) == nullptr) missing.push_back(commit + " in " + mode);
    }
  }
  if (missing.empty()) return "";
  return absl::StrCat("no live agent offers a ", ExecutorName(real.executor), " kernel for ",
                      absl::StrJoin(missing, ", "));
}

std::string RerunSpecYaml(const SeriesSpec& spec, const std::string& name,
                          const std::vector<std::string>& commits, int repeats,
                          const std::string& kind, uint64_t seed, int priority) {
  // JSON flow collections are valid YAML; quoting every id avoids YAML
  // reading a hex id like 1e100 as a number.
  json modes = json::array({spec.mode});
  if (spec.overhead) modes.push_back(proto::ModeName(pb::IOMMU_MODE_OFF));
  json params = json::parse(spec.params_json, nullptr, false);
  if (!params.is_object()) params = json::object();
  json set = json::parse(spec.model_set_json, nullptr, false);
  std::string y;
  absl::StrAppend(&y, "name: ", json(name).dump(), "\n");
  absl::StrAppend(&y, "catalog: ", json(spec.catalog).dump(), "\n");
  absl::StrAppend(&y, "platform: ", json(spec.platform).dump(), "\n");
  absl::StrAppend(&y, "commits: ", json(commits).dump(), "\n");
  absl::StrAppend(&y, "modes: ", modes.dump(), "\n");
  absl::StrAppend(&y, "workloads:\n  - name: ", json(spec.workload).dump(), "\n");
  if (!params.empty()) absl::StrAppend(&y, "    params: ", params.dump(), "\n");
  absl::StrAppend(&y, "repeats: ", repeats, "\n");
  absl::StrAppend(&y, "executor: ", ExecutorName(spec.executor), "\n");
  absl::StrAppend(&y, "kind: ", kind, "\n");
  absl::StrAppend(&y, "priority: ", priority, "\n");
  absl::StrAppend(&y, "seed: ", seed, "\n");
  if (set.is_object() && !set.empty()) absl::StrAppend(&y, "set: ", set.dump(), "\n");
  return y;
}

std::string RankNote(const Finding& f, const std::set<std::string>& workload_primary,
                     const AnalyzerOptions& options) {
  if (f.primary_metric) return absl::StrCat("primary metric of ", f.workload);
  const bool alerted = options.secondary_severity != "none";
  return absl::StrCat("secondary metric: ", f.metric.substr(0, f.metric.find('/')),
                      " is not a primary metric of ", f.workload, " (",
                      absl::StrJoin(workload_primary, ", "), "); ",
                      alerted ? "alerted as " + options.secondary_severity : "not alerted",
                      options.bisect_secondary ? "" : ", not bisected");
}

std::optional<Alert> BuildAlert(const AlertWork& a, const AnalyzerOptions& options,
                                const std::string& now) {
  if (!a.primary_metric && options.secondary_severity == "none") return std::nullopt;
  const bool open = a.state == 2 || a.state == 3;
  const std::string severity = !a.primary_metric                ? options.secondary_severity
                               : std::fabs(a.magnitude) >= 0.10 ? "critical"
                                                                : "warning";
  Alert alert;
  alert.labels = {{"alertname", "IommuPerfRegression"},
                  {"platform", a.platform},
                  {"workload", a.workload},
                  {"mode", a.overhead ? a.mode_name + "/off" : a.mode_name},
                  {"metric", a.metric},
                  {"metric_rank", a.primary_metric ? "primary" : "secondary"},
                  {"severity", severity},
                  {"regression_id", std::to_string(a.regression_id)}};
  const std::string culprit =
      a.culprit_id.empty() ? (a.bisect_done ? "unknown" : "bisecting") : a.culprit_id;
  alert.annotations = {
      {"summary", absl::StrCat(a.primary_metric ? "" : "secondary metric: ", a.workload, " ",
                               a.metric, " ", Percent(a.magnitude), " on ", a.platform, " (",
                               a.overhead ? a.mode_name + "/off" : a.mode_name, ")",
                               a.culprit_id.empty() ? "" : ", culprit " + a.culprit_id)},
      {"culprit", culprit},
      {"culprit_subject", a.culprit_subject},
      {"magnitude", Percent(a.magnitude)},
      {"last_good", a.last_good},
      {"first_bad", a.first_bad},
      {"bisect_steps", std::to_string(a.bisect_steps)},
      {"change_class", a.change_class == 1   ? "iommu"
                       : a.change_class == 2 ? "not_iommu"
                                             : ""},
      {"catalog", a.catalog}};
  if (!a.primary_metrics.empty()) alert.annotations["primary_metrics"] = a.primary_metrics;
  // Every culprit of a range that held several changes; the culprit label
  // above stays the largest share so that rules and dashboards keep working.
  if (!a.culprits.empty()) {
    std::vector<std::string> named;
    for (const AlertWork::NamedCulprit& c : a.culprits) {
      named.push_back(absl::StrFormat("%s (%.0f%%)", c.commit_id, 100.0 * c.share));
    }
    alert.annotations["culprits"] = absl::StrJoin(named, ", ");
  }
  alert.starts_at = a.starts_at;
  // A resolution is re-sent with the time it was first sent, so that every
  // copy tells Alertmanager the same thing.
  if (!open) alert.ends_at = a.ends_at.empty() ? now : a.ends_at;
  return alert;
}

Silence BuildSilence(const Alert& alert, int64_t regression_id, const std::string& now,
                     const std::string& ends) {
  Silence s;
  s.matchers = alert.labels;
  s.matchers.erase("severity");
  s.starts_at = now;
  s.ends_at = ends;
  s.created_by = "farm-analyzer";
  s.comment = absl::StrCat("regression ", regression_id, " acknowledged (farmctl regression mark ",
                           regression_id, " reopen removes this silence)");
  return s;
}

Analyzer::Analyzer(AnalyzerStore* store, JobSubmitter* submitter, AlertSink* sink, OpenGauges open,
                   AnalyzerOptions options)
    : store_(store),
      submitter_(submitter),
      sink_(sink),
      open_(open),
      options_(std::move(options)) {}

absl::Status Analyzer::Tick() {
  absl::Status first = absl::OkStatus();
  auto note = [&](const absl::Status& s, const std::string& what) {
    if (s.ok()) return;
    Log(what + ": " + s.ToString());
    if (first.ok()) first = s;
  };
  absl::StatusOr<std::vector<MatrixInfo>> todo = store_->MatricesToAnalyze();
  note(todo.status(), "listing matrices");
  if (todo.ok()) {
    for (const MatrixInfo& m : *todo) note(AnalyzeMatrix(m), absl::StrCat("matrix ", m.id));
  }
  absl::StatusOr<std::vector<ActiveBisect>> active = store_->ActiveBisects();
  note(active.status(), "listing bisects");
  if (active.ok()) {
    for (const ActiveBisect& b : *active)
      note(AdvanceBisect(b), absl::StrCat("bisect ", b.bisect_id));
  }
  note(SendAlerts(), "alerts");
  note(CheckFixes(), "fix checks");
  if (open_.primary != nullptr || open_.secondary != nullptr) {
    absl::StatusOr<AnalyzerStore::OpenCounts> open = store_->CountOpenRegressions();
    note(open.status(), "counting regressions");
    if (open.ok() && open_.primary != nullptr)
      open_.primary->Set(static_cast<double>(open->primary));
    if (open.ok() && open_.secondary != nullptr)
      open_.secondary->Set(static_cast<double>(open->secondary));
  }
  return first;
}

absl::Status Analyzer::AnalyzeMatrix(const MatrixInfo& m) {
  absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples({m.id});
  if (!samples.ok()) return samples.status();
  const std::vector<Series> series = BuildSeries(*samples, false, options_.primary_metrics);
  if (open_.results != nullptr) open_.results->Update(m.catalog, series);
  const PrimaryMetricMap primary = PrimaryMetrics(*samples, options_.primary_metrics);
  // Suggestive candidates are recorded as suspected too: their confirmation
  // re-runs both commits with doubled repeats until the evidence decides.
  const std::vector<ChangePoint> cps = DetectCandidates(series, options_.detect);
  const std::vector<Finding> findings = Classify(cps, series, options_.detect);
  std::vector<NewRegression> found;
  for (const Finding& f : findings) {
    absl::StatusOr<SeriesSpec> cell = store_->Cell(m.id, f.platform, f.workload);
    if (!cell.ok()) return cell.status();
    SeriesSpec spec = *cell;
    if (spec.catalog.empty()) spec.catalog = m.catalog;
    const size_t slash = f.metric.find('/');
    spec.metric = f.metric.substr(0, slash);
    spec.phase = slash == std::string::npos ? "" : f.metric.substr(slash + 1);
    spec.mode = f.mode;
    spec.overhead = f.overhead_series;
    NewRegression n;
    n.finding = f;
    n.series_key =
        absl::StrCat(f.platform, "|", f.workload, "|", f.metric, "|", f.mode,
                     f.overhead_series ? "/off" : "", "|", f.last_good, "|", f.first_bad);
    n.state = 1;  // SUSPECTED until confirmed
    auto pm = primary.find({f.platform, f.workload});
    const std::set<std::string> workload_primary =
        pm == primary.end() ? std::set<std::string>{} : pm->second;
    n.metric_rank = f.primary_metric ? "primary" : "secondary";
    n.primary_metrics.assign(workload_primary.begin(), workload_primary.end());
    n.note = RankNote(f, workload_primary, options_);
    const bool suggestive = std::all_of(f.change_points.begin(), f.change_points.end(),
                                        [](const ChangePoint& cp) { return cp.suggestive; });
    if (suggestive) n.note += "; suggestive (confirmed with more repeats before it counts)";
    const bool do_bisect = m.analysis_bisect && (f.regression || options_.bisect_improvements) &&
                           (f.primary_metric || options_.bisect_secondary);
    const json state = {{"series", SpecToJson(spec)},
                        {"regression", f.regression},
                        {"expected_change", f.magnitude},
                        {"last_good", {{"index", f.last_good_index}, {"id", f.last_good}}},
                        {"first_bad", {{"index", f.first_bad_index}, {"id", f.first_bad}}},
                        {"do_bisect", do_bisect},
                        {"metric_rank", f.primary_metric ? "primary" : "secondary"},
                        {"primary_metrics", workload_primary},
                        {"phase", "confirm"},
                        {"seq", 0},
                        {"confirm_matrices", json::array()},
                        {"pending_matrices", json::array()},
                        {"pending_index", -1},
                        {"empty_rounds", 0},
                        {"step_matrix", json::object()}};
    json full = state;
    // A real tool measures the workload's throughput, which stands for a
    // primary metric only: secondary findings are confirmed on the emulator.
    if (std::optional<RealConfirm> rc = RealConfirmFromSpecYaml(m.spec_yaml);
        rc.has_value() && f.primary_metric) {
      full["real_confirm"] = RealConfirmToJson(*rc);
    }
    n.bisect_state_json = full.dump();
    found.push_back(std::move(n));
    Log(absl::StrCat("matrix ", m.id, ": ", f.primary_metric ? "" : "secondary-metric ",
                     f.regression ? "regression" : "improvement", " ", f.platform, " ", f.workload,
                     " ", f.metric, " ", f.mode, f.overhead_series ? "/off" : "", " ",
                     Percent(f.magnitude), " between ", f.last_good, " and ", f.first_bad, " (",
                     ChangeClassName(f.change_class), ", p=", absl::StrFormat("%.2g", f.p_value),
                     suggestive ? ", suggestive" : "", ")"));
  }
  absl::StatusOr<std::vector<int64_t>> bisects = store_->RecordAnalysis(m.id, m.catalog, found);
  if (!bisects.ok()) return bisects.status();
  ++matrices_analyzed_;
  Log(absl::StrCat("matrix ", m.id, " analysed: ", samples->size(), " samples, ", series.size(),
                   " series, ", findings.size(), " findings, ", bisects->size(), " new bisects"));
  return absl::OkStatus();
}

absl::Status Analyzer::AdvanceBisect(const ActiveBisect& b) {
  json st = json::parse(b.state_json, nullptr, false);
  if (st.is_discarded() || !st.is_object()) {
    return absl::InternalError(absl::StrCat("bisect ", b.bisect_id, ": unreadable state"));
  }
  try {
    const SeriesSpec spec = SpecFromJson(st.at("series"));
    const int lg_index = st.at("last_good").at("index").get<int>();
    const int fb_index = st.at("first_bad").at("index").get<int>();
    const std::string lg = st.at("last_good").at("id").get<std::string>();
    const std::string fb = st.at("first_bad").at("id").get<std::string>();
    BisectUpdate u;
    u.bisect_id = b.bisect_id;
    u.regression_id = b.regression_id;
    u.bisect_state = "running";
    u.last_good = lg;
    u.first_bad = fb;

    auto submit = [&](const SeriesSpec& cell, const std::string& what,
                      const std::vector<std::string>& commits, int repeats,
                      const std::string& kind) -> absl::StatusOr<int64_t> {
      const int seq = st.at("seq").get<int>();
      const std::string key = absl::StrCat("analyzer/b", b.bisect_id, "/", seq);
      const std::string yaml =
          RerunSpecYaml(cell, absl::StrCat("analyzer-b", b.bisect_id, "-", what), commits, repeats,
                        kind, SubmissionSeed(b.bisect_id, seq), options_.priority);
      absl::StatusOr<int64_t> id = submitter_->Submit(yaml, key);
      if (!id.ok()) return id.status();
      st["seq"] = seq + 1;
      ++submissions_;
      return id;
    };

    if (st.at("phase") == "confirm") {
      json& cm = st["confirm_matrices"];
      // The executor of the confirmation, chosen once before its first
      // matrix: the spec's real one when live agents offer kernels for both
      // commits in every mode of the cell, else the emulator (saying why).
      // The emulator does not wait for kernels: a real confirmation that
      // cannot run would hold the bisect forever.
      if (!st.contains("confirm_by")) {
        st["confirm_by"] = ExecutorName(pb::EXECUTOR_EMULATOR);
        st["confirm_note"] = "";
        if (st.contains("real_confirm") && cm.empty()) {
          const RealConfirm rc = RealConfirmFromJson(st.at("real_confirm"));
          const SeriesSpec real = RealConfirmSpec(spec, rc);
          absl::StatusOr<std::vector<pb::KernelOffer>> offers =
              store_->LiveOffers(rc.executor, kLiveAgent);
          if (!offers.ok()) return offers.status();
          const std::string missing = MissingKernels(*offers, real, {lg, fb});
          if (missing.empty()) {
            st["confirm_by"] = ExecutorName(rc.executor);
            st["confirm_series"] = SpecToJson(real);
          } else {
            st["confirm_note"] = absl::StrCat("not confirmed on real kernels: ", missing,
                                              "; confirmed on the emulator");
          }
          Log(absl::StrCat("bisect ", b.bisect_id, ": confirmation by ",
                           st["confirm_by"].get<std::string>(),
                           missing.empty() ? "" : " (" + missing + ")"));
        }
      }
      const bool real = st.at("confirm_by") != ExecutorName(pb::EXECUTOR_EMULATOR);
      const SeriesSpec cell = real ? SpecFromJson(st.at("confirm_series")) : spec;
      BisectOptions confirm_options = options_.bisect;
      if (real) {
        const RealConfirm rc = RealConfirmFromJson(st.at("real_confirm"));
        confirm_options.confirm_repeats = rc.repeats;
        confirm_options.max_confirm_repeats = rc.max_repeats;
      }
      u.confirmed_by = st.at("confirm_by").get<std::string>();
      u.confirm_note = st.value("confirm_note", "");
      // Round r (0-based) of confirm_repeats matrices doubles the repeats of
      // both commits: round 0 runs 1 repeat per matrix, round r >= 1 runs
      // 2^(r-1), so after round r each commit has confirm_repeats * 2^r.
      const int per_round = std::max(1, confirm_options.confirm_repeats);
      const int round = st.value("confirm_round", 0);
      const int wanted = per_round * (round + 1);
      if (static_cast<int>(cm.size()) < wanted) {
        // One matrix per round keeps last good and first bad interleaved in
        // the queue (same priority, ids in submission order).
        while (static_cast<int>(cm.size()) < wanted) {
          const int r = static_cast<int>(cm.size()) / per_round;
          const int repeats = r == 0 ? 1 : 1 << (r - 1);
          absl::StatusOr<int64_t> id =
              submit(cell, absl::StrCat("confirm", cm.size() + 1), {lg, fb}, repeats, "confirm");
          if (!id.ok() && real && cm.empty() && absl::IsInvalidArgument(id.status())) {
            // The scheduler refused the real cell (e.g. its catalog lacks a
            // commit): the emulator confirms, the reason is kept.
            st["confirm_by"] = ExecutorName(pb::EXECUTOR_EMULATOR);
            st["confirm_note"] = absl::StrCat(
                "not confirmed on real kernels: the scheduler refused ",
                "the real matrix: ", id.status().message(), "; confirmed on the emulator");
            st.erase("confirm_series");
            u.confirmed_by = st["confirm_by"].get<std::string>();
            u.confirm_note = st["confirm_note"].get<std::string>();
            u.state_json = st.dump();
            Log(absl::StrCat("bisect ", b.bisect_id, ": ", u.confirm_note));
            return store_->SaveBisect(u);
          }
          if (!id.ok()) {
            // Keep what was submitted; the next tick goes on with the same keys.
            if (!cm.empty()) {
              u.state_json = st.dump();
              (void)store_->SaveBisect(u);
            }
            return id.status();
          }
          cm.push_back(*id);
        }
        BisectUpdate::Step s0;
        s0.record =
            BisectStepRecord{0, fb_index, fb, "pending", 2 * per_round * (1 << round), 0, 1, 0};
        s0.matrix_id = cm.front().get<int64_t>();
        u.steps.push_back(s0);
        u.confirm_matrix_id = s0.matrix_id;
        u.state_json = st.dump();
        Log(absl::StrCat("bisect ", b.bisect_id, ": confirming ", lg, " vs ", fb, " with ",
                         cm.size(), " interleaved rounds on ", u.confirmed_by));
        return store_->SaveBisect(u);
      }
      const std::vector<int64_t> ids = cm.get<std::vector<int64_t>>();
      u.confirm_matrix_id = ids.front();
      absl::StatusOr<bool> done = store_->MatricesTerminal(ids);
      if (!done.ok()) return done.status();
      if (!*done) return absl::OkStatus();
      absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples(ids);
      if (!samples.ok()) return samples.status();
      const std::vector<double> good = SeriesValuesAt(*samples, cell, lg);
      const std::vector<double> bad = SeriesValuesAt(*samples, cell, fb);
      const Confirmation c =
          EvaluateConfirmation(good, bad, st.at("expected_change").get<double>(), confirm_options);
      if (c.decision == SampleDecision::kMoreRepeats) {
        // Suggestive, not conclusive: both commits again with doubled repeats.
        st["confirm_round"] = round + 1;
        BisectUpdate::Step s0;
        s0.record = BisectStepRecord{0,
                                     fb_index,
                                     fb,
                                     "pending",
                                     static_cast<int>(std::min(good.size(), bad.size())),
                                     c.test.mean_b,
                                     c.test.p_value,
                                     c.test.relative_change};
        s0.matrix_id = ids.front();
        u.steps.push_back(s0);
        u.state_json = st.dump();
        Log(absl::StrCat("bisect ", b.bisect_id, ": confirmation suggestive ",
                         Percent(c.test.relative_change),
                         absl::StrFormat(" p=%.2g", c.test.p_value), " (", good.size(), "+",
                         bad.size(), " runs), doubling the repeats"));
        return store_->SaveBisect(u);
      }
      BisectUpdate::Step s0;
      s0.record = BisectStepRecord{0,
                                   fb_index,
                                   fb,
                                   c.confirmed ? "confirmed" : "not-reproduced",
                                   static_cast<int>(std::min(good.size(), bad.size())),
                                   c.test.mean_b,
                                   c.test.p_value,
                                   c.test.relative_change};
      s0.matrix_id = ids.front();
      u.steps.push_back(s0);
      Log(absl::StrCat("bisect ", b.bisect_id, ": confirmation ", s0.record.verdict, " ",
                       Percent(c.test.relative_change), absl::StrFormat(" p=%.2g", c.test.p_value),
                       " (", good.size(), "+", bad.size(), " runs on ", u.confirmed_by, ")"));
      if (real) {
        // The real figures: the regression's own magnitude stays the
        // emulator's (another metric), so they go into the note.
        u.confirm_note = absl::StrCat(
            u.confirmed_by, " on real kernels (", cell.platform, ", ", cell.workload,
            "): ", cell.metric, cell.phase.empty() ? "" : "/" + cell.phase, " ",
            Percent(c.test.relative_change), absl::StrFormat(" p=%.2g", c.test.p_value), " (",
            good.size(), "+", bad.size(), " runs): ", s0.record.verdict);
        st["confirm_note"] = u.confirm_note;
      }
      if (!c.confirmed) {
        st["phase"] = "done";
        u.bisect_state = "failed";
        u.regression_state = 6;  // REJECTED
        u.state_json = st.dump();
        return store_->SaveBisect(u);
      }
      u.regression_state = 2;  // CONFIRMED
      if (!real) {
        u.magnitude = c.test.relative_change;
        u.p_value = c.test.p_value;
      }
      absl::StatusOr<std::vector<CommitRow>> commits =
          store_->Commits(spec.catalog, lg_index, fb_index);
      if (!commits.ok()) return commits.status();
      if (fb_index - lg_index == 1 || !st.at("do_bisect").get<bool>()) {
        st["phase"] = "done";
        u.bisect_state = "done";
        if (fb_index - lg_index == 1) {
          u.culprit_id = fb;
          u.culprit_subject = commits->back().subject;
          u.culprits.push_back(BisectUpdate::CulpritRow{
              Culprit{lg_index, fb_index, fb,
                      real ? st.at("expected_change").get<double>() : c.test.relative_change, 1},
              lg, u.culprit_subject});
        }
        u.state_json = st.dump();
        return store_->SaveBisect(u);
      }
      std::vector<std::string> ids_in_range;
      for (const CommitRow& r : *commits) ids_in_range.push_back(r.id);
      if (static_cast<int>(ids_in_range.size()) != fb_index - lg_index + 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("catalog ", spec.catalog, " changed under bisect ", b.bisect_id));
      }
      // The bisect runs on the emulator; real references would be another
      // metric, so after a real confirmation the planner measures its own.
      BisectPlanner planner(ids_in_range, lg_index, fb_index, options_.bisect);
      if (!real) {
        planner.AddSamples(lg_index, good);
        planner.AddSamples(fb_index, bad);
      }
      st["phase"] = "bisect";
      st["planner"] = json::parse(planner.ToJson());
      st["culprit_subjects"] = json::object();
      for (const CommitRow& r : *commits) st["culprit_subjects"][r.id] = r.subject;
    }

    if (st.at("phase") != "bisect") return absl::OkStatus();
    absl::StatusOr<BisectPlanner> planner = BisectPlanner::FromJson(st.at("planner").dump());
    if (!planner.ok()) return planner.status();
    json& pending = st["pending_matrices"];
    if (!pending.empty()) {
      const std::vector<int64_t> ids = pending.get<std::vector<int64_t>>();
      absl::StatusOr<bool> done = store_->MatricesTerminal(ids);
      if (!done.ok()) return done.status();
      if (!*done) return absl::OkStatus();
      absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples(ids);
      if (!samples.ok()) return samples.status();
      const int index = st.at("pending_index").get<int>();
      const std::vector<double> values = SeriesValuesAt(*samples, spec, planner->CommitId(index));
      if (values.empty()) {
        st["empty_rounds"] = st.at("empty_rounds").get<int>() + 1;
      } else {
        st["empty_rounds"] = 0;
      }
      planner->AddSamples(index, values);
      pending = json::array();
      st["pending_index"] = -1;
    }
    const bool stuck = st.at("empty_rounds").get<int>() >= 3;
    if (!planner->Done() && !stuck) {
      const BisectRequest req = *planner->Next();
      absl::StatusOr<int64_t> id = submit(spec, absl::StrCat("step", planner->Steps().size()),
                                          {req.commit_id}, req.repeats, "bisect");
      if (!id.ok()) return id.status();
      pending.push_back(*id);
      st["pending_index"] = req.commit_index;
      if (!planner->Steps().empty())
        st["step_matrix"][std::to_string(planner->Steps().back().step)] = *id;
      Log(absl::StrCat("bisect ", b.bisect_id, ": range ",
                       planner->CommitId(planner->LastGoodIndex()), "..",
                       planner->CommitId(planner->FirstBadIndex()), ", testing ", req.commit_id,
                       " x", req.repeats, " (matrix ", *id, ")"));
    }
    st["planner"] = json::parse(planner->ToJson());
    for (const BisectStepRecord& r : planner->Steps()) {
      BisectUpdate::Step s;
      s.record = r;
      const std::string k = std::to_string(r.step);
      if (st["step_matrix"].contains(k)) s.matrix_id = st["step_matrix"][k].get<int64_t>();
      u.steps.push_back(s);
    }
    if (planner->Done() || stuck) {
      st["phase"] = "done";
      const bool ok = planner->Done() && !planner->Failed();
      u.bisect_state = ok ? "done" : "failed";
      u.last_good = planner->CommitId(planner->LastGoodIndex());
      u.first_bad = planner->CommitId(planner->FirstBadIndex());
      const json& subjects = st.at("culprit_subjects");
      auto subject_of = [&](const std::string& id) {
        return subjects.contains(id) ? subjects.at(id).get<std::string>() : std::string();
      };
      std::string named;
      if (ok) {
        u.culprit_id = u.first_bad;
        u.culprit_subject = subject_of(u.culprit_id);
        for (const Culprit& c : planner->Culprits()) {
          u.culprits.push_back(BisectUpdate::CulpritRow{c, planner->CommitId(c.last_good_index),
                                                        subject_of(c.commit_id)});
          absl::StrAppend(&named, named.empty() ? "" : ", ", c.commit_id, " (",
                          Percent(c.relative_change),
                          absl::StrFormat(", share %.0f%%", c.share * 100), ")");
        }
      }
      if (u.culprits.size() > 1)
        Log(absl::StrCat("bisect ", b.bisect_id, ": ", u.culprits.size(), " culprits: ", named));
      Log(absl::StrCat("bisect ", b.bisect_id, ": ", u.bisect_state, ", first bad ", u.first_bad,
                       " \"", u.culprit_subject, "\" after ", planner->Steps().size(), " steps, ",
                       planner->RunsRequested(), " runs",
                       planner->UsedWeakVerdict() ? " (a weak verdict was acted on)" : ""));
    }
    u.state_json = st.dump();
    return store_->SaveBisect(u);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bisect ", b.bisect_id, ": bad state: ", e.what()));
  }
}

absl::Status Analyzer::SendAlerts() {
  if (sink_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<AlertWork>> work = store_->AlertCandidates(options_.resolved_resend);
  if (!work.ok()) return work.status();
  const absl::Time now_time = absl::Now();
  auto rfc3339 = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
  };
  const std::string now = rfc3339(now_time);
  // One failed post (Alertmanager briefly away, one bad alert) must not keep
  // the others from going out: each is retried on the next pass.
  absl::Status first = absl::OkStatus();
  auto keep = [&](const absl::Status& s, int64_t id, const char* what) {
    if (s.ok()) return true;
    Log(absl::StrCat("regression ", id, ": ", what, ": ", s.ToString()));
    if (first.ok()) first = s;
    return false;
  };
  for (const AlertWork& a : *work) {
    const bool open = a.state == 2 || a.state == 3;
    const bool acknowledged = a.state == 3;
    std::optional<Alert> built = BuildAlert(a, options_, now);
    if (!a.silence_id.empty() && (!acknowledged || !built.has_value())) {
      // Re-opened or closed: the silence goes, so the alert (or its
      // resolution) is seen again.
      if (!keep(sink_->ExpireSilence(a.silence_id), a.regression_id, "expiring its silence"))
        continue;
      if (!keep(store_->SetSilence(a.regression_id, ""), a.regression_id, "recording")) continue;
      Log(absl::StrCat("silence ", a.silence_id, " of regression ", a.regression_id, " expired"));
    }
    if (!built.has_value()) continue;
    Alert& alert = *built;
    if (acknowledged && a.silence_id.empty()) {
      absl::StatusOr<std::string> id = sink_->CreateSilence(
          BuildSilence(alert, a.regression_id, now, rfc3339(now_time + options_.silence_for)));
      if (!keep(id.status(), a.regression_id, "silencing")) continue;
      if (!keep(store_->SetSilence(a.regression_id, *id), a.regression_id, "recording")) {
        // Not recorded: expire it rather than leave one nobody removes.
        (void)sink_->ExpireSilence(*id);
        continue;
      }
      Log(absl::StrCat("alert of regression ", a.regression_id, " silenced (acknowledged): ", *id));
    }
    if (!open && !a.alert_exists) continue;  // closed before it was ever alerted
    // Re-sent every alert_resend -- while open, and for resolved_resend once
    // resolved -- and at once when its content or state changed.
    const bool changed = json::parse(a.annotations_json, nullptr, false) != json(alert.annotations);
    const bool state_changed = a.alert_firing != open;
    if (!changed && !state_changed &&
        a.seconds_since_sent < absl::ToDoubleSeconds(options_.alert_resend))
      continue;
    if (!keep(sink_->Post({alert}), a.regression_id, "posting its alert")) continue;
    if (!keep(store_->MarkAlertSent(a.regression_id, open, json(alert.labels).dump(),
                                    json(alert.annotations).dump()),
              a.regression_id, "recording its alert"))
      continue;
    if (state_changed || !a.alert_exists) {
      Log(absl::StrCat("alert ", open ? "firing" : "resolved", " for regression ", a.regression_id,
                       ": ", alert.annotations["summary"]));
    }
  }
  return first;
}

absl::Status Analyzer::CheckFixes() {
  absl::StatusOr<std::vector<FixCheckWork>> work = store_->FixChecks();
  if (!work.ok()) return work.status();
  absl::Status first = absl::OkStatus();
  for (const FixCheckWork& w : *work) {
    absl::Status s = CheckFix(w);
    if (!s.ok()) {
      Log(absl::StrCat("fix check of regression ", w.regression_id, ": ", s.ToString()));
      if (first.ok()) first = s;
    }
  }
  return first;
}

absl::Status Analyzer::CheckFix(const FixCheckWork& w) {
  try {
    const json bisect = json::parse(w.bisect_state_json);
    const SeriesSpec spec = SpecFromJson(bisect.at("series"));
    // The old level is the last good commit of the range as detected: before
    // every culprit of it.
    const std::string lg = bisect.at("last_good").at("id").get<std::string>();
    const int fb_index = bisect.at("first_bad").at("index").get<int>();
    const double expected = bisect.at("expected_change").get<double>();
    json st = w.check_state_json.empty() ? json::object() : json::parse(w.check_state_json);
    const int generation = st.value("generation", 0);
    if (w.fix_check.empty()) {
      // Not started, or fixed again after a re-open: a new generation, so its
      // idempotency key asks for a new matrix.
      absl::StatusOr<CommitRow> latest = store_->LatestCommit(spec.catalog);
      if (!latest.ok()) return latest.status();
      json next = {{"generation", generation + 1}, {"commit", latest->id}};
      if (latest->index <= fb_index) {
        Log(absl::StrCat("fix check of regression ", w.regression_id, ": no commit after ",
                         bisect.at("first_bad").at("id").get<std::string>(), " in catalog ",
                         spec.catalog));
        return store_->SaveFixCheck(w.regression_id, "no-later-commit", "", 0, next.dump());
      }
      const int repeats = std::max(2, options_.bisect.confirm_repeats);
      const uint64_t seed =
          (static_cast<uint64_t>(w.regression_id) * 15485863u + (generation + 1) * 32452843u) %
              2000000000u +
          1;
      absl::StatusOr<int64_t> id = submitter_->Submit(
          RerunSpecYaml(spec, absl::StrCat("analyzer-r", w.regression_id, "-fixcheck"),
                        {lg, latest->id}, repeats, "confirm", seed, options_.priority),
          absl::StrCat("analyzer/f", w.regression_id, "/", generation + 1));
      if (!id.ok()) return id.status();
      ++submissions_;
      next["matrix"] = *id;
      Log(absl::StrCat("fix check of regression ", w.regression_id, ": re-running ", lg, " and ",
                       latest->id, " x", repeats, " (matrix ", *id, ")"));
      return store_->SaveFixCheck(w.regression_id, "checking", latest->id, 0, next.dump());
    }
    const int64_t matrix = st.at("matrix").get<int64_t>();
    const std::string later = st.at("commit").get<std::string>();
    absl::StatusOr<bool> done = store_->MatricesTerminal({matrix});
    if (!done.ok()) return done.status();
    if (!*done) return absl::OkStatus();
    absl::StatusOr<std::vector<SampleRow>> samples = store_->Samples({matrix});
    if (!samples.ok()) return samples.status();
    const std::vector<double> good = SeriesValuesAt(*samples, spec, lg);
    const std::vector<double> after = SeriesValuesAt(*samples, spec, later);
    if (good.size() < 2 || after.size() < 2) {
      return absl::FailedPreconditionError(absl::StrCat("matrix ", matrix, " gave ", good.size(),
                                                        " + ", after.size(), " values for ", lg,
                                                        " and ", later));
    }
    const FixCheck f = JudgeFixCheck(good, after, expected, options_.bisect);
    const std::string verdict = f.back ? "back" : "not-back";
    Log(absl::StrCat("fix check of regression ", w.regression_id, ": ", later, " is ", verdict,
                     " (", Percent(f.test.relative_change), " vs ", lg,
                     absl::StrFormat(", p=%.2g", f.test.p_value), ")"));
    return store_->SaveFixCheck(w.regression_id, verdict, later, f.test.relative_change, st.dump());
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unreadable state: ", e.what()));
  }
}

}  // namespace farm::analyzer
