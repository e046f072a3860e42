// catalog_bench: how LoadCatalog's parse scales with the catalog's size.
//
// BM_ParseCatalog/<commits>: ParseCatalogYaml (what the scheduler runs for
// LoadCatalog) over a generated catalog of 1,000 to 10,000 commits (every
// 100th sets a model key, as in control_plane_pgtest's big catalog).
// Reports commits_per_s. BM_ResolveRange/<commits> resolves the whole
// range A..B of a parsed catalog (what SubmitMatrix does with it). Linear
// work shows as a flat commits_per_s across sizes; quadratic work halves it
// each time the size doubles.
// Run: build/bin/catalog_bench --benchmark_min_time=0.5
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "lib/spec/matrix_spec.h"
#include "scheduler/catalog_yaml.h"
#include "scheduler/spec.h"

namespace {

std::string BigCatalog(int commits) {
  std::string y = "catalog: big\ncommits:\n";
  for (int i = 0; i < commits; ++i) {
    absl::StrAppend(&y, "  - id: ", absl::StrFormat("%012x", 0x100000000000LL + i),
                    "\n    subject: \"commit ", i, "\"\n");
    if (i % 100 == 0) absl::StrAppend(&y, "    set: {iova.rcache.mag_size: ", 64 + i % 7, "}\n");
  }
  return y;
}

void BM_ParseCatalog(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::string yaml = BigCatalog(n);
  for (auto _ : state) {
    auto cat = farm::scheduler::ParseCatalogYaml(yaml, "big.yaml");
    if (!cat.ok() || cat->commits_size() != n) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(cat);
  }
  state.counters["commits_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ParseCatalog)
    ->Arg(1000)
    ->Arg(2500)
    ->Arg(5000)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);

void BM_ResolveRange(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  auto cat = farm::scheduler::ParseCatalogYaml(BigCatalog(n), "big.yaml");
  farm::spec::MatrixSpec spec;
  spec.catalog = "big";
  spec.commit_range = true;
  spec.range_from = cat->commits(0).id();
  spec.range_to = cat->commits(n - 1).id();
  for (auto _ : state) {
    auto picked = farm::scheduler::ResolveCommits(spec, *cat);
    if (!picked.ok() || static_cast<int>(picked->size()) != n) state.SkipWithError("resolve");
    benchmark::DoNotOptimize(picked);
  }
  state.counters["commits_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ResolveRange)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
