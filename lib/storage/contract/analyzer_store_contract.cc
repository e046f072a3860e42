// The analyzer store's contract cases (AnalyzerStoreContractTest,
// repository_contract.h): what every AnalyzerStore must make of the rows the
// scheduler's repositories wrote, and how what it writes reads back through
// AnalysisStore. Each case gets a fresh, empty database.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "lib/storage/contract/repository_contract.h"
#include "lib/storage/contract/test_rows.h"
#include "proto/kernel_offers.h"

namespace farm::storage {

absl::StatusOr<ReportOutcome> AnalyzerStoreContractTest::ReportSamples(
    const pb::RegisterResponse& a, const pb::LeaseRef& l, const std::vector<pb::Sample>& samples) {
  pb::ReportResultRequest r;
  r.set_agent_id(a.agent_id());
  *r.mutable_lease() = l;
  for (const pb::Sample& s : samples) *r.add_samples() = s;
  return queue().ReportResult(r);
}

namespace {

using json = nlohmann::json;

// testrows::Matrix's workload params, as SampleRow.params spells them.
constexpr char kParams[] = R"({"tests":"write,read"})";

// Catalog "c" of testrows::Matrix: commits c0..c{n-1}, "subject <i>",
// "Author <i> <a<i>@example.org>".
void PutCatalog(CatalogStore& catalogs, int n) {
  pb::Catalog c;
  c.set_name("c");
  c.set_source("builtin");
  for (int i = 0; i < n; ++i) {
    pb::CatalogCommit* commit = c.add_commits();
    commit->set_id("c" + std::to_string(i));
    commit->set_subject("subject " + std::to_string(i));
    commit->set_author(absl::StrCat("Author ", i, " <a", i, "@example.org>"));
  }
  auto put = catalogs.PutCatalog(c, false);
  EXPECT_TRUE(put.ok()) << put.status();
}

pb::Sample Sample(const std::string& metric, const std::string& phase, double value) {
  pb::Sample s;
  s.set_metric(metric);
  s.set_phase(phase);
  s.set_unit("MB/s");
  s.set_value(value);
  return s;
}

// A strict throughput/write change of testrows::Matrix's cell between
// commits c<lg> and c<fb> of catalog "c", deduplicated by `series_key`.
NewRegression Found(const std::string& series_key, int lg, int fb, bool regression = true) {
  NewRegression n;
  RegressionFinding& f = n.finding;
  f.platform = "p";
  f.workload = "dma-map-bench";
  f.metric = "throughput/write";
  f.mode = "strict";
  f.change_class = pb::CHANGE_CLASS_IOMMU;
  f.regression = regression;
  f.last_good_index = lg;
  f.last_good = "c" + std::to_string(lg);
  f.first_bad_index = fb;
  f.first_bad = "c" + std::to_string(fb);
  f.magnitude = regression ? -0.2 : 0.2;
  f.p_value = 1e-4;
  f.per_mode = {{"strict", false, 100, 80, -0.2, 1e-4},
                {"off", false, 100, 100, 0, 0.9},
                {"strict", true, 1, 0.8, -0.2, 1e-4}};  // an overhead ratio: not stored
  n.series_key = series_key;
  n.note = "primary metric of dma-map-bench";
  n.primary_metrics = {"throughput"};
  n.bisect_state_json = R"({"phase": "confirm", "seq": 0, "key": ")" + series_key + "\"}";
  return n;
}

bool SameJson(const std::string& a, const std::string& b) {
  const json x = json::parse(a, nullptr, false);
  return !x.is_discarded() && x == json::parse(b, nullptr, false);
}

// A confirmation that moves the bisect's regression to `state`.
BisectUpdate Confirm(int64_t bisect, int64_t regression, pb::RegressionState state) {
  BisectUpdate u;
  u.bisect_id = bisect;
  u.regression_id = regression;
  u.state_json = R"({"phase": "bisect"})";
  u.bisect_state = "running";
  u.regression_state = state;
  return u;
}

// An RFC 3339 UTC time of the last few minutes.
bool Recent(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%SZ", rfc3339, &t, &err)) return false;
  return absl::AbsDuration(absl::Now() - t) < absl::Minutes(5);
}

}  // namespace

int64_t AnalyzerStoreContractTest::AnalysedMatrix(const std::vector<NewRegression>& found,
                                                  std::vector<int64_t>* bisects) {
  PutCatalog(catalogs(), 10);
  const int64_t m = MakeMatrix(2);
  const pb::RegisterResponse a = Register("analysed");
  for (const pb::JobLease& l : Lease(a, 10)) EXPECT_TRUE(Report(a, l.lease()).ok());
  absl::StatusOr<std::vector<int64_t>> b = analyzer().RecordAnalysis(m, "c", found, {});
  EXPECT_TRUE(b.ok()) << b.status();
  if (b.ok()) *bisects = *b;
  return m;
}

namespace {

// The regression a bisect drives.
int64_t RegressionOf(AnalysisStore& analysis, int64_t bisect) {
  absl::StatusOr<pb::Bisect> b = analysis.GetBisect(bisect, 0);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? b->regression_id() : 0;
}

TEST_P(AnalyzerStoreContractTest, SamplesAreTheNumericValuesOfSucceededJobs) {
  NewMatrix nm = testrows::Matrix(3, 1, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  nm.jobs[1].set_mode(pb::IOMMU_MODE_OFF);
  nm.jobs[1].set_repeat(2);
  (*nm.jobs[1].mutable_workload()->mutable_params())["threads"] = "16";
  (*nm.jobs[1].mutable_workload()->mutable_params())["tests"] = "read";
  auto created = matrices().CreateMatrix(nm);
  ASSERT_TRUE(created.ok()) << created.status();
  const int64_t m = created->matrix.id();
  const int64_t other = MakeMatrix(1);
  const pb::RegisterResponse a = Register("a1");
  std::map<int64_t, pb::JobLease> jobs;  // of matrix m, by id
  for (const pb::JobLease& l : Lease(a, 10)) {
    if (l.job().matrix_id() == m) {
      jobs[l.job().id()] = l;
    } else {
      ASSERT_TRUE(Report(a, l.lease()).ok());
    }
  }
  ASSERT_EQ(jobs.size(), 3u);
  auto job = jobs.begin();
  const pb::JobLease j0 = (job++)->second, j1 = (job++)->second, j2 = job->second;
  // The throughput sample carries its run's series (Sample.intervals).
  pb::Sample series = Sample("throughput", "write", 100);
  for (double v : {104.0, 100.5, 95.5}) series.add_intervals(v);
  series.set_interval_seconds(0.05);
  ASSERT_TRUE(
      ReportSamples(a, j0.lease(),
                    {series, Sample("latency", "", 5.5), Sample("broken", "", std::nan(""))})
          .ok());
  // j1 ran in an instruction-timed guest: its rows carry that timing.
  pb::ReportResultRequest guest;
  guest.set_agent_id(a.agent_id());
  *guest.mutable_lease() = j1.lease();
  *guest.add_samples() = Sample("throughput", "read", 200);
  guest.mutable_host()->mutable_guest()->set_accel("tcg-icount");
  guest.mutable_host()->mutable_guest()->set_icount_shift(7);
  ASSERT_TRUE(queue().ReportResult(guest).ok());
  ASSERT_TRUE(Fail(a, j2.lease(), "no value", false).ok());

  absl::StatusOr<std::vector<SampleRow>> rows = analyzer().Samples({m});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);  // the NaN and the failed job give none
  EXPECT_TRUE(std::is_sorted(
      rows->begin(), rows->end(),
      [](const SampleRow& x, const SampleRow& y) { return x.sample_id < y.sample_id; }));
  std::sort(rows->begin(), rows->end(), [](const SampleRow& x, const SampleRow& y) {
    return std::tie(x.sample_id, x.metric) < std::tie(y.sample_id, y.metric);
  });
  const SampleRow& lat = (*rows)[0];
  EXPECT_EQ(lat.sample_id, j0.job().id());
  EXPECT_EQ(lat.matrix_id, m);
  EXPECT_EQ(lat.catalog, "c");
  EXPECT_EQ(lat.commit_id, "c0");
  EXPECT_EQ(lat.commit_index, 0);
  EXPECT_EQ(lat.platform, "p");
  EXPECT_EQ(lat.workload, "dma-map-bench");
  EXPECT_EQ(lat.mode, "strict");
  EXPECT_EQ(lat.metric, "latency");
  EXPECT_EQ(lat.phase, "");
  EXPECT_EQ(lat.unit, "MB/s");
  EXPECT_EQ(lat.value, 5.5);
  EXPECT_EQ(lat.timing, "");  // no guest
  EXPECT_EQ(lat.params, kParams);
  EXPECT_EQ((*rows)[1].metric, "throughput");
  EXPECT_EQ((*rows)[1].phase, "write");
  EXPECT_EQ((*rows)[1].value, 100);
  EXPECT_EQ((*rows)[1].intervals, (std::vector<double>{104.0, 100.5, 95.5}));
  EXPECT_TRUE(lat.intervals.empty());
  const SampleRow& off = (*rows)[2];
  EXPECT_EQ(off.sample_id, j1.job().id());
  EXPECT_EQ(off.commit_id, "c1");
  EXPECT_EQ(off.commit_index, 1);
  EXPECT_EQ(off.mode, "off");
  EXPECT_EQ(off.repeat, 2);
  EXPECT_EQ(off.value, 200);
  EXPECT_EQ(off.timing, "tcg-icount shift 7");
  EXPECT_EQ(off.params, R"({"tests":"read","threads":"16"})");  // keys sorted, as MapToJson

  EXPECT_EQ(analyzer().Samples({m, other})->size(), 4u);
  EXPECT_TRUE(analyzer().Samples({})->empty());
}

// A real run on the host itself carries the host's measurement hygiene as
// its timing: another governor, turbo, SMT or binding, or the kernel's event
// counters on, is another series. An emulator run's figures do not depend on
// the agent's host: no timing.
TEST_P(AnalyzerStoreContractTest, RealRunsCarryTheirHostsHygieneAsTiming) {
  auto created =
      matrices().CreateMatrix(testrows::Matrix(4, 1, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK));
  ASSERT_TRUE(created.ok()) << created.status();
  const int64_t real = created->matrix.id();
  const int64_t emu = MakeMatrix(1);
  auto report = [&](const pb::RegisterResponse& a, const pb::JobLease& l,
                    const std::string& governor, const std::string& counters = "") {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = l.lease();
    *r.add_samples() = Sample("iops", "read", 1000);
    pb::Hygiene* h = r.mutable_host()->mutable_hygiene();
    h->set_governor(governor);
    h->set_turbo("off");
    h->set_smt("on");
    h->set_cpus_allowed("0-3");
    h->set_mems_allowed("0");
    h->set_kernel_counters(counters);
    ASSERT_TRUE(queue().ReportResult(r).ok());
  };
  const pb::RegisterResponse fio = Register("fio-host", "fio");
  const std::vector<pb::JobLease> leased = Lease(fio, 10);
  ASSERT_EQ(leased.size(), 4u);
  report(fio, leased[0], "performance");
  report(fio, leased[1], "powersave");
  report(fio, leased[2], "performance", "on");
  // A guest's run is timed by its clock; the counters still set it apart.
  pb::ReportResultRequest guest;
  guest.set_agent_id(fio.agent_id());
  *guest.mutable_lease() = leased[3].lease();
  *guest.add_samples() = Sample("iops", "read", 1000);
  guest.mutable_host()->mutable_guest()->set_accel("tcg-icount");
  guest.mutable_host()->mutable_guest()->set_icount_shift(7);
  guest.mutable_host()->mutable_hygiene()->set_kernel_counters("on");
  ASSERT_TRUE(queue().ReportResult(guest).ok());
  const pb::RegisterResponse e = Register("emu-host");
  for (const pb::JobLease& l : Lease(e, 10)) report(e, l, "performance");

  absl::StatusOr<std::vector<SampleRow>> rows = analyzer().Samples({real});
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> timings;
  for (const SampleRow& r : *rows) timings.insert(r.timing);
  EXPECT_EQ(timings, (std::set<std::string>{
                         "governor=performance turbo=off smt=on cpus=0-3 mems=0",
                         "governor=powersave turbo=off smt=on cpus=0-3 mems=0",
                         "governor=performance turbo=off smt=on cpus=0-3 mems=0 kernel-counters=on",
                         "tcg-icount shift 7 kernel-counters=on"}));
  absl::StatusOr<std::vector<SampleRow>> emu_rows = analyzer().Samples({emu});
  ASSERT_TRUE(emu_rows.ok() && !emu_rows->empty());
  for (const SampleRow& r : *emu_rows) EXPECT_EQ(r.timing, "");
}

// Two results of one host whose IOMMU environments differ (another
// firmware, a VT-d caching mode, a group's domain type) never share a
// series; a result without an environment (recorded before there was one)
// keeps the series it had.
TEST_P(AnalyzerStoreContractTest, AnotherIommuEnvironmentIsAnotherSeries) {
  auto created =
      matrices().CreateMatrix(testrows::Matrix(3, 1, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK));
  ASSERT_TRUE(created.ok()) << created.status();
  const int64_t m = created->matrix.id();
  const pb::RegisterResponse fio = Register("fio-host", "fio");
  const std::vector<pb::JobLease> leased = Lease(fio, 10);
  ASSERT_EQ(leased.size(), 3u);
  const std::string digests[] = {std::string(64, 'a'), std::string(64, 'b'), ""};
  for (size_t i = 0; i < leased.size(); ++i) {
    pb::ReportResultRequest r;
    r.set_agent_id(fio.agent_id());
    *r.mutable_lease() = leased[i].lease();
    *r.add_samples() = Sample("iops", "read", 1000);
    r.mutable_host()->set_hostname("fio-host");
    r.mutable_host()->mutable_hygiene()->set_governor("performance");
    if (!digests[i].empty()) {
      pb::IommuEnvironment* env = r.mutable_host()->mutable_iommu_environment();
      (*env->mutable_facts())["device/0000:00:04.0/domain"] = i == 0 ? "DMA-FQ" : "identity";
      env->set_digest(digests[i]);
    }
    ASSERT_TRUE(queue().ReportResult(r).ok());
  }
  absl::StatusOr<std::vector<SampleRow>> rows = analyzer().Samples({m});
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> timings;
  for (const SampleRow& r : *rows) timings.insert(r.timing);
  EXPECT_EQ(timings, (std::set<std::string>{"governor=performance iommu-env=aaaaaaaaaaaa",
                                            "governor=performance iommu-env=bbbbbbbbbbbb",
                                            "governor=performance"}));
}

// A result that states the mode its kernel really ran for the job's (the
// emulator's modelled kernel, a guest) carries it as one more sample; one
// that does not (the host's own facts only) carries none.
TEST_P(AnalyzerStoreContractTest, AStatedEffectiveModeIsASampleOfItsResult) {
  const int64_t m = MakeMatrix(2);
  const pb::RegisterResponse a = Register("emu-host");
  const std::vector<pb::JobLease> leased = Lease(a, 10);
  ASSERT_EQ(leased.size(), 2u);
  for (size_t i = 0; i < leased.size(); ++i) {
    pb::ReportResultRequest r;
    r.set_agent_id(a.agent_id());
    *r.mutable_lease() = leased[i].lease();
    *r.add_samples() = Sample("throughput", "", 100);
    r.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
    if (i == 0) {
      r.mutable_host()->mutable_guest()->set_provider("emulator");
      r.mutable_host()->mutable_guest()->set_requested_mode(pb::IOMMU_MODE_LAZY);
    }
    ASSERT_TRUE(queue().ReportResult(r).ok());
  }
  absl::StatusOr<std::vector<SampleRow>> rows = analyzer().Samples({m});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  int modes = 0;
  for (const SampleRow& r : *rows) {
    if (r.metric != kEffectiveModeMetric) continue;
    ++modes;
    EXPECT_EQ(r.sample_id, leased[0].job().id());
    EXPECT_EQ(r.value, pb::IOMMU_MODE_STRICT);
    EXPECT_EQ(r.phase, "");
  }
  EXPECT_EQ(modes, 1);
}

TEST_P(AnalyzerStoreContractTest, MatricesAreTerminalWhenEveryJobIs) {
  const int64_t m = MakeMatrix(2, 1);
  const int64_t n = MakeMatrix(1);
  EXPECT_FALSE(*analyzer().MatricesTerminal({m}));
  const pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> of_m;
  pb::LeaseRef of_n;
  for (const pb::JobLease& l : Lease(a, 10)) {
    if (l.job().matrix_id() == m) of_m.push_back(l);
    if (l.job().matrix_id() == n) of_n = l.lease();
  }
  ASSERT_EQ(of_m.size(), 2u);
  EXPECT_FALSE(*analyzer().MatricesTerminal({m}));  // leased
  ASSERT_TRUE(Report(a, of_m[0].lease()).ok());
  EXPECT_FALSE(*analyzer().MatricesTerminal({m}));
  ASSERT_TRUE(Fail(a, of_m[1].lease(), "gone", false).ok());
  EXPECT_TRUE(*analyzer().MatricesTerminal({m}));
  EXPECT_FALSE(*analyzer().MatricesTerminal({m, n}));
  EXPECT_TRUE(*analyzer().MatricesTerminal({}));
  ASSERT_TRUE(Report(a, of_n).ok());
  EXPECT_TRUE(*analyzer().MatricesTerminal({m, n}));
}

TEST_P(AnalyzerStoreContractTest, FailureReasonsAreThoseOfFailedJobsInJobOrder) {
  const int64_t m = MakeMatrix(3, 2);
  const int64_t other = MakeMatrix(1);
  const pb::RegisterResponse a = Register("a1");
  std::vector<pb::JobLease> ls;
  for (const pb::JobLease& l : Lease(a, 10)) {
    if (l.job().matrix_id() == m) ls.push_back(l);
  }
  ASSERT_EQ(ls.size(), 3u);
  std::sort(ls.begin(), ls.end(), [](const pb::JobLease& x, const pb::JobLease& y) {
    return x.job().id() < y.job().id();
  });
  EXPECT_EQ(*Fail(a, ls[2].lease(), "build failed at c2: error: x", false), pb::JOB_STATE_FAILED);
  EXPECT_EQ(*Fail(a, ls[0].lease(), "oops", false), pb::JOB_STATE_FAILED);
  // Retried: not failed (yet).
  EXPECT_EQ(*Fail(a, ls[1].lease(), "transient", true), pb::JOB_STATE_QUEUED);
  absl::StatusOr<std::vector<std::string>> reasons = analyzer().FailureReasons({m});
  ASSERT_TRUE(reasons.ok()) << reasons.status();
  // The queue's reason, which names the attempt before the agent's words.
  ASSERT_EQ(reasons->size(), 2u);
  EXPECT_TRUE(absl::EndsWith((*reasons)[0], "oops")) << (*reasons)[0];
  EXPECT_TRUE(absl::EndsWith((*reasons)[1], "build failed at c2: error: x")) << (*reasons)[1];
  EXPECT_TRUE(analyzer().FailureReasons({other})->empty());
}

TEST_P(AnalyzerStoreContractTest, CommitsOfACatalogRangeAndItsLatest) {
  PutCatalog(catalogs(), 5);
  absl::StatusOr<std::vector<CommitRow>> range = analyzer().Commits("c", 1, 3);
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*range)[i].index, i + 1);
    EXPECT_EQ((*range)[i].id, "c" + std::to_string(i + 1));
    EXPECT_EQ((*range)[i].subject, "subject " + std::to_string(i + 1));
  }
  EXPECT_EQ(analyzer().Commits("c", 3, 99)->size(), 2u);
  EXPECT_EQ(analyzer().Commits("c", 7, 9).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(analyzer().Commits("nope", 0, 1).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<CommitRow> latest = analyzer().LatestCommit("c");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->index, 4);
  EXPECT_EQ(latest->id, "c4");
  EXPECT_EQ(latest->subject, "subject 4");
  EXPECT_EQ(analyzer().LatestCommit("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_P(AnalyzerStoreContractTest, CellIsTheFirstJobOfItsCellWithTheSpecsSet) {
  NewMatrix nm = testrows::Matrix(3, 3, 0, pb::EXECUTOR_FIO, pb::JOB_KIND_BULK);
  nm.matrix.set_spec_yaml("name: m\nset:\n  agent.hold_ms: \"5\"\nlabels:\n  nic: cx6\n");
  nm.jobs[0].set_platform("q");
  (*nm.jobs[1].mutable_workload()->mutable_params())["tests"] = "read";
  (*nm.jobs[1].mutable_model_set())["commit.key"] = "1";  // the catalog's: not carried
  auto created = matrices().CreateMatrix(nm);
  ASSERT_TRUE(created.ok()) << created.status();
  const int64_t m = created->matrix.id();
  absl::StatusOr<SeriesSpec> cell = analyzer().Cell(m, "p", "dma-map-bench", R"({"tests":"read"})");
  ASSERT_TRUE(cell.ok()) << cell.status();
  EXPECT_EQ(cell->catalog, "c");
  EXPECT_EQ(cell->platform, "p");
  EXPECT_EQ(cell->workload, "dma-map-bench");
  EXPECT_EQ(cell->executor, pb::EXECUTOR_FIO);
  EXPECT_TRUE(SameJson(cell->params_json, R"({"tests": "read"})")) << cell->params_json;
  EXPECT_TRUE(SameJson(cell->model_set_json, R"({"agent.hold_ms": "5"})")) << cell->model_set_json;
  EXPECT_TRUE(SameJson(cell->labels_json, R"({"nic": "cx6"})")) << cell->labels_json;
  // The same workload with other params is another cell.
  absl::StatusOr<SeriesSpec> other = analyzer().Cell(m, "p", "dma-map-bench", kParams);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(SameJson(other->params_json, kParams)) << other->params_json;
  EXPECT_EQ(analyzer().Cell(m, "p", "dma-map-bench", R"({"tests":"reread"})").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(analyzer().Cell(m, "p", "fio", kParams).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(analyzer().Cell(m + 100, "p", "dma-map-bench", kParams).status().code(),
            absl::StatusCode::kNotFound);
  const int64_t plain = MakeMatrix(1);  // spec without `set:`
  EXPECT_TRUE(
      SameJson(analyzer().Cell(plain, "p", "dma-map-bench", kParams)->model_set_json, "{}"));
}

TEST_P(AnalyzerStoreContractTest, TerminalBulkMatricesAreAnalysedOnce) {
  NewMatrix bulk = testrows::Matrix(1, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  bulk.analysis_bisect = true;
  bulk.matrix.set_spec_yaml("name: m\nanalysis:\n  bisect: true\n");
  auto created = matrices().CreateMatrix(bulk);
  ASSERT_TRUE(created.ok()) << created.status();
  const int64_t m1 = created->matrix.id();
  const int64_t m2 = MakeMatrix(1);
  const int64_t m3 = MakeMatrix(1, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_CONFIRM);
  const pb::RegisterResponse a = Register("a1");
  pb::LeaseRef of_m2;
  for (const pb::JobLease& l : Lease(a, 10)) {
    if (l.job().matrix_id() == m2) {
      of_m2 = l.lease();
    } else {
      ASSERT_TRUE(Report(a, l.lease()).ok());
    }
  }
  // m2 is still running; m3 has no bulk job.
  absl::StatusOr<std::vector<MatrixInfo>> todo = analyzer().MatricesToAnalyze();
  ASSERT_TRUE(todo.ok()) << todo.status();
  ASSERT_EQ(todo->size(), 1u);
  const MatrixInfo& info = todo->front();
  EXPECT_EQ(info.id, m1);
  EXPECT_EQ(info.catalog, "c");
  EXPECT_TRUE(info.analysis_bisect);
  EXPECT_EQ(info.executor, pb::EXECUTOR_EMULATOR);
  EXPECT_EQ(info.spec_yaml, "name: m\nanalysis:\n  bisect: true\n");

  absl::StatusOr<std::vector<int64_t>> none = analyzer().RecordAnalysis(m1, "c", {}, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_TRUE(analyzer().MatricesToAnalyze()->empty());
  EXPECT_EQ(analyzer().RecordAnalysis(m1, "c", {}, {}).status().code(),
            absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE(Report(a, of_m2).ok());
  todo = analyzer().MatricesToAnalyze();
  ASSERT_TRUE(todo.ok()) << todo.status();
  ASSERT_EQ(todo->size(), 1u);
  EXPECT_EQ(todo->front().id, m2);
  EXPECT_FALSE(todo->front().analysis_bisect);
  (void)m3;
}

// A matrix whose analysis cannot finish is marked with its reason, read no
// more, and shown in Matrix.analysis; so are the series an analysis skipped.
TEST_P(AnalyzerStoreContractTest, AnalysisOutcomeIsRecordedOnceAndShown) {
  PutCatalog(catalogs(), 10);
  const int64_t poisoned = MakeMatrix(1);
  const int64_t partial = MakeMatrix(1);
  const pb::RegisterResponse a = Register("a1");
  for (const pb::JobLease& l : Lease(a, 10)) ASSERT_TRUE(Report(a, l.lease()).ok());
  EXPECT_EQ(matrices().GetMatrix(poisoned)->analysis(), "");
  ASSERT_EQ(analyzer().MatricesToAnalyze()->size(), 2u);

  ASSERT_TRUE(analyzer().RecordAnalysisFailure(poisoned, "detector: split outside").ok());
  EXPECT_EQ(analyzer().RecordAnalysisFailure(poisoned, "again").code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(analyzer().RecordAnalysis(poisoned, "c", {}, {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  absl::StatusOr<std::vector<MatrixInfo>> todo = analyzer().MatricesToAnalyze();
  ASSERT_TRUE(todo.ok()) << todo.status();
  ASSERT_EQ(todo->size(), 1u);
  EXPECT_EQ(todo->front().id, partial);
  EXPECT_EQ(matrices().GetMatrix(poisoned)->analysis(), "failed: detector: split outside");

  ASSERT_TRUE(analyzer()
                  .RecordAnalysis(partial, "c", {Found("k1", 2, 5)},
                                  {"p fio iops strict: sample nan is not finite", "p fio x: y"})
                  .ok());
  EXPECT_TRUE(analyzer().MatricesToAnalyze()->empty());
  EXPECT_EQ(matrices().GetMatrix(partial)->analysis(),
            "1 finding; 2 series skipped: p fio iops strict: sample nan is not finite "
            "(and 1 more)");
  absl::StatusOr<std::vector<pb::Matrix>> listed = matrices().ListMatrices(10, 0);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ(listed->back().analysis(), "failed: detector: split outside");
}

// What a restarted analyzer replays into its result gauges: per (platform,
// workload) the newest analysed bulk matrix; not a newer one still to be
// analysed, nor a confirmation matrix.
TEST_P(AnalyzerStoreContractTest, LatestAnalysedMatricesAreTheNewestPerCell) {
  auto on = [&](const std::string& platform, pb::JobKind kind) {
    NewMatrix m = testrows::Matrix(1, 3, 0, pb::EXECUTOR_EMULATOR, kind);
    for (pb::Job& j : m.jobs) j.set_platform(platform);
    auto created = matrices().CreateMatrix(m);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->matrix.id() : 0;
  };
  const int64_t p_old = on("p", pb::JOB_KIND_BULK);
  const int64_t q = on("q", pb::JOB_KIND_BULK);
  const int64_t p_new = on("p", pb::JOB_KIND_BULK);
  const int64_t p_unanalysed = on("p", pb::JOB_KIND_BULK);
  const int64_t confirm = on("r", pb::JOB_KIND_CONFIRM);
  const pb::RegisterResponse a = Register("a1");
  for (const pb::JobLease& l : Lease(a, 10)) ASSERT_TRUE(Report(a, l.lease()).ok());
  for (int64_t m : {p_old, q, p_new}) {
    ASSERT_TRUE(analyzer().RecordAnalysis(m, "c", {}, {}).ok());
  }
  absl::StatusOr<std::vector<MatrixInfo>> latest = analyzer().LatestAnalysedMatrices();
  ASSERT_TRUE(latest.ok()) << latest.status();
  std::vector<int64_t> ids;
  for (const MatrixInfo& m : *latest) ids.push_back(m.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{q, p_new}));
  ASSERT_FALSE(latest->empty());
  EXPECT_EQ(latest->front().catalog, "c");
  (void)p_unanalysed;
  (void)confirm;
}

// The history a matrix's series extend: samples of the same cell (platform,
// workload, params) in the other analysed bulk matrices of the catalog and
// executor; not of a matrix still to be analysed, a confirmation matrix,
// another cell or the matrix itself.
TEST_P(AnalyzerStoreContractTest, HistoryIsTheSameCellInOtherAnalysedBulkMatrices) {
  auto make = [&](const std::string& platform, pb::JobKind kind, const std::string& tests) {
    NewMatrix m = testrows::Matrix(2, 3, 0, pb::EXECUTOR_EMULATOR, kind);
    for (pb::Job& j : m.jobs) {
      j.set_platform(platform);
      (*j.mutable_workload()->mutable_params())["tests"] = tests;
    }
    auto created = matrices().CreateMatrix(m);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->matrix.id() : 0;
  };
  const int64_t old = make("p", pb::JOB_KIND_BULK, "write,read");
  const int64_t newer = make("p", pb::JOB_KIND_BULK, "write,read");
  const int64_t other_params = make("p", pb::JOB_KIND_BULK, "read");
  const int64_t other_platform = make("q", pb::JOB_KIND_BULK, "write,read");
  const int64_t confirm = make("p", pb::JOB_KIND_CONFIRM, "write,read");
  const int64_t now = make("p", pb::JOB_KIND_BULK, "write,read");
  const int64_t later = make("p", pb::JOB_KIND_BULK, "write,read");  // not analysed yet
  // Other model keys (`set:`) measure something else.
  NewMatrix tried = testrows::Matrix(2, 3, 0, pb::EXECUTOR_EMULATOR, pb::JOB_KIND_BULK);
  tried.matrix.set_spec_yaml("name: m\nset:\n  fq.kind: percpu\n");
  tried.model_set["fq.kind"] = "percpu";
  auto created_tried = matrices().CreateMatrix(tried);
  ASSERT_TRUE(created_tried.ok()) << created_tried.status();
  const int64_t with_set = created_tried->matrix.id();
  const pb::RegisterResponse a = Register("a1");
  for (const pb::JobLease& l : Lease(a, 20)) {
    ASSERT_TRUE(Report(a, l.lease(), static_cast<double>(l.job().matrix_id())).ok());
  }
  for (int64_t m : {old, newer, other_params, other_platform, confirm, now, with_set}) {
    ASSERT_TRUE(analyzer().RecordAnalysis(m, "c", {}, {}).ok());
  }
  const std::vector<HistoryCell> cells = {{"p", "dma-map-bench", kParams}};
  absl::StatusOr<std::vector<SampleRow>> h =
      analyzer().HistorySamples("c", pb::EXECUTOR_EMULATOR, cells, now, 10);
  ASSERT_TRUE(h.ok()) << h.status();
  std::set<int64_t> from;
  for (const SampleRow& r : *h) {
    from.insert(r.matrix_id);
    EXPECT_EQ(r.value, static_cast<double>(r.matrix_id));
    EXPECT_EQ(r.params, kParams);
  }
  EXPECT_EQ(from, (std::set<int64_t>{old, newer}));
  EXPECT_EQ(h->size(), 4u);  // both commits of each
  // At most the newest one.
  absl::StatusOr<std::vector<SampleRow>> last =
      analyzer().HistorySamples("c", pb::EXECUTOR_EMULATOR, cells, now, 1);
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->size(), 2u);
  EXPECT_EQ(last->front().matrix_id, newer);
  EXPECT_TRUE(analyzer().HistorySamples("d", pb::EXECUTOR_EMULATOR, cells, now, 10)->empty());
  EXPECT_TRUE(analyzer().HistorySamples("c", pb::EXECUTOR_FIO, cells, now, 10)->empty());
  (void)later;
}

TEST_P(AnalyzerStoreContractTest, RecordedFindingsReadBackAsRegressionsWithRunningBisects) {
  std::vector<int64_t> bisects;
  const int64_t m = AnalysedMatrix({Found("k1", 2, 5), Found("k2", 1, 3, false)}, &bisects);
  ASSERT_EQ(bisects.size(), 2u);
  absl::StatusOr<std::vector<ActiveBisect>> active = analyzer().ActiveBisects();
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].bisect_id, bisects[0]);
  EXPECT_EQ((*active)[1].bisect_id, bisects[1]);
  EXPECT_TRUE(SameJson((*active)[0].state_json, Found("k1", 2, 5).bisect_state_json))
      << (*active)[0].state_json;

  absl::StatusOr<pb::Bisect> b = analysis().GetBisect(bisects[0], 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state(), "running");
  EXPECT_EQ(b->last_good(), "c2");
  EXPECT_EQ(b->first_bad(), "c5");
  EXPECT_EQ(b->regression_id(), (*active)[0].regression_id);
  absl::StatusOr<pb::Regression> g = analysis().GetRegression(b->regression_id());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), pb::REGRESSION_STATE_SUSPECTED);
  EXPECT_EQ(g->direction(), pb::CHANGE_DIRECTION_REGRESSION);
  EXPECT_EQ(g->change_class(), pb::CHANGE_CLASS_IOMMU);
  EXPECT_EQ(g->platform(), "p");
  EXPECT_EQ(g->workload(), "dma-map-bench");
  EXPECT_EQ(g->metric(), "throughput/write");
  EXPECT_EQ(g->mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_FALSE(g->overhead_series());
  EXPECT_EQ(g->catalog(), "c");
  EXPECT_EQ(g->last_good(), "c2");
  EXPECT_EQ(g->first_bad(), "c5");
  EXPECT_EQ(g->magnitude(), -0.2);
  EXPECT_EQ(g->p_value(), 1e-4);
  EXPECT_EQ(g->bisect_id(), bisects[0]);
  EXPECT_EQ(g->matrix_id(), m);
  EXPECT_EQ(g->note(), "primary metric of dma-map-bench");
  EXPECT_EQ(g->metric_rank(), "primary");
  ASSERT_EQ(g->primary_metrics_size(), 1);
  EXPECT_EQ(g->primary_metrics(0), "throughput");
  ASSERT_EQ(g->per_mode_size(), 2);  // the overhead ratio is not kept
  EXPECT_EQ(g->per_mode(0).mode(), pb::IOMMU_MODE_STRICT);
  EXPECT_EQ(g->per_mode(0).before(), 100);
  EXPECT_EQ(g->per_mode(0).after(), 80);
  EXPECT_EQ(g->per_mode(0).relative_change(), -0.2);
  EXPECT_EQ(g->per_mode(0).p_value(), 1e-4);
  EXPECT_EQ(g->per_mode(1).mode(), pb::IOMMU_MODE_OFF);
  absl::StatusOr<pb::Regression> improvement =
      analysis().GetRegression(RegressionOf(analysis(), bisects[1]));
  ASSERT_TRUE(improvement.ok()) << improvement.status();
  EXPECT_EQ(improvement->direction(), pb::CHANGE_DIRECTION_IMPROVEMENT);
}

TEST_P(AnalyzerStoreContractTest, OpenAndIgnoredChangesAreNotRecordedAgain) {
  std::vector<int64_t> first;
  AnalysedMatrix({Found("k1", 2, 5)}, &first);
  ASSERT_EQ(first.size(), 1u);
  const int64_t m2 = MakeMatrix(1), m3 = MakeMatrix(1), m4 = MakeMatrix(1);
  // Open under the same key.
  EXPECT_TRUE(analyzer().RecordAnalysis(m2, "c", {Found("k1", 2, 5)}, {})->empty());

  ASSERT_TRUE(analysis()
                  .UpdateRegression(RegressionOf(analysis(), first[0]),
                                    pb::REGRESSION_STATE_IGNORED, "noise")
                  .ok());
  // Overlapping the ignored (c2, c5]: skipped; adjacent to it, or the other
  // direction: recorded.
  absl::StatusOr<std::vector<int64_t>> later = analyzer().RecordAnalysis(
      m3, "c", {Found("k1b", 3, 6), Found("k2", 5, 8), Found("k3", 3, 4, false)}, {});
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_EQ(later->size(), 2u);
  EXPECT_EQ(analysis().GetBisect((*later)[0], 0)->first_bad(), "c8");
  EXPECT_EQ(analysis().GetBisect((*later)[1], 0)->first_bad(), "c4");
  // The ignored one's key is free again; one call records a key once. The
  // open (c5, c8] change found again, now led by another mode over a
  // narrower range, joins it.
  NewRegression lazy = Found("k4", 6, 7);
  lazy.finding.mode = "lazy";
  absl::StatusOr<std::vector<int64_t>> again =
      analyzer().RecordAnalysis(m4, "c", {Found("k1", 8, 9), Found("k1", 8, 9), lazy}, {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size(), 1u);
}

// A decay is one commit's runs: recorded confirmed with a bisect that is
// done from the start (nothing drives it), deduplicated by its own key
// only, and neither merged into an overlapping change nor keeping one out.
TEST_P(AnalyzerStoreContractTest, DecaysAreConfirmedWithADoneBisectAndStandApart) {
  std::vector<int64_t> first;
  AnalysedMatrix({Found("change", 2, 5)}, &first);
  ASSERT_EQ(first.size(), 1u);
  NewRegression decay = Found("decay|c4", 4, 4);
  decay.kind = "decay";
  decay.state = pb::REGRESSION_STATE_CONFIRMED;
  const int64_t m2 = MakeMatrix(1), m3 = MakeMatrix(1);
  absl::StatusOr<std::vector<int64_t>> recorded =
      analyzer().RecordAnalysis(m2, "c", {decay, decay}, {});
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_EQ(recorded->size(), 1u);  // inside the open (c2, c5], and once per key
  absl::StatusOr<pb::Bisect> b = analysis().GetBisect((*recorded)[0], 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state(), "done");
  absl::StatusOr<pb::Regression> g = analysis().GetRegression(b->regression_id());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kind(), "decay");
  EXPECT_EQ(g->state(), pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(g->last_good(), "c4");
  EXPECT_EQ(g->first_bad(), "c4");
  absl::StatusOr<pb::Regression> change =
      analysis().GetRegression(RegressionOf(analysis(), first[0]));
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->kind(), "change");
  absl::StatusOr<std::vector<ActiveBisect>> active = analyzer().ActiveBisects();
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].bisect_id, first[0]);
  // A change over the decay's commit is not kept out by it.
  absl::StatusOr<std::vector<int64_t>> later =
      analyzer().RecordAnalysis(m3, "c", {Found("change-b", 3, 6, false)}, {});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->size(), 1u);
  absl::StatusOr<std::vector<AlertWork>> alerts = analyzer().AlertCandidates(absl::Minutes(15));
  ASSERT_TRUE(alerts.ok()) << alerts.status();
  ASSERT_EQ(alerts->size(), 1u);  // the confirmed decay; the suspected change is not alerted
  EXPECT_EQ((*alerts)[0].kind, "decay");
}

TEST_P(AnalyzerStoreContractTest, RegressionGroupsGatherOverlappingFindingsAndSplit) {
  // Two findings of one new group over (c2, c6] and (c3, c8]: the group
  // holds the overlap (c3, c6]; another new group; an improvement in none.
  NewRegression a = Found("k1", 2, 6), b = Found("k2", 3, 8), c = Found("k3", 7, 9);
  b.finding.platform = "q";
  c.finding.platform = "r";
  a.group_id = b.group_id = -1;
  c.group_id = -2;
  a.strength = 5;
  b.strength = 9;
  std::vector<int64_t> bisects;
  AnalysedMatrix({a, b, c, Found("k4", 1, 2, false)}, &bisects);
  ASSERT_EQ(bisects.size(), 4u);
  const int64_t ra = RegressionOf(analysis(), bisects[0]);
  const int64_t rb = RegressionOf(analysis(), bisects[1]);
  absl::StatusOr<std::vector<RegressionGroup>> open = analyzer().OpenGroups("c", absl::Hours(1));
  ASSERT_TRUE(open.ok()) << open.status();
  ASSERT_EQ(open->size(), 2u);
  const RegressionGroup g = (*open)[0];
  EXPECT_EQ(g.catalog, "c");
  EXPECT_EQ(g.last_good, "c3");
  EXPECT_EQ(g.last_good_index, 3);
  EXPECT_EQ(g.first_bad, "c6");
  EXPECT_EQ(g.first_bad_index, 6);
  EXPECT_EQ(g.state, "open");
  EXPECT_EQ(g.leader_id, 0);
  EXPECT_LT(absl::AbsDuration(absl::Now() - g.opened_at), absl::Minutes(5));
  ASSERT_EQ(g.members.size(), 2u);
  EXPECT_EQ(g.members[0].regression_id, ra);
  EXPECT_EQ(g.members[0].strength, 5);
  EXPECT_EQ(g.members[1].regression_id, rb);
  EXPECT_EQ(g.members[1].last_good_index, 3);
  EXPECT_EQ(g.members[1].first_bad, "c8");
  EXPECT_EQ(g.members[1].first_bad_index, 8);
  EXPECT_EQ(g.members[1].bisect_state, "running");
  EXPECT_EQ(g.members[1].state, pb::REGRESSION_STATE_SUSPECTED);
  EXPECT_EQ((*open)[1].members.size(), 1u);
  EXPECT_EQ(analysis().GetRegression(ra)->group_id(), g.id);
  EXPECT_TRUE(absl::IsNotFound(analyzer().GroupOf(RegressionOf(analysis(), bisects[3])).status()));

  // A later finding joins it by id and narrows it to (c4, c6].
  NewRegression e = Found("k5", 4, 9);
  e.finding.platform = "s";
  e.group_id = g.id;
  absl::StatusOr<std::vector<int64_t>> joined =
      analyzer().RecordAnalysis(MakeMatrix(1), "c", {e}, {});
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->size(), 1u);
  const int64_t re = RegressionOf(analysis(), (*joined)[0]);
  absl::StatusOr<RegressionGroup> of = analyzer().GroupOf(re);
  ASSERT_TRUE(of.ok()) << of.status();
  EXPECT_EQ(of->id, g.id);
  EXPECT_EQ(of->last_good, "c4");
  EXPECT_EQ(of->first_bad, "c6");
  EXPECT_EQ(of->members.size(), 3u);
  pb::ListRegressionsRequest lr;
  lr.set_group_id(g.id);
  absl::StatusOr<std::vector<pb::Regression>> listed = analysis().ListRegressions(lr);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  for (const pb::Regression& r : *listed) EXPECT_EQ(r.group_id(), g.id);

  // The alert work carries the group; the group's leader and state read back.
  ASSERT_TRUE(analyzer().SaveBisect(Confirm(bisects[1], rb, pb::REGRESSION_STATE_CONFIRMED)).ok());
  absl::StatusOr<std::vector<AlertWork>> work = analyzer().AlertCandidates(absl::Minutes(1));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_EQ(work->size(), 1u);
  EXPECT_EQ(work->front().group_id, g.id);
  EXPECT_EQ(work->front().strength, 9);
  ASSERT_TRUE(analyzer().SaveGroup(g.id, rb, "culprit", "c5").ok());
  of = analyzer().GroupOf(ra);
  ASSERT_TRUE(of.ok()) << of.status();
  EXPECT_EQ(of->leader_id, rb);
  EXPECT_EQ(of->state, "culprit");
  EXPECT_EQ(of->culprit_id, "c5");

  // Split out: a group of its own, over its own range, itself bisecting.
  absl::StatusOr<int64_t> own = analyzer().SplitFromGroup(re);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_NE(*own, g.id);
  of = analyzer().GroupOf(re);
  ASSERT_TRUE(of.ok()) << of.status();
  EXPECT_EQ(of->id, *own);
  EXPECT_EQ(of->leader_id, re);
  EXPECT_EQ(of->state, "bisecting");
  EXPECT_EQ(of->last_good, "c4");
  EXPECT_EQ(of->first_bad_index, 9);
  ASSERT_EQ(of->members.size(), 1u);
  EXPECT_EQ(analyzer().GroupOf(ra)->members.size(), 2u);
  EXPECT_TRUE(absl::IsNotFound(analyzer().SplitFromGroup(999999).status()));
}

TEST_P(AnalyzerStoreContractTest, SaveBisectRoundTripsStepsCulpritsAndTheRegression) {
  std::vector<int64_t> bisects;
  const int64_t m = AnalysedMatrix({Found("k1", 2, 5)}, &bisects);
  ASSERT_EQ(bisects.size(), 1u);
  const int64_t bisect = bisects[0];
  const int64_t reg = RegressionOf(analysis(), bisect);

  BisectUpdate u = Confirm(bisect, reg, pb::REGRESSION_STATE_CONFIRMED);
  u.last_good = "c2";
  u.first_bad = "c5";
  u.magnitude = -0.25;
  u.p_value = 1e-6;
  u.confirmed_by = "emulator";
  u.confirm_matrix_id = m;
  u.confirm_note = "confirmed with 8 repeats";
  u.steps = {{{0, 5, "c5", "bad", 16, 80, 1e-6, -0.25}, m, "emulator"}};
  ASSERT_TRUE(analyzer().SaveBisect(u).ok());
  absl::StatusOr<std::vector<ActiveBisect>> active = analyzer().ActiveBisects();
  ASSERT_TRUE(active.ok()) << active.status();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_TRUE(SameJson(active->front().state_json, u.state_json));
  absl::StatusOr<pb::Regression> g = analysis().GetRegression(reg);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(g->magnitude(), -0.25);
  EXPECT_EQ(g->p_value(), 1e-6);
  EXPECT_EQ(g->confirmed_by(), "emulator");
  EXPECT_EQ(g->confirm_matrix_id(), m);
  EXPECT_EQ(g->confirm_note(), "confirmed with 8 repeats");

  BisectUpdate done = Confirm(bisect, reg, pb::REGRESSION_STATE_CONFIRMED);
  done.state_json = R"({"phase": "done"})";
  done.bisect_state = "done";
  done.last_good = "c3";
  done.first_bad = "c4";
  done.culprit_id = "c4";
  done.culprit_subject = "subject 4";
  done.culprits = {{Culprit{3, 4, "c4", -0.25, 1, {}}, "c3", "subject 4"}};
  // Step 0 again without an executor keeps the one it had.
  done.steps = {{u.steps[0].record, m, ""},
                {{1, 3, "c3", "good", 3, 100, 0.5, 0}, m + 1, "dma-map-bench"},
                {{2, 4, "c4", "bad", 3, 80, 1e-3, -0.2}, m + 2}};
  ASSERT_TRUE(analyzer().SaveBisect(done).ok());
  EXPECT_TRUE(analyzer().ActiveBisects()->empty());
  absl::StatusOr<pb::Bisect> b = analysis().GetBisect(bisect, 0);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->state(), "done");
  EXPECT_EQ(b->last_good(), "c3");
  EXPECT_EQ(b->first_bad(), "c4");
  EXPECT_EQ(b->culprit_id(), "c4");
  ASSERT_EQ(b->steps_size(), 3);
  EXPECT_EQ(b->steps(0).verdict(), "bad");
  EXPECT_EQ(b->steps(1).verdict(), "good");
  EXPECT_EQ(b->steps(1).commit_id(), "c3");
  EXPECT_EQ(b->steps(2).commit_index(), 4);
  EXPECT_EQ(b->steps(2).repeats(), 3);
  EXPECT_EQ(b->steps(2).mean(), 80);
  EXPECT_EQ(b->steps(0).executor(), "emulator");
  EXPECT_FALSE(b->steps(0).real_kernel());
  EXPECT_EQ(b->steps(1).executor(), "dma-map-bench");
  EXPECT_TRUE(b->steps(1).real_kernel());
  EXPECT_EQ(b->steps(2).executor(), "");
  ASSERT_EQ(b->culprits_size(), 1);
  EXPECT_EQ(b->culprits(0).commit_id(), "c4");
  EXPECT_EQ(b->culprits(0).commit_index(), 4);
  EXPECT_EQ(b->culprits(0).last_good(), "c3");
  EXPECT_EQ(b->culprits(0).subject(), "subject 4");
  EXPECT_EQ(b->culprits(0).share(), 1);
  g = analysis().GetRegression(reg);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->last_good(), "c3");
  EXPECT_EQ(g->first_bad(), "c4");
  EXPECT_EQ(g->culprit_id(), "c4");
  EXPECT_EQ(g->culprit_subject(), "subject 4");
  EXPECT_EQ(g->magnitude(), -0.25);  // not re-measured: kept
  ASSERT_EQ(g->culprits_size(), 1);
  // The alert names the culprit's author from the catalog.
  absl::StatusOr<std::vector<AlertWork>> alerts = analyzer().AlertCandidates(absl::Minutes(15));
  ASSERT_TRUE(alerts.ok()) << alerts.status();
  ASSERT_EQ(alerts->size(), 1u);
  EXPECT_EQ((*alerts)[0].culprit_author, "Author 4 <a4@example.org>");

  // A person's triage is never overwritten.
  ASSERT_TRUE(analysis().UpdateRegression(reg, pb::REGRESSION_STATE_ACKNOWLEDGED, "").ok());
  done.regression_state = pb::REGRESSION_STATE_REJECTED;
  ASSERT_TRUE(analyzer().SaveBisect(done).ok());
  EXPECT_EQ(analysis().GetRegression(reg)->state(), pb::REGRESSION_STATE_ACKNOWLEDGED);
}

TEST_P(AnalyzerStoreContractTest, AlertCandidatesFollowAlertsAndSilences) {
  std::vector<int64_t> bisects;
  AnalysedMatrix({Found("k1", 2, 5), Found("k2", 1, 3, false)}, &bisects);
  ASSERT_EQ(bisects.size(), 2u);
  const int64_t reg = RegressionOf(analysis(), bisects[0]);
  const int64_t improvement = RegressionOf(analysis(), bisects[1]);
  EXPECT_TRUE(analyzer().AlertCandidates(absl::Hours(1))->empty());  // suspected
  ASSERT_TRUE(analyzer().SaveBisect(Confirm(bisects[0], reg, pb::REGRESSION_STATE_CONFIRMED)).ok());
  ASSERT_TRUE(
      analyzer().SaveBisect(Confirm(bisects[1], improvement, pb::REGRESSION_STATE_CONFIRMED)).ok());
  absl::StatusOr<AnalyzerStore::OpenCounts> open = analyzer().CountOpenRegressions();
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->primary, 1);  // improvements are not counted
  EXPECT_EQ(open->secondary, 0);

  absl::StatusOr<std::vector<AlertWork>> c = analyzer().AlertCandidates(absl::Hours(1));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);  // improvements are never alerted
  EXPECT_EQ(c->front().regression_id, reg);
  EXPECT_EQ(c->front().state, pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(c->front().mode_name, "strict");
  EXPECT_EQ(c->front().catalog, "c");
  EXPECT_EQ(c->front().change_class, pb::CHANGE_CLASS_IOMMU);
  EXPECT_EQ(c->front().magnitude, -0.2);
  EXPECT_TRUE(c->front().primary_metric);
  EXPECT_EQ(c->front().primary_metrics, "throughput");
  EXPECT_FALSE(c->front().bisect_done);
  EXPECT_FALSE(c->front().alert_exists);
  EXPECT_EQ(c->front().starts_at, "");
  EXPECT_GE(c->front().seconds_since_sent, 1e17);

  const std::string annotations = R"({"summary": "throughput -20%"})";
  ASSERT_TRUE(analyzer().MarkAlertSent(reg, true, R"({"alertname": "x"})", annotations).ok());
  EXPECT_TRUE(analysis().GetRegression(reg)->alert_firing());
  c = analyzer().AlertCandidates(absl::Hours(1));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_TRUE(c->front().alert_exists);
  EXPECT_TRUE(c->front().alert_firing);
  EXPECT_TRUE(Recent(c->front().starts_at)) << c->front().starts_at;
  EXPECT_EQ(c->front().ends_at, "");
  EXPECT_GE(c->front().seconds_since_sent, 0);
  EXPECT_LT(c->front().seconds_since_sent, 60);
  EXPECT_TRUE(SameJson(c->front().annotations_json, annotations)) << c->front().annotations_json;

  // Closed while firing: still a candidate, to be resolved; then resolved
  // ones are re-sent within the window only.
  ASSERT_TRUE(analysis().UpdateRegression(reg, pb::REGRESSION_STATE_FIXED, "").ok());
  EXPECT_EQ(analyzer().CountOpenRegressions()->primary, 0);
  EXPECT_EQ(analyzer().AlertCandidates(absl::ZeroDuration())->size(), 1u);
  ASSERT_TRUE(analyzer().MarkAlertSent(reg, false, "{}", annotations).ok());
  EXPECT_FALSE(analysis().GetRegression(reg)->alert_firing());
  c = analyzer().AlertCandidates(absl::Hours(1));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_FALSE(c->front().alert_firing);
  EXPECT_TRUE(Recent(c->front().ends_at)) << c->front().ends_at;
  const std::string ends_at = c->front().ends_at;
  EXPECT_TRUE(analyzer().AlertCandidates(absl::ZeroDuration())->empty());
  // A resolution re-sent keeps its end.
  ASSERT_TRUE(analyzer().MarkAlertSent(reg, false, "{}", annotations).ok());
  EXPECT_EQ(analyzer().AlertCandidates(absl::Hours(1))->front().ends_at, ends_at);

  // A silence to remove makes it a candidate whatever its state.
  ASSERT_TRUE(analyzer().SetSilence(reg, "silence-1").ok());
  c = analyzer().AlertCandidates(absl::ZeroDuration());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ(c->front().silence_id, "silence-1");
  ASSERT_TRUE(analyzer().SetSilence(reg, "").ok());
  EXPECT_TRUE(analyzer().AlertCandidates(absl::ZeroDuration())->empty());
}

TEST_P(AnalyzerStoreContractTest, FixChecksOfRegressionsMarkedFixed) {
  std::vector<int64_t> bisects;
  AnalysedMatrix({Found("k1", 2, 5)}, &bisects);
  ASSERT_EQ(bisects.size(), 1u);
  const int64_t reg = RegressionOf(analysis(), bisects[0]);
  EXPECT_TRUE(analyzer().FixChecks()->empty());  // not fixed
  ASSERT_TRUE(analysis().UpdateRegression(reg, pb::REGRESSION_STATE_FIXED, "").ok());
  absl::StatusOr<std::vector<FixCheckWork>> work = analyzer().FixChecks();
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_EQ(work->size(), 1u);
  EXPECT_EQ(work->front().regression_id, reg);
  EXPECT_EQ(work->front().fix_check, "");
  EXPECT_TRUE(SameJson(work->front().bisect_state_json, Found("k1", 2, 5).bisect_state_json));
  EXPECT_EQ(work->front().check_state_json, "");

  ASSERT_TRUE(analyzer().SaveFixCheck(reg, "checking", "c9", 0, R"({"matrix": 7})", "").ok());
  work = analyzer().FixChecks();
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_EQ(work->size(), 1u);
  EXPECT_EQ(work->front().fix_check, "checking");
  EXPECT_TRUE(SameJson(work->front().check_state_json, R"({"matrix": 7})"));
  ASSERT_TRUE(analyzer().SaveFixCheck(reg, "back", "c9", -0.01, R"({"matrix": 7})", "").ok());
  EXPECT_TRUE(analyzer().FixChecks()->empty());
  absl::StatusOr<pb::Regression> g = analysis().GetRegression(reg);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->fix_check(), "back");
  EXPECT_EQ(g->fix_check_commit(), "c9");
  EXPECT_EQ(g->fix_check_change(), -0.01);

  // Re-opened meanwhile: the check's columns stay as triage left them.
  ASSERT_TRUE(analysis().UpdateRegression(reg, pb::REGRESSION_STATE_CONFIRMED, "").ok());
  ASSERT_TRUE(analyzer().SaveFixCheck(reg, "not-back", "c9", -0.2, "{}", "").ok());
  EXPECT_EQ(analysis().GetRegression(reg)->fix_check(), "");

  // Fixed again, and not back this time: re-opened with the reason noted
  // under the person's note.
  ASSERT_TRUE(analysis().UpdateRegression(reg, pb::REGRESSION_STATE_FIXED, "fixed by c8").ok());
  ASSERT_TRUE(analyzer().SaveFixCheck(reg, "not-back", "c9", -0.2, "{}", "c9 is not back").ok());
  g = analysis().GetRegression(reg);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), pb::REGRESSION_STATE_CONFIRMED);
  EXPECT_EQ(g->fix_check(), "not-back");
  EXPECT_EQ(g->note(), "fixed by c8\nc9 is not back");
  EXPECT_TRUE(analyzer().FixChecks()->empty());
}

TEST_P(AnalyzerStoreContractTest, LiveOffersAreTheLiveAgentsOffersForTheExecutor) {
  pb::RegisterRequest vm = testrows::Registration("vm-host", "fio");
  pb::KernelOffer* o = vm.mutable_capabilities(0)->add_kernels();
  o->set_provider("vm");
  o->set_release("6.1.0-57-cloud-amd64");
  o->add_modes(pb::IOMMU_MODE_STRICT);
  o->add_modes(pb::IOMMU_MODE_LAZY);
  o->set_architecture("x86_64");
  o->set_machine_model("q35+intel-iommu");
  o->set_accel("tcg");
  o->set_commit("kernel-a1");
  ASSERT_TRUE(queue().RegisterAgent(vm, retry_).ok());
  Register("emu");
  pb::RegisterRequest host = testrows::Registration("bare", "fio");
  host.mutable_host()->set_kernel_release("6.12.0-1-amd64");
  host.mutable_host()->set_iommu_mode(pb::IOMMU_MODE_STRICT);
  ASSERT_TRUE(queue().RegisterAgent(host, retry_).ok());

  std::vector<pb::KernelOffer> want;  // in agent order; the bare host offers its own kernel
  for (const pb::RegisterRequest* r : {&vm, &host}) {
    for (const pb::KernelOffer& k : proto::OffersFor(
             {r->capabilities().begin(), r->capabilities().end()}, pb::EXECUTOR_FIO, r->host())) {
      want.push_back(k);
    }
  }
  ASSERT_EQ(want.size(), 2u);
  absl::StatusOr<std::vector<pb::KernelOffer>> got =
      analyzer().LiveOffers(pb::EXECUTOR_FIO, absl::Minutes(1));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*got)[i].SerializeAsString(), want[i].SerializeAsString())
        << i << ": " << (*got)[i].ShortDebugString();
  }
  EXPECT_TRUE(analyzer().LiveOffers(pb::EXECUTOR_IOZONE, absl::Minutes(1))->empty());
  // No agent was heard from within no time at all.
  EXPECT_TRUE(analyzer().LiveOffers(pb::EXECUTOR_FIO, absl::ZeroDuration())->empty());
}

TEST_P(AnalyzerStoreContractTest, AgentCapabilitiesAreEveryRegisteredAgents) {
  pb::RegisterRequest builder = testrows::Registration("builder", "kbuild");
  pb::BuildOffer* b = builder.mutable_capabilities(0)->add_builds();
  b->set_catalog("test-tree");
  b->add_architectures("x86_64");
  ASSERT_TRUE(queue().RegisterAgent(builder, retry_).ok());
  Register("emu");
  absl::StatusOr<std::vector<std::vector<pb::Capability>>> got = analyzer().AgentCapabilities();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);  // in agent id order
  ASSERT_EQ((*got)[0].size(), 1u);
  EXPECT_EQ((*got)[0][0].SerializeAsString(), builder.capabilities(0).SerializeAsString());
  pb::Job build;
  build.set_catalog("test-tree");
  build.set_platform("x86_64");
  EXPECT_TRUE(proto::BuildOfferRuns((*got)[0], build));
  EXPECT_FALSE(proto::BuildOfferRuns((*got)[1], build));
}

}  // namespace
}  // namespace farm::storage
