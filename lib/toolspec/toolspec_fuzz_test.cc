// Property tests of the checks of a real job's tool params (fio, iozone,
// dma_map_benchmark) and of the benchmark's output parser, over params built
// from the allowed keys with mutated values: any params get an answer, never
// a crash or a hang; an error names a param and is short; a spec that passes
// holds values in the documented ranges. testing/fuzz.h says how to run
// longer.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "lib/toolspec/dma_map_bench_spec.h"
#include "lib/toolspec/fio_spec.h"
#include "lib/toolspec/iozone_spec.h"
#include "lib/toolspec/params.h"
#include "testing/fuzz.h"

namespace farm::toolspec {
namespace {

using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

// An error's own words; it also quotes the value it refuses, whole (a
// value is bounded by the spec's size, and the spec's checks cut each line).
constexpr size_t kMaxErrorBytes = 2048;

size_t Bytes(const Params& p) {
  size_t n = 0;
  for (const auto& [k, v] : p) n += k.size() + v.size();
  return n;
}

const std::vector<std::string>& Values() {
  static const auto* values = new std::vector<std::string>{"read",
                                                           "randrw",
                                                           "4k",
                                                           "4KiB",
                                                           "1m",
                                                           "2g",
                                                           "1t",
                                                           "16",
                                                           "0",
                                                           "-1",
                                                           "1",
                                                           "30s",
                                                           "2m",
                                                           "1h",
                                                           "true",
                                                           "off",
                                                           "yes",
                                                           "psync",
                                                           "libaio",
                                                           "io_uring",
                                                           "exec",
                                                           "/dev/nvme0n1",
                                                           "/tmp/x",
                                                           "../x",
                                                           "0-3,8,10-11",
                                                           "3-0",
                                                           "write,read",
                                                           "[write, read]",
                                                           "write,,read",
                                                           "$(id)",
                                                           "${HOME}",
                                                           "a:b",
                                                           "18446744073709551615",
                                                           "99999999999999999999k",
                                                           "1e3",
                                                           " 4k",
                                                           "4k ",
                                                           "0x10",
                                                           ""};
  return *values;
}

// Params of `keys` (and a stranger now and then) with values that are
// plausible, odd or mutated.
Params RandomParams(Mutator& m, const std::vector<std::string>& keys) {
  Params p;
  const size_t n = m.Below(keys.size() + 2);
  for (size_t i = 0; i < n; ++i) {
    std::string key =
        m.OneIn(10)
            ? m.Pick(std::vector<std::string>{"exec_prerun", "ioengine", "trim", "output", "x"})
            : m.Pick(keys);
    std::string value = m.Pick(Values());
    if (m.OneIn(3)) m.Mutate(value);
    p[key] = value;
  }
  return p;
}

std::string Show(const Params& p) {
  std::string s;
  for (const auto& [k, v] : p) absl::StrAppend(&s, k, "=", testing::FuzzShow(v, 200), " ");
  return s;
}

template <typename T>
void ExpectAnswer(const absl::StatusOr<T>& r, const Params& p) {
  if (r.ok()) return;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_FALSE(r.status().message().empty());
  EXPECT_LE(r.status().message().size(), kMaxErrorBytes + Bytes(p)) << r.status();
  bool names_one = p.empty();
  for (const auto& [k, v] : p) names_one |= absl::StrContains(r.status().message(), k);
  EXPECT_TRUE(names_one || absl::StrContains(r.status().message(), "param")) << r.status();
}

TEST(ToolSpecFuzzTest, RandomParamsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(10000);
  Mutator m(config.seed, {""});
  Params p;
  RunFuzz(
      config,
      [&] {
        switch (m.Below(3)) {
          case 0:
            p = RandomParams(m, FioAllowedParams());
            break;
          case 1:
            p = RandomParams(m, IozoneAllowedParams());
            break;
          default:
            p = RandomParams(m, DmaMapBenchAllowedParams());
        }
        return Show(p);
      },
      [&](const std::string&) {
        absl::StatusOr<FioSpec> fio = FioSpecFromParams(p);
        ExpectAnswer(fio, p);
        if (fio.ok()) {
          EXPECT_GT(fio->bs_bytes, 0u);
          EXPECT_GE(fio->iodepth, 1);
          EXPECT_GE(fio->numjobs, 1);
          EXPECT_GE(fio->runtime_s, 0);
        }
        absl::StatusOr<IozoneSpec> iozone = IozoneSpecFromParams(p);
        ExpectAnswer(iozone, p);
        if (iozone.ok()) {
          EXPECT_GT(iozone->size_bytes, 0u);
          EXPECT_GT(iozone->record_bytes, 0u);
          EXPECT_GE(iozone->threads, 1);
          EXPECT_FALSE(iozone->tests.empty());
        }
        absl::StatusOr<DmaMapBenchSpec> bench = DmaMapBenchSpecFromParams(p);
        ExpectAnswer(bench, p);
        if (bench.ok()) {
          EXPECT_GE(bench->threads, 1);
          EXPECT_LE(bench->threads, 1024);
          EXPECT_GE(bench->seconds, 1);
          EXPECT_LE(bench->seconds, 300);
          EXPECT_GE(bench->bits, 20);
          EXPECT_LE(bench->bits, 64);
          EXPECT_GE(bench->granule, 1);
          EXPECT_LE(bench->granule, 1024);
          EXPECT_EQ(DmaMapBenchArgv(*bench, "tool").front(), "tool");
        }
      });
}

// The value grammars alone: a value that passes lies in the range asked.
TEST(ToolSpecFuzzTest, MutatedValuesParseWithinTheirRange) {
  const auto config = FuzzConfigFromEnv(10000);
  Mutator m(config.seed, Values());
  RunFuzz(
      config, [&] { return m.Next(); },
      [&](const std::string& v) {
        absl::StatusOr<uint64_t> bytes = ParseBytes("bs", v, 512, 1ull << 40);
        if (bytes.ok()) {
          EXPECT_GE(*bytes, 512u);
          EXPECT_LE(*bytes, 1ull << 40);
        }
        absl::StatusOr<int64_t> i = ParseInt("n", v, -5, 1000);
        if (i.ok()) {
          EXPECT_GE(*i, -5);
          EXPECT_LE(*i, 1000);
        }
        absl::StatusOr<int64_t> s = ParseSeconds("t", v, 1, 86400);
        if (s.ok()) {
          EXPECT_GE(*s, 1);
          EXPECT_LE(*s, 86400);
        }
        absl::StatusOr<std::vector<std::string>> list = ParseList("tests", v);
        if (list.ok()) {
          for (const std::string& item : *list) EXPECT_FALSE(item.empty());
        }
        for (const absl::Status& st :
             {bytes.status(), i.status(), s.status(), list.status(), ParseBool("b", v).status(),
              CheckCpuList("cpus_allowed", v)}) {
          if (!st.ok()) EXPECT_LE(st.message().size(), kMaxErrorBytes + v.size()) << st;
        }
      });
}

TEST(ToolSpecFuzzTest, MutatedBenchmarkOutputGetsAnAnswer) {
  const auto config = FuzzConfigFromEnv(10000);
  Mutator m(config.seed,
            {"dma mapping benchmark: threads:1 seconds:1 node:-1 dir:BIDIRECTIONAL granule: 1\n"
             "average map latency(us):93.7 standard deviation:12.0\n"
             "average unmap latency(us):141.3 standard deviation:0.4\n"},
            {"average map latency(us):", "average unmap latency(us):", " standard deviation:"});
  RunFuzz(
      config, [&] { return m.Next(); },
      [&](const std::string& out) {
        absl::StatusOr<DmaMapBenchReport> r = ParseDmaMapBenchOutput(out);
        if (!r.ok()) {
          EXPECT_FALSE(r.status().message().empty());
          EXPECT_LE(r.status().message().size(), kMaxErrorBytes + out.size()) << r.status();
        }
      });
}

}  // namespace
}  // namespace farm::toolspec
