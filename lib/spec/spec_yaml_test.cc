// The YAML <-> MatrixSpec mapping: round trips, what cannot be mapped, and
// the limits a YAML text meets before it becomes nodes.
#include "lib/spec/spec_yaml.h"

#include <fstream>
#include <set>
#include <string>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_testing.h"
#include "lib/spec/yaml_document.h"
#include "lib/spec/yaml_limits.h"

namespace farm::spec {
namespace {

// Resident set size of this process in KiB (Linux /proc), 0 if unknown.
int64_t RssKib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      in >> kib;
      return kib;
    }
    std::getline(in, key);
  }
  return 0;
}

TEST(SpecTest, NotAMapAndSyntaxErrors) {
  EXPECT_NE(ErrorOf("- a\n- b\n").find("expected a YAML map"), std::string::npos);
  EXPECT_NE(ErrorOf("name: [unclosed\n").find("YAML syntax error at line"), std::string::npos);
  EXPECT_NE(ErrorOf("").find("expected a YAML map"), std::string::npos);
}

// Escapes in double-quoted scalars ("\0") and raw bytes make text the
// request's own UTF-8 check never sees; each is refused under its field
// path and line, keys included, and its value is not echoed. (yaml-cpp
// itself refuses an escaped surrogate such as "\ud800".)
TEST(SpecTest, NulAndInvalidUtf8FromYamlEscapesAreRefusedByField) {
  std::string nul_name = kGoodSpec;
  nul_name.replace(nul_name.find("name: nfsrdma-v5.11"), 19, R"(name: "nfs\0rdma")");
  EXPECT_EQ(ErrorOf(nul_name),
            "name: contains a NUL byte (line 2); text must be UTF-8 without NUL");
  // A raw byte that starts no UTF-8 sequence.
  std::string raw = kGoodSpec;
  raw.replace(raw.find("record: 256k"), 12, "record: 256\xffk");
  EXPECT_EQ(ErrorOf(raw),
            "workloads[0].params.record: is not valid UTF-8 (line 9); text must be UTF-8 "
            "without NUL");
  const std::string key = std::string(kGoodSpec) + "set: {\"fq.\\0kind\": percpu}\n";
  EXPECT_NE(ErrorOf(key).find("contains a NUL byte (line 13)"), std::string::npos) << ErrorOf(key);
  EXPECT_EQ(ErrorOf(key).find('\0'), std::string::npos);  // the key is shown escaped
  EXPECT_NE(ErrorOf(key).find("set.fq.\\0kind: "), std::string::npos) << ErrorOf(key);
}

TEST(SpecTest, SpecSizeCap) {
  SpecLimits l;
  l.max_spec_bytes = 64;
  auto s = ParseMatrixSpec(kGoodSpec, l);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.status().message().find("--max-spec-bytes"), std::string::npos);
}

// The typed message is what a YAML spec maps onto: YAML -> message -> YAML
// -> message is the same message, and both forms check to the same spec.
TEST(TypedSpecTest, YamlMapsOntoTheMessageAndBack) {
  const std::string y = std::string(kGoodSpec) +
                        "set: {fq.kind: percpu, agent.hold_ms: 5}\nkind: confirm\npriority: 7\n"
                        "seed: 18446744073709551615\n";
  absl::StatusOr<pb::MatrixSpec> typed = MatrixSpecFromYaml(y, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->platform_size(), 1);
  ASSERT_TRUE(typed->has_commit_range());
  EXPECT_EQ(typed->commit_range().from(), "v5.10");
  EXPECT_EQ(typed->modes_size(), 3);
  EXPECT_EQ(typed->workloads(0).params().at("tests"), "write,read");
  EXPECT_TRUE(typed->analysis().bisect());
  EXPECT_EQ(typed->seed(), 18446744073709551615ULL);
  const std::string back = MatrixSpecToYaml(*typed);
  absl::StatusOr<pb::MatrixSpec> again = MatrixSpecFromYaml(back, {});
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << back;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*typed, *again)) << back;

  auto from_yaml = ParseMatrixSpec(y, {});
  auto from_typed = CheckMatrixSpec(*typed, {});
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  ASSERT_TRUE(from_typed.ok()) << from_typed.status();
  EXPECT_EQ(from_typed->name, from_yaml->name);
  EXPECT_EQ(from_typed->range_to, from_yaml->range_to);
  EXPECT_EQ(from_typed->modes, from_yaml->modes);
  EXPECT_EQ(from_typed->model_set, from_yaml->model_set);
  EXPECT_EQ(from_typed->kind, pb::JOB_KIND_CONFIRM);
  EXPECT_EQ(from_typed->priority, 7);
  EXPECT_EQ(from_typed->repeats, 5);
  EXPECT_EQ(from_typed->workloads[0].params, from_yaml->workloads[0].params);
}

// Ten levels of ten aliases each over a padded scalar: 127 KB of text that
// expands to 10^10 scalars. Refused from the event stream, before a tree is
// built, and the check itself stays small.
TEST(SpecTest, AliasBombIsRefusedWithoutGrowing) {
  std::string yaml = "name: bomb\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\n";
  absl::StrAppend(&yaml, "pad: &a0 [\"", std::string(126000, 'x'), "\"]\n");
  for (int level = 1; level <= 10; ++level) {
    absl::StrAppend(&yaml, "l", level, ": &a", level, " [");
    for (int k = 0; k < 10; ++k) absl::StrAppend(&yaml, k ? ", " : "", "*a", level - 1);
    absl::StrAppend(&yaml, "]\n");
  }
  absl::StrAppend(&yaml,
                  "commits: [v5.10]\nmodes: [strict]\nworkloads:\n  - name: dma-map-bench\n"
                  "    params: {tests: *a10}\n");
  ASSERT_GT(yaml.size(), 126000u);
  const int64_t before = RssKib();
  auto s = ParseMatrixSpec(yaml, {});
  const int64_t after = RssKib();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "spec: YAML document is more than 4194304 bytes of scalars with its aliases expanded");
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 50 * 1024) << "RSS grew by " << (after - before) << " KiB";
}

// yaml-cpp keeps the first of two equal keys and drops the second: a
// second `modes:` must be refused, not run as the first. So must a second
// document, and text that is not UTF-8.
TEST(YamlDocument, DuplicateKeysSecondDocumentsAndOtherEncodingsAreRefused) {
  const std::string spec =
      "name: twice\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\ncommits: v5.10..v5.12\n"
      "modes: [strict]\nworkloads: [{name: dma-map-bench}]\n";
  ASSERT_TRUE(ParseMatrixSpec(spec, {}).ok());
  auto twice = ParseMatrixSpec(spec + "modes: [off]\n", {});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(),
            "spec: YAML key \"modes\" appears twice in one map (lines 5 and 7); say it once");
  // Nested maps too; equal keys in different maps are fine.
  EXPECT_EQ(CheckYamlDocument("a: {x: 1, y: 2, x: 3}\n").message(),
            "YAML key \"x\" appears twice in one map (lines 1 and 1); say it once");
  EXPECT_TRUE(CheckYamlDocument("a: {x: 1}\nb: {x: 1}\nc: [{x: 1}, {x: 2}]\n").ok());
  // A key equal to a value is no duplicate.
  EXPECT_TRUE(CheckYamlDocument("a: b\nb: a\n").ok());
  auto two_docs = ParseMatrixSpec(spec + "---\nname: other\n", {});
  ASSERT_FALSE(two_docs.ok());
  EXPECT_EQ(two_docs.status().message(),
            "spec: a second YAML document (after `---`) would not be read; one document per file");
  EXPECT_TRUE(CheckYamlDocument("---\na: 1\n...\n").ok());
  std::string utf16 = "\xff\xfe";
  for (char c : spec) utf16 += std::string{c, '\0'};
  EXPECT_EQ(ParseMatrixSpec(utf16, {}).status().message(),
            "spec: the text is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8");
  EXPECT_EQ(ParseMatrixSpec(std::string("name: a\0b\n", 10), {}).status().message(),
            "spec: a NUL byte at offset 7 (UTF-16 text, or a binary file?); save it as UTF-8 text");
  EXPECT_EQ(ParseMatrixSpec(spec + "# caf\xe9\n", {}).status().message(),
            "spec: bytes that are not UTF-8 outside every value (in a comment or a key?); save "
            "the spec as UTF-8");
  // A name is printed on terminals: no control characters in it.
  auto escape = ParseMatrixSpec(
      "name: \"ok\\e[2J\"\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\n"
      "commits: v5.10..v5.12\nmodes: [strict]\nworkloads: [{name: dma-map-bench}]\n",
      {});
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("name: contains a control character"), std::string::npos)
      << escape.status();
  EXPECT_FALSE(HasControlCharacter("caf\xc3\xa9 v1.2_x-y"));
  EXPECT_TRUE(HasControlCharacter("a\tb"));
  EXPECT_TRUE(HasControlCharacter("a\x7f"));
}

TEST(YamlLimits, CountsAliasesAndExpandedNodes) {
  EXPECT_TRUE(CheckYamlExpansion("a: &x {k: v}\nb: *x\nc: *x\n", {}).ok());
  YamlExpansionLimits tight;
  tight.max_aliases = 2;
  EXPECT_TRUE(CheckYamlExpansion("a: &x 1\nb: [*x, *x]\n", tight).ok());
  EXPECT_EQ(CheckYamlExpansion("a: &x 1\nb: [*x, *x, *x]\n", tight).message(),
            "spec: YAML document is more than 2 aliases");
  tight.max_aliases = 100;
  tight.max_expanded_nodes = 20;
  // The root, keys a and b, x's 5 nodes, b's sequence and twice x's 5: 19.
  const std::string doc = "a: &x [1, 2, 3, 4]\nb: [*x, *x]\n";
  EXPECT_TRUE(CheckYamlExpansion(doc, tight).ok());
  EXPECT_FALSE(CheckYamlExpansion(doc + "c: [*x, *x]\n", tight).ok());
  // A document the parser rejects is the loader's to report.
  EXPECT_TRUE(CheckYamlExpansion("a: [1, 2\n", {}).ok());
  // A spec with a few aliases still parses.
  auto spec = ParseMatrixSpec(
      "name: aliased\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\ncommits: v5.10..v5.12\n"
      "modes: [strict]\nworkloads:\n  - name: dma-map-bench\n    params: &p {threads: 1}\n"
      "  - name: iozone-nfsrdma\n    params: *p\n",
      {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->workloads.size(), 2u);
  EXPECT_EQ(spec->workloads[1].params.at("threads"), "1");
}

// A list for a param that is not itself a list is a sweep: one run per
// value (per combination for several); iozone's `tests` stays one run's
// list. The YAML written back keeps the sweep as a list.
TEST(SweepTest, AListOfValuesIsASweepAxisButTestsStayOneRunsList) {
  const std::string yaml =
      "name: sweep\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\ncommits: v5.10..v5.12\n"
      "modes: [strict]\nworkloads:\n"
      "  - name: dma-map-bench\n    params: {threads: [1, 16], granule: [1, 2, 8]}\n"
      "  - name: iozone-nfsrdma\n    params: {threads: 2, tests: [write, read]}\n";
  auto spec = ParseMatrixSpec(yaml, {});
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->workloads.size(), 2u * 3u + 1u);
  std::set<std::pair<std::string, std::string>> runs;  // (threads, granule)
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(spec->workloads[i].name, "dma-map-bench");
    EXPECT_EQ(spec->workloads[i].path, "workloads[0]");
    runs.emplace(spec->workloads[i].params.at("threads"), spec->workloads[i].params.at("granule"));
  }
  EXPECT_EQ(runs.size(), 6u);
  EXPECT_EQ(runs.count({"16", "8"}), 1u);
  EXPECT_EQ(spec->workloads[6].params.at("tests"), "write,read");

  auto typed = MatrixSpecFromYaml(yaml, {});
  ASSERT_TRUE(typed.ok()) << typed.status();
  const std::string back = MatrixSpecToYaml(*typed);
  EXPECT_NE(back.find("threads: [1, 16]"), std::string::npos) << back;
  auto again = ParseMatrixSpec(back, {});
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << back;
  EXPECT_EQ(again->workloads.size(), 7u);
}

TEST(SweepTest, EachSweptValueIsCheckedAndTheSweepIsBounded) {
  const std::string head =
      "name: sweep\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\ncommits: v5.10..v5.12\n"
      "modes: [strict]\nworkloads:\n  - name: dma-map-bench\n    params: ";
  const std::string bad = ErrorOf(head + "{threads: [1, 99999]}\n");
  EXPECT_NE(bad.find("workloads[0].params.threads"), std::string::npos) << bad;
  EXPECT_NE(bad.find("99999"), std::string::npos) << bad;
  EXPECT_NE(ErrorOf(head + "{threads: []}\n").find("empty list"), std::string::npos);
  std::string many = "[";
  for (int i = 1; i <= 40; ++i) many += std::to_string(i) + (i < 40 ? ", " : "]");
  const std::string over = ErrorOf(head + "{threads: " + many + ", granule: " + many + "}\n");
  EXPECT_NE(over.find("more than 1000 runs"), std::string::npos) << over;
}

}  // namespace
}  // namespace farm::spec
