#include "lib/toolspec/dma_map_bench_spec.h"

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace farm::toolspec {
namespace {

struct IntParam {
  const char* name;
  int DmaMapBenchSpec::*field;
  int min, max;
};

// map_benchmark_ioctl's checks (kernel/dma/map_benchmark.c).
constexpr IntParam kIntParams[] = {
    {"threads", &DmaMapBenchSpec::threads, 1, 1024},
    {"seconds", &DmaMapBenchSpec::seconds, 1, 300},
    {"node", &DmaMapBenchSpec::node, -1, 1 << 20},
    {"bits", &DmaMapBenchSpec::bits, 20, 64},
    {"dir", &DmaMapBenchSpec::dir, 0, 2},
    {"dma_trans_ns", &DmaMapBenchSpec::dma_trans_ns, 0, 10 * 1000 * 1000},
    {"granule", &DmaMapBenchSpec::granule, 1, 1024},
};

// "average map latency(us):12.3 standard deviation:4.5" -> {123, 45}.
bool ParseLatencyLine(absl::string_view line, absl::string_view prefix, double* avg,
                      double* stddev) {
  if (!absl::ConsumePrefix(&line, prefix)) return false;
  const std::vector<absl::string_view> parts = absl::StrSplit(line, " standard deviation:");
  if (parts.size() != 2) return false;
  double a = 0, s = 0;
  if (!absl::SimpleAtod(parts[0], &a) || !absl::SimpleAtod(parts[1], &s)) return false;
  // Back to the kernel's integers: the tool printed them divided by 10.
  *avg = static_cast<double>(static_cast<long long>(a * 10 + 0.5));
  *stddev = static_cast<double>(static_cast<long long>(s * 10 + 0.5));
  return true;
}

}  // namespace

const std::vector<std::string>& DmaMapBenchAllowedParams() {
  static const auto* keys = [] {
    auto* k = new std::vector<std::string>;
    for (const IntParam& p : kIntParams) k->emplace_back(p.name);
    return k;
  }();
  return *keys;
}

absl::StatusOr<DmaMapBenchSpec> DmaMapBenchSpecFromParams(const Params& params) {
  DmaMapBenchSpec spec;
  for (const auto& [key, value] : params) {
    const IntParam* p = std::find_if(std::begin(kIntParams), std::end(kIntParams),
                                     [&](const IntParam& q) { return key == q.name; });
    if (p == std::end(kIntParams)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dma-map-bench param '", key, "' refused: ",
          key == "device" ? "a guest's benchmark device is the vm provider's spare PCI device"
                          : absl::StrCat("unknown option; allowed: ",
                                         absl::StrJoin(DmaMapBenchAllowedParams(), ", "))));
    }
    absl::StatusOr<std::int64_t> v = ParseInt(key, value, p->min, p->max);
    if (!v.ok()) return v.status();
    spec.*(p->field) = static_cast<int>(*v);
  }
  return spec;
}

std::vector<std::string> DmaMapBenchArgv(const DmaMapBenchSpec& spec, const std::string& tool) {
  return {tool,
          "-t",
          absl::StrCat(spec.threads),
          "-s",
          absl::StrCat(spec.seconds),
          "-n",
          absl::StrCat(spec.node),
          "-b",
          absl::StrCat(spec.bits),
          "-d",
          absl::StrCat(spec.dir),
          "-x",
          absl::StrCat(spec.dma_trans_ns),
          "-g",
          absl::StrCat(spec.granule)};
}

absl::StatusOr<DmaMapBenchReport> ParseDmaMapBenchOutput(absl::string_view out) {
  DmaMapBenchReport r;
  bool map = false, unmap = false;
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    map =
        map || ParseLatencyLine(line, "average map latency(us):", &r.avg_map_100ns, &r.map_stddev);
    unmap = unmap || ParseLatencyLine(line, "average unmap latency(us):", &r.avg_unmap_100ns,
                                      &r.unmap_stddev);
  }
  if (!map || !unmap) {
    return absl::InvalidArgumentError(
        absl::StrCat("dma_map_benchmark printed no ", map ? "unmap" : "map", " latency line"));
  }
  return r;
}

}  // namespace farm::toolspec
