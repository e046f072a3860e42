#include "emu/run/catalog_check.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "emu/model/catalog.h"
#include "emu/run/run.h"
#include "emu/workloads/workload.h"

namespace farm::emu {
namespace {

// The three figures an expectation can compare, from one run.
struct Figures {
  double throughput = 0, map_ns = 0, unmap_ns = 0;
};

double Pick(const Figures& f, ExpectMetric m) {
  switch (m) {
    case ExpectMetric::kThroughput:
      return f.throughput;
    case ExpectMetric::kMapNs:
      return f.map_ns;
    case ExpectMetric::kUnmapNs:
      return f.unmap_ns;
  }
  return 0;
}

// One emulation the check needs; the same run serves every row that names it
// (a commit is the next entry's baseline).
struct Job {
  RunSpec spec;
  absl::StatusOr<Figures> figures = absl::UnknownError("not run");
};

// One row still to be judged, and the two jobs it reads.
struct Pending {
  CatalogCheckRow row;
  ExpectMetric metric = ExpectMetric::kThroughput;
  double min_speedup = 0, max_speedup = 0;
  std::string baseline_job, commit_job;
};

std::string ParamsText(const std::map<std::string, std::string>& params) {
  std::vector<std::string> kv;
  for (const auto& [k, v] : params) kv.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(kv, " ");
}

std::string BandText(ExpectDirection d, double lo, double hi) {
  const std::string name = ExpectDirectionName(d);
  if (std::isinf(hi)) return absl::StrFormat("%s (>= %gx)", name, lo);
  if (lo == 0) return absl::StrFormat("%s (<= %gx)", name, hi);
  return absl::StrFormat("%s (%g-%gx)", name, lo, hi);
}

// Adds the job for (kernel, platform, mode, workload) once; returns its key.
std::string AddJob(std::map<std::string, Job>& jobs, const std::string& catalog,
                   const std::string& kernel, const std::string& platform, const std::string& mode,
                   const CatalogExpectation& e) {
  std::string key =
      absl::StrCat(kernel, "|", platform, "|", mode, "|", e.workload, "|", ParamsText(e.params));
  if (jobs.count(key) == 0) {
    Job job;
    job.spec.platform = platform;
    job.spec.kernel = kernel;
    job.spec.mode = mode;
    job.spec.workload = e.workload;
    job.spec.params = e.params;
    job.spec.sets = {{"noise.cv", "0"}};  // bit-identical repeats: only the model moves
    job.spec.catalog = catalog;
    jobs.emplace(key, std::move(job));
  }
  return key;
}

// The rows of one commit's expectations (each platform x mode).
void PlanCommit(const Catalog& catalog, size_t index, const std::string& path,
                std::map<std::string, Job>& jobs, std::vector<Pending>& out) {
  const CatalogCommit& c = catalog.commits()[index];
  for (const CatalogExpectation& e : c.expect) {
    const std::string baseline = e.against.empty() ? catalog.commits()[index - 1].id : e.against;
    for (const std::string& platform : e.platforms) {
      for (const std::string& mode : e.modes) {
        Pending p;
        p.row.commit = c.id;
        p.row.baseline = baseline;
        p.row.platform = platform;
        p.row.mode = mode;
        p.row.workload =
            absl::StrCat(e.workload, e.params.empty() ? "" : " ", ParamsText(e.params));
        p.row.metric = ExpectMetricName(e.metric);
        p.row.expected = BandText(e.direction, e.min_speedup, e.max_speedup);
        p.row.from_catalog_comment = e.from_catalog_comment();
        p.row.claim = e.claim;
        p.row.source = e.source;
        p.row.model_todo = e.model_todo;
        p.metric = e.metric;
        p.min_speedup = e.min_speedup;
        p.max_speedup = e.max_speedup;
        p.baseline_job = AddJob(jobs, path, baseline, platform, mode, e);
        p.commit_job = AddJob(jobs, path, c.id, platform, mode, e);
        out.push_back(std::move(p));
      }
    }
  }
}

absl::StatusOr<Figures> RunOne(const RunSpec& spec) {
  absl::StatusOr<RunResult> r = RunEmulation(spec);
  if (!r.ok()) return r.status();
  return Figures{r->throughput, r->map_latency.mean, r->unmap_latency.mean};
}

// Runs every job on `threads` workers; each job is written by one worker only.
void RunJobs(std::map<std::string, Job>& jobs, int threads) {
  std::vector<Job*> list;
  for (auto& [key, job] : jobs) list.push_back(&job);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < list.size(); i = next++) list[i]->figures = RunOne(list[i]->spec);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

void Judge(Pending& p, const std::map<std::string, Job>& jobs) {
  const absl::StatusOr<Figures>& base = jobs.at(p.baseline_job).figures;
  const absl::StatusOr<Figures>& mine = jobs.at(p.commit_job).figures;
  CatalogCheckRow& row = p.row;
  if (!base.ok() || !mine.ok()) {
    row.verdict = CheckVerdict::kError;
    row.note = std::string((base.ok() ? mine : base).status().message());
    return;
  }
  row.baseline_value = Pick(*base, p.metric);
  row.commit_value = Pick(*mine, p.metric);
  if (row.baseline_value <= 0 || row.commit_value <= 0) {
    row.verdict = CheckVerdict::kError;
    row.note = absl::StrCat(row.metric, " is zero: the workload does not report it");
    return;
  }
  row.speedup = p.metric == ExpectMetric::kThroughput ? row.commit_value / row.baseline_value
                                                      : row.baseline_value / row.commit_value;
  const bool agrees = row.speedup >= p.min_speedup && row.speedup <= p.max_speedup;
  if (row.model_todo.empty()) {
    row.verdict = agrees ? CheckVerdict::kPass : CheckVerdict::kFail;
  } else {
    row.verdict = agrees ? CheckVerdict::kFixed : CheckVerdict::kKnownFail;
  }
}

// Commits that set model keys but say nothing about their performance.
void AddUnchecked(const Catalog& catalog, std::vector<CatalogCheckRow>& rows) {
  for (size_t i = 1; i < catalog.size(); ++i) {
    const CatalogCommit& c = catalog.commits()[i];
    if (c.set.empty() || !c.expect.empty()) continue;
    CatalogCheckRow row;
    row.commit = c.id;
    row.baseline = catalog.commits()[i - 1].id;
    row.verdict = CheckVerdict::kUnchecked;
    row.note = "sets model keys but records no expectation";
    rows.push_back(std::move(row));
  }
}

}  // namespace

const char* CheckVerdictName(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kPass:
      return "PASS";
    case CheckVerdict::kFail:
      return "FAIL";
    case CheckVerdict::kKnownFail:
      return "known (model_todo)";
    case CheckVerdict::kFixed:
      return "FIXED: remove model_todo";
    case CheckVerdict::kError:
      return "ERROR";
    case CheckVerdict::kUnchecked:
      return "unchecked";
  }
  return "?";
}

absl::StatusOr<std::vector<CatalogCheckRow>> CheckCatalog(const CatalogCheckOptions& options) {
  std::string path = options.catalog;
  if (path.empty()) {
    absl::StatusOr<std::string> def = DefaultCatalogPath();
    if (!def.ok()) return def.status();
    path = *def;
  }
  ExpectValidator expect_validator = [](absl::string_view workload,
                                        const std::map<std::string, std::string>& params) {
    return ValidateWorkloadParams(workload, params);
  };
  absl::StatusOr<Catalog> catalog = Catalog::LoadFile(path, {}, expect_validator);
  if (!catalog.ok()) return catalog.status();
  std::vector<size_t> indices;
  if (!options.commit.empty()) {
    absl::StatusOr<size_t> i = catalog->Find(options.commit);
    if (!i.ok()) return i.status();
    indices.push_back(*i);
  } else {
    for (size_t i = 0; i < catalog->size(); ++i) indices.push_back(i);
  }
  std::map<std::string, Job> jobs;
  std::vector<Pending> pending;
  for (size_t i : indices) PlanCommit(*catalog, i, path, jobs, pending);
  int threads = options.jobs > 0
                    ? options.jobs
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  RunJobs(jobs, std::min<int>(threads, std::max<size_t>(1, jobs.size())));
  std::vector<CatalogCheckRow> rows;
  for (Pending& p : pending) {
    Judge(p, jobs);
    rows.push_back(std::move(p.row));
  }
  if (options.commit.empty()) AddUnchecked(*catalog, rows);
  return rows;
}

bool CatalogCheckFailed(const std::vector<CatalogCheckRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const CatalogCheckRow& r) {
    return r.verdict == CheckVerdict::kFail || r.verdict == CheckVerdict::kFixed ||
           r.verdict == CheckVerdict::kError;
  });
}

namespace {

std::string ModelText(const CatalogCheckRow& r) {
  if (r.verdict == CheckVerdict::kError || r.verdict == CheckVerdict::kUnchecked) return r.note;
  return absl::StrFormat("%.3fx (%.6g -> %.6g)", r.speedup, r.baseline_value, r.commit_value);
}

std::string NoteKey(const CatalogCheckRow& r) {
  return absl::StrCat(r.commit, "|", r.claim, "|", r.source, "|", r.model_todo);
}

// Each distinct expectation's words once, numbered in table order.
std::string Notes(const std::vector<CatalogCheckRow>& rows, std::map<std::string, int>& number) {
  std::string out;
  for (const CatalogCheckRow& r : rows) {
    if (r.verdict == CheckVerdict::kUnchecked) continue;
    const std::string key = NoteKey(r);
    if (number.count(key)) continue;
    const int n = static_cast<int>(number.size()) + 1;
    number[key] = n;
    absl::StrAppend(
        &out, "[", n, "] ", r.commit, ": ", r.claim, "\n    source: ",
        r.from_catalog_comment ? "none found; the catalog comment's own expectation" : r.source,
        "\n");
    if (!r.model_todo.empty()) absl::StrAppend(&out, "    model_todo: ", r.model_todo, "\n");
  }
  return out;
}

}  // namespace

std::string FormatCatalogCheck(const std::vector<CatalogCheckRow>& rows) {
  std::map<std::string, int> number;
  const std::string notes = Notes(rows, number);
  std::string out =
      "| commit | baseline | platform | mode | workload | metric | expected | model: speedup "
      "(baseline -> commit) | verdict |\n|---|---|---|---|---|---|---|---|---|\n";
  std::map<CheckVerdict, int> counts;
  for (const CatalogCheckRow& r : rows) {
    ++counts[r.verdict];
    std::string expected = r.expected;
    if (r.verdict != CheckVerdict::kUnchecked) {
      absl::StrAppend(&expected, " [", number[NoteKey(r)],
                      r.from_catalog_comment ? ", catalog comment" : "", "]");
    }
    absl::StrAppend(&out, "| ", r.commit, " | ", r.baseline, " | ", r.platform, " | ", r.mode,
                    " | ", r.workload, " | ", r.metric, " | ", expected, " | ", ModelText(r), " | ",
                    CheckVerdictName(r.verdict), " |\n");
  }
  absl::StrAppend(&out, "\n", notes, "\n");
  std::vector<std::string> summary;
  for (const auto& [v, n] : counts) summary.push_back(absl::StrCat(n, " ", CheckVerdictName(v)));
  absl::StrAppend(&out, rows.size(), " rows: ", absl::StrJoin(summary, ", "), "\n");
  return out;
}

}  // namespace farm::emu
