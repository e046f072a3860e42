// Unit tests of the engine's pure helpers (the DB-backed flow is in
// analyzer_pgtest.cc).
#include "services/analyzer/analyzer.h"

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <tuple>

#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/analyzer/result_gauges.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

std::vector<std::string> Ids(const pb::MatrixSpec& m) {
  return {m.commit_list().ids().begin(), m.commit_list().ids().end()};
}

std::vector<int> Modes(const pb::MatrixSpec& m) { return {m.modes().begin(), m.modes().end()}; }

std::map<std::string, std::string> Sorted(
    const google::protobuf::Map<std::string, std::string>& m) {
  return {m.begin(), m.end()};
}

SampleRow Row(int64_t matrix, const std::string& commit, const std::string& mode, int repeat,
              double v) {
  SampleRow r;
  r.matrix_id = matrix;
  r.commit_id = commit;
  r.platform = "p";
  r.workload = "w";
  r.mode = mode;
  r.metric = "throughput";
  r.phase = "write";
  r.repeat = repeat;
  r.value = v;
  return r;
}

TEST(AnalyzerHelpersTest, SeriesValuesPlainAndOverhead) {
  const std::vector<SampleRow> rows{Row(1, "a", "strict", 0, 50), Row(1, "a", "off", 0, 100),
                                    Row(1, "a", "strict", 1, 60), Row(1, "a", "off", 1, 120),
                                    Row(2, "a", "strict", 0, 40), Row(1, "b", "strict", 0, 7)};
  SeriesSpec spec;
  spec.platform = "p";
  spec.workload = "w";
  spec.metric = "throughput";
  spec.phase = "write";
  spec.mode = "strict";
  EXPECT_EQ(SeriesValuesAt(rows, spec, "a"), (std::vector<double>{50, 60, 40}));
  spec.overhead = true;
  // Matrix 2 has no off run: no ratio from it.
  EXPECT_EQ(SeriesValuesAt(rows, spec, "a"), (std::vector<double>{0.5, 0.5}));
}

TEST(AnalyzerHelpersTest, RerunSpecCarriesCellAndKind) {
  SeriesSpec spec;
  spec.catalog = "linux-iommu";
  spec.platform = "intel-vtd-2s12c";
  spec.workload = "iozone-nfsrdma";
  spec.params_json = R"({"threads":"12","tests":"write,read"})";
  spec.model_set_json = R"({"agent.hold_ms":"5"})";
  spec.mode = "strict";
  spec.overhead = true;
  const pb::MatrixSpec m = RerunSpec(spec, "analyzer-b1-step1", {"v5.10", "c588072bba6b"}, 3,
                                     pb::JOB_KIND_BISECT, 42, 0);
  EXPECT_EQ(m.name(), "analyzer-b1-step1");
  EXPECT_EQ(m.catalog(), "linux-iommu");
  EXPECT_EQ(std::vector<std::string>(m.platform().begin(), m.platform().end()),
            std::vector<std::string>{"intel-vtd-2s12c"});
  EXPECT_EQ(Ids(m), (std::vector<std::string>{"v5.10", "c588072bba6b"}));
  EXPECT_EQ(Modes(m), (std::vector<int>{pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_OFF}));
  EXPECT_EQ(m.kind(), pb::JOB_KIND_BISECT);
  EXPECT_EQ(m.repeats(), 3);
  EXPECT_EQ(m.seed(), 42u);
  ASSERT_EQ(m.workloads_size(), 1);
  EXPECT_EQ(m.workloads(0).name(), "iozone-nfsrdma");
  EXPECT_EQ(Sorted(m.workloads(0).params()),
            (std::map<std::string, std::string>{{"tests", "write,read"}, {"threads", "12"}}));
  EXPECT_EQ(Sorted(m.set()), (std::map<std::string, std::string>{{"agent.hold_ms", "5"}}));
  EXPECT_EQ(m.executor(), pb::EXECUTOR_EMULATOR);
}

// A rerun of a real series goes to agents with the series' labels; one on
// the emulator takes none (a spec refuses labels there).
TEST(AnalyzerHelpersTest, RerunSpecOfARealSeriesKeepsItsLabels) {
  SeriesSpec spec;
  spec.catalog = "host-kernels";
  spec.platform = "lab-spr";
  spec.workload = "fio-randread";
  spec.labels_json = R"({"nic":"cx6"})";
  spec.mode = "off";
  spec.executor = pb::EXECUTOR_FIO;
  pb::MatrixSpec m = RerunSpec(spec, "analyzer-c1", {"6.1.0-57"}, 5, pb::JOB_KIND_CONFIRM, 1, 0);
  EXPECT_EQ(Sorted(m.labels()), (std::map<std::string, std::string>{{"nic", "cx6"}}));
  spec.executor = pb::EXECUTOR_EMULATOR;
  m = RerunSpec(spec, "analyzer-b1", {"v5.10"}, 1, pb::JOB_KIND_BISECT, 1, 0);
  EXPECT_TRUE(m.labels().empty());
}

TEST(AnalyzerHelpersTest, AlertJsonHasLabelsAnnotationsAndEnd) {
  Alert a;
  a.labels = {{"alertname", "IommuPerfRegression"}};
  a.annotations = {{"culprit", "c588072bba6b"}};
  a.ends_at = "2026-01-01T00:00:00Z";
  EXPECT_EQ(AlertsToJson({a}),
            R"([{"annotations":{"culprit":"c588072bba6b"},"endsAt":"2026-01-01T00:00:00Z",)"
            R"("labels":{"alertname":"IommuPerfRegression"}}])");
  EXPECT_FALSE(NewAlertmanagerSink("127.0.0.1:9093").ok());
  EXPECT_TRUE(NewAlertmanagerSink("http://127.0.0.1:9093/").ok());
}

AlertWork Work(bool primary, double magnitude) {
  AlertWork w;
  w.regression_id = 7;
  w.state = 2;  // CONFIRMED
  w.platform = "intel-vtd-2s12c";
  w.workload = "iozone-nfsrdma";
  w.metric = primary ? "throughput_kb_s/read" : "rcache_hit_rate";
  w.mode_name = "lazy";
  w.magnitude = magnitude;
  w.primary_metric = primary;
  w.primary_metrics = "throughput,throughput_kb_s";
  return w;
}

TEST(AnalyzerRankTest, PrimaryPagesSecondaryIsInfoOrSilent) {
  AnalyzerOptions o;
  auto primary = BuildAlert(Work(true, -0.227), o.alert, "now");
  ASSERT_TRUE(primary.has_value());
  EXPECT_EQ(primary->labels["severity"], "critical");
  EXPECT_EQ(primary->labels["metric_rank"], "primary");
  EXPECT_EQ(BuildAlert(Work(true, -0.05), o.alert, "now")->labels["severity"], "warning");

  auto secondary = BuildAlert(Work(false, -0.45), o.alert, "now");
  ASSERT_TRUE(secondary.has_value());
  EXPECT_EQ(secondary->labels["severity"], "info");  // however large the change
  EXPECT_EQ(secondary->labels["metric_rank"], "secondary");
  EXPECT_EQ(secondary->annotations["primary_metrics"], "throughput,throughput_kb_s");
  EXPECT_EQ(secondary->annotations["summary"].rfind("secondary metric: ", 0), 0u);
  EXPECT_TRUE(secondary->ends_at.empty());

  o.alert.secondary_severity = "none";
  EXPECT_FALSE(BuildAlert(Work(false, -0.45), o.alert, "now").has_value());
  AlertWork fixed = Work(true, -0.2);
  fixed.state = 4;  // FIXED: resolved
  EXPECT_EQ(BuildAlert(fixed, o.alert, "2026-01-01T00:00:00Z")->ends_at, "2026-01-01T00:00:00Z");
}

TEST(AnalyzerAlertTest, AnnotationsNameEveryCulpritLabelKeepsTheLargest) {
  AnalyzerOptions o;
  AlertWork w = Work(true, -0.21);
  w.bisect_done = true;
  w.culprit_id = "c588072bba6b";
  w.culprits = {{"c062db039f40", 0.43}, {"c588072bba6b", 0.57}};
  auto alert = BuildAlert(w, o.alert, "now");
  ASSERT_TRUE(alert.has_value());
  EXPECT_EQ(alert->annotations["culprits"], "c062db039f40 (43%), c588072bba6b (57%)");
  EXPECT_EQ(alert->annotations["culprit"], "c588072bba6b");
  // No bisect result yet: no culprits annotation.
  EXPECT_EQ(BuildAlert(Work(true, -0.21), o.alert, "now")->annotations.count("culprits"), 0u);
}

TEST(AnalyzerRankTest, NoteRecordsTheRank) {
  Finding f;
  f.workload = "iozone-nfsrdma";
  f.metric = "rcache_hit_rate/write";
  f.primary_metric = false;
  AnalyzerOptions o;
  EXPECT_EQ(RankNote(f, {"throughput", "throughput_kb_s"}, o),
            "secondary metric: rcache_hit_rate is not a primary metric of iozone-nfsrdma "
            "(throughput, throughput_kb_s); alerted as info, not bisected");
  o.bisect_secondary = true;
  o.alert.secondary_severity = "none";
  EXPECT_EQ(RankNote(f, {"throughput"}, o),
            "secondary metric: rcache_hit_rate is not a primary metric of iozone-nfsrdma "
            "(throughput); not alerted");
  f.primary_metric = true;
  EXPECT_EQ(RankNote(f, {"throughput"}, o), "primary metric of iozone-nfsrdma");
}

// Only the IOMMU overhead moved: at commit 23 off gains 2% and strict loses
// 2% (each under the 3% magnitude, and measured tightly enough to know it),
// so strict/off drops 3.9%. The ratio series is detected, confirmed and
// bisected like a mode series, through the same helpers as the live
// analyzer (SeriesValuesAt pairs strict with off per matrix and repeat).
class RatioFarm {
 public:
  std::vector<SampleRow> Run(int commit, int repeats) {
    std::vector<SampleRow> rows;
    const int64_t matrix = next_matrix_++;
    for (int r = 0; r < repeats; ++r) {
      for (const auto& [mode, level0, shift] :
           {std::tuple<std::string, double, double>{"off", 2000, 0.02},
            std::tuple<std::string, double, double>{"strict", 1200, -0.02}}) {
        SampleRow row = Row(matrix, "c" + std::to_string(commit), mode, r,
                            level0 * (commit >= 23 ? 1 + shift : 1) * (1 + 0.003 * noise_(rng_)));
        row.commit_index = commit;
        rows.push_back(row);
      }
    }
    return rows;
  }

 private:
  std::mt19937_64 rng_{42};
  std::normal_distribution<double> noise_{0, 1};
  int64_t next_matrix_ = 1;
};

TEST(AnalyzerRatioTest, OnlyTheOverheadRatioMovedIsDetectedConfirmedAndBisected) {
  RatioFarm farm;
  std::vector<SampleRow> bulk;
  for (int c = 0; c <= 40; c += 8) {
    const std::vector<SampleRow> rows = farm.Run(c, 5);
    bulk.insert(bulk.end(), rows.begin(), rows.end());
  }
  const std::vector<Series> series = BuildSeries(bulk);
  ASSERT_EQ(series.size(), 3u);  // off, strict, strict/off
  const DetectOptions dopt;
  const std::vector<ChangePoint> cps = DetectAll(series, dopt);
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_TRUE(cps[0].key.overhead);  // neither mode's series moved by 3%
  EXPECT_EQ(cps[0].last_good_index, 16);
  EXPECT_EQ(cps[0].first_bad_index, 24);
  EXPECT_NEAR(cps[0].relative_change, 0.98 / 1.02 - 1, 0.005);
  const std::vector<Finding> findings = Classify(cps, series, dopt);
  ASSERT_EQ(findings.size(), 1u);
  const Finding& f = findings[0];
  EXPECT_TRUE(f.overhead_series);
  EXPECT_EQ(f.mode, "strict");
  EXPECT_EQ(f.change_class, ChangeClass::kIommu);
  EXPECT_TRUE(f.regression);
  for (const ModeEffect& e : f.per_mode) EXPECT_EQ(e.significant, e.overhead) << e.mode;

  SeriesSpec spec;
  spec.platform = "p";
  spec.workload = "w";
  spec.metric = "throughput";
  spec.phase = "write";
  spec.mode = f.mode;
  spec.overhead = f.overhead_series;
  // The confirmation matrices re-run strict and off together (RerunSpec).
  EXPECT_EQ(Modes(RerunSpec(spec, "n", {"c16", "c24"}, 1, pb::JOB_KIND_CONFIRM, 1, 0)),
            (std::vector<int>{pb::IOMMU_MODE_STRICT, pb::IOMMU_MODE_OFF}));
  const BisectOptions bopt;
  std::vector<SampleRow> confirm;
  for (int r = 0; r < bopt.confirm_repeats; ++r) {
    for (int c : {16, 24}) {
      const std::vector<SampleRow> rows = farm.Run(c, 1);
      confirm.insert(confirm.end(), rows.begin(), rows.end());
    }
  }
  const std::vector<double> good = SeriesValuesAt(confirm, spec, "c16");
  const std::vector<double> bad = SeriesValuesAt(confirm, spec, "c24");
  ASSERT_EQ(good.size(), 8u);
  const Confirmation c = EvaluateConfirmation(good, bad, f.magnitude, bopt);
  EXPECT_TRUE(c.confirmed);

  std::vector<std::string> ids;
  for (int i = 16; i <= 24; ++i) ids.push_back("c" + std::to_string(i));
  BisectPlanner planner(ids, 16, 24, bopt);
  planner.AddSamples(16, good);
  planner.AddSamples(24, bad);
  for (int guard = 0; guard < 100 && planner.Next().has_value(); ++guard) {
    const BisectRequest req = *planner.Next();
    planner.AddSamples(req.commit_index, SeriesValuesAt(farm.Run(req.commit_index, req.repeats),
                                                        spec, req.commit_id));
  }
  ASSERT_TRUE(planner.Done());
  EXPECT_FALSE(planner.Failed());
  EXPECT_EQ(planner.FirstBadIndex(), 23);
  ASSERT_EQ(planner.Culprits().size(), 1u);
  EXPECT_EQ(planner.Culprits()[0].commit_id, "c23");
}

constexpr char kConfirmSpec[] = R"(
name: prescreen
catalog: kernels
platform: kunpeng920-smmuv3
commits: [v6.1.190, v6.1.192]
modes: [strict]
workloads: [{name: fio-like}]
analysis:
  bisect: true
  confirm:
    executor: fio
    platform: vm-smmuv3
    repeats: 2
    workload:
      name: fio-nvme
      params: {rw: randread, bs: 4k, iodepth: 16, runtime: 2, time_based: 1}
)";

TEST(RealConfirmTest, ReadsTheSpecWithTheSchedulersDefaults) {
  std::optional<RealConfirm> c = RealConfirmFromSpecYaml(kConfirmSpec);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->executor, 2);  // fio
  EXPECT_EQ(c->workload, "fio-nvme");
  EXPECT_EQ(nlohmann::json::parse(c->params_json).at("iodepth"), "16");
  EXPECT_EQ(c->platform, "vm-smmuv3");
  EXPECT_EQ(c->catalog, "");
  EXPECT_EQ(c->repeats, 2);
  EXPECT_EQ(c->max_repeats, 2);
  EXPECT_EQ(c->metric, "iops");  // fio's default for randread
  EXPECT_EQ(c->phase, "read");
  EXPECT_FALSE(RealConfirmFromSpecYaml("name: x\nanalysis: {bisect: true}\n").has_value());
  EXPECT_FALSE(RealConfirmFromSpecYaml("not: [yaml").has_value());
  // No metric to compare (a mixed job): nothing the analyzer could judge.
  EXPECT_FALSE(RealConfirmFromSpecYaml(
                   "analysis: {confirm: {executor: fio, workload: {name: w, params: {rw: rw}}}}\n")
                   .has_value());
  std::optional<RealConfirm> iozone = RealConfirmFromSpecYaml(
      "analysis: {confirm: {executor: iozone, metric: throughput_kb_s/read, repeats: 4, "
      "max_repeats: 16, workload: iozone-nfs}}\n");
  ASSERT_TRUE(iozone.has_value());
  EXPECT_EQ(iozone->metric, "throughput_kb_s");
  EXPECT_EQ(iozone->phase, "read");
  EXPECT_EQ(iozone->max_repeats, 16);

  SeriesSpec emulated;
  emulated.catalog = "kernels";
  emulated.platform = "kunpeng920-smmuv3";
  emulated.workload = "fio-like";
  emulated.model_set_json = R"({"fq.kind":"percpu"})";
  emulated.metric = "throughput";
  emulated.mode = "lazy";
  emulated.overhead = true;
  const SeriesSpec real = RealConfirmSpec(emulated, *c);
  EXPECT_EQ(real.catalog, "kernels");
  EXPECT_EQ(real.platform, "vm-smmuv3");
  EXPECT_EQ(real.workload, "fio-nvme");
  EXPECT_EQ(real.executor, 2);
  EXPECT_EQ(real.model_set_json, "{}");
  EXPECT_EQ(real.metric, "iops");
  EXPECT_EQ(real.mode, "lazy");
  EXPECT_TRUE(real.overhead);
  const pb::MatrixSpec m =
      RerunSpec(real, "n", {"v6.1.190", "v6.1.192"}, 1, pb::JOB_KIND_CONFIRM, 1, 0);
  EXPECT_EQ(m.executor(), pb::EXECUTOR_FIO);
  EXPECT_EQ(Modes(m), (std::vector<int>{pb::IOMMU_MODE_LAZY, pb::IOMMU_MODE_OFF}));
  EXPECT_TRUE(m.set().empty());
}

iommufarm::v1::KernelOffer Offer(const std::string& commit, const std::string& release,
                                 std::vector<iommufarm::v1::IommuMode> modes) {
  iommufarm::v1::KernelOffer o;
  o.set_provider("vm");
  o.set_commit(commit);
  o.set_release(release);
  for (auto m : modes) o.add_modes(m);
  return o;
}

TEST(RealConfirmTest, MissingKernelsNamesEachCommitAndMode) {
  using iommufarm::v1::IOMMU_MODE_OFF;
  using iommufarm::v1::IOMMU_MODE_STRICT;
  SeriesSpec real;
  real.executor = iommufarm::v1::EXECUTOR_FIO;
  real.mode = "strict";
  real.params_json = R"({"rw":"randread"})";
  const std::vector<iommufarm::v1::KernelOffer> offers = {
      Offer("v6.1.190", "6.1.0-54-cloud-arm64", {IOMMU_MODE_STRICT}),
      Offer("", "6.1.0-57-cloud-arm64", {IOMMU_MODE_STRICT, IOMMU_MODE_OFF})};
  EXPECT_EQ(MissingKernels(offers, real, {"v6.1.190", "6.1.0-57-cloud-arm64"}), "");
  EXPECT_EQ(MissingKernels(offers, real, {"v6.1.190", "v6.1.191"}),
            "no live agent offers a fio kernel for v6.1.191 in strict");
  real.overhead = true;  // strict and off, at both commits
  EXPECT_EQ(MissingKernels(offers, real, {"v6.1.190", "6.1.0-57-cloud-arm64"}),
            "no live agent offers a fio kernel for v6.1.190 in off");
  EXPECT_EQ(MissingKernels({}, real, {"a"}),
            "no live agent offers a fio kernel for a in strict, a in off");
}

// An in-memory AnalyzerStore holding one bisect, enough to drive its
// confirmation through Tick(); the submitter records every spec.
class OneBisectStore final : public AnalyzerStore {
 public:
  explicit OneBisectStore(std::string state) : state_(std::move(state)) {}
  absl::StatusOr<std::vector<MatrixInfo>> MatricesToAnalyze() override {
    std::vector<MatrixInfo> out = matrices;
    matrices.clear();
    return out;
  }
  absl::StatusOr<std::vector<MatrixInfo>> LatestAnalysedMatrices() override { return latest; }
  absl::StatusOr<std::vector<SampleRow>> Samples(const std::vector<int64_t>& ids) override {
    for (int64_t id : ids) {
      if (auto it = samples_error.find(id); it != samples_error.end()) {
        if (it->second.ok()) throw std::runtime_error("store exploded");
        return it->second;
      }
    }
    std::vector<SampleRow> out;
    for (const SampleRow& r : samples) {
      if (std::find(ids.begin(), ids.end(), r.matrix_id) != ids.end()) out.push_back(r);
    }
    return out;
  }
  absl::StatusOr<std::vector<SampleRow>> HistorySamples(const std::string&, pb::Executor,
                                                        const std::vector<HistoryCell>& cells,
                                                        int64_t, int) override {
    std::vector<SampleRow> out;
    for (const SampleRow& r : history) {
      if (InCells(cells, r)) out.push_back(r);
    }
    return out;
  }
  absl::StatusOr<bool> MatricesTerminal(const std::vector<int64_t>&) override { return true; }
  absl::StatusOr<std::vector<std::string>> FailureReasons(
      const std::vector<int64_t>& ids) override {
    std::vector<std::string> out;
    for (int64_t id : ids) {
      if (auto it = failures.find(id); it != failures.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
      }
    }
    return out;
  }
  absl::StatusOr<std::vector<CommitRow>> Commits(const std::string&, int lo, int hi) override {
    std::vector<CommitRow> out;
    for (int i = lo; i <= hi; ++i) out.push_back({i, "c" + std::to_string(i), "subject"});
    return out;
  }
  absl::StatusOr<SeriesSpec> Cell(int64_t, const std::string&, const std::string&,
                                  const std::string&) override {
    return SeriesSpec{};
  }
  absl::StatusOr<std::vector<int64_t>> RecordAnalysis(
      int64_t matrix, const std::string&, const std::vector<NewRegression>& found,
      const std::vector<std::string>& skipped_series) override {
    recorded.insert(recorded.end(), found.begin(), found.end());
    analysed.push_back(matrix);
    skipped.insert(skipped.end(), skipped_series.begin(), skipped_series.end());
    return std::vector<int64_t>{};
  }
  absl::Status RecordAnalysisFailure(int64_t matrix, const std::string& reason) override {
    failed_analysis[matrix] = reason;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<ActiveBisect>> ActiveBisects() override {
    if (done_) return std::vector<ActiveBisect>{};
    return std::vector<ActiveBisect>{{1, 7, state_}};
  }
  absl::Status SaveBisect(const BisectUpdate& u) override {
    state_ = u.state_json;
    done_ = u.bisect_state != "running";
    updates.push_back(u);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<AlertWork>> AlertCandidates(absl::Duration) override {
    return std::vector<AlertWork>{};
  }
  absl::Status SetSilence(int64_t, const std::string&) override { return absl::OkStatus(); }
  absl::Status MarkAlertSent(int64_t, bool, const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<OpenCounts> CountOpenRegressions() override { return OpenCounts{}; }
  absl::StatusOr<std::vector<storage::RegressionGroup>> OpenGroups(const std::string&,
                                                                   absl::Duration) override {
    return std::vector<storage::RegressionGroup>{};
  }
  absl::StatusOr<storage::RegressionGroup> GroupOf(int64_t) override {
    return absl::NotFoundError("no groups");
  }
  absl::Status SaveGroup(int64_t, int64_t, const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> SplitFromGroup(int64_t) override {
    return absl::NotFoundError("no groups");
  }
  absl::StatusOr<std::vector<FixCheckWork>> FixChecks() override {
    return std::vector<FixCheckWork>{};
  }
  absl::StatusOr<CommitRow> LatestCommit(const std::string&) override { return CommitRow{}; }
  absl::StatusOr<std::vector<iommufarm::v1::KernelOffer>> LiveOffers(
      iommufarm::v1::Executor executor, absl::Duration) override {
    offers_asked_for.push_back(executor);
    return offers;
  }
  absl::StatusOr<std::vector<std::vector<pb::Capability>>> AgentCapabilities() override {
    return agents;
  }
  absl::Status SaveFixCheck(int64_t, const std::string&, const std::string&, double,
                            const std::string&, const std::string&) override {
    return absl::OkStatus();
  }

  std::vector<MatrixInfo> matrices;
  std::vector<MatrixInfo> latest;  // LatestAnalysedMatrices
  std::vector<SampleRow> history;  // HistorySamples: other analysed matrices
  std::vector<NewRegression> recorded;
  std::vector<iommufarm::v1::KernelOffer> offers;
  std::vector<int> offers_asked_for;
  std::vector<std::vector<pb::Capability>> agents;  // AgentCapabilities
  std::vector<SampleRow> samples;
  std::map<int64_t, std::vector<std::string>> failures;  // matrix -> its failed jobs' reasons
  std::vector<BisectUpdate> updates;
  std::vector<int64_t> analysed;                   // RecordAnalysis's matrices
  std::vector<std::string> skipped;                // and the series they skipped
  std::map<int64_t, std::string> failed_analysis;  // RecordAnalysisFailure
  // Samples() of the matrix fails with this status (OK: throws).
  std::map<int64_t, absl::Status> samples_error;

 private:
  std::string state_;
  bool done_ = false;
};

class RecordingSubmitter final : public JobSubmitter {
 public:
  absl::StatusOr<int64_t> Submit(const pb::MatrixSpec& spec, const std::string&) override {
    specs.push_back(spec);
    return static_cast<int64_t>(100 + specs.size());
  }
  std::vector<pb::MatrixSpec> specs;
};

// The bisect state AnalyzeMatrix writes for a finding at c5..c6 (strict,
// throughput -20%), with the spec's analysis.confirm.
std::string StateWithRealConfirm(int first_bad = 6) {
  nlohmann::json st = {
      {"series",
       {{"catalog", "kernels"},
        {"platform", "kunpeng920-smmuv3"},
        {"workload", "fio-like"},
        {"params", nlohmann::json::object()},
        {"model_set", {{"fq.kind", "percpu"}}},
        {"executor", 1},
        {"metric", "throughput"},
        {"phase", ""},
        {"mode", "strict"},
        {"overhead", false}}},
      {"regression", true},
      {"expected_change", -0.2},
      {"last_good", {{"index", 5}, {"id", "c5"}}},
      {"first_bad", {{"index", first_bad}, {"id", "c" + std::to_string(first_bad)}}},
      {"do_bisect", true},
      {"metric_rank", "primary"},
      {"primary_metrics", {"throughput"}},
      {"phase", "confirm"},
      {"seq", 0},
      {"confirm_matrices", nlohmann::json::array()},
      {"pending_matrices", nlohmann::json::array()},
      {"pending_index", -1},
      {"empty_rounds", 0},
      {"step_matrix", nlohmann::json::object()}};
  std::optional<RealConfirm> c = RealConfirmFromSpecYaml(kConfirmSpec);
  st["real_confirm"] = {{"executor", c->executor},
                        {"workload", c->workload},
                        {"params", nlohmann::json::parse(c->params_json)},
                        {"catalog", c->catalog},
                        {"platform", c->platform},
                        {"repeats", c->repeats},
                        {"max_repeats", c->max_repeats},
                        {"metric", c->metric},
                        {"phase", c->phase}};
  return st.dump();
}

SampleRow RealRow(int64_t matrix, const std::string& commit, double iops) {
  SampleRow r;
  r.matrix_id = matrix;
  r.commit_id = commit;
  r.platform = "vm-smmuv3";
  r.workload = "fio-nvme";
  r.mode = "strict";
  r.metric = "iops";
  r.phase = "read";
  r.value = iops;
  return r;
}

// The stored JSON reads into BisectState and writes back key for key, so
// rows of running bisects survive an analyzer upgrade.
TEST(BisectStateTest, StoredRowsRoundTripKeyForKey) {
  const nlohmann::json confirming = nlohmann::json::parse(StateWithRealConfirm());
  absl::StatusOr<BisectState> st = BisectStateFromJson(confirming.dump());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->phase, BisectPhase::kConfirm);
  EXPECT_EQ(st->first_bad.id, "c6");
  ASSERT_TRUE(st->real_confirm.has_value());
  EXPECT_EQ(st->real_confirm->executor, pb::EXECUTOR_FIO);
  EXPECT_EQ(st->confirm_by, pb::EXECUTOR_UNSPECIFIED);  // not chosen yet
  EXPECT_EQ(nlohmann::json::parse(BisectStateToJson(*st)), confirming);

  nlohmann::json bisecting = confirming;
  bisecting["phase"] = "bisect";
  bisecting["confirm_by"] = "fio";
  bisecting["confirm_note"] = "fio on real kernels";
  bisecting["confirm_series"] = confirming["series"];
  bisecting["confirm_round"] = 2;
  bisecting["confirm_matrices"] = {101, 102};
  bisecting["pending_matrices"] = {103};
  bisecting["pending_index"] = 5;
  bisecting["step_matrix"] = {{"1", 103}, {"10", 104}};
  bisecting["planner"] = {{"any", "object"}};
  bisecting["culprit_subjects"] = {{"c5", "s5"}, {"c6", "s6"}};
  st = BisectStateFromJson(bisecting.dump());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->confirm_by, pb::EXECUTOR_FIO);
  EXPECT_TRUE(st->real());
  EXPECT_EQ(st->step_matrix.at(10), 104);
  EXPECT_EQ(nlohmann::json::parse(BisectStateToJson(*st)), bisecting);

  EXPECT_FALSE(BisectStateFromJson("{}").ok());
  EXPECT_FALSE(BisectStateFromJson("not json").ok());
}

// A real series' labels are kept with its bisect, so its reruns after a
// restart still go to agents holding them.
TEST(BisectStateTest, SeriesLabelsRoundTrip) {
  absl::StatusOr<BisectState> st = BisectStateFromJson(StateWithRealConfirm());
  ASSERT_TRUE(st.ok()) << st.status();
  st->series.labels_json = R"({"nic":"cx6"})";
  absl::StatusOr<BisectState> back = BisectStateFromJson(BisectStateToJson(*st));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(nlohmann::json::parse(back->series.labels_json), nlohmann::json({{"nic", "cx6"}}));
}

TEST(RealConfirmTest, OfferedKernelsConfirmAsRealJobsAndTheRegressionRecordsFio) {
  OneBisectStore store(StateWithRealConfirm());
  store.offers = {Offer("c5", "", {iommufarm::v1::IOMMU_MODE_STRICT}),
                  Offer("c6", "", {iommufarm::v1::IOMMU_MODE_STRICT})};
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  EXPECT_EQ(store.offers_asked_for, std::vector<int>{2});
  // One interleaved matrix per repeat (2), real cell, no model settings.
  ASSERT_EQ(submitter.specs.size(), 2u);
  for (const pb::MatrixSpec& y : submitter.specs) {
    EXPECT_EQ(y.executor(), pb::EXECUTOR_FIO) << y.DebugString();
    ASSERT_EQ(y.platform_size(), 1);
    EXPECT_EQ(y.platform(0), "vm-smmuv3");
    ASSERT_EQ(y.workloads_size(), 1);
    EXPECT_EQ(y.workloads(0).name(), "fio-nvme");
    EXPECT_EQ(Ids(y), (std::vector<std::string>{"c5", "c6"}));
    EXPECT_TRUE(y.set().empty()) << y.DebugString();
  }
  ASSERT_EQ(store.updates.size(), 1u);
  EXPECT_EQ(store.updates[0].confirmed_by, "fio");
  EXPECT_EQ(store.updates[0].confirm_matrix_id, 101);

  // The real runs lose 25% iops at c6: confirmed by fio, then the bisect
  // (c5, c6 adjacent) is done with c6 as culprit; the emulator's magnitude
  // stays (the real change is another metric), the note carries it.
  for (int64_t m : {101, 102}) {
    store.samples.push_back(RealRow(m, "c5", 8000 + m));
    store.samples.push_back(RealRow(m, "c6", 6000 + m));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(store.updates.size(), 2u);
  const BisectUpdate& u = store.updates[1];
  EXPECT_EQ(u.confirmed_by, "fio");
  EXPECT_EQ(u.confirm_matrix_id, 101);
  EXPECT_EQ(u.regression_state, 2);  // CONFIRMED
  EXPECT_FALSE(u.magnitude.has_value());
  EXPECT_EQ(u.culprit_id, "c6");
  EXPECT_NE(u.confirm_note.find("fio on real kernels (vm-smmuv3, fio-nvme): iops/read -2"),
            std::string::npos)
      << u.confirm_note;
  EXPECT_NE(u.confirm_note.find("confirmed"), std::string::npos) << u.confirm_note;
  EXPECT_EQ(submitter.specs.size(), 2u);
}

// After a real confirmation the bisect runs the same real cell: the real
// runs are its references, each step runs beside them, and every step
// records that it ran on a real kernel.
TEST(RealConfirmTest, TheBisectAfterARealConfirmationRunsOnRealKernels) {
  OneBisectStore store(StateWithRealConfirm(/*first_bad=*/8));
  store.offers = {Offer("c5", "", {iommufarm::v1::IOMMU_MODE_STRICT}),
                  Offer("c8", "", {iommufarm::v1::IOMMU_MODE_STRICT})};
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(submitter.specs.size(), 2u);
  for (int64_t m : {101, 102}) {
    store.samples.push_back(RealRow(m, "c5", 8000 + m));
    store.samples.push_back(RealRow(m, "c8", 6000 + m));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(submitter.specs.size(), 3u);
  const pb::MatrixSpec& step = submitter.specs[2];
  EXPECT_EQ(step.executor(), pb::EXECUTOR_FIO) << step.DebugString();
  EXPECT_EQ(step.kind(), pb::JOB_KIND_BISECT) << step.DebugString();
  ASSERT_EQ(step.platform_size(), 1);
  EXPECT_EQ(step.platform(0), "vm-smmuv3");
  ASSERT_EQ(step.workloads_size(), 1);
  EXPECT_EQ(step.workloads(0).name(), "fio-nvme");
  EXPECT_TRUE(step.set().empty()) << step.DebugString();
  // The references are the confirmation's real runs: the first step is a
  // midpoint, beside both of them.
  const std::vector<std::string> ids = Ids(step);
  ASSERT_EQ(ids.size(), 3u) << step.DebugString();
  EXPECT_EQ(ids.front(), "c5");
  EXPECT_EQ(ids.back(), "c8");
  const BisectUpdate& u = store.updates.back();
  EXPECT_EQ(u.confirmed_by, "fio");
  EXPECT_EQ(u.regression_state, 2);
  ASSERT_FALSE(u.steps.empty());
  for (const BisectUpdate::Step& s : u.steps) EXPECT_EQ(s.executor, "fio") << s.record.step;
  absl::StatusOr<BisectState> st = BisectStateFromJson(u.state_json);
  ASSERT_TRUE(st.ok()) << st.status();
  ASSERT_TRUE(st->bisect_series.has_value());
  EXPECT_EQ(st->BisectCell().executor, pb::EXECUTOR_FIO);
  EXPECT_EQ(st->series.executor, pb::EXECUTOR_EMULATOR);  // the finding's own
  EXPECT_EQ(st->confirm_kernels, "offered");
}

// A confirm over another catalog than the finding's: the commits' places
// differ, so the bisect stays on the emulator and measures its references.
TEST(RealConfirmTest, AConfirmOverAnotherCatalogBisectsOnTheEmulator) {
  nlohmann::json j = nlohmann::json::parse(StateWithRealConfirm(/*first_bad=*/8));
  j["real_confirm"]["catalog"] = "other";
  OneBisectStore store(j.dump());
  store.offers = {Offer("c5", "", {iommufarm::v1::IOMMU_MODE_STRICT}),
                  Offer("c8", "", {iommufarm::v1::IOMMU_MODE_STRICT})};
  RecordingSubmitter submitter;
  AnalyzerOptions options;
  Analyzer analyzer(&store, &submitter, nullptr, {}, options);
  ASSERT_TRUE(analyzer.Tick().ok());
  for (int64_t m : {101, 102}) {
    store.samples.push_back(RealRow(m, "c5", 8000 + m));
    store.samples.push_back(RealRow(m, "c8", 6000 + m));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(submitter.specs.size(), 3u);
  const pb::MatrixSpec& step = submitter.specs[2];
  EXPECT_EQ(step.executor(), pb::EXECUTOR_EMULATOR) << step.DebugString();
  EXPECT_EQ(step.platform(0), "kunpeng920-smmuv3");
  // The planner's first request is a reference, not the midpoint.
  EXPECT_EQ(Ids(step), std::vector<std::string>{"c5"});
  EXPECT_EQ(step.repeats(), options.bisect.initial_repeats) << step.DebugString();
  const BisectUpdate& u = store.updates.back();
  EXPECT_EQ(u.confirmed_by, "fio");
  EXPECT_EQ(u.regression_state, 2);
}

// Only a primary-metric finding carries the real confirmation into its
// bisect's state; a secondary one (latency) is confirmed on the emulator.
TEST(RealConfirmTest, OnlyPrimaryMetricFindingsAreConfirmedOnRealKernels) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{1, "kernels", true, pb::EXECUTOR_EMULATOR, kConfirmSpec});
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 1);
  for (int c = 0; c <= 40; c += 8) {
    for (int r = 0; r < 5; ++r) {
      SampleRow t = Row(1, "c" + std::to_string(c), "strict", r,
                        1200 * (c >= 24 ? 0.8 : 1) * (1 + 0.003 * noise(rng)));
      t.commit_index = c;
      store.samples.push_back(t);
      SampleRow l = t;
      l.metric = "latency_us";
      l.value = 50 * (c >= 8 ? 1.2 : 1) * (1 + 0.003 * noise(rng));
      store.samples.push_back(l);
    }
  }
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  (void)analyzer.Tick();
  ASSERT_EQ(store.recorded.size(), 2u);
  int primary = 0, secondary = 0;
  for (const NewRegression& n : store.recorded) {
    const nlohmann::json st = nlohmann::json::parse(n.bisect_state_json);
    if (n.metric_rank == "primary") {
      ++primary;
      EXPECT_EQ(n.finding.first_bad, "c24");
      ASSERT_TRUE(st.contains("real_confirm")) << st.dump();
      EXPECT_EQ(st["real_confirm"]["workload"], "fio-nvme");
    } else {
      ++secondary;
      EXPECT_EQ(n.finding.first_bad, "c8");
      EXPECT_FALSE(st.contains("real_confirm")) << st.dump();
    }
  }
  EXPECT_EQ(primary, 1);
  EXPECT_EQ(secondary, 1);
}

TEST(RealConfirmTest, WithoutOfferedKernelsTheEmulatorConfirmsAndSaysWhy) {
  OneBisectStore store(StateWithRealConfirm());
  store.offers = {Offer("c5", "", {iommufarm::v1::IOMMU_MODE_STRICT})};
  RecordingSubmitter submitter;
  AnalyzerOptions options;
  Analyzer analyzer(&store, &submitter, nullptr, {}, options);
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(submitter.specs.size(), static_cast<size_t>(options.bisect.confirm_repeats));
  EXPECT_EQ(submitter.specs[0].executor(), pb::EXECUTOR_EMULATOR);
  EXPECT_EQ(Sorted(submitter.specs[0].set()),
            (std::map<std::string, std::string>{{"fq.kind", "percpu"}}));
  ASSERT_EQ(store.updates.size(), 1u);
  EXPECT_EQ(store.updates[0].confirmed_by, "emulator");
  EXPECT_EQ(store.updates[0].confirm_note,
            "not confirmed on real kernels: no live agent offers a fio kernel for c6 in strict, "
            "and vm-smmuv3 is not a vm platform (a host's kernel is not built); confirmed on the "
            "emulator");
}

TEST(DmaMapBenchConfirmTest, TheMetricFollowsTheFinding) {
  // A map or unmap figure of the finding's own: its mean latency.
  EXPECT_EQ(DmaMapBenchConfirmMetric("unmap_latency_p99", {}, 0.03), "unmap_latency_mean");
  EXPECT_EQ(DmaMapBenchConfirmMetric("avg_unmap_100ns", {}, 0.03), "unmap_latency_mean");
  EXPECT_EQ(DmaMapBenchConfirmMetric("map_latency_mean", {}, 0.03), "map_latency_mean");
  EXPECT_EQ(DmaMapBenchConfirmMetric("map_stddev", {{"unmap_latency_mean", 0.5}}, 0.03),
            "map_latency_mean");
  // A throughput: the latency that moved more the finding's way.
  EXPECT_EQ(
      DmaMapBenchConfirmMetric("throughput/write",
                               {{"map_latency_mean", 0.01}, {"unmap_latency_mean", 0.3}}, 0.03),
      "unmap_latency_mean");
  EXPECT_EQ(DmaMapBenchConfirmMetric(
                "throughput", {{"map_latency_mean", 0.2}, {"unmap_latency_mean", -0.1}}, 0.03),
            "map_latency_mean");
  // Neither moved that way by the magnitude, or neither measured: the spec
  // must name one.
  EXPECT_EQ(DmaMapBenchConfirmMetric(
                "throughput", {{"map_latency_mean", 0.01}, {"unmap_latency_mean", -0.2}}, 0.03),
            "");
  EXPECT_EQ(DmaMapBenchConfirmMetric("throughput", {}, 0.03), "");
  // Without a metric the spec reads for dma-map-bench only.
  std::optional<RealConfirm> c = RealConfirmFromSpecYaml(
      "analysis: {confirm: {executor: dma-map-bench, platform: q35-intel-iommu, "
      "workload: {name: dma-map-bench, params: {seconds: 1}}}}\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->executor, pb::EXECUTOR_DMA_MAP_BENCH);
  EXPECT_EQ(c->metric, "");
  EXPECT_FALSE(RealConfirmFromSpecYaml(
                   "analysis: {confirm: {executor: iozone, workload: {name: iozone-nfs}}}\n")
                   .has_value());
}

TEST(DmaMapBenchConfirmTest, TheExpectedChangeIsTheRealMetricsBadDirection) {
  // An emulator throughput regression of -20%: latency up is worse.
  EXPECT_DOUBLE_EQ(RealExpectedChange("unmap_latency_mean", true, -0.2), 0.2);
  EXPECT_DOUBLE_EQ(RealExpectedChange("iops", true, -0.2), -0.2);
  // An emulator latency regression of +30% confirmed by a throughput.
  EXPECT_DOUBLE_EQ(RealExpectedChange("iops", true, 0.3), -0.3);
  // Improvements the other way.
  EXPECT_DOUBLE_EQ(RealExpectedChange("map_latency_mean", false, 0.1), -0.1);
  EXPECT_DOUBLE_EQ(RealExpectedChange("throughput_kb_s", false, -0.1), 0.1);
  // A name that says neither keeps the emulator's sign.
  EXPECT_DOUBLE_EQ(RealExpectedChange("invalidations", true, -0.2), -0.2);
}

TEST(DmaMapBenchConfirmTest, NotBuildableNamesTheCatalogAndArchitecture) {
  SeriesSpec real;
  real.catalog = "kernels";
  real.platform = "q35-intel-iommu";
  pb::Capability kbuild;
  kbuild.set_name("kbuild");
  pb::BuildOffer* b = kbuild.add_builds();
  b->set_catalog("kernels");
  b->add_architectures("x86_64");
  pb::Capability emulator;
  emulator.set_name("emulator");
  EXPECT_EQ(NotBuildable({{emulator}, {emulator, kbuild}}, real), "");
  EXPECT_EQ(NotBuildable({{emulator}}, real),
            "no registered agent builds catalog kernels for x86_64");
  real.platform = "virt-smmuv3";  // aarch64
  EXPECT_EQ(NotBuildable({{kbuild}}, real),
            "no registered agent builds catalog kernels for aarch64");
  real.platform = "my-lab-box";
  EXPECT_EQ(NotBuildable({{kbuild}}, real),
            "my-lab-box is not a vm platform (a host's kernel is not built)");
}

// The state of an emulator throughput finding at c5..c8 (-20%) whose spec
// confirms with dma-map-bench on q35-intel-iommu, the metric chosen.
std::string StateWithDmaMapBenchConfirm() {
  nlohmann::json st = nlohmann::json::parse(StateWithRealConfirm(/*first_bad=*/8));
  st["real_confirm"] = {{"executor", pb::EXECUTOR_DMA_MAP_BENCH},
                        {"workload", "dma-map-bench"},
                        {"params", {{"seconds", "1"}}},
                        {"catalog", ""},
                        {"platform", "q35-intel-iommu"},
                        {"repeats", 2},
                        {"max_repeats", 2},
                        {"metric", "unmap_latency_mean"},
                        {"phase", ""}};
  return st.dump();
}

std::vector<pb::Capability> Builder(const std::string& catalog, const std::string& arch) {
  pb::Capability kbuild;
  kbuild.set_name("kbuild");
  pb::BuildOffer* b = kbuild.add_builds();
  b->set_catalog(catalog);
  b->add_architectures(arch);
  pb::Capability bench;
  bench.set_name("dma-map-bench");
  return {kbuild, bench};
}

SampleRow UnmapRow(int64_t matrix, const std::string& commit, double ns) {
  SampleRow r;
  r.matrix_id = matrix;
  r.commit_id = commit;
  r.platform = "q35-intel-iommu";
  r.workload = "dma-map-bench";
  r.mode = "strict";
  r.metric = "unmap_latency_mean";
  r.value = ns;
  return r;
}

// Nobody offers the kernels but a registered agent builds the catalog for
// x86_64: the confirmation runs as real matrices (the scheduler's submit
// asks for the builds). The unmap latency rises by 30% where the
// emulator's throughput fell by 20%: confirmed, by the latency's own
// direction; the bisect then runs dma-map-bench steps beside the real
// references, each recorded as run on a real kernel.
TEST(DmaMapBenchConfirmTest, KernelsBuiltForItConfirmByLatencyAndBisectOnRealKernels) {
  OneBisectStore store(StateWithDmaMapBenchConfirm());
  store.agents = {Builder("kernels", "x86_64")};
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  EXPECT_EQ(store.offers_asked_for, std::vector<int>{pb::EXECUTOR_DMA_MAP_BENCH});
  ASSERT_EQ(submitter.specs.size(), 2u);
  for (const pb::MatrixSpec& y : submitter.specs) {
    EXPECT_EQ(y.executor(), pb::EXECUTOR_DMA_MAP_BENCH) << y.DebugString();
    EXPECT_EQ(y.platform(0), "q35-intel-iommu");
    EXPECT_EQ(y.catalog(), "kernels");
    EXPECT_EQ(Ids(y), (std::vector<std::string>{"c5", "c8"}));
  }
  EXPECT_EQ(store.updates.back().confirmed_by, "dma-map-bench");

  for (int64_t m : {101, 102}) {
    store.samples.push_back(UnmapRow(m, "c5", 1000 + m % 3));
    store.samples.push_back(UnmapRow(m, "c8", 1300 + m % 3));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  const BisectUpdate& u = store.updates.back();
  EXPECT_EQ(u.regression_state, pb::REGRESSION_STATE_CONFIRMED) << u.confirm_note;
  EXPECT_FALSE(u.magnitude.has_value());  // the emulator's stays
  EXPECT_NE(u.confirm_note.find("dma-map-bench on real kernels (q35-intel-iommu, dma-map-bench): "
                                "unmap_latency_mean +30"),
            std::string::npos)
      << u.confirm_note;
  EXPECT_NE(u.confirm_note.find("confirmed; kernels built for it"), std::string::npos)
      << u.confirm_note;
  ASSERT_EQ(submitter.specs.size(), 3u);
  const pb::MatrixSpec& step = submitter.specs[2];
  EXPECT_EQ(step.executor(), pb::EXECUTOR_DMA_MAP_BENCH) << step.DebugString();
  EXPECT_EQ(step.kind(), pb::JOB_KIND_BISECT);
  EXPECT_EQ(step.platform(0), "q35-intel-iommu");
  const std::vector<std::string> ids = Ids(step);
  ASSERT_EQ(ids.size(), 3u) << step.DebugString();
  EXPECT_TRUE(ids[1] == "c6" || ids[1] == "c7") << ids[1];
  ASSERT_GE(u.steps.size(), 2u);  // the confirmation and the pending midpoint
  for (const BisectUpdate::Step& s : u.steps) {
    EXPECT_EQ(s.executor, "dma-map-bench") << s.record.step;
  }

  // The midpoint measures like c5: good, and the next step runs on real
  // kernels too.
  for (int r = 0; r < step.repeats(); ++r) {
    for (const std::string& c : ids) {
      store.samples.push_back(UnmapRow(103, c, (c == "c8" ? 1300 : 1000) + r % 3));
    }
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_EQ(submitter.specs.size(), 4u);
  EXPECT_EQ(submitter.specs[3].executor(), pb::EXECUTOR_DMA_MAP_BENCH);
  for (const BisectUpdate::Step& s : store.updates.back().steps) {
    EXPECT_EQ(s.executor, "dma-map-bench") << s.record.step;
  }
}

// Latency down on the real kernels where the emulator's throughput fell:
// the real kernels did not show the regression, whatever the sign of the
// emulator's change.
TEST(DmaMapBenchConfirmTest, ALatencyThatFellIsNotReproduced) {
  OneBisectStore store(StateWithDmaMapBenchConfirm());
  store.agents = {Builder("kernels", "x86_64")};
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  for (int64_t m : {101, 102}) {
    store.samples.push_back(UnmapRow(m, "c5", 1000 + m % 3));
    store.samples.push_back(UnmapRow(m, "c8", 700 + m % 3));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  const BisectUpdate& u = store.updates.back();
  EXPECT_EQ(u.regression_state, pb::REGRESSION_STATE_REJECTED) << u.confirm_note;
  EXPECT_NE(u.confirm_note.find("unmap_latency_mean -30"), std::string::npos) << u.confirm_note;
  EXPECT_NE(u.confirm_note.find("not-reproduced"), std::string::npos) << u.confirm_note;
  EXPECT_EQ(submitter.specs.size(), 2u);  // no bisect
}

TEST(DmaMapBenchConfirmTest, NeitherOfferedNorBuildableConfirmsOnTheEmulator) {
  OneBisectStore store(StateWithDmaMapBenchConfirm());
  store.agents = {Builder("other-tree", "x86_64"), Builder("kernels", "aarch64")};
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  ASSERT_FALSE(submitter.specs.empty());
  EXPECT_EQ(submitter.specs[0].executor(), pb::EXECUTOR_EMULATOR);
  EXPECT_EQ(store.updates.back().confirmed_by, "emulator");
  EXPECT_EQ(store.updates.back().confirm_note,
            "not confirmed on real kernels: no live agent offers a dma-map-bench kernel for c5 in "
            "strict, c8 in strict, and no registered agent builds catalog kernels for x86_64; "
            "confirmed on the emulator");
}

// An emulator dma-map-bench matrix whose throughput falls at c24 while its
// unmap latency rises: the throughput finding is confirmed on
// unmap_latency_mean; with neither latency rising the metric stays unchosen
// and the emulator confirms, saying so.
TEST(DmaMapBenchConfirmTest, AThroughputFindingIsConfirmedOnTheLatencyThatRose) {
  for (const bool unmap_rises : {true, false}) {
    SCOPED_TRACE(unmap_rises);
    OneBisectStore store("{}");
    store.matrices.push_back(MatrixInfo{
        1, "kernels", true, pb::EXECUTOR_EMULATOR,
        "name: x\nanalysis:\n  bisect: true\n  confirm:\n    executor: dma-map-bench\n"
        "    platform: q35-intel-iommu\n    workload: {name: dma-map-bench, params: {seconds: "
        "1}}\n"});
    std::mt19937_64 rng(7);
    std::normal_distribution<double> noise(0, 1);
    for (int c = 0; c <= 40; c += 8) {
      for (int r = 0; r < 5; ++r) {
        const bool bad = c >= 24;
        SampleRow t = Row(1, "c" + std::to_string(c), "strict", r,
                          1200 * (bad ? 0.8 : 1) * (1 + 0.003 * noise(rng)));
        t.commit_index = c;
        store.samples.push_back(t);
        SampleRow l = t;
        l.phase = "";
        for (const char* metric : {"map_latency_mean", "unmap_latency_mean"}) {
          l.metric = metric;
          const bool rises = unmap_rises && l.metric == "unmap_latency_mean";
          l.value = 500 * (bad && rises ? 1.25 : 1) * (1 + 0.003 * noise(rng));
          store.samples.push_back(l);
        }
      }
    }
    RecordingSubmitter submitter;
    Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
    (void)analyzer.Tick();
    bool found = false;
    for (const NewRegression& n : store.recorded) {
      if (n.metric_rank != "primary") continue;
      found = true;
      const nlohmann::json st = nlohmann::json::parse(n.bisect_state_json);
      ASSERT_TRUE(st.contains("real_confirm")) << st.dump();
      EXPECT_EQ(st["real_confirm"]["metric"], unmap_rises ? "unmap_latency_mean" : "");
    }
    EXPECT_TRUE(found);
    if (unmap_rises) continue;
    // The bisect's first move names what is missing.
    for (const NewRegression& n : store.recorded) {
      if (n.metric_rank != "primary") continue;
      OneBisectStore bisect(n.bisect_state_json);
      Analyzer b(&bisect, &submitter, nullptr, {}, AnalyzerOptions{});
      ASSERT_TRUE(b.Tick().ok());
      EXPECT_EQ(bisect.updates.back().confirmed_by, "emulator");
      EXPECT_NE(bisect.updates.back().confirm_note.find(
                    "analysis.confirm.metric is needed for a throughput/write finding under "
                    "dma-map-bench"),
                std::string::npos)
          << bisect.updates.back().confirm_note;
    }
  }
}

// A real series' finding (the kernel's dma_map_benchmark, unmap latency
// +30% between c5 and c8): confirmed by its own executor, its figures the
// regression's magnitude and the bisect's references; each step runs beside
// its references in one matrix.
TEST(RealSeriesTest, ConfirmedAndBisectedByItsOwnExecutorStepsBesideTheirReferences) {
  BisectState st;
  st.series.catalog = "tree";
  st.series.platform = "q35-intel-iommu";
  st.series.workload = "dma-map-bench";
  st.series.executor = pb::EXECUTOR_DMA_MAP_BENCH;
  st.series.metric = "unmap_latency_mean";
  st.series.mode = "strict";
  st.regression = true;
  st.expected_change = 0.3;
  st.last_good = {5, "c5"};
  st.first_bad = {8, "c8"};
  st.do_bisect = true;
  st.phase = BisectPhase::kConfirm;
  OneBisectStore store(BisectStateToJson(st));
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  ASSERT_TRUE(analyzer.Tick().ok());
  EXPECT_TRUE(store.offers_asked_for.empty()) << "no offers needed: kernels are built on demand";
  ASSERT_EQ(submitter.specs.size(), 5u);
  for (const pb::MatrixSpec& y : submitter.specs) {
    EXPECT_EQ(y.executor(), pb::EXECUTOR_DMA_MAP_BENCH) << y.DebugString();
    EXPECT_EQ(Ids(y), (std::vector<std::string>{"c5", "c8"}));
  }
  EXPECT_EQ(store.updates.back().confirmed_by, "dma-map-bench");

  auto row = [](int64_t matrix, const std::string& commit, double ns) {
    SampleRow r;
    r.matrix_id = matrix;
    r.commit_id = commit;
    r.platform = "q35-intel-iommu";
    r.workload = "dma-map-bench";
    r.mode = "strict";
    r.metric = "unmap_latency_mean";
    r.value = ns;
    return r;
  };
  for (int64_t m = 101; m <= 105; ++m) {
    store.samples.push_back(row(m, "c5", 1000 + m % 3));
    store.samples.push_back(row(m, "c8", 1300 + m % 3));
  }
  ASSERT_TRUE(analyzer.Tick().ok());
  const BisectUpdate& confirmed = store.updates.back();
  EXPECT_EQ(confirmed.regression_state, pb::REGRESSION_STATE_CONFIRMED);
  ASSERT_TRUE(confirmed.magnitude.has_value());
  EXPECT_NEAR(*confirmed.magnitude, 0.3, 0.01);
  // The references came from the confirmation: the first step is a
  // midpoint, run beside both references.
  ASSERT_EQ(submitter.specs.size(), 6u);
  const pb::MatrixSpec& step = submitter.specs[5];
  EXPECT_EQ(step.executor(), pb::EXECUTOR_DMA_MAP_BENCH);
  EXPECT_EQ(step.kind(), pb::JOB_KIND_BISECT);
  const std::vector<std::string> ids = Ids(step);
  ASSERT_EQ(ids.size(), 3u) << step.DebugString();
  EXPECT_EQ(ids.front(), "c5");
  EXPECT_EQ(ids.back(), "c8");
  EXPECT_TRUE(ids[1] == "c6" || ids[1] == "c7") << ids[1];
}

// A bisect past its confirmation over c<lo>..c<hi> (emulator, strict
// throughput), the references measured, no step submitted yet.
std::string BisectingState(int lo, int hi) {
  BisectState st;
  st.series.catalog = "kernels";
  st.series.platform = "p";
  st.series.workload = "w";
  st.series.metric = "throughput";
  st.series.mode = "strict";
  st.expected_change = -0.2;
  st.last_good = {lo, "c" + std::to_string(lo)};
  st.first_bad = {hi, "c" + std::to_string(hi)};
  st.do_bisect = true;
  st.phase = BisectPhase::kBisect;
  st.confirm_by = pb::EXECUTOR_EMULATOR;
  std::vector<std::string> ids;
  for (int i = lo; i <= hi; ++i) {
    ids.push_back("c" + std::to_string(i));
    st.culprit_subjects[ids.back()] = "subject " + ids.back();
  }
  BisectPlanner planner(ids, lo, hi, BisectOptions{});
  planner.AddSamples(lo, std::vector<double>{100, 100, 100});
  planner.AddSamples(hi, std::vector<double>{80, 80, 80});
  st.planner_json = planner.ToJson();
  return BisectStateToJson(st);
}

std::string BuildFailed(const std::string& commit) {
  return "kernel build 42 failed: build failed at " + commit +
         ": drivers/iommu/iova.c:12: error: 'iova' undeclared";
}

// Drives one bisect of BisectingState(lo, hi) through a BisectDriver.
class BisectDriverSkipTest : public ::testing::Test {
 protected:
  void Start(int lo, int hi) {
    store_ = std::make_unique<OneBisectStore>(BisectingState(lo, hi));
    driver_ = std::make_unique<BisectDriver>(store_.get(), &submitter_, BisectOptions{}, 0);
  }
  absl::Status Advance() { return driver_->Advance(store_->ActiveBisects()->front()); }
  int EmptyRounds() {
    return BisectStateFromJson(store_->ActiveBisects()->front().state_json)->empty_rounds;
  }

  std::unique_ptr<OneBisectStore> store_;
  RecordingSubmitter submitter_;
  std::unique_ptr<BisectDriver> driver_;
};

TEST_F(BisectDriverSkipTest, AStepWhoseKernelDoesNotBuildIsSkippedAndANeighbourTested) {
  Start(10, 14);
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 1u);
  EXPECT_EQ(Ids(submitter_.specs[0]), std::vector<std::string>{"c12"});  // matrix 101
  store_->failures[101] = {BuildFailed("c12"), BuildFailed("c12")};
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 2u);
  EXPECT_EQ(Ids(submitter_.specs[1]), std::vector<std::string>{"c11"});
  const BisectUpdate& u = store_->updates.back();
  EXPECT_EQ(u.bisect_state, "running");
  ASSERT_EQ(u.steps.size(), 2u);
  EXPECT_EQ(u.steps[0].record.commit_id, "c12");
  EXPECT_EQ(u.steps[0].record.verdict, "skip");
  EXPECT_EQ(u.steps[0].matrix_id, 101);
  EXPECT_EQ(u.steps[1].record.commit_id, "c11");
  EXPECT_EQ(u.steps[1].record.verdict, "pending");
  EXPECT_EQ(u.steps[1].matrix_id, 102);
  EXPECT_EQ(EmptyRounds(), 0);  // a skip is not a step without value
}

// A kernel that did not bring its host back (the reaper's reason for an
// expired hold, or the kexec agent's on the default kernel) is skipped as an
// unbuildable one is, also beside a build failure in the same step.
TEST_F(BisectDriverSkipTest, AStepWhoseKernelDoesNotBootIsSkipped) {
  Start(10, 14);
  ASSERT_TRUE(Advance().ok());
  store_->failures[101] = {
      "attempt 1 of 3: lease held through the agent's reboot expired: the job's kernel did not "
      "come back within the boot timeout, so it does not boot on this host (agent lab-1)\n"
      "console (last 1 lines):\nKernel panic - not syncing",
      BuildFailed("c12")};
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 2u);
  EXPECT_EQ(Ids(submitter_.specs[1]), std::vector<std::string>{"c11"});
  EXPECT_EQ(store_->updates.back().steps[0].record.verdict, "skip");
  EXPECT_EQ(EmptyRounds(), 0);
}

TEST_F(BisectDriverSkipTest, OtherFailuresLeaveAStepWithoutValue) {
  Start(10, 14);
  ASSERT_TRUE(Advance().ok());
  store_->failures[101] = {BuildFailed("c12"), "agent lost its lease 3 times"};
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 2u);
  EXPECT_EQ(Ids(submitter_.specs[1]), std::vector<std::string>{"c12"});  // the same commit again
  EXPECT_EQ(store_->updates.back().steps.back().record.verdict, "pending");
  EXPECT_EQ(EmptyRounds(), 1);
}

TEST_F(BisectDriverSkipTest, OnlyUnbuildableCommitsBetweenEndsNamesThemAll) {
  Start(10, 13);
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 1u);
  EXPECT_EQ(Ids(submitter_.specs[0]), std::vector<std::string>{"c11"});
  store_->failures[101] = {BuildFailed("c11")};
  ASSERT_TRUE(Advance().ok());
  ASSERT_EQ(submitter_.specs.size(), 2u);
  EXPECT_EQ(Ids(submitter_.specs[1]), std::vector<std::string>{"c12"});
  store_->failures[102] = {BuildFailed("c12")};
  ASSERT_TRUE(Advance().ok());
  EXPECT_EQ(submitter_.specs.size(), 2u);
  const BisectUpdate& u = store_->updates.back();
  EXPECT_EQ(u.bisect_state, "done");
  EXPECT_EQ(u.last_good, "c10");
  EXPECT_EQ(u.first_bad, "c13");
  EXPECT_EQ(u.culprit_id, "c13");
  const std::string one_of =
      "first bad is one of: c11 c12 c13 (c11 c12 skipped: do not build or boot)";
  EXPECT_EQ(u.culprit_subject, one_of);
  ASSERT_EQ(u.culprits.size(), 1u);
  EXPECT_EQ(u.culprits[0].last_good, "c10");
  EXPECT_EQ(u.culprits[0].culprit.commit_id, "c13");
  EXPECT_EQ(u.culprits[0].subject, one_of);
  std::vector<std::string> skipped;
  for (const BisectUpdate::Step& s : u.steps) {
    if (s.record.verdict == "skip") skipped.push_back(s.record.commit_id);
  }
  EXPECT_EQ(skipped, (std::vector<std::string>{"c11", "c12"}));
}

// Two workloads of one name with other params are two series: a change in
// each is found on its own, not pooled (threads: 1 fell at c16, threads: 16
// at c32; pooled, neither split stands out).
TEST(ParamsSeriesTest, EachParamSetOfAWorkloadIsItsOwnSeries) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{1, "kernels", false, pb::EXECUTOR_EMULATOR, ""});
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 1);
  for (int c = 0; c <= 40; c += 8) {
    for (int r = 0; r < 5; ++r) {
      SampleRow one = Row(1, "c" + std::to_string(c), "strict", r,
                          100 * (c >= 16 ? 0.85 : 1) * (1 + 0.003 * noise(rng)));
      one.commit_index = c;
      one.params = R"({"threads":"1"})";
      store.samples.push_back(one);
      SampleRow many = one;
      many.params = R"({"threads":"16"})";
      many.value = 1600 * (c >= 32 ? 0.6 : 1) * (1 + 0.003 * noise(rng));
      store.samples.push_back(many);
    }
  }
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  (void)analyzer.Tick();
  std::map<std::string, std::string> first_bad;  // params -> first bad commit
  for (const NewRegression& n : store.recorded) first_bad[n.finding.params] = n.finding.first_bad;
  EXPECT_EQ(first_bad, (std::map<std::string, std::string>{{R"({"threads":"1"})", "c16"},
                                                           {R"({"threads":"16"})", "c32"}}));
  for (const NewRegression& n : store.recorded) {
    EXPECT_NE(n.series_key.find(n.finding.params), std::string::npos) << n.series_key;
  }
}

// A nightly matrix of one new commit: its series extend the history the
// farm holds (matrix 1 measured c0..c32), so the drop at c40 is a finding
// between c32 and c40; alone, one commit has no change to find.
TEST(HistoryTest, AMatrixOfOneNewCommitIsJudgedAgainstHistory) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{2, "kernels", true, pb::EXECUTOR_EMULATOR, ""});
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 1);
  for (int c = 0; c <= 40; c += 8) {
    for (int r = 0; r < 5; ++r) {
      SampleRow row = Row(c == 40 ? 2 : 1, "c" + std::to_string(c), "strict", r,
                          1000 * (c == 40 ? 0.8 : 1) * (1 + 0.003 * noise(rng)));
      row.commit_index = c;
      (c == 40 ? store.samples : store.history).push_back(row);
    }
  }
  // Another workload's history is not this matrix's series.
  SampleRow other = store.history.front();
  other.workload = "other";
  other.value = 1;
  store.history.push_back(other);
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  (void)analyzer.Tick();
  ASSERT_EQ(store.recorded.size(), 1u);
  EXPECT_EQ(store.recorded[0].finding.last_good, "c32");
  EXPECT_EQ(store.recorded[0].finding.first_bad, "c40");
  EXPECT_TRUE(store.recorded[0].finding.regression);
  EXPECT_NEAR(store.recorded[0].finding.magnitude, -0.2, 0.01);
}

// History alone raises nothing again: a change between two commits this
// matrix did not measure was the finding of the matrix that measured them.
TEST(HistoryTest, AChangeWithinTheHistoryIsNotThisMatrixsFinding) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{2, "kernels", true, pb::EXECUTOR_EMULATOR, ""});
  for (int c = 0; c <= 40; c += 8) {
    for (int r = 0; r < 5; ++r) {
      SampleRow row =
          Row(c == 40 ? 2 : 1, "c" + std::to_string(c), "strict", r, (c >= 16 ? 800 : 1000) + r);
      row.commit_index = c;
      (c == 40 ? store.samples : store.history).push_back(row);
    }
  }
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  (void)analyzer.Tick();
  EXPECT_TRUE(store.recorded.empty()) << store.recorded[0].finding.first_bad;
}

// The bulk's top-up: a 5% drop at c48 under 5% noise, five runs a commit
// (the bulk of bench/analyzer_quality). Where the first scan is suggestive,
// the analyzer measures the commits around the split again as bulk matrices
// of their own (doubled repeats, a seed of their own, the matrix's
// analysis), and the analysis of each, over all of them, decides. Over 40
// seeded farms the top-ups open the drop as a significant change more often
// than the bulk alone does.
struct TopUpTrial {
  int significant_hits = 0;  // significant findings whose range holds c48
  std::vector<pb::MatrixSpec> top_ups;
};

TopUpTrial RunTopUpTrial(uint64_t seed, const AnalyzerOptions& options) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<SampleRow> rows;
  auto measure = [&](int64_t matrix, const std::vector<std::string>& commits, int repeats) {
    for (const std::string& id : commits) {
      const int c = std::stoi(id.substr(1));
      for (int r = 0; r < repeats; ++r) {
        SampleRow row =
            Row(matrix, id, "strict", r, 1000 * (c >= 48 ? 0.95 : 1) * (1 + 0.05 * noise(rng)));
        row.commit_index = c;
        rows.push_back(row);
      }
    }
  };
  OneBisectStore store("{}");
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, options);
  auto analyse = [&](int64_t matrix) {
    store.samples.clear();
    store.history.clear();
    for (const SampleRow& r : rows)
      (r.matrix_id == matrix ? store.samples : store.history).push_back(r);
    store.matrices.push_back(MatrixInfo{matrix, "kernels", true, pb::EXECUTOR_EMULATOR, ""});
    (void)analyzer.Tick();
  };
  std::vector<std::string> bulk;
  for (int c = 0; c <= 96; c += 8) bulk.push_back("c" + std::to_string(c));
  measure(1, bulk, 5);
  analyse(1);
  // The farm answers every top-up (the submitter numbers them 101, 102 ...).
  for (size_t done = 0; done < submitter.specs.size() && done < 32; ++done) {
    const pb::MatrixSpec& m = submitter.specs[done];
    measure(101 + static_cast<int64_t>(done),
            {m.commit_list().ids().begin(), m.commit_list().ids().end()}, m.repeats());
    analyse(101 + static_cast<int64_t>(done));
  }
  TopUpTrial t;
  t.top_ups = submitter.specs;
  for (const NewRegression& n : store.recorded) {
    const int lg = std::stoi(n.finding.last_good.substr(1));
    const int fb = std::stoi(n.finding.first_bad.substr(1));
    if (lg < 48 && fb >= 48 && n.note.find("suggestive") == std::string::npos) ++t.significant_hits;
  }
  return t;
}

TEST(TopUpTest, SuggestiveSplitsAreMeasuredAgainAndOpenTheChange) {
  int with = 0, without = 0, top_ups = 0;
  AnalyzerOptions off;
  off.detect.max_top_up_factor = 1;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const TopUpTrial t = RunTopUpTrial(seed, AnalyzerOptions{});
    with += t.significant_hits > 0;
    const TopUpTrial b = RunTopUpTrial(seed, off);
    without += b.significant_hits > 0;
    EXPECT_TRUE(b.top_ups.empty()) << "--top-up-max 1 topped up";
    std::set<uint64_t> seeds;
    for (const pb::MatrixSpec& m : t.top_ups) {
      ++top_ups;
      EXPECT_EQ(m.name().rfind("analyzer-t", 0), 0u) << m.name();
      EXPECT_EQ(m.kind(), pb::JOB_KIND_BULK);
      // Doubling the bulk's 5, never past 4x the fewest a commit holds.
      EXPECT_TRUE(m.repeats() % 5 == 0 && m.repeats() <= 20) << m.repeats();
      EXPECT_TRUE(seeds.insert(m.seed()).second) << "two top-ups measure the same values";
      EXPECT_TRUE(m.analysis().bisect());  // the matrix's own analysis
      EXPECT_EQ(Modes(m), (std::vector<int>{pb::IOMMU_MODE_STRICT}));
    }
    // No round beyond 4x the bulk's repeats: at most two per split.
    EXPECT_LE(t.top_ups.size(), 8u) << "seed " << seed;
  }
  EXPECT_GT(top_ups, 40);
  EXPECT_GE(with, without + 6) << with << " with top-ups vs " << without << " without, of 40";
  EXPECT_GE(with, 32);
  std::printf("opened as significant in %d of 40 with top-ups (%d matrices), %d without\n", with,
              top_ups, without);
}

// One pass of a fresh analyzer over `store`; its pass status is not the
// point (this store's one bisect has no state to advance).
void AnalyseOnce(OneBisectStore& store) {
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  (void)analyzer.Tick();
}

// One run per commit over many commits and every mode: no split has two
// samples a side at first, so no scan tries one, and nothing may be read
// from the position a scan never set. The matrix is analysed like any
// other.
TEST(IsolationTest, OneRunPerCommitIsAnalysedLikeAnyMatrix) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{1, "kernels", true, pb::EXECUTOR_EMULATOR, ""});
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 1);
  for (int c = 0; c < 40; ++c) {
    for (const char* mode : {"off", "strict", "lazy", "passthrough"}) {
      SampleRow row = Row(1, "c" + std::to_string(c), mode, 0,
                          1000 * (c >= 30 ? 0.97 : 1) * (1 + 0.01 * noise(rng)));
      row.commit_index = c;
      store.samples.push_back(row);
    }
  }
  AnalyseOnce(store);
  EXPECT_EQ(store.analysed, (std::vector<int64_t>{1}));
  EXPECT_TRUE(store.failed_analysis.empty());
  EXPECT_TRUE(store.skipped.empty());
}

// A series with a sample that is not finite is skipped and named; the
// matrix's other series are judged as if it were not there.
TEST(IsolationTest, APoisonedSeriesIsSkippedAndTheOthersJudged) {
  OneBisectStore store("{}");
  store.matrices.push_back(MatrixInfo{1, "kernels", true, pb::EXECUTOR_EMULATOR, ""});
  for (int c = 0; c <= 40; c += 8) {
    for (int r = 0; r < 5; ++r) {
      for (const char* mode : {"strict", "lazy"}) {
        double v = (c >= 24 ? 800 : 1000) + r;
        if (std::string(mode) == "lazy" && c == 16 && r == 2) v = std::nan("");
        SampleRow row = Row(1, "c" + std::to_string(c), mode, r, v);
        row.commit_index = c;
        store.samples.push_back(row);
      }
    }
  }
  AnalyseOnce(store);
  EXPECT_EQ(store.analysed, (std::vector<int64_t>{1}));
  ASSERT_EQ(store.skipped.size(), 1u);
  EXPECT_NE(store.skipped[0].find("lazy"), std::string::npos) << store.skipped[0];
  EXPECT_NE(store.skipped[0].find("not finite"), std::string::npos) << store.skipped[0];
  ASSERT_EQ(store.recorded.size(), 1u);
  EXPECT_EQ(store.recorded[0].finding.first_bad, "c24");
  for (const auto& e : store.recorded[0].finding.per_mode) EXPECT_NE(e.mode, "lazy");
}

// A matrix whose analysis fails for a reason of its own (here an exception
// from the store) is marked with it and the pass goes on to the next; one
// whose database is away is left for the next pass, unmarked.
TEST(IsolationTest, AFailingMatrixIsMarkedAndThePassGoesOn) {
  OneBisectStore store("{}");
  store.matrices = {MatrixInfo{1, "kernels", true, pb::EXECUTOR_EMULATOR, ""},
                    MatrixInfo{2, "kernels", true, pb::EXECUTOR_EMULATOR, ""},
                    MatrixInfo{3, "kernels", true, pb::EXECUTOR_EMULATOR, ""}};
  store.samples_error[1] = absl::OkStatus();  // throws
  store.samples_error[2] = absl::UnavailableError("connection refused");
  for (int c = 0; c <= 16; c += 8) {
    SampleRow row = Row(3, "c" + std::to_string(c), "strict", 0, 1000);
    row.commit_index = c;
    store.samples.push_back(row);
  }
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, {}, AnalyzerOptions{});
  const absl::Status pass = analyzer.Tick();
  EXPECT_EQ(pass.code(), absl::StatusCode::kInternal) << pass;
  ASSERT_EQ(store.failed_analysis.size(), 1u);
  EXPECT_NE(store.failed_analysis[1].find("store exploded"), std::string::npos)
      << store.failed_analysis[1];
  EXPECT_EQ(store.analysed, (std::vector<int64_t>{3}));
  EXPECT_EQ(analyzer.matrices_failed(), 1);
  EXPECT_EQ(analyzer.matrices_analyzed(), 1);
}

// A restarted analyzer's result gauges come back from the latest analysed
// matrices on its first pass, not only when a new matrix is analysed; each
// series ends at the newest of them.
TEST(ResultGaugesRestoreTest, TheFirstPassRestoresTheLatestResults) {
  OneBisectStore store("{}");
  store.latest = {MatrixInfo{3, "kernels", false, pb::EXECUTOR_EMULATOR, ""},
                  MatrixInfo{5, "kernels", false, pb::EXECUTOR_EMULATOR, ""}};
  for (int r = 0; r < 3; ++r) {
    store.samples.push_back(Row(3, "c1", "strict", r, 100));
    store.samples.push_back(Row(5, "c2", "strict", r, 80));
  }
  prometheus::Registry registry;
  ResultGauges gauges(registry);
  OpenGauges open;
  open.results = &gauges;
  RecordingSubmitter submitter;
  Analyzer analyzer(&store, &submitter, nullptr, open, AnalyzerOptions{});
  (void)analyzer.Tick();  // the store's one bisect has no state to advance
  double latest = -1;
  std::string commit;
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> labels;
      for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
      if (f.name == "farm_result_latest" && labels["mode"] == "strict") latest = m.gauge.value;
      if (f.name == "farm_result_latest_commit_info") commit = labels["commit"];
    }
  }
  EXPECT_EQ(latest, 80);
  EXPECT_EQ(commit, "c2");
}

}  // namespace
}  // namespace farm::analyzer
