// emu_bench: how fast the emulation core simulates, on one host core.
//
// BM_EmuDmaMapBench/<threads>: dma-map-bench on kunpeng920-smmuv3, strict
// mode, latest kernel (every unmap goes through the lock-free SMMUv3 command
// queue), with 1 and 128 virtual threads. In the same benchmark it runs a
// bare loop doing the same allocator and page-table work without the engine
// (magazine pop/push in front of the real IOVA rbtree, IoPageTable map/unmap,
// IOTLB range invalidation) and reports:
//   emu_pairs_per_cpu_s   simulated map+unmap pairs per host CPU second
//   emu_pairs_per_wall_s  the same per wall-clock second
//   bare_pairs_per_cpu_s  the bare loop
//   emu_over_bare         emu / bare (the engine's and model's overhead factor)
// Run: build-emu/bench/emu_bench --benchmark_min_time=1
#include <time.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "emu/iommu/io_pgtable.h"
#include "emu/iommu/iova.h"
#include "emu/run/run.h"

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The allocator and page-table work of one map+unmap pair, without engine,
// coroutines, locks or costs.
uint64_t BareLoop(uint64_t pairs) {
  farm::emu::IovaDomain iovad(nullptr, "bare", 1, 1);
  farm::emu::IoPageTable pt;
  farm::emu::Iotlb tlb(128, 4);
  std::vector<uint64_t> magazine;  // per-CPU loaded magazine
  magazine.reserve(128);
  uint64_t checksum = 0;
  int visited = 0;
  const uint64_t limit = 1ULL << 20;
  for (uint64_t i = 0; i < pairs; ++i) {
    uint64_t pfn;
    if (!magazine.empty()) {
      pfn = magazine.back();
      magazine.pop_back();
    } else {
      pfn = iovad.AllocAndInsertRangeLocked(1, limit, true, &visited);
    }
    farm::emu::PtWork w = pt.Map(pfn, 0x100000 + (i & 1023), 1);
    uint64_t n = 0;
    pt.Unmap(pfn, 1, &n);
    tlb.InvalidateRange(pfn, 1);
    if (magazine.size() < 128) {
      magazine.push_back(pfn);
    } else {
      iovad.RemoveLocked(pfn, &visited);
    }
    checksum += static_cast<uint64_t>(w.ptes) + n;
  }
  return checksum;
}

void BM_EmuDmaMapBench(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  farm::emu::RunSpec spec;
  spec.platform = "kunpeng920-smmuv3";
  spec.kernel = "latest";
  spec.mode = "strict";
  spec.workload = "dma-map-bench";
  // About 200k simulated pairs per iteration either way.
  spec.params = {{"threads", std::to_string(threads)}, {"seconds", threads == 1 ? "0.1" : "0.1"}};
  double emu_cpu = 0, emu_wall = 0, bare_cpu = 0;
  uint64_t pairs = 0;
  for (auto _ : state) {
    double c0 = ThreadCpuSeconds();
    auto w0 = std::chrono::steady_clock::now();
    auto r = farm::emu::RunEmulation(spec);
    auto w1 = std::chrono::steady_clock::now();
    double c1 = ThreadCpuSeconds();
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    emu_cpu += c1 - c0;
    emu_wall += std::chrono::duration<double>(w1 - w0).count();
    pairs += r->operations;
    double b0 = ThreadCpuSeconds();
    benchmark::DoNotOptimize(BareLoop(r->operations));
    bare_cpu += ThreadCpuSeconds() - b0;
  }
  double emu_rate = static_cast<double>(pairs) / emu_cpu;
  double bare_rate = static_cast<double>(pairs) / bare_cpu;
  state.counters["emu_pairs_per_cpu_s"] = emu_rate;
  state.counters["emu_pairs_per_wall_s"] = static_cast<double>(pairs) / emu_wall;
  state.counters["bare_pairs_per_cpu_s"] = bare_rate;
  state.counters["emu_over_bare"] = emu_rate / bare_rate;
  state.counters["pairs_per_iteration"] =
      static_cast<double>(pairs) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_EmuDmaMapBench)->Arg(1)->Arg(128)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
