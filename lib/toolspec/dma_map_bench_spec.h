// lib/toolspec/dma_map_bench_spec: the kernel's DMA-API micro benchmark as a
// real job runs it. kernel/dma/map_benchmark.c (CONFIG_DMA_MAP_BENCHMARK)
// binds to a PCI device through driver_override and times
// dma_map_single/dma_unmap_single pairs in kernel threads; its selftest tool
// (tools/testing/selftests/dma/dma_map_benchmark.c) starts a run with one
// ioctl on /sys/kernel/debug/dma_map_benchmark and prints three lines. This
// is the typed run built from a job's workload params, the tool's argv, and
// the parse of its output.
//
// Contract:
// - DmaMapBenchSpecFromParams accepts the emulator's dma-map-bench param
//   names (emu/workloads/dma_map_bench.cc) within the kernel's own limits
//   (map_benchmark_ioctl: threads 1..1024, seconds 1..300 whole, node -1 or
//   a node, dir 0..2, dma_trans_ns up to 10 ms, granule 1..1024, bits
//   20..64); anything else is InvalidArgument saying why. The emulator's
//   `device` param has no meaning in a guest and is refused.
// - ParseDmaMapBenchOutput reads the tool's lines verbatim (its "%.1f" us
//   figures are the kernel's 100 ns integers divided by 10) and refuses
//   output without both latency lines.
// - Pure functions, thread-safe.
#ifndef LIB_TOOLSPEC_DMA_MAP_BENCH_SPEC_H_
#define LIB_TOOLSPEC_DMA_MAP_BENCH_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/toolspec/params.h"

namespace farm::toolspec {

struct DmaMapBenchSpec {
  int threads = 1;       // -t
  int seconds = 1;       // -s (the tool's own default is 20)
  int node = -1;         // -n, NUMA_NO_NODE
  int bits = 32;         // -b, the device's DMA mask
  int dir = 0;           // -d: 0 BIDIRECTIONAL, 1 TO_DEVICE, 2 FROM_DEVICE
  int dma_trans_ns = 0;  // -x, the ndelay between map and unmap
  int granule = 1;       // -g, pages per mapping
};

const std::vector<std::string>& DmaMapBenchAllowedParams();

absl::StatusOr<DmaMapBenchSpec> DmaMapBenchSpecFromParams(const Params& params);

// `tool` -t .. -s .. -n .. -b .. -d .. -x .. -g ..
std::vector<std::string> DmaMapBenchArgv(const DmaMapBenchSpec& spec, const std::string& tool);

// The kernel's figures, in its 100 ns units.
struct DmaMapBenchReport {
  double avg_map_100ns = 0;
  double map_stddev = 0;
  double avg_unmap_100ns = 0;
  double unmap_stddev = 0;
};

absl::StatusOr<DmaMapBenchReport> ParseDmaMapBenchOutput(absl::string_view out);

}  // namespace farm::toolspec

#endif  // LIB_TOOLSPEC_DMA_MAP_BENCH_SPEC_H_
