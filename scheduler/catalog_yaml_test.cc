#include "scheduler/catalog_yaml.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace farm::scheduler {
namespace {

TEST(CatalogYamlTest, ParsesAndResolves) {
  auto c = ParseCatalogYaml(R"(
catalog: linux-iommu
description: ignored extra key
commits:
  - id: v4.6
    subject: "Linux 4.6"
    set: {iova.allocator: rbtree, fq.kind: intel-global}
  - id: 9257b4a206fc
    subject: "iommu/iova: introduce per-cpu caching to iova allocation"
    set: {iova.allocator: rcache}
  - id: v4.7
    subject: "Linux 4.7"
)",
                            "test.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "linux-iommu");
  ASSERT_EQ(c->commits_size(), 3);
  EXPECT_EQ(c->commits(1).index(), 1);
  ResolveCatalog(&*c);
  EXPECT_EQ(c->commits(2).resolved().at("iova.allocator"), "rcache");
  EXPECT_EQ(c->commits(2).resolved().at("fq.kind"), "intel-global");
  EXPECT_EQ(c->commits(0).resolved().at("iova.allocator"), "rbtree");
}

// A merge-based history: parents by any id form that resolves (stored as
// the entry's id) or a commit outside the catalog; each commit runs with its
// own history's settings.
TEST(CatalogYamlTest, ParentsMakeAGraphAndSettingsFollowIt) {
  auto c = ParseCatalogYaml(R"(
catalog: merged
commits:
  - {id: 1111111aaaa, subject: base, parents: [0000000ffff], set: {fq.kind: intel-global}}
  - {id: 2222222bbbb, subject: main, set: {iova.allocator: rcache}}
  - {id: 3333333cccc, subject: side, parents: [1111111], set: {fq.kind: percpu}}
  - {id: 4444444dddd, subject: merge, author: "A U Thor <author@example.org>",
     parents: [2222222bbbb, 3333333]}
)",
                            "m.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->commits(3).author(), "A U Thor <author@example.org>");
  EXPECT_EQ(c->commits(2).author(), "");
  EXPECT_EQ(c->commits(1).parents_size(), 0);  // the previous entry
  ASSERT_EQ(c->commits(2).parents_size(), 1);
  EXPECT_EQ(c->commits(2).parents(0), "1111111aaaa");
  ASSERT_EQ(c->commits(3).parents_size(), 2);
  EXPECT_EQ(c->commits(3).parents(1), "3333333cccc");
  EXPECT_EQ(c->commits(0).parents(0), "0000000ffff");  // before the catalog
  ResolveCatalog(&*c);
  // The side branch forked before `main` set the allocator.
  EXPECT_FALSE(c->commits(2).resolved().contains("iova.allocator"));
  EXPECT_EQ(c->commits(2).resolved().at("fq.kind"), "percpu");
  EXPECT_EQ(c->commits(3).resolved().at("iova.allocator"), "rcache");
  EXPECT_EQ(c->commits(3).resolved().at("fq.kind"), "percpu");

  auto later = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s, parents: [b]}\n  - {id: b, subject: t}\n",
      "p.yaml");
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.status().message().find(
                "p.yaml:3: commit 'a': parent 'b' does not come before the commit"),
            std::string::npos)
      << later.status();
  auto unknown = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s}\n  - {id: b, subject: t, parents: [v9]}\n",
      "p.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("p.yaml:4: commit 'b': parent 'v9' is neither"),
            std::string::npos)
      << unknown.status();
  auto empty = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s}\n  - {id: b, subject: t, parents: []}\n",
      "p.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("'parents' must be a non-empty list"), std::string::npos)
      << empty.status();
}

// One parser (emu's loader): errors name the file and the line.
TEST(CatalogYamlTest, ErrorsNameFileAndLine) {
  auto dup = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s}\n  - {id: a, subject: t}\n", "mine.yaml");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dup.status().message().find("mine.yaml:4: duplicate commit id 'a'"), std::string::npos)
      << dup.status();

  auto no_id = ParseCatalogYaml("catalog: x\ncommits:\n  - subject: s\n", "mine.yaml");
  ASSERT_FALSE(no_id.ok());
  EXPECT_NE(no_id.status().message().find("mine.yaml:3: commit without 'id'"), std::string::npos)
      << no_id.status();

  auto no_name = ParseCatalogYaml("commits:\n  - {id: a, subject: s}\n", "f.yaml");
  ASSERT_FALSE(no_name.ok());
  EXPECT_NE(no_name.status().message().find("f.yaml:1: catalog: required"), std::string::npos)
      << no_name.status();

  auto bad_set =
      ParseCatalogYaml("catalog: x\ncommits:\n  - id: a\n    subject: s\n    set: [1]\n", "f.yaml");
  ASSERT_FALSE(bad_set.ok());
  EXPECT_NE(bad_set.status().message().find("f.yaml:5: commit 'a': 'set' must be a map"),
            std::string::npos)
      << bad_set.status();

  EXPECT_FALSE(ParseCatalogYaml("catalog: x\ncommits: []", "f").ok());
  auto syntax = ParseCatalogYaml("catalog: [x\n", "f.yaml");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("f.yaml:"), std::string::npos) << syntax.status();
}

// The scheduler loads catalogs with `expect:` (the shipped one has them) and
// checks them as farm-emu does, the workload's params included.
TEST(CatalogYamlTest, ExpectationsAreAcceptedAndChecked) {
  const std::string head = R"(catalog: x
commits:
  - {id: v1, subject: base}
  - id: v2
    subject: next
    expect:
      - platforms: [kunpeng920-smmuv3]
        modes: [strict]
        workload: dma-map-bench
)";
  const std::string tail = R"(        metric: throughput
        direction: faster
        claim: "faster"
        source: "none found"
)";
  auto good = ParseCatalogYaml(head + "        params: {threads: 2}\n" + tail, "e.yaml");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->commits_size(), 2);

  auto bad_param = ParseCatalogYaml(head + "        params: {threads: many}\n" + tail, "e.yaml");
  ASSERT_FALSE(bad_param.ok());
  EXPECT_NE(bad_param.status().message().find("e.yaml:9: commit 'v2': expect: "), std::string::npos)
      << bad_param.status();

  auto unknown = ParseCatalogYaml(head + "        colour: red\n" + tail, "e.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown field 'colour'"), std::string::npos)
      << unknown.status();
}

}  // namespace
// A commit's `set:` is held to what a spec's is: a key the model lacks, a
// value out of its range or an unknown agent directive would queue jobs
// every agent refuses.
TEST(CatalogYamlTest, SetKeysAreCheckedLikeASpecs) {
  const std::string head = "catalog: x\ncommits:\n  - id: a\n    subject: s\n    set: {";
  auto unknown = ParseCatalogYaml(head + "iova.alocator: rcache}\n", "f.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("f.yaml:5"), std::string::npos) << unknown.status();
  EXPECT_NE(unknown.status().message().find("iova.allocator"), std::string::npos)
      << "suggests the key: " << unknown.status();
  auto bad_choice = ParseCatalogYaml(head + "iova.allocator: magic}\n", "f.yaml");
  ASSERT_FALSE(bad_choice.ok());
  EXPECT_NE(bad_choice.status().message().find("magic"), std::string::npos) << bad_choice.status();
  auto directive = ParseCatalogYaml(head + "agent.sleep: 1}\n", "f.yaml");
  ASSERT_FALSE(directive.ok());
  EXPECT_NE(directive.status().message().find("unknown agent directive"), std::string::npos)
      << directive.status();
  EXPECT_TRUE(
      ParseCatalogYaml(head + "iova.allocator: rcache, agent.hold_ms: 5}\n", "f.yaml").ok());
}

TEST(CatalogYamlTest, AliasesCannotMultiplyTheText) {
  // Each level doubles: 2^20 copies of one set from a few hundred bytes.
  std::string y = "a0: &a0 {k: vvvvvvvvvvvvvvvv}\n";
  for (int i = 1; i <= 20; ++i) {
    absl::StrAppend(&y, "a", i, ": &a", i, " [*a", i - 1, ", *a", i - 1, "]\n");
  }
  y += "catalog: x\ncommits:\n  - {id: a, subject: s}\n";
  auto c = ParseCatalogYaml(y, "bomb.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(c.status().message()).rfind("bomb.yaml: YAML document is more than", 0), 0u)
      << c.status();
  // Sharing one set between commits is fine.
  auto shared = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s, set: &s {fq.kind: percpu}}\n"
      "  - {id: b, subject: t, set: *s}\n",
      "f.yaml");
  ASSERT_TRUE(shared.ok()) << shared.status();
}

TEST(CatalogYamlTest, EscapedNulAndInvalidBytesAreRefusedByField) {
  auto nul = ParseCatalogYaml("catalog: \"x\\0y\"\ncommits:\n  - {id: a, subject: s}\n", "f.yaml");
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.status().message(),
            "f.yaml: name: contains a NUL byte, which PostgreSQL text cannot store");
  // A file of --catalog-dir is read raw: an invalid byte there reaches the
  // parser as it is.
  auto bad = ParseCatalogYaml("catalog: x\ncommits:\n  - {id: a, subject: \"a\xff\"}\n", "f.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "f.yaml: commits[0].subject: not valid UTF-8");
}

// A catalog is read like a spec: a key twice in one map, or a second
// document, is refused rather than half read.
TEST(CatalogYamlTest, DuplicateKeysAndSecondDocumentsAreRefused) {
  auto twice = ParseCatalogYaml(
      "catalog: x\ncommits:\n  - {id: a, subject: s, set: {fq.kind: percpu}, set: {}}\n", "f.yaml");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(),
            "f.yaml: YAML key \"set\" appears twice in one map (lines 3 and 3); say it once");
  auto two = ParseCatalogYaml("catalog: x\ncommits: []\n---\ncatalog: y\n", "f.yaml");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(
      two.status().message(),
      "f.yaml: a second YAML document (after `---`) would not be read; one document per file");
  auto escape =
      ParseCatalogYaml("catalog: \"x\\e[2J\"\ncommits: [{id: a, subject: s}]\n", "f.yaml");
  ASSERT_FALSE(escape.ok());
  EXPECT_EQ(escape.status().message(),
            "f.yaml: catalog: contains a control character (a name is printed on terminals)");
}

}  // namespace farm::scheduler
