// store_scale: what the farm's database costs after a year of results. Fills
// two fresh databases on one private PostgreSQL (farm_testing) through the
// real schema (every migration applied) with a synthetic year of nightly
// matrices -- a small one (--small samples) and a big one (--samples) --
// then runs the same operations on both and prints, per operation, the
// absolute times and the ratio big / small against the farm's goals:
//   - the analyzer's store calls for a new one-commit nightly matrix
//     (PgAnalyzerStore: MatricesToAnalyze, Samples of the matrix,
//     HistorySamples of its cells over the newest 100 matrices,
//     RecordAnalysis), together and the two reads alone; the detection
//     itself is CPU on the samples read, whatever the database's size;
//   - every PostgreSQL query of dashboards/iommu-farm.json (panels and
//     template variables), with the variables set to a series of the year;
//   - the store calls behind `farmctl results`, `compare`, `regressions`,
//     `report` and `matrix list`, on a wide matrix (--wide-commits commits of
//     one nightly's cells);
//   - ingest: samples per second through the queue's lease and batched
//     report path (PgJobQueue::LeaseJobs, ReportResults), --workers agents;
//   - bytes per sample and per raw output (pg_total_relation_size).
//
//   build-rel/bin/store_scale [--samples N] [--small N] [--wide-commits C]
//       [--ingest-jobs J] [--workers K] [--runs R] [--hold SECONDS]
//       [--pg-shared-buffers SIZE] [--ingest-against SIZE --ingest-rounds N]
//
// The cluster runs with the test harness's shared_buffers (32MB) unless
// --pg-shared-buffers says otherwise. --ingest-against measures the big
// database's ingest again after the report, alternating the cluster's
// shared_buffers between its own and SIZE (ALTER SYSTEM and a restart before
// each) for --ingest-rounds rounds of six ingests each, so the two settings
// are compared on one database under the same load.
//
// A nightly matrix is one catalog commit x 3 platforms x 5 workloads (two
// dma-map-bench thread counts, a network-like emulator workload, fio
// randread and iozone, 4-8 samples each, with raw outputs of the tools'
// shape and size) x 4 IOMMU modes x 5 repeats: 300 jobs, 1,680 samples.
// A year is 365 days of such matrices from as many nightly streams as the
// size needs; stream k runs catalog k % 4 on platforms of its own, so a
// bigger farm has more catalogs, platforms, cells and matrices, while the
// nightly matrix the analyzer reads keeps its shape. Every tenth nightly
// has a regression with a finished bisect. Each timed read runs --runs
// times and the fastest is reported (the database is in the page cache).
//
// Exits non-zero when any store call fails, the analyzer's listing misses
// the new matrix or its history is empty, or a dashboard query returns no
// rows, so a tiny run is a test (store_scale.tiny).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "lib/base/file.h"
#include "lib/storage/pg/migrations.h"
#include "lib/storage/pg/pg_analyzer_store.h"
#include "lib/storage/pg/pg_pool.h"
#include "lib/storage/pg/pg_raw_outputs.h"
#include "lib/storage/pg/pg_rows.h"
#include "lib/storage/pg/pg_store.h"
#include "testing/service_harness.h"

namespace {

namespace pb = ::iommufarm::v1;
using Clock = std::chrono::steady_clock;

struct Options {
  int64_t samples = 1000000;
  int64_t small = 10000;
  int wide_commits = 10;
  int ingest_jobs = 4000;
  int workers = 4;
  int runs = 2;
  int hold = 0;                // seconds to keep the databases up after the report
  std::string shared_buffers;  // empty: the harness's
  std::string ingest_against;  // empty: no alternating ingest
  int ingest_rounds = 3;
};

constexpr int kPlatforms = 3;
constexpr int kModes = 4;
constexpr int kRepeats = 5;
constexpr int kDays = 365;
constexpr int kCommitsPerDay = 3;  // the nightly tests the day's last one
constexpr int kRawVariants = 32;   // distinct raw outputs per workload
constexpr int kAgents = 8;

struct Metric {
  const char* name;
  const char* unit;
  const char* phase;
  double base;
};

struct Workload {
  const char* name;
  const char* params;  // canonical JSON, string values (as jobs.params holds them)
  const char* raw_format;
  const char* tool_version;
  std::vector<Metric> metrics;
};

const std::vector<Workload>& Workloads() {
  static const auto* const kAll = new std::vector<Workload>{
      {"dma-map-bench",
       R"({"threads": "1"})",
       "emu-json",
       "farm-emu",
       {{"throughput", "Mops", "", 2.9},
        {"map_latency_mean", "ns", "", 310},
        {"unmap_latency_mean", "ns", "", 420},
        {"map_latency_p99", "ns", "", 910},
        {"unmap_latency_p99", "ns", "", 1350}}},
      {"dma-map-bench",
       R"({"threads": "16"})",
       "emu-json",
       "farm-emu",
       {{"throughput", "Mops", "", 21.5},
        {"map_latency_mean", "ns", "", 640},
        {"unmap_latency_mean", "ns", "", 1730},
        {"map_latency_p99", "ns", "", 2900},
        {"unmap_latency_p99", "ns", "", 8100}}},
      {"netperf-sim",
       R"({"size": "1500"})",
       "emu-json",
       "farm-emu",
       {{"throughput", "Gbps", "", 38.0},
        {"cpu_per_byte", "ns", "", 0.21},
        {"rcache_hit_rate", "ratio", "", 0.97},
        {"invalidations", "count", "", 181000}}},
      {"fio-randread",
       R"({"bs": "4k", "iodepth": "32", "rw": "randread"})",
       "fio-json",
       "fio-3.33",
       {{"iops", "IOPS", "", 412000},
        {"bw", "KiB/s", "", 1648000},
        {"clat_mean", "ns", "", 77500},
        {"clat_p99", "ns", "", 161000},
        {"usr_cpu", "%", "", 7.4},
        {"sys_cpu", "%", "", 38.2}}},
      {"iozone",
       R"({"record": "64k", "size": "1g"})",
       "iozone-text",
       "iozone-3.506",
       {{"throughput_kb_s", "KB/s", "write", 1.9e6},
        {"latency_us", "us", "write", 33},
        {"throughput_kb_s", "KB/s", "rewrite", 2.3e6},
        {"latency_us", "us", "rewrite", 27},
        {"throughput_kb_s", "KB/s", "read", 5.1e6},
        {"latency_us", "us", "read", 12},
        {"throughput_kb_s", "KB/s", "reread", 5.6e6},
        {"latency_us", "us", "reread", 11}}},
  };
  return *kAll;
}

int SamplesPerMatrix() {
  int per_cell = 0;
  for (const Workload& w : Workloads()) per_cell += static_cast<int>(w.metrics.size());
  return per_cell * kPlatforms * kModes * kRepeats;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "store_scale: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().ToString()));
  return *std::move(v);
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The fastest of `runs` calls of `fn`, in seconds.
double Fastest(int runs, const std::function<void()>& fn) {
  double best = 1e18;
  for (int i = 0; i < std::max(1, runs); ++i) {
    const Clock::time_point t0 = Clock::now();
    fn();
    best = std::min(best, Seconds(t0));
  }
  return best;
}

// ------------------------------------------------------- raw tool output

// Raw outputs of the tools' shape and size, numbers drawn from `rng` so
// PostgreSQL's compression sees what it sees in real ones: the emulator's
// JSON report (~1 KB), fio's --output-format=json for one job (~7 KB) and
// iozone's text report (~4 KB).
std::string Num(std::mt19937_64& rng, double lo, double hi) {
  return absl::StrCat(std::uniform_real_distribution<double>(lo, hi)(rng));
}
std::string Int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return absl::StrCat(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
}

std::string EmuRaw(const Workload& w, std::mt19937_64& rng) {
  std::string out = absl::StrCat("{\"workload\":\"", w.name, "\",\"params\":", w.params,
                                 ",\"duration_ns\":", Int(rng, 1e7, 2e7), ",\"metrics\":{");
  for (size_t i = 0; i < w.metrics.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", "\"", w.metrics[i].name,
                    "\":", Num(rng, w.metrics[i].base * 0.9, w.metrics[i].base * 1.1));
  }
  absl::StrAppend(&out, "},\"counters\":{");
  const char* const kCounters[] = {"map_calls",    "unmap_calls",   "iotlb_invalidations",
                                   "rcache_hits",  "rcache_misses", "iova_allocs",
                                   "pt_pages_new", "pt_pages_free", "flush_queue_flushes"};
  for (size_t i = 0; i < std::size(kCounters); ++i) {
    absl::StrAppend(&out, i ? "," : "", "\"", kCounters[i], "\":", Int(rng, 1000, 9000000));
  }
  absl::StrAppend(&out, "}");
  for (const char* h : {"map_ns", "unmap_ns"}) {
    absl::StrAppend(&out, ",\"", h, "_histogram\":[");
    for (int b = 0; b < 16; ++b) absl::StrAppend(&out, b ? "," : "", Int(rng, 0, 200000));
    absl::StrAppend(&out, "]");
  }
  absl::StrAppend(&out, ",\"model\":{\"platform_cost_version\":3,\"seed\":", Int(rng, 1, 1e15),
                  "}}");
  return out;
}

std::string FioLat(std::mt19937_64& rng, bool percentiles) {
  std::string out = absl::StrCat("{\"min\":", Int(rng, 1000, 9000), ",\"max\":", Int(rng, 1e6, 9e6),
                                 ",\"mean\":", Num(rng, 7e4, 8e4),
                                 ",\"stddev\":", Num(rng, 1e4, 4e4), ",\"N\":", Int(rng, 1e7, 2e7));
  if (percentiles) {
    absl::StrAppend(&out, ",\"percentile\":{");
    const char* const kPct[] = {"1.000000",  "5.000000",  "10.000000", "20.000000", "30.000000",
                                "40.000000", "50.000000", "60.000000", "70.000000", "80.000000",
                                "90.000000", "95.000000", "99.000000", "99.500000", "99.900000",
                                "99.950000", "99.990000"};
    for (size_t i = 0; i < std::size(kPct); ++i) {
      absl::StrAppend(&out, i ? "," : "", "\"", kPct[i],
                      "\":", Int(rng, 1e4 * (i + 1), 2e4 * (i + 1)));
    }
    absl::StrAppend(&out, "}");
  }
  return out + "}";
}

std::string FioDir(std::mt19937_64& rng, bool active) {
  auto n = [&](int64_t lo, int64_t hi) { return active ? Int(rng, lo, hi) : std::string("0"); };
  return absl::StrCat(
      "{\"io_bytes\":", n(1e10, 2e10), ",\"io_kbytes\":", n(1e7, 2e7),
      ",\"bw_bytes\":", n(1e9, 2e9), ",\"bw\":", n(1e6, 2e6),
      ",\"iops\":", active ? Num(rng, 4e5, 4.2e5) : "0", ",\"runtime\":", n(30000, 30010),
      ",\"total_ios\":", n(1e7, 2e7),
      ",\"short_ios\":0,\"drop_ios\":0,\"slat_ns\":", FioLat(rng, false),
      ",\"clat_ns\":", FioLat(rng, active), ",\"lat_ns\":", FioLat(rng, false),
      ",\"bw_min\":", n(1e6, 2e6), ",\"bw_max\":", n(1e6, 2e6),
      ",\"bw_agg\":100.0,\"bw_mean\":", active ? Num(rng, 1e6, 2e6) : "0",
      ",\"bw_dev\":", active ? Num(rng, 1e3, 9e3) : "0", ",\"bw_samples\":", n(59, 60),
      ",\"iops_min\":", n(4e5, 4.2e5), ",\"iops_max\":", n(4e5, 4.2e5),
      ",\"iops_mean\":", active ? Num(rng, 4e5, 4.2e5) : "0",
      ",\"iops_stddev\":", active ? Num(rng, 100, 900) : "0", ",\"iops_samples\":", n(59, 60), "}");
}

std::string FioRaw(std::mt19937_64& rng) {
  std::string out = absl::StrCat(
      "{\n  \"fio version\" : \"fio-3.33\",\n  \"timestamp\" : ", Int(rng, 1.7e9, 1.8e9),
      ",\n  \"time\" : \"Sat Dec  5 03:12:44 2026\",\n  \"global options\" : {\"ioengine\":"
      "\"io_uring\",\"direct\":\"1\",\"bs\":\"4k\",\"iodepth\":\"32\",\"runtime\":\"30\","
      "\"time_based\":\"1\",\"filename\":\"/dev/nvme0n1\"},\n  \"jobs\" : [{\"jobname\":"
      "\"randread\",\"groupid\":0,\"error\":0,\"eta\":0,\"elapsed\":31,\"job options\":{\"rw\":"
      "\"randread\",\"numjobs\":\"4\"},\n    \"read\":",
      FioDir(rng, true), ",\n    \"write\":", FioDir(rng, false),
      ",\n    \"trim\":", FioDir(rng, false),
      ",\n    \"sync\":{\"total_ios\":0,\"lat_ns\":", FioLat(rng, false),
      "},\n    \"job_runtime\":", Int(rng, 119000, 121000), ",\"usr_cpu\":", Num(rng, 6, 9),
      ",\"sys_cpu\":", Num(rng, 35, 41), ",\"ctx\":", Int(rng, 1e5, 9e5),
      ",\"majf\":0,\"minf\":", Int(rng, 100, 200),
      ",\"iodepth_level\":{\"1\":0.1,\"2\":0.1,"
      "\"4\":0.1,\"8\":0.1,\"16\":0.1,\"32\":",
      Num(rng, 99, 100), ",\">=64\":0.0},");
  for (const char* bucket : {"latency_ns", "latency_us", "latency_ms"}) {
    absl::StrAppend(&out, "\n    \"", bucket, "\":{");
    const char* const kB[] = {"2", "4", "10", "20", "50", "100", "250", "500", "750", "1000"};
    for (size_t i = 0; i < std::size(kB); ++i) {
      absl::StrAppend(&out, i ? "," : "", "\"", kB[i], "\":", Num(rng, 0, 30));
    }
    absl::StrAppend(&out, "},");
  }
  absl::StrAppend(&out,
                  "\"latency_depth\":32,\"latency_target\":0}],\n  \"disk_util\" : [{"
                  "\"name\":\"nvme0n1\",\"read_ios\":",
                  Int(rng, 4e7, 5e7), ",\"write_ios\":", Int(rng, 0, 100),
                  ",\"read_merges\":0,\"write_merges\":0,\"read_ticks\":", Int(rng, 1e6, 9e6),
                  ",\"write_ticks\":", Int(rng, 0, 100), ",\"in_queue\":", Int(rng, 1e6, 9e6),
                  ",\"util\":", Num(rng, 99, 100), "}]\n}\n");
  return out;
}

std::string IozoneRaw(std::mt19937_64& rng) {
  std::string out =
      "\tIozone: Performance Test of File I/O\n\t        Version $Revision: 3.506 $\n"
      "\t\tCompiled for 64 bit mode.\n\t\tBuild: linux-AMD64\n\n"
      "\tRun began: Sat Dec  5 03:12:44 2026\n\n\tInclude fsync in write timing\n"
      "\tO_DIRECT feature enabled\n\tAuto Mode\n\tFile size set to 1048576 kB\n"
      "\tRecord Size 64 kB\n\tCommand line used: iozone -a -I -e -s 1g -r 64k -i 0 -i 1 -i 2 "
      "-f /mnt/nfsrdma/iozone.tmp\n\tOutput is in kBytes/sec\n"
      "\tTime Resolution = 0.000001 seconds.\n\tProcessor cache size set to 1024 kBytes.\n"
      "\tProcessor cache line size set to 32 bytes.\n\tFile stride size set to 17 * record size.\n"
      "                                                              random    random     bkwd    "
      "record    stride                                    \n"
      "              kB  reclen    write  rewrite    read    reread    read     write     read   "
      "rewrite      read   fwrite frewrite    fread  freread\n";
  for (int row = 0; row < 24; ++row) {
    absl::StrAppend(&out, "         1048576  ", 4 << (row % 8));
    for (int col = 0; col < 13; ++col) absl::StrAppend(&out, "  ", Int(rng, 1000000, 6000000));
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "\niozone test complete.\n\tLatency (us): write ", Num(rng, 30, 36),
                  " rewrite ", Num(rng, 25, 29), " read ", Num(rng, 11, 13), " reread ",
                  Num(rng, 10, 12), "\n");
  return out;
}

std::string RawOutput(const Workload& w, std::mt19937_64& rng) {
  if (std::string(w.raw_format) == "fio-json") return FioRaw(rng);
  if (std::string(w.raw_format) == "iozone-text") return IozoneRaw(rng);
  return EmuRaw(w, rng);
}

// What an agent reports of its host (results.host), one per agent.
std::string HostJson(int agent) {
  return absl::StrCat(
      "{\"hostname\": \"farm-agent-", agent,
      "\", \"kernel\": \"6.6.0-farm\", \"cpu_model\": \"Intel(R) Xeon(R) Gold 6248R CPU @ "
      "3.00GHz\", \"cpus\": 96, \"memory_bytes\": 412316860416, \"iommu\": \"intel-iommu\", "
      "\"hygiene\": {\"governor\": \"performance\", \"turbo\": \"off\", \"smt\": \"off\", "
      "\"cpus_allowed\": \"2-47\", \"mems_allowed\": \"0\"}}");
}

// ---------------------------------------------------------------- the year

// How a database is filled: `streams` nightly streams of `days` days.
struct Year {
  int streams = 1;
  int days = 1;
  std::vector<std::string> catalogs;  // catalog of stream k: catalogs[k % size]
  int64_t planned_samples() const { return int64_t{streams} * days * SamplesPerMatrix(); }
};

Year YearOf(int64_t samples) {
  Year y;
  const int64_t per_matrix = SamplesPerMatrix();
  const int64_t matrices = std::max<int64_t>(1, (samples + per_matrix / 2) / per_matrix);
  y.streams = static_cast<int>(std::max<int64_t>(1, (matrices + kDays / 2) / kDays));
  y.days = static_cast<int>(std::clamp<int64_t>(matrices / y.streams, 1, kDays));
  const char* const kCatalogs[] = {"linux-iommu", "iommu-next", "linux-stable-6.6", "arm-smmu"};
  for (int c = 0; c < std::min(y.streams, 4); ++c) y.catalogs.push_back(kCatalogs[c]);
  return y;
}

std::string PlatformOf(int stream, int p) {
  const char* const kBase[] = {"intel-vtd-2s24c", "amd-vi-1s64c", "arm-smmuv3-1s80c"};
  return absl::StrCat(kBase[p % 3], "-s", stream);
}

// A matrix spec as users write them, for matrices.spec_yaml.
std::string SpecYaml(const std::string& name, const std::string& catalog,
                     const std::vector<std::string>& commits, int stream) {
  std::vector<std::string> platforms;
  for (int p = 0; p < kPlatforms; ++p) platforms.push_back(PlatformOf(stream, p));
  std::string out =
      absl::StrCat("name: ", name, "\ncatalog: ", catalog, "\nplatform: [",
                   absl::StrJoin(platforms, ", "), "]\ncommits: [", absl::StrJoin(commits, ", "),
                   "]\nmodes: [off, passthrough, strict, lazy]\nworkloads:\n");
  for (const Workload& w : Workloads()) {
    std::string params = w.params;
    absl::StrReplaceAll({{"\"", ""}}, &params);
    absl::StrAppend(&out, "  - name: ", w.name, "\n    params: ", params, "\n");
  }
  absl::StrAppend(&out, "repeats: ", kRepeats, "\nexecutor: emulator\nset: {noise.cv: 0.02}\n");
  return out;
}

// Static tables of the fill: workloads with their metrics, the raw output
// pool, agents, catalogs and their commits.
void FillReference(pqxx::work& w, const Year& y) {
  w.exec(
      "CREATE TEMP TABLE wl (i int, name text, params jsonb, fmt text, tool text, "
      "metrics text[], units text[], phases text[], base float8[], key_ids int[]) "
      "ON COMMIT PRESERVE ROWS");
  w.exec("CREATE TEMP TABLE raw_pool (wi int, variant int, raw text)");
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < Workloads().size(); ++i) {
    const Workload& wl = Workloads()[i];
    std::vector<std::string> names, units, phases, base;
    for (const Metric& m : wl.metrics) {
      names.push_back(m.name);
      units.push_back(m.unit);
      phases.push_back(m.phase);
      base.push_back(absl::StrCat(m.base));
    }
    w.exec_params(
        "INSERT INTO wl VALUES ($1, $2, $3::jsonb, $4, $5, string_to_array($6, ','), "
        "string_to_array($7, ','), string_to_array($8, ','), string_to_array($9, ',')::float8[])",
        static_cast<int>(i), wl.name, wl.params, wl.raw_format, wl.tool_version,
        absl::StrJoin(names, ","), absl::StrJoin(units, ","), absl::StrJoin(phases, ","),
        absl::StrJoin(base, ","));
    for (int v = 0; v < kRawVariants; ++v) {
      w.exec_params("INSERT INTO raw_pool VALUES ($1, $2, $3)", static_cast<int>(i), v,
                    RawOutput(wl, rng));
    }
  }
  // Each metric's key once, as a report stores them (sample_keys), and
  // each workload's keys in its metrics' order.
  w.exec(
      "INSERT INTO sample_keys (metric, unit, phase) "
      "SELECT DISTINCT wl.metrics[g], wl.units[g], wl.phases[g] FROM wl "
      "CROSS JOIN LATERAL generate_series(1, cardinality(wl.metrics)) g ORDER BY 1, 2, 3 "
      "ON CONFLICT DO NOTHING");
  w.exec(
      "UPDATE wl SET key_ids = ARRAY(SELECT k.id FROM generate_series(1, cardinality(wl.metrics)) "
      "  i JOIN sample_keys k ON k.metric = wl.metrics[i] AND k.unit = wl.units[i] "
      "  AND k.phase = wl.phases[i] ORDER BY i)");
  for (int a = 0; a < kAgents; ++a) {
    w.exec_params(
        "INSERT INTO agents (name, session, capabilities, executors, host, slots) "
        "VALUES ($1, md5($1), '[{\"name\": \"emulator\", \"version\": \"1\"}]', '{1}', $2, 8)",
        absl::StrCat("farm-agent-", a), HostJson(a));
  }
  // Each agent's facts once, as a report stores them (result_hosts).
  w.exec(
      "INSERT INTO result_hosts (digest, host) "
      "SELECT DISTINCT sha256(convert_to(host::text, 'UTF8')), host FROM agents "
      "ON CONFLICT (digest) DO NOTHING");
  const int commits = kDays * kCommitsPerDay + 2 * kCommitsPerDay;
  w.exec_params(
      "INSERT INTO catalogs (name, source) SELECT n, 'git://synthetic/' || n "
      "FROM unnest($1::text[]) n",
      farm::storage::QuotedArrayLiteral(y.catalogs));
  w.exec_params(
      "INSERT INTO catalog_commits (catalog, idx, id, subject) "
      "SELECT n, i, md5(n || i) || left(md5(i || n), 8), "
      "  'iommu/vt-d: synthetic change ' || i || ' of ' || n "
      "FROM unnest($1::text[]) n, generate_series(0, $2 - 1) i",
      farm::storage::QuotedArrayLiteral(y.catalogs), commits);
}

// The year's matrices: mk(id, stream, day, first_idx, n_commits, catalog,
// platforms), the nightly ones and the wide one.
void FillMatrices(pqxx::work& w, const Year& y, int wide_commits) {
  w.exec(
      "CREATE TEMP TABLE mk (id bigint, stream int, day int, first_idx int, n_commits int, "
      "name text, catalog text, platforms text[], spec text)");
  std::vector<std::string> rows;
  for (int k = 0; k < y.streams; ++k) {
    std::vector<std::string> plats;
    for (int p = 0; p < kPlatforms; ++p) plats.push_back(PlatformOf(k, p));
    const std::string& cat = y.catalogs[k % y.catalogs.size()];
    w.exec_params(
        "INSERT INTO mk (stream, day, first_idx, n_commits, name, catalog, platforms, spec) "
        "SELECT $1::int, d, $2::int * d + $2 - 1, 1, format('nightly/%s/s%s/day%s', $3::text, $1, "
        "d), $3, "
        "  $4::text[], replace($5, 'COMMIT', (SELECT id FROM catalog_commits c "
        "    WHERE c.catalog = $3 AND c.idx = $2 * d + $2 - 1)) "
        "FROM generate_series(0, $6 - 1) d",
        k, kCommitsPerDay, cat, farm::storage::QuotedArrayLiteral(plats),
        SpecYaml(absl::StrCat("nightly-s", k), cat, {"COMMIT"}, k), y.days);
  }
  // The wide matrix: the newest wide_commits commits of stream 0's catalog.
  const int last = kCommitsPerDay * y.days - 1;
  const int first = std::max(0, last - wide_commits + 1);
  std::vector<std::string> plats;
  for (int p = 0; p < kPlatforms; ++p) plats.push_back(PlatformOf(0, p));
  w.exec_params(
      "INSERT INTO mk (stream, day, first_idx, n_commits, name, catalog, platforms, spec) "
      "VALUES (0, $1, $2, $3, 'wide/' || $4, $4, $5::text[], $6)",
      y.days, first, last - first + 1, y.catalogs[0], farm::storage::QuotedArrayLiteral(plats),
      SpecYaml("wide", y.catalogs[0], {"range"}, 0));
  w.exec(
      "INSERT INTO matrices (name, spec_yaml, catalog, platform, executor, submitted_by, "
      "  total_jobs, created_at) "
      "SELECT name, spec, catalog, platforms[1], 1, 'nightly-bot', n_commits * " +
      std::to_string(kPlatforms * kModes * kRepeats * Workloads().size()) +
      ", now() - interval '366 days' + day * interval '1 day' + stream * interval '1 minute' "
      "FROM mk ORDER BY day, stream");
  w.exec("UPDATE mk SET id = m.id FROM matrices m WHERE m.name = mk.name");
  w.exec("CREATE INDEX ON mk (id)");
}

// The outputs of batch_raw (job_id, raw) longer than the inline bound into
// raw_outputs, packed as PgJobQueue packs them, and raw_map (job_id,
// digest) naming each job's.
void StoreBatchRaws(pqxx::work& w) {
  w.exec("CREATE TEMP TABLE raw_map (job_id bigint, digest bytea) ON COMMIT DROP");
  const pqxx::result rows = w.exec_params(
      "SELECT job_id, raw FROM batch_raw WHERE octet_length(raw) > $1 "
      "AND octet_length(raw) <= $2 ORDER BY job_id",
      static_cast<int64_t>(farm::storage::kRawInlineMaxBytes),
      static_cast<int64_t>(farm::storage::kRawOutOfRowMaxBytes));
  constexpr size_t kChunk = 2000;
  farm::storage::RawBlobs blobs;
  for (size_t at = 0; at < rows.size(); at += kChunk) {
    std::vector<int64_t> jobs;
    std::vector<std::string> digests;
    blobs.digests.clear();  // `seen` stays: a blob stored by an earlier chunk is not sent again
    blobs.sizes.clear();
    blobs.frames.clear();
    for (size_t i = at; i < std::min(rows.size(), at + kChunk); ++i) {
      jobs.push_back(rows[i][0].as<int64_t>());
      digests.push_back(blobs.Add(std::string_view(rows[i][1].c_str(), rows[i][1].size())));
    }
    w.exec_params(
        "WITH blobs AS (INSERT INTO raw_outputs (digest, size, zstd) "
        "  SELECT * FROM unnest($3::bytea[], $4::int[], $5::bytea[]) "
        "  ON CONFLICT (digest) DO NOTHING) "
        "INSERT INTO raw_map SELECT * FROM unnest($1::bigint[], $2::bytea[])",
        farm::storage::ArrayLiteral(jobs), farm::storage::QuotedArrayLiteral(digests),
        farm::storage::QuotedArrayLiteral(blobs.digests), farm::storage::ArrayLiteral(blobs.sizes),
        farm::storage::QuotedArrayLiteral(blobs.frames));
  }
  w.exec("CREATE INDEX ON raw_map (job_id)");
}

// Jobs and results of the matrices with from <= mk.id < to: every job
// succeeded at attempt 1; samples drawn per job around each metric's base
// (mode factors 1, 1.01, 1.4, 1.15) as a report stores them (keys from
// sample_keys, values as float8[]), raw outputs from the pool.
void FillJobsAndResults(pqxx::work& w, int64_t from, int64_t to) {
  w.exec_params(
      "INSERT INTO jobs (matrix_id, catalog, commit_id, commit_index, platform, workload, "
      "  params, mode, repeat, executor, kind, state, attempt, max_attempts, seed, lease_agent, "
      "  lease_owner, lease_token, created_at, started_at, finished_at, fair_rank) "
      "SELECT mk.id, mk.catalog, cc.id, cc.idx, mk.platforms[p], wl.name, wl.params, mo, r, 1, "
      "  1, 3, 1, 3, (random() * 9e15)::bigint, 1 + (r + mo) % $3, 'farm-agent-' || (r + mo) % $3, "
      "  gen_random_uuid()::text, m.created_at, m.created_at + interval '10 minutes', "
      "  m.created_at + interval '11 minutes', "
      "  (row_number() OVER (PARTITION BY mk.id ORDER BY c, p, wl.i, mo, r) - 1)::int "
      "FROM mk JOIN matrices m ON m.id = mk.id "
      "CROSS JOIN LATERAL generate_series(0, mk.n_commits - 1) c "
      "JOIN catalog_commits cc ON cc.catalog = mk.catalog AND cc.idx = mk.first_idx + c "
      "CROSS JOIN generate_series(1, $4) p CROSS JOIN wl CROSS JOIN generate_series(1, 4) mo "
      "CROSS JOIN generate_series(0, $5 - 1) r "
      "WHERE mk.id >= $1 AND mk.id < $2 ORDER BY mk.id, c, p, wl.i, mo, r",
      from, to, kAgents, kPlatforms, kRepeats);
  // Each result's own output: the pool's with its job id written over 12
  // characters, so that no two results share one (a tool's output carries
  // its own measurements), stored as ReportResults stores it.
  w.exec_params(
      "CREATE TEMP TABLE batch_raw ON COMMIT DROP AS "
      "SELECT j.id AS job_id, overlay(rp.raw placing lpad(j.id::text, 12, '0') from 20) AS raw "
      "FROM jobs j JOIN wl ON wl.name = j.workload AND wl.params = j.params "
      "JOIN raw_pool rp ON rp.wi = wl.i AND rp.variant = j.id % $3 "
      "WHERE j.matrix_id >= $1 AND j.matrix_id < $2",
      from, to, kRawVariants);
  StoreBatchRaws(w);
  w.exec_params(
      "INSERT INTO results (job_id, attempt, matrix_id, agent_id, agent, sample_key_ids, "
      "  sample_values, raw_output, raw_digest, raw_format, host_id, tool_version, wall_time_ns, "
      "  finished_at) "
      "SELECT j.id, 1, j.matrix_id, a.id, a.name, wl.key_ids, "
      "  ARRAY(SELECT wl.base[i] * (ARRAY[1, 1.01, 1.4, 1.15]::float8[])[j.mode] "
      "     * (0.985 + 0.03 * random()) FROM generate_series(1, cardinality(wl.metrics)) i "
      "     ORDER BY i), "
      "  CASE WHEN m.digest IS NULL THEN b.raw ELSE '' END, m.digest, "
      "  wl.fmt, rh.id, wl.tool, (5e9 + random() * 5e9)::bigint, j.finished_at "
      "FROM jobs j JOIN wl ON wl.name = j.workload AND wl.params = j.params "
      "JOIN batch_raw b ON b.job_id = j.id LEFT JOIN raw_map m ON m.job_id = j.id "
      "JOIN agents a ON a.id = j.lease_agent JOIN result_hosts rh ON rh.host = a.host "
      "WHERE j.matrix_id >= $1 AND j.matrix_id < $2",
      from, to);
}

// Every tenth nightly matrix a regression with a done bisect of 8 steps
// and its culprit, states spread over the triage states (fixed ones
// checked); the wide matrix three, in one regression group. Every matrix
// analysed.
void FillAnalysis(pqxx::work& w) {
  w.exec(
      "CREATE TEMP TABLE rg AS SELECT mk.id AS matrix_id, mk.catalog, mk.platforms[1] AS platform, "
      "  mk.first_idx, g AS n FROM mk CROSS JOIN generate_series(1, "
      "    CASE WHEN mk.name LIKE 'wide/%' THEN 3 WHEN mk.id % 10 = 0 THEN 1 ELSE 0 END) g");
  w.exec(
      "INSERT INTO regressions (state, change_class, direction, platform, workload, params, "
      "  metric, mode, catalog, last_good, first_bad, magnitude, p_value, per_mode, culprit_id, "
      "  culprit_subject, detected_at, note, matrix_id, series_key, metric_rank, "
      "  primary_metrics, fix_check) "
      "SELECT 1 + (rg.matrix_id + rg.n) % 7, 1 + rg.n % 2, 1 + (rg.matrix_id / 10 + rg.n) % 2, "
      "  rg.platform, 'dma-map-bench', '{\"threads\": \"1\"}', 'throughput', 3, rg.catalog, "
      "  lg.id, fb.id, -0.05 - random() * 0.2, random() * 1e-4, "
      "  '[{\"mode\": 3, \"before\": 2.9, \"after\": 2.6, \"relative_change\": -0.1, "
      "     \"p_value\": 0.00001}]', fb.id, fb.subject, now(), 'primary metric of dma-map-bench', "
      "  rg.matrix_id, rg.platform || '/dma-map-bench/throughput/strict/' || rg.matrix_id || '/' "
      "  || rg.n, 'primary', '{throughput}', "
      "  CASE WHEN 1 + (rg.matrix_id + rg.n) % 7 = 4 THEN 'back' ELSE '' END "
      "FROM rg JOIN catalog_commits lg ON lg.catalog = rg.catalog "
      "  AND lg.idx = greatest(rg.first_idx - 3, 0) "
      "JOIN catalog_commits fb ON fb.catalog = rg.catalog AND fb.idx = rg.first_idx");
  w.exec(
      "INSERT INTO bisects (regression_id, state, last_good, first_bad, culprit_id, "
      "  culprit_subject) "
      "SELECT id, 'done', last_good, first_bad, culprit_id, culprit_subject FROM regressions");
  w.exec("UPDATE regressions g SET bisect_id = b.id FROM bisects b WHERE b.regression_id = g.id");
  // The wide matrices' regressions share a range: one group each, bisected
  // by its first member, whose culprit the others took.
  w.exec(
      "INSERT INTO regression_groups (catalog, last_good, first_bad, leader_id, state, "
      "  culprit_id) "
      "SELECT catalog, min(last_good), min(first_bad), min(id), 'culprit', min(culprit_id) "
      "FROM regressions g WHERE EXISTS (SELECT 1 FROM matrices x WHERE x.id = g.matrix_id "
      "  AND x.name LIKE 'wide/%') GROUP BY catalog, matrix_id");
  w.exec(
      "UPDATE regressions g SET group_id = gr.id FROM regression_groups gr "
      "WHERE gr.leader_id IN (SELECT min(id) FROM regressions r WHERE r.matrix_id = g.matrix_id)");
  w.exec(
      "INSERT INTO bisect_steps (bisect_id, step, commit_id, commit_index, verdict, repeats, "
      "  mean, p_value, relative_change) "
      "SELECT b.id, s, b.first_bad, s, CASE WHEN s % 2 = 0 THEN 'good' ELSE 'bad' END, 5, "
      "  2.9 - (s % 2) * 0.3, random() * 1e-3, -(s % 2) * 0.1 "
      "FROM bisects b CROSS JOIN generate_series(0, 7) s");
  w.exec(
      "INSERT INTO bisect_culprits (bisect_id, ordinal, commit_id, last_good, subject, "
      "  relative_change, share) "
      "SELECT id, 1, culprit_id, last_good, culprit_subject, -0.1, 1 FROM bisects");
  w.exec(
      "INSERT INTO analyzer_state (key, value) "
      "SELECT 'matrix:' || id, '{\"findings\": 0}'::jsonb FROM matrices");
  w.exec(
      "INSERT INTO analyzer_state (key, value) "
      "SELECT 'matrix_floor', to_jsonb(max(id)) FROM matrices");
  w.exec(
      "UPDATE job_state_totals SET jobs = (SELECT count(*) FROM jobs WHERE state = 3) "
      "WHERE state = 3 AND shard = 0");
}

// A fresh database at `uri` with the schema and the year `y`.
void Fill(const std::string& uri, const Year& y, int wide_commits, const char* label) {
  const Clock::time_point t0 = Clock::now();
  {
    farm::storage::PgPool pool({uri, 1, 3});
    Check(farm::storage::ApplyMigrations(pool), "migrations");
  }
  pqxx::connection c(uri);
  {
    pqxx::work w(c);
    FillReference(w, y);
    FillMatrices(w, y, wide_commits);
    w.commit();
  }
  int64_t lo = 0, hi = 0;
  {
    pqxx::nontransaction n(c);
    const pqxx::row range = n.exec1("SELECT min(id), max(id) FROM mk");
    lo = range[0].as<int64_t>();
    hi = range[1].as<int64_t>() + 1;
  }
  const int64_t step = 100;
  for (int64_t from = lo; from < hi; from += step) {
    pqxx::work w(c);
    FillJobsAndResults(w, from, std::min(hi, from + step));
    w.commit();
    std::fprintf(stderr, "\r%s: %lld/%lld matrices, %.0f s", label,
                 static_cast<long long>(std::min(hi, from + step) - lo),
                 static_cast<long long>(hi - lo), Seconds(t0));
  }
  {
    pqxx::work w(c);
    FillAnalysis(w);
    w.commit();
  }
  pqxx::nontransaction(c).exec("VACUUM ANALYZE");
  std::fprintf(stderr, "\n");
}

// ---------------------------------------------------------------- timing

struct Figure {
  std::string what;
  std::string unit;  // "s", "samples/s", "B"
  double small = 0, big = 0;
  std::string goal;  // e.g. "<= 10 s"
  double limit = 0;  // 0: no goal
  bool higher_is_better = false;
};

class Report {
 public:
  void Set(bool big, const std::string& what, const std::string& unit, double v,
           const std::string& goal = "", double limit = 0, bool higher_is_better = false) {
    for (Figure& f : figures_) {
      if (f.what != what) continue;
      (big ? f.big : f.small) = v;
      return;
    }
    Figure f{what, unit, 0, 0, goal, limit, higher_is_better};
    (big ? f.big : f.small) = v;
    figures_.push_back(f);
  }
  void Print() const;

 private:
  std::vector<Figure> figures_;
};

std::string Value(double v, const std::string& unit) {
  if (unit == "s") return absl::StrFormat("%.3f s", v);
  if (unit == "B") return absl::StrFormat("%.0f B", v);
  return absl::StrFormat("%.0f %s", v, unit);
}

void Report::Print() const {
  std::printf("%-58s %14s %14s %9s %12s %s\n", "operation", "small", "big", "big/small", "goal",
              "");
  for (const Figure& f : figures_) {
    std::string verdict;
    if (f.limit > 0) {
      const bool ok = f.higher_is_better ? f.big >= f.limit : f.big <= f.limit;
      verdict = ok ? "ok" : "MISSED";
    }
    std::printf("%-58s %14s %14s %9s %12s %s\n", f.what.substr(0, 58).c_str(),
                Value(f.small, f.unit).c_str(), Value(f.big, f.unit).c_str(),
                f.small > 0 ? absl::StrFormat("%.1f", f.big / f.small).c_str() : "-",
                f.goal.c_str(), verdict.c_str());
  }
}

// ---------------------------------------------------------------- ingest

// A workload's params as a Workload message holds them.
std::map<std::string, std::string> ParamsOf(const Workload& w) {
  const nlohmann::json j = nlohmann::json::parse(w.params);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : j.items()) out[k] = v.get<std::string>();
  return out;
}

// A matrix of `commits` x `platforms` x every workload x mode x repeat,
// cut to `max_jobs` (0: all).
farm::storage::NewMatrix MatrixOf(const std::string& name, const std::string& catalog,
                                  const std::vector<std::pair<std::string, int>>& commits,
                                  const std::vector<std::string>& platforms, int max_jobs,
                                  const std::string& spec_yaml) {
  farm::storage::NewMatrix m;
  m.matrix.set_name(name);
  m.matrix.set_spec_yaml(spec_yaml);
  m.matrix.set_catalog(catalog);
  m.matrix.set_platform(platforms[0]);
  m.matrix.set_executor(pb::EXECUTOR_EMULATOR);
  m.matrix.set_submitted_by("nightly-bot");
  for (int round = 0; max_jobs == 0 ? round < 1 : static_cast<int>(m.jobs.size()) < max_jobs;
       ++round) {
    for (const auto& [commit, index] : commits) {
      for (const std::string& platform : platforms) {
        for (const Workload& w : Workloads()) {
          for (int mode = 1; mode <= kModes; ++mode) {
            for (int r = 0; r < kRepeats; ++r) {
              if (max_jobs > 0 && static_cast<int>(m.jobs.size()) >= max_jobs) break;
              pb::Job& j = m.jobs.emplace_back();
              j.set_catalog(catalog);
              j.set_commit_id(commit);
              j.set_commit_index(index);
              j.set_platform(platform);
              j.mutable_workload()->set_name(w.name);
              for (const auto& [k, v] : ParamsOf(w))
                (*j.mutable_workload()->mutable_params())[k] = v;
              j.set_mode(static_cast<pb::IommuMode>(mode));
              j.set_repeat(round * kRepeats + r);
              j.set_executor(pb::EXECUTOR_EMULATOR);
              j.set_kind(pb::JOB_KIND_BULK);
              j.set_max_attempts(3);
            }
          }
        }
      }
    }
  }
  return m;
}

// What an emulator agent reports for `lease`: the workload's samples and
// one of its raw outputs.
pb::ReportResultRequest ResultFor(int64_t agent_id, const pb::JobLease& lease, std::mt19937_64& rng,
                                  const std::map<std::string, std::vector<std::string>>& raws) {
  pb::ReportResultRequest rr;
  rr.set_agent_id(agent_id);
  *rr.mutable_lease() = lease.lease();
  const pb::Job& job = lease.job();
  const double kFactor[] = {1, 1, 1.01, 1.4, 1.15};
  std::uniform_real_distribution<double> noise(0.985, 1.015);
  for (const Workload& w : Workloads()) {
    if (job.workload().name() != w.name) continue;
    const std::map<std::string, std::string> params(job.workload().params().begin(),
                                                    job.workload().params().end());
    if (params != ParamsOf(w)) continue;
    for (const Metric& m : w.metrics) {
      pb::Sample* s = rr.add_samples();
      s->set_metric(m.name);
      s->set_unit(m.unit);
      s->set_phase(m.phase);
      s->set_value(m.base * kFactor[job.mode() % 5] * noise(rng));
    }
    const std::vector<std::string>& pool = raws.at(absl::StrCat(w.name, w.params));
    // The job's own output (see FillJobsAndResults): no two results share one.
    std::string raw = pool[rng() % pool.size()];
    const std::string id = absl::StrFormat("%012d", job.id());
    if (raw.size() > 19 + id.size()) raw.replace(19, id.size(), id);
    rr.set_raw_output(std::move(raw));
    rr.set_raw_format(w.raw_format);
    rr.set_tool_version(w.tool_version);
    rr.mutable_host()->set_hostname("farm-agent");
    rr.mutable_host()->set_kernel_release("6.6.0-farm");
    rr.mutable_host()->set_cpus(96);
    rr.mutable_wall_time()->set_seconds(7);
  }
  return rr;
}

// `workers` agents lease (50 at a time) and report (one ReportResults per
// lease batch) until the queue is empty; returns the samples stored.
int64_t RunAgents(farm::storage::PgJobQueue* queue, int workers, const std::string& prefix) {
  std::map<std::string, std::vector<std::string>> raws;
  std::mt19937_64 seed_rng(7);
  for (const Workload& w : Workloads()) {
    for (int v = 0; v < 8; ++v)
      raws[absl::StrCat(w.name, w.params)].push_back(RawOutput(w, seed_rng));
  }
  std::atomic<int64_t> samples{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(100 + i);
      pb::RegisterRequest reg;
      reg.set_name(absl::StrCat(prefix, "-", i));
      reg.add_capabilities()->set_name("emulator");
      reg.set_slots(50);
      absl::StatusOr<pb::RegisterResponse> a = queue->RegisterAgent(reg, {});
      if (!a.ok()) return void(failed = true);
      const farm::storage::ClaimRules rules{.match_real_run_hosts = true,
                                            .within_free_slots = true};
      for (;;) {
        auto leases =
            queue->LeaseJobs(a->agent_id(), a->session(), 50, absl::Seconds(60), {}, rules);
        if (!leases.ok()) return void(failed = true);
        if (leases->empty()) return;
        std::vector<pb::ReportResultRequest> batch;
        for (const pb::JobLease& l : *leases)
          batch.push_back(ResultFor(a->agent_id(), l, rng, raws));
        auto outs = queue->ReportResults(batch);
        if (!outs.ok()) return void(failed = true);
        for (size_t k = 0; k < outs->size(); ++k) {
          if (!(*outs)[k].ok() || !(*outs)[k]->accepted) return void(failed = true);
          samples += batch[k].samples_size();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (failed) Die("an agent's lease or report failed");
  return samples;
}

// ---------------------------------------------------------------- one database

struct Context {
  std::string uri;
  Year year;
  const Options* options = nullptr;
  farm::storage::PgPool* pool = nullptr;
  farm::storage::PgStore* store = nullptr;
  farm::storage::AnalyzerStore* analyzer_store = nullptr;
};

std::pair<std::string, int> CommitAt(pqxx::connection& c, const std::string& catalog, int idx) {
  pqxx::nontransaction n(c);
  const pqxx::row r = n.exec_params1(
      "SELECT id, idx FROM catalog_commits WHERE catalog = $1 AND idx = $2", catalog, idx);
  return {r[0].as<std::string>(), r[1].as<int>()};
}

// The 1-minute load average, printed with each ingest so a noisy machine
// shows next to the figure it disturbed.
std::string LoadAverage() {
  const std::string s = farm::base::ReadFileOrEmpty("/proc/loadavg");
  return s.substr(0, s.find(' '));
}

// Samples per second of one ingest: a matrix of other platforms, leased and
// reported by --workers agents named `prefix`-N, marked analysed after so
// the analyzer's listing stays idle.
double IngestOnce(const Context& ctx, const std::string& prefix) {
  pqxx::connection c(ctx.uri);
  std::vector<std::string> platforms;
  for (int p = 0; p < kPlatforms; ++p) platforms.push_back(absl::StrCat("ingest-", p));
  const std::string& catalog = ctx.year.catalogs[0];
  const int next_idx = kCommitsPerDay * ctx.year.days + kCommitsPerDay - 1;
  auto ingest = MatrixOf("ingest", catalog, {CommitAt(c, catalog, next_idx - 1)}, platforms,
                         ctx.options->ingest_jobs, "name: ingest");
  const int64_t ingest_id = Check(ctx.store->CreateMatrix(ingest), "CreateMatrix").matrix.id();
  const Clock::time_point t0 = Clock::now();
  const int64_t samples = RunAgents(ctx.store, ctx.options->workers, prefix);
  const double rate = static_cast<double>(samples) / Seconds(t0);
  pqxx::nontransaction(c).exec_params(
      "INSERT INTO analyzer_state (key, value) VALUES ('matrix:' || $1, '{\"findings\": 0}')",
      ingest_id);
  return rate;
}

// The analyzer's idle listing, then the ingest rate.
void MeasureIngest(const Context& ctx, bool big, Report* report) {
  const Clock::time_point t0 = Clock::now();
  Check(ctx.analyzer_store->MatricesToAnalyze(), "MatricesToAnalyze");
  report->Set(big, "analyzer store: MatricesToAnalyze (none to analyse)", "s", Seconds(t0));
  const std::string load = LoadAverage();
  const double rate = IngestOnce(ctx, "ingest");
  std::printf("%s: ingest %.0f samples/s (load %s)\n", big ? "big" : "small", rate, load.c_str());
  report->Set(big, absl::StrCat("ingest: lease + ReportResults, ", ctx.options->workers, " agents"),
              "samples/s", rate, ">= 20000", 20000, true);
}

constexpr int kIngestsPerStart = 6;

// --ingest-against: the big database's ingest with the cluster's own
// shared_buffers and with `o.ingest_against`, alternated. A restart empties
// shared_buffers, so each setting's first ingest after one starts cold
// (from the kernel's page cache, its backends without cached plans); the
// lines show every ingest.
void AlternateIngest(farm::testing::PostgresInstance* pg, const std::string& uri, const Year& y,
                     const Options& o) {
  const std::string own = o.shared_buffers.empty() ? "32MB" : o.shared_buffers;
  for (int round = 0; round < o.ingest_rounds; ++round) {
    for (const std::string& size : {own, o.ingest_against}) {
      {
        pqxx::connection c(uri);
        pqxx::nontransaction(c).exec(
            absl::StrCat("ALTER SYSTEM SET shared_buffers = ", c.quote(size)));
      }
      if (absl::Status s = pg->Restart(); !s.ok()) Die(absl::StrCat("restart: ", s.ToString()));
      farm::storage::PgPool pool({uri, std::max(2, o.workers), 3});
      farm::storage::PgStore store(&pool);
      const Context ctx{uri, y, &o, &pool, &store, nullptr};
      for (int i = 0; i < kIngestsPerStart; ++i) {
        const std::string load = LoadAverage();
        const double rate = IngestOnce(ctx, absl::StrCat("ingest-", round, "-", size, "-", i));
        std::printf(
            "big: ingest round %d shared_buffers %s, ingest %d after restart: %.0f "
            "samples/s (load %s)\n",
            round + 1, size.c_str(), i + 1, rate, load.c_str());
        std::fflush(stdout);
      }
    }
  }
}

// The analyzer's store calls for a new nightly matrix of stream 0, the
// next day's commit of its catalog.
void MeasureNightly(const Context& ctx, bool big, Report* report) {
  pqxx::connection c(ctx.uri);
  farm::storage::AnalyzerStore* as = ctx.analyzer_store;
  const std::string& catalog = ctx.year.catalogs[0];
  const int next_idx = kCommitsPerDay * ctx.year.days + kCommitsPerDay - 1;
  std::vector<std::string> platforms;
  for (int p = 0; p < kPlatforms; ++p) platforms.push_back(PlatformOf(0, p));
  const std::pair<std::string, int> commit = CommitAt(c, catalog, next_idx);
  auto nightly = MatrixOf("nightly/new", catalog, {commit}, platforms, 0,
                          SpecYaml("nightly-s0", catalog, {commit.first}, 0));
  const int64_t id = Check(ctx.store->CreateMatrix(nightly), "CreateMatrix").matrix.id();
  RunAgents(ctx.store, ctx.options->workers, "nightly");

  std::vector<farm::storage::SampleRow> own;
  report->Set(big, "analyzer store: Samples(new nightly matrix)", "s",
              Fastest(ctx.options->runs,
                      [&] { own = Check(ctx.analyzer_store->Samples({id}), "Samples"); }));
  std::vector<farm::storage::HistoryCell> cells;
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (const farm::storage::SampleRow& s : own) {
    if (seen.insert({s.platform, s.workload, s.params}).second) {
      cells.push_back({s.platform, s.workload, s.params});
    }
  }
  size_t history = 0;
  report->Set(big, "analyzer store: HistorySamples(its cells, 100 matrices)", "s",
              Fastest(ctx.options->runs, [&] {
                history = Check(ctx.analyzer_store->HistorySamples(catalog, pb::EXECUTOR_EMULATOR,
                                                                   cells, id, 100),
                                "HistorySamples")
                              .size();
              }));
  // The analyzer's pass over the matrix, less its detection (CPU on the
  // samples read): listing, its samples, its history, the analysis record.
  const Clock::time_point t0 = Clock::now();
  const std::vector<farm::storage::MatrixInfo> todo =
      Check(as->MatricesToAnalyze(), "MatricesToAnalyze");
  if (todo.size() != 1 || todo[0].id != id) Die("MatricesToAnalyze does not list the new matrix");
  Check(as->Samples({id}), "Samples");
  Check(as->HistorySamples(catalog, pb::EXECUTOR_EMULATOR, cells, id, 100), "HistorySamples");
  Check(as->RecordAnalysis(id, catalog, {}, {}), "RecordAnalysis");
  report->Set(big, "analyzer store: the calls of one nightly matrix's analysis", "s", Seconds(t0),
              "<= 10 s", 10);
  std::printf("%s: new nightly matrix %lld: %zu own samples, %zu history samples\n",
              big ? "big" : "small", static_cast<long long>(id), own.size(), history);
  if (own.empty() || history == 0) Die("the new nightly matrix has no samples or no history");
}

// Every result of a matrix as the scheduler's GetResults stream reads them.
size_t ReadResults(farm::storage::PgStore* store, int64_t matrix) {
  Check(store->GetMatrix(matrix), "GetMatrix");
  size_t n = 0;
  int64_t after = 0;
  for (;;) {
    auto page = Check(store->ListResults(matrix, after, 500, false, 0), "ListResults");
    n += page.size();
    if (page.size() < 500) return n;
    after = page.back().job_id();
  }
}

std::vector<pb::Regression> AllRegressions(farm::storage::PgStore* store,
                                           pb::ListRegressionsRequest req) {
  std::vector<pb::Regression> out;
  for (;;) {
    req.set_page_size(1001);
    auto page = Check(store->ListRegressions(req), "ListRegressions");
    const bool more = page.size() == 1001;
    if (more) page.pop_back();
    out.insert(out.end(), page.begin(), page.end());
    if (!more) return out;
    req.set_page_token(absl::StrCat(out.back().id()));
  }
}

void MeasureCommands(const Context& ctx, bool big, Report* report) {
  pqxx::connection c(ctx.uri);
  pqxx::nontransaction n(c);
  const int64_t wide = n.exec1("SELECT id FROM matrices WHERE name LIKE 'wide/%'")[0].as<int64_t>();
  const int64_t prev =
      n.exec1("SELECT max(id) FROM matrices WHERE name LIKE 'nightly/%/s0/%'")[0].as<int64_t>();
  const int runs = ctx.options->runs;
  farm::storage::PgStore* store = ctx.store;
  report->Set(big, "farmctl results WIDE: GetMatrix + ListResults pages", "s",
              Fastest(runs, [&] { ReadResults(store, wide); }), "<= 2 s", 2);
  report->Set(big, "farmctl compare WIDE NIGHTLY: both matrices' results", "s",
              Fastest(runs,
                      [&] {
                        ReadResults(store, wide);
                        ReadResults(store, prev);
                      }),
              "<= 2 s", 2);
  report->Set(big, "farmctl regressions: ListRegressions (open)", "s",
              Fastest(runs, [&] { AllRegressions(store, {}); }), "<= 2 s", 2);
  pb::ListRegressionsRequest all;
  all.set_include_closed(true);
  all.set_include_improvements(true);
  report->Set(big, "farmctl regressions --all", "s",
              Fastest(runs, [&] { AllRegressions(store, all); }), "<= 2 s", 2);
  report->Set(big, "farmctl report WIDE: regressions, matrix, results, catalog, bisects", "s",
              Fastest(runs,
                      [&] {
                        pb::ListRegressionsRequest req = all;
                        req.set_matrix_id(wide);
                        const std::vector<pb::Regression> regs = AllRegressions(store, req);
                        const pb::Matrix m = Check(store->GetMatrix(wide), "GetMatrix");
                        ReadResults(store, wide);
                        Check(store->GetCatalog(m.catalog()), "GetCatalog");
                        for (const pb::Regression& g : regs)
                          Check(store->GetBisect(g.bisect_id(), 0), "GetBisect");
                      }),
              "<= 2 s", 2);
  report->Set(big, "farmctl matrix list: ListMatrices(50)", "s",
              Fastest(runs, [&] { Check(store->ListMatrices(50, 0), "ListMatrices"); }), "<= 2 s",
              2);
}

// The dashboard's PostgreSQL queries (panels, then template variables)
// with its variables set to a series of stream 0.
std::vector<std::pair<std::string, std::string>> DashboardQueries(const Year& y) {
  const std::string path = std::string(FARM_SOURCE_DIR) + "/dashboards/iommu-farm.json";
  const nlohmann::json d = nlohmann::json::parse(farm::base::ReadFileOrEmpty(path));
  std::vector<std::pair<std::string, std::string>> out;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& panels) {
    for (const nlohmann::json& p : panels) {
      if (p.contains("panels")) walk(p["panels"]);
      for (const nlohmann::json& t : p.value("targets", nlohmann::json::array())) {
        if (t.contains("rawSql")) out.emplace_back(p.value("title", ""), t["rawSql"]);
      }
    }
  };
  walk(d["panels"]);
  for (const nlohmann::json& v : d["templating"]["list"]) {
    const nlohmann::json ds = v.value("datasource", nlohmann::json::object());
    if (v.value("type", "") == "query" && v["query"].is_string() && ds.is_object() &&
        ds.value("type", "") == "grafana-postgresql-datasource") {
      out.emplace_back("variable $" + v["name"].get<std::string>(), v["query"]);
    }
  }
  if (out.empty()) Die("no PostgreSQL query in " + path);
  for (auto& [title, sql] : out) {
    sql = absl::StrReplaceAll(sql, {{"$platform", PlatformOf(0, 0)},
                                    {"$workload", "dma-map-bench"},
                                    {"$catalog", y.catalogs[0]},
                                    {"$kind", "1"},
                                    {"$phase", "(none)"},
                                    {"$metric", "throughput"}});
  }
  return out;
}

void MeasureDashboards(const Context& ctx, bool big, Report* report) {
  pqxx::connection c(ctx.uri);
  for (const auto& query : DashboardQueries(ctx.year)) {
    // Clang before 16 cannot capture a structured binding in a lambda.
    const std::string& title = query.first;
    const std::string& sql = query.second;
    size_t rows = 0;
    const double s = Fastest(ctx.options->runs, [&] {
      pqxx::nontransaction n(c);
      rows = n.exec(sql).size();
    });
    if (rows == 0) {
      Die("dashboard query of '" + title + "' returned no rows");
    }
    report->Set(big, "dashboard: " + title, "s", s, "<= 1 s", 1);
  }
}

// Where the bytes of results, jobs and raw_outputs go: each relation
// (heap, TOAST with its index, each index) per sample, largest first.
void PrintRelationBytes(pqxx::nontransaction& n, const char* label, double samples) {
  std::printf("%s: bytes per sample by relation\n", label);
  for (const pqxx::row& r : n.exec(
           "WITH t AS (SELECT oid, relname, reltoastrelid FROM pg_class "
           "  WHERE relname IN ('results', 'jobs', 'raw_outputs', 'result_hosts', 'sample_keys')) "
           "SELECT name, bytes FROM (SELECT relname AS name, pg_relation_size(oid) AS bytes FROM t "
           "  UNION ALL SELECT relname || ' (TOAST)', pg_total_relation_size(reltoastrelid) FROM t "
           "  WHERE reltoastrelid <> 0 "
           "  UNION ALL SELECT i.relname, pg_relation_size(i.oid) FROM t "
           "  JOIN pg_index x ON x.indrelid = t.oid JOIN pg_class i ON i.oid = x.indexrelid) s "
           "ORDER BY bytes DESC, name")) {
    std::printf("  %-40s %8.1f B\n", r[0].c_str(), r[1].as<double>() / samples);
  }
  std::fflush(stdout);
}

// Where a results and a jobs row's bytes go: each column's stored size
// (pg_column_size: compressed, or the TOAST pointer) and the whole row's
// per sample; the heap's figure above less these is tuple headers, line
// pointers, alignment and free space.
void PrintColumnBytes(pqxx::nontransaction& n, const char* label, double samples) {
  for (const char* table : {"results", "jobs"}) {
    std::vector<std::string> cols;
    for (const pqxx::row& r : n.exec_params(
             "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 "
             "AND NOT attisdropped ORDER BY attnum",
             table)) {
      cols.push_back(r[0].as<std::string>());
    }
    std::string sql = absl::StrCat("SELECT sum(pg_column_size(t.*))::float8");
    for (const std::string& col : cols) {
      absl::StrAppend(&sql, ", coalesce(sum(pg_column_size(", n.quote_name(col), ")), 0)::float8");
    }
    const pqxx::row r = n.exec1(absl::StrCat(sql, " FROM ", table, " t"));
    std::printf("%s: bytes per sample by column of %s (row %.1f B)\n", label, table,
                r[0].as<double>() / samples);
    for (size_t i = 0; i < cols.size(); ++i) {
      std::printf("  %-40s %8.1f B\n", cols[i].c_str(),
                  r[static_cast<int>(i + 1)].as<double>() / samples);
    }
  }
  std::fflush(stdout);
}

// Bytes per sample in PostgreSQL: results, jobs and the out-of-row raw
// outputs (raw_outputs), with and without the raw output. The inline raw
// output's bytes are its column's; an out-of-row one's are raw_outputs',
// while its digest in results counts as the result's.
void MeasureBytes(const Context& ctx, bool big, Report* report) {
  pqxx::connection c(ctx.uri);
  pqxx::nontransaction n(c);
  const pqxx::row r = n.exec1(
      "SELECT sum(cardinality(sample_values))::float8, count(*)::float8, "
      "  sum(coalesce(o.size, octet_length(raw_output)))::float8, "
      "  sum(pg_column_size(raw_output))::float8, "
      "  sum(pg_column_size(sample_key_ids) + pg_column_size(sample_values) "
      "    + coalesce(pg_column_size(sample_series), 0))::float8, "
      "  pg_total_relation_size('results')::float8, "
      "  pg_total_relation_size('jobs')::float8 + pg_total_relation_size('result_hosts') "
      "    + pg_total_relation_size('sample_keys'), "
      "  pg_database_size(current_database())::float8, "
      "  pg_total_relation_size('raw_outputs')::float8, "
      "  (SELECT coalesce(sum(pg_column_size(zstd)), 0) FROM raw_outputs)::float8 "
      "FROM results LEFT JOIN raw_outputs o ON o.digest = raw_digest");
  const double samples = r[0].as<double>(), results = r[1].as<double>();
  const double inline_raw = r[3].as<double>(), raw_table = r[8].as<double>();
  const double rows = r[5].as<double>() + r[6].as<double>();
  report->Set(big, "samples in the database", "samples", samples);
  report->Set(big, "database size", "B", r[7].as<double>());
  // results, jobs, result_hosts, sample_keys and raw_outputs; then the same
  // without the raw output.
  report->Set(big, "bytes per sample: results, jobs, hosts, keys, raw_outputs", "B",
              (rows + raw_table) / samples, "<= 200 B", 200);
  report->Set(big, "bytes per sample: the same without the raw output", "B",
              (rows - inline_raw) / samples, "<= 200 B", 200);
  report->Set(big, "bytes per sample: raw output (inline + raw_outputs)", "B",
              (inline_raw + raw_table) / samples);
  report->Set(big, "bytes per sample: results (heap, TOAST, indexes)", "B",
              r[5].as<double>() / samples);
  report->Set(big, "bytes per sample: the samples columns alone", "B", r[4].as<double>() / samples);
  report->Set(big, "bytes per raw output: as reported", "B", r[2].as<double>() / results);
  report->Set(big, "bytes per raw output: as stored (inline + zstd frames)", "B",
              (inline_raw + r[9].as<double>()) / results);
  report->Set(big, "bytes per raw output: raw_outputs with its index", "B",
              (inline_raw + raw_table) / results);
  PrintRelationBytes(n, big ? "big" : "small", samples);
  PrintColumnBytes(n, big ? "big" : "small", samples);
}

void MeasureDatabase(const std::string& uri, const Year& y, const Options& o, bool big,
                     Report* report) {
  farm::storage::PgPool pool({uri, std::max(2, o.workers), 3});
  farm::storage::PgStore store(&pool);
  std::unique_ptr<farm::storage::AnalyzerStore> analyzer_store =
      farm::storage::NewPgAnalyzerStore(&pool);
  const Context ctx{uri, y, &o, &pool, &store, analyzer_store.get()};
  MeasureDashboards(ctx, big, report);
  MeasureCommands(ctx, big, report);
  MeasureIngest(ctx, big, report);
  MeasureNightly(ctx, big, report);
  MeasureBytes(ctx, big, report);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"store_scale: the farm's database after a synthetic year, small vs big"};
  app.add_option("--samples", o.samples, "samples in the big database");
  app.add_option("--small", o.small, "samples in the small database");
  app.add_option("--wide-commits", o.wide_commits, "commits of the wide matrix");
  app.add_option("--ingest-jobs", o.ingest_jobs, "jobs of the ingest matrix");
  app.add_option("--workers", o.workers, "agents reporting concurrently");
  app.add_option("--runs", o.runs, "runs of each timed read (the fastest is reported)");
  app.add_option("--pg-shared-buffers", o.shared_buffers,
                 "the cluster's shared_buffers (default: the test harness's 32MB)");
  app.add_option("--ingest-against", o.ingest_against,
                 "after the report, alternate the big database's ingest between the cluster's "
                 "shared_buffers and this one (e.g. 4GB)");
  app.add_option("--ingest-rounds", o.ingest_rounds, "rounds of --ingest-against");
  app.add_option("--hold", o.hold,
                 "seconds to keep PostgreSQL up after the report (its URIs are printed), to "
                 "look at plans");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  farm::testing::PostgresOptions pg_options;
  // Room for the fill's WAL between checkpoints; the rest is PostgreSQL's default.
  pg_options.extra_config = {"max_wal_size = 4GB"};
  if (!o.shared_buffers.empty()) {
    pg_options.extra_config.push_back(absl::StrCat("shared_buffers = '", o.shared_buffers, "'"));
  }
  auto pg = Check(farm::testing::PostgresInstance::Start(pg_options), "postgres");
  Report report;
  std::vector<std::pair<std::string, Year>> dbs;
  for (const auto& [label, samples] : {std::pair{"small", o.small}, std::pair{"big", o.samples}}) {
    const Year y = YearOf(samples);
    const std::string uri = Check(pg->CreateDatabase(label), "create database");
    std::printf("%s: %d nightly streams x %d days x %d samples = %lld samples, %zu catalogs\n",
                label, y.streams, y.days, SamplesPerMatrix(),
                static_cast<long long>(y.planned_samples()), y.catalogs.size());
    std::fflush(stdout);
    const Clock::time_point t0 = Clock::now();
    Fill(uri, y, o.wide_commits, label);
    report.Set(std::string(label) == "big", "fill: generate_series through the schema", "samples/s",
               static_cast<double>(y.planned_samples()) / Seconds(t0));
    dbs.emplace_back(uri, y);
  }
  for (size_t i = 0; i < dbs.size(); ++i) {
    MeasureDatabase(dbs[i].first, dbs[i].second, o, i == 1, &report);
  }
  report.Print();
  if (!o.ingest_against.empty()) AlternateIngest(pg.get(), dbs[1].first, dbs[1].second, o);
  if (o.hold > 0) {
    for (const auto& db : dbs) std::printf("holding %s\n", db.first.c_str());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(o.hold));
  }
  return 0;
}
