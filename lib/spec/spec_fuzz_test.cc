// Property tests of the matrix spec's parser and checks (ParseMatrixSpec,
// MatrixSpecFromYaml, CheckMatrixSpec) over mutated specs and specs built at
// random: any text gets an answer, never a crash or a hang; an error names
// something and stays within FieldErrors' bound; a spec that maps comes back
// the same from its YAML form and meets the same checks. testing/fuzz.h says
// how to run longer.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "lib/base/utf8.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_testing.h"
#include "lib/spec/spec_yaml.h"
#include "testing/fuzz.h"

namespace farm::spec {
namespace {

using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

// FieldErrors' bound (kMaxReported lines of kMaxLineBytes, and the count
// line) with room for a syntax error's position.
constexpr size_t kMaxErrorBytes = 32 << 10;

const std::vector<std::string>& Seeds() {
  static const auto* seeds = new std::vector<std::string>{
      kGoodSpec,
      R"(name: k
catalog: linux-iommu
platform: this-host
commits: [v5.10]
modes: [strict]
executor: fio
workloads:
  - name: fio-randread
    params: {rw: randread, size: 8m, kernel_params: "iommu.forcedac=1 intel_iommu=sm_on"}
labels: {nic: cx6, disk: pm1733}
patch: |
  --- a/drivers/iommu/dma-iommu.c
  +++ b/drivers/iommu/dma-iommu.c
  @@ -1 +1 @@
  -a
  +b
)",
      R"(name: sweep
catalog: linux-iommu
platform: [intel-vtd-2s12c, amd-vi-1s64c]
commits: {from: v5.10, to: v5.12}
modes: [off, passthrough, strict, lazy]
workloads:
  - name: dma-map-bench
    params: {threads: [1, 16, 64], granule: 1}
  - name: iozone-nfsrdma
    params: {threads: 12, record: 256k, size: 1g, tests: [write, read]}
repeats: 3
seed: 42
kind: bisect
priority: -5
set: {agent.hold_ms: 20, fq.kind: percpu}
analysis:
  bisect: true
  confirm:
    executor: fio
    platform: vm-smmuv3
    repeats: 2
    max_repeats: 8
    metric: iops/read
    workload:
      name: fio-nvme
      params: {rw: randread, bs: 4k, iodepth: 16, runtime: 2, time_based: 1}
)",
      "name: a\ncatalog: c\nplatform: p\ncommits: [a, b, c]\nmodes: [lazy]\nworkloads: "
      "[{name: iozone-nfsrdma, params: {size: 1m, tests: [write, read]}}]\nexecutor: iozone\n",
      "base: &b {threads: 1}\nname: x\nworkloads: [{name: w, params: *b}, {name: v, params: *b}]\n",
  };
  return *seeds;
}

const std::vector<std::string>& Words() {
  static const auto* words = new std::vector<std::string>{
      "name: ",   "catalog: ",  "platform: ", "commits: ", "modes: ",       "workloads: ",
      "params: ", "repeats: ",  "executor: ", "analysis:", "confirm:",      "bisect: true",
      "kind: ",   "priority: ", "seed: ",     "set: ",     "labels: ",      "patch: ",
      "from: ",   "to: ",       "sweep: ",    "metric: ",  "strict",        "lazy",
      "off",      "emulator",   "fio",        "iozone",    "dma-map-bench", "v5.10..",
      "\n  - ",   "\n    ",     "{}",         "[]",        "&x ",           "*x",
      "<<: ",     "!!str ",     "!!int ",     "0x",        "0o17",
  };
  return *words;
}

// The properties of one text: an answer within bounds, and a spec that maps
// reads back the same from the YAML it is written as, with the same verdict.
void SpecTextProperties(const std::string& yaml) {
  const absl::StatusOr<MatrixSpec> parsed = ParseMatrixSpec(yaml, {});
  if (!parsed.ok()) {
    EXPECT_FALSE(parsed.status().message().empty()) << parsed.status();
    EXPECT_LE(parsed.status().message().size(), kMaxErrorBytes);
  }
  const absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(yaml, {});
  if (!typed.ok()) {
    EXPECT_FALSE(parsed.ok()) << "maps with errors yet parses";
    EXPECT_FALSE(typed.status().message().empty());
    return;
  }
  const absl::StatusOr<MatrixSpec> checked = CheckMatrixSpec(*typed, {});
  EXPECT_EQ(checked.ok(), parsed.ok()) << checked.status() << "\nvs\n" << parsed.status();
  const std::string again_yaml = MatrixSpecToYaml(*typed);
  const absl::StatusOr<pb::MatrixSpec> again = MatrixSpecFromYaml(again_yaml, {});
  // The YAML form is the stored form of an accepted typed spec; one the
  // checks refuse (no name, no commits) need not map back.
  if (!checked.ok()) return;
  ASSERT_TRUE(again.ok()) << again.status() << "\nwritten as:\n" << again_yaml;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*typed, *again))
      << typed->DebugString() << "\nvs\n"
      << again->DebugString();
  EXPECT_EQ(CheckMatrixSpec(*again, {}).ok(), checked.ok());
  EXPECT_EQ(MatrixSpecToYaml(*again), again_yaml) << "the YAML form is not stable";
}

TEST(SpecFuzzTest, MutatedSpecsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(2000);
  Mutator m(config.seed, Seeds(), Words());
  RunFuzz(
      config, [&] { return m.Next(); }, SpecTextProperties);
}

// A spec put together from fields each valid or not, so the checks past the
// YAML mapping see many shapes of plausible specs.
std::string RandomSpec(Mutator& m) {
  auto pick = [&m](std::vector<std::string> v) { return m.Pick(v); };
  std::string y;
  if (!m.OneIn(8)) y += "name: " + pick({"n", "\"\"", "x y", std::string(201, 'n'), "[a]"}) + "\n";
  if (!m.OneIn(8)) y += "catalog: " + pick({"linux-iommu", "vm-kernels", "", "{}"}) + "\n";
  if (!m.OneIn(8)) {
    y += "platform: " +
         pick({"intel-vtd-2s12c", "this-host", "[a, a]", "[]", "q35-intel-iommu", "vm-smmuv3"}) +
         "\n";
  }
  if (!m.OneIn(8)) {
    y += "commits: " +
         pick({"v5.10..v5.12", "[v4.6]", "[]", "{from: a}", "..", "[a, a]", "v5.10.."}) + "\n";
  }
  if (!m.OneIn(8)) {
    y +=
        "modes: " +
        pick({"[off, strict, lazy]", "[strict, strict]", "[]", "[stict]", "off", "[unspecified]"}) +
        "\n";
  }
  y += "executor: " + pick({"emulator", "fio", "iozone", "dma-map-bench", "bogus", "\"\""}) + "\n";
  y += "workloads:\n";
  const size_t n = m.Below(4);
  for (size_t i = 0; i < n; ++i) {
    y += "  - name: " +
         pick({"iozone-nfsrdma", "dma-map-bench", "fio-randread", "fio-nvme", "w", ""}) + "\n";
    y += "    params: {" +
         pick({"threads: 12", "threads: [1, 16]", "rw: randread", "size: 1m", "size: -1",
               "tests: [write, read]", "bs: 4k", "iodepth: 99999999999", "record: 256k",
               "kernel_params: \"iommu.strict=1\"", "granule: nan", "threads: []"}) +
         ", " + pick({"size: 8m", "runtime: 2", "time_based: 1", "direct: maybe", "x: y"}) + "}\n";
  }
  if (m.OneIn(2)) y += "repeats: " + pick({"1", "0", "-1", "10001", "1e3", "inf"}) + "\n";
  if (m.OneIn(3)) y += "kind: " + pick({"bulk", "confirm", "bisect", "urgent"}) + "\n";
  if (m.OneIn(3)) y += "priority: " + pick({"0", "999", "-1000", "nan"}) + "\n";
  if (m.OneIn(3)) y += "seed: " + pick({"1", "-1", "18446744073709551616", "0x10"}) + "\n";
  if (m.OneIn(3)) y += "set: " + pick({"{fq.kind: percpu}", "{a: [1, 2]}", "{bogus: 1}"}) + "\n";
  if (m.OneIn(3)) y += "labels: " + pick({"{nic: cx6}", "{Nic: x}", "[cx6]", "{}"}) + "\n";
  if (m.OneIn(4)) y += "patch: " + pick({"\"--- a/x\\n+++ b/x\\n\"", "text", "\"\""}) + "\n";
  if (m.OneIn(3)) {
    y += "analysis: {bisect: " + pick({"true", "false", "1", "maybe"}) +
         pick({"}", ", confirm: {executor: fio, workload: {name: w, params: {rw: write}}}}",
               ", confirm: {executor: emulator}}", ", confirm: {repeats: 101}}"}) +
         "\n";
  }
  if (m.OneIn(4)) m.Mutate(y);
  return y;
}

TEST(SpecFuzzTest, RandomSpecsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(2000);
  Mutator m(config.seed, Seeds(), Words());
  RunFuzz(
      config, [&] { return RandomSpec(m); }, SpecTextProperties);
}

// A try job's patch goes to the scheduler in the YAML form (farmctl try) and
// its try commit id is a hash of its bytes: the form must keep every one.
void PatchProperties(const std::string& patch) {
  absl::StatusOr<pb::MatrixSpec> spec = MatrixSpecFromYaml(Seeds()[1], {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->set_patch(patch);
  const std::string yaml = MatrixSpecToYaml(*spec);
  const absl::StatusOr<pb::MatrixSpec> back = MatrixSpecFromYaml(yaml, {});
  // A typed spec's strings are UTF-8 (protobuf refuses others on the wire);
  // the emitter writes U+FFFD for a bad byte.
  if (!base::IsValidUtf8(patch) || patch.find('\0') != std::string::npos) return;
  ASSERT_TRUE(back.ok()) << back.status() << "\nwritten as:\n" << yaml;
  EXPECT_EQ(back->patch(), patch) << yaml;
}

constexpr char kPatch[] =
    "--- a/drivers/iommu/dma-iommu.c\n+++ b/drivers/iommu/dma-iommu.c\n@@ -1 +1 @@\n-a\n+b\n";

// Texts a literal block does not keep: no final newline, git format-patch's
// signature (a final blank line), a CRLF file, a first line of context.
TEST(SpecFuzzTest, PatchesThatALiteralBlockWouldChange) {
  for (const std::string& patch :
       {std::string(kPatch, sizeof(kPatch) - 2), std::string(kPatch) + "-- \n2.39.2\n\n",
        absl::StrReplaceAll(kPatch, {{"\n", "\r\n"}}), std::string(" ctx\n") + kPatch,
        std::string("\n") + kPatch, std::string(kPatch) + "\t\x7f\n"}) {
    SCOPED_TRACE(testing::FuzzShow(patch));
    PatchProperties(patch);
  }
}

TEST(SpecFuzzTest, MutatedPatchesKeepEveryByte) {
  const auto config = FuzzConfigFromEnv(2000);
  Mutator m(config.seed, {kPatch, std::string(kPatch) + "-- \n2.39.2\n\n"});
  RunFuzz(
      config, [&] { return m.Next(); }, PatchProperties);
}

}  // namespace
}  // namespace farm::spec
