#include "emu/model/catalog.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "emu/model/model_config.h"

namespace farm::emu {
namespace {

using ::testing::HasSubstr;

constexpr char kSmall[] = R"(catalog: small
commits:
  - id: v1.0
    subject: "Linux 1.0"
    set: {a: x, b: "1"}
  - id: 1111111aaaa
    subject: "change a"
    set: {a: y}
  - id: 2222222bbbb
    subject: "no settings"
  - id: v1.1
    subject: "Linux 1.1"
  - id: 3333333cccc
    subject: "change b"
    set:
      b: "2"
)";

TEST(CatalogTest, SettingsAccumulateAndCommitsWithoutSetInherit) {
  absl::StatusOr<Catalog> c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "small");
  ASSERT_EQ(c->size(), 5u);
  auto r = c->Resolve("2222222bbbb");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->index, 2u);
  EXPECT_EQ(r->settings.at("a"), "y");
  EXPECT_EQ(r->settings.at("b"), "1");
  EXPECT_EQ(c->SettingsAt(4).at("b"), "2");
  EXPECT_EQ(c->SettingsAt(4).at("a"), "y");
  EXPECT_EQ(c->SettingsAt(0).at("a"), "x");
  EXPECT_EQ(c->commits()[4].line, 13);
}

TEST(CatalogTest, ResolvesPrefixesBothWays) {
  auto c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->Find("1111111"), 1u);                                  // shorter
  EXPECT_EQ(*c->Find("1111111aaaa0123456789012345678901234567"), 1u);  // full id
  EXPECT_EQ(*c->Find("v1.1"), 3u);
  EXPECT_THAT(c->Find("111111").status().message(), HasSubstr("too short"));
  EXPECT_EQ(c->Find("4444444").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(c->Find("v9.9").status().code(), absl::StatusCode::kNotFound);
}

TEST(CatalogTest, AmbiguousPrefixIsAnError) {
  auto c = Catalog::LoadString(R"(commits:
  - {id: abcdef01, subject: one}
  - {id: abcdef02, subject: two}
)",
                               "amb.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->Find("abcdef0").status().message(), HasSubstr("ambiguous"));
}

TEST(CatalogTest, RangeIsInclusiveAndOrdered) {
  auto c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok());
  auto r = c->Range("v1.0..v1.1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(*c->Range("2222222"), (std::vector<size_t>{2}));
  EXPECT_THAT(c->Range("v1.1..v1.0").status().message(), HasSubstr("comes before"));
  EXPECT_THAT(c->Range("v1.0..").status().message(), HasSubstr("both ends"));
  EXPECT_THAT(c->Range("v1.0..v7").status().message(), HasSubstr("unknown commit 'v7'"));
}

struct BadCase {
  const char* name;
  const char* yaml;
  const char* want;  // substring of the message, which must start with "bad.yaml:<line>:"
  int line;
};

class CatalogErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(CatalogErrorTest, NamesFileAndLine) {
  const BadCase& bc = GetParam();
  auto validator = [](absl::string_view key, absl::string_view value) -> absl::Status {
    if (key != "a" && key != "b") {
      return absl::NotFoundError(absl::StrCat("unknown model key '", key, "'"));
    }
    if (key == "b" && value != "1" && value != "2") {
      return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for 'b'"));
    }
    return absl::OkStatus();
  };
  auto c = Catalog::LoadString(bc.yaml, "bad.yaml", validator);
  ASSERT_FALSE(c.ok());
  std::string msg(c.status().message());
  EXPECT_TRUE(absl::StartsWith(msg, absl::StrCat("bad.yaml:", bc.line, ":"))) << msg;
  EXPECT_THAT(msg, HasSubstr(bc.want));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CatalogErrorTest,
    ::testing::Values(
        BadCase{"UnknownKey", "commits:\n  - id: v1\n    subject: s\n    set: {zz: 1}\n",
                "unknown model key 'zz'", 4},
        BadCase{"BadValue", "commits:\n  - id: v1\n    subject: s\n    set:\n      b: 7\n",
                "bad value '7' for 'b'", 5},
        BadCase{"NonScalarValue", "commits:\n  - id: v1\n    subject: s\n    set: {a: [1, 2]}\n",
                "expected a scalar", 4},
        BadCase{"DuplicateId",
                "commits:\n  - {id: v1, subject: s}\n  - {id: abcdef123, subject: t}\n"
                "  - {id: abcdef1234, subject: u}\n",
                "duplicate commit id 'abcdef1234'", 4},
        BadCase{"MissingId", "commits:\n  - {id: v1, subject: s}\n  - subject: t\n",
                "commit without 'id'", 3},
        BadCase{"MissingSubject", "commits:\n  - {id: v1, subject: s}\n  - id: v2\n",
                "commit 'v2' without 'subject'", 3},
        BadCase{"UnknownField", "commits:\n  - {id: v1, subject: s, sett: {a: 1}}\n",
                "unknown field 'sett'", 2},
        BadCase{"Syntax", "commits:\n  - {id: v1, subject: s\n  - x\n", "YAML syntax error", 4},
        BadCase{"NoCommits", "catalog: x\n", "missing 'commits'", 1}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return p.param.name; });

TEST(CatalogTest, ReportsEveryBadEntryInOneLoad) {
  auto c = Catalog::LoadString(
      "commits:\n  - {id: v1, subject: s}\n  - id: v2\n  - {id: v1, subject: t}\n"
      "  - {id: v3, subject: u, sett: {}}\n  - {id: v4, subject: ok}\n",
      "many.yaml");
  ASSERT_FALSE(c.ok());
  std::vector<std::string> lines = absl::StrSplit(c.status().message(), '\n');
  ASSERT_EQ(lines.size(), 3u) << c.status();
  EXPECT_THAT(lines[0], HasSubstr("many.yaml:3: commit 'v2' without 'subject'"));
  EXPECT_THAT(lines[1], HasSubstr("many.yaml:4: duplicate commit id 'v1'"));
  EXPECT_THAT(lines[2], HasSubstr("many.yaml:5: unknown field 'sett'"));
  // The first error decides the code (a missing subject is a bad argument).
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CatalogTest, ImportAppendsInheritingAndSkipsKnownCommits) {
  auto c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok());
  // git log order: newest first; the oldest line is already in the catalog.
  std::string list =
      "5555555eeee\tnewest commit\n"
      "4444444dddd fix something\n"
      "\n"
      "3333333cccc1\tchange b\n";
  ASSERT_TRUE(c->ImportCommitList(list, "log.txt").ok());
  ASSERT_EQ(c->size(), 7u);
  EXPECT_EQ(c->commits()[5].id, "4444444dddd");
  EXPECT_EQ(c->commits()[5].subject, "fix something");
  EXPECT_EQ(c->commits()[6].id, "5555555eeee");
  auto r = c->Resolve("5555555");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->settings.at("b"), "2");  // inherited from 3333333cccc
  EXPECT_EQ(r->settings.at("a"), "y");
}

TEST(CatalogTest, BadImportNamesLineAndLeavesCatalogAlone) {
  auto c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok());
  absl::Status s = c->ImportCommitList("6666666ffff\tok\nnot-a-sha subject\n", "log.txt",
                                       CommitListOrder::kOldestFirst);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("log.txt:2:"));
  EXPECT_EQ(c->size(), 5u);
}

TEST(CatalogTest, LoadFileErrorsNameThePath) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("catalog_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "mine.yaml").string();
  {
    std::ofstream out(path);
    out << "commits:\n  - {id: v1, subject: s}\n  - {id: v1, subject: again}\n";
  }
  auto c = Catalog::LoadFile(path);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr(path + ":3:"));
  EXPECT_THAT(c.status().message(), HasSubstr("duplicate commit id 'v1'"));
  EXPECT_EQ(Catalog::LoadFile("/nonexistent/x.yaml").status().code(), absl::StatusCode::kNotFound);
}

// The shipped catalog: loads, is in order, and holds the seed-000 story.
TEST(ShippedCatalogTest, HoldsTheSeed000Story) {
  auto path = DefaultCatalogPath();
  ASSERT_TRUE(path.ok()) << path.status();
  auto c = Catalog::LoadFile(*path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name(), "linux-iommu");
  auto idx = [&](const char* id) {
    auto i = c->Find(id);
    EXPECT_TRUE(i.ok()) << id << ": " << i.status();
    return i.ok() ? *i : 0;
  };
  EXPECT_LT(idx("v4.6"), idx("9257b4a206fc"));
  EXPECT_LT(idx("9257b4a206fc"), idx("v4.7"));
  EXPECT_LT(idx("v5.10"), idx("65f746e8285f"));
  EXPECT_LT(idx("65f746e8285f"), idx("c062db039f40"));
  EXPECT_LT(idx("c062db039f40"), idx("c588072bba6b"));
  EXPECT_LT(idx("c588072bba6b"), idx("v5.11"));
  EXPECT_LT(idx("v5.11"), idx("d8c1df02ac7f"));
  EXPECT_LT(idx("933fcd01e97e"), idx("v5.12"));
  EXPECT_LT(idx("v6.6"), idx("911aa1245da8"));
  EXPECT_LT(idx("233045378dbb"), idx("v6.7"));
  EXPECT_LT(idx("v6.7"), idx("v6.8"));
  // Bisect between v5.10 and v5.11 has steps to take.
  auto range = c->Range("v5.10..v5.11");
  ASSERT_TRUE(range.ok());
  EXPECT_GE(range->size(), 6u);
  // Full-length id from seed 000's mail resolves.
  EXPECT_TRUE(c->Find("c588072bba6b54b4b946485228b0409f23cd68a6").ok());
  // The conversion changes map_sg and the fix restores batching.
  EXPECT_NE(c->Resolve("65f746e8285f")->settings.at("map_sg"),
            c->Resolve("c588072bba6b")->settings.at("map_sg"));
  EXPECT_EQ(c->Resolve("58a8bb39490d")->settings.at("map_sg"),
            c->Resolve("c588072bba6b")->settings.at("map_sg"));
  EXPECT_EQ(c->Resolve("v5.12")->settings.at("map_sg"), "batched");
}

// The commits since v5.11 that changed a DMA-API or IOMMU-driver cost: each
// is found by its id, sits in its release, and the catalog keeps them in order.
TEST(ShippedCatalogTest, HoldsTheCostChangesSinceV511InOrder) {
  auto path = DefaultCatalogPath();
  ASSERT_TRUE(path.ok()) << path.status();
  auto c = Catalog::LoadFile(*path);
  ASSERT_TRUE(c.ok()) << c.status();
  struct Entry {
    const char* id;
    const char* subject_start;
    const char* before;  // the release tag (or commit) it follows
  };
  const Entry entries[] = {
      {"fc65d0acaf23", "iommu/amd: Selective flush on unmap", "v5.14"},
      {"5b61343b5059", "iommu/iova: Improve 32-bit free space estimate", "v5.17"},
      {"32d5bc8b09c7", "iommu/dma: Allow a single FQ", "v6.6"},
      {"9f5b681e2a3f", "iommu/dma: Use a large flush queue", "v6.6"},
      {"3b1d9e2b2d68", "iommu/vt-d: Add cache tag assignment interface", "v6.9"},
      {"4e589a53685c", "iommu/vt-d: Use cache_tag_flush_all()", "v6.9"},
      {"a600ccd0a347", "iommu/vt-d: Use cache_tag_flush_range()", "v6.9"},
      {"b5c58b2fdc42", "dma-mapping: direct calls for dma-iommu", "v6.11"},
      {"918eb5c856f6", "iommu/arm-smmu-v3: Add in-kernel support for NVIDIA Tegra241", "v6.11"},
      {"705c1cdf1e73", "iommu/vt-d: Introduce batched cache invalidation", "v6.11"},
      {"d2a0cac10597", "iommu/amd: move wait_on_sem() out of spinlock", "v6.19"},
  };
  size_t prev = 0;
  for (const Entry& e : entries) {
    absl::StatusOr<size_t> i = c->Find(e.id);
    ASSERT_TRUE(i.ok()) << e.id << ": " << i.status();
    EXPECT_EQ(c->commits()[*i].id, e.id);
    EXPECT_TRUE(absl::StartsWith(c->commits()[*i].subject, e.subject_start))
        << e.id << ": " << c->commits()[*i].subject;
    EXPECT_GT(*i, prev) << e.id << " is out of order";
    EXPECT_GT(*i, *c->Find(e.before)) << e.id << " before " << e.before;
    prev = *i;
  }
  // Each release tag closes its commits.
  EXPECT_LT(*c->Find("fc65d0acaf23"), *c->Find("v5.15"));
  EXPECT_LT(*c->Find("5b61343b5059"), *c->Find("v5.18"));
  EXPECT_LT(*c->Find("9f5b681e2a3f"), *c->Find("v6.7"));
  EXPECT_LT(*c->Find("a600ccd0a347"), *c->Find("v6.10"));
  EXPECT_LT(*c->Find("705c1cdf1e73"), *c->Find("v6.12"));
  // The keys the modelled commits set, and the state before them.
  EXPECT_EQ(c->Resolve("v5.14")->settings.at("amd.selective_flush"), "false");
  EXPECT_EQ(c->Resolve("fc65d0acaf23")->settings.at("amd.selective_flush"), "true");
  EXPECT_EQ(c->Resolve("4e589a53685c")->settings.at("vtd.cache_lock"), "false");
  EXPECT_EQ(c->Resolve("a600ccd0a347")->settings.at("vtd.cache_lock"), "true");
  EXPECT_EQ(c->Resolve("v6.11")->settings.at("dma.ops_indirect"), "true");
  EXPECT_EQ(c->Resolve("b5c58b2fdc42")->settings.at("dma.ops_indirect"), "false");
  EXPECT_EQ(c->Resolve("b5c58b2fdc42")->settings.at("smmu.tegra241_cmdqv"), "false");
  EXPECT_EQ(c->Resolve("918eb5c856f6")->settings.at("smmu.tegra241_cmdqv"), "true");
  EXPECT_EQ(c->Resolve("v6.19")->settings.at("amd.wait_unlocked"), "false");
  EXPECT_EQ(c->Resolve("d2a0cac10597")->settings.at("amd.wait_unlocked"), "true");
  // Full ids from the rev-lists resolve to the catalog's 12-digit entries.
  EXPECT_TRUE(c->Find("a600ccd0a347e8f9c9f35f229e1ccd0dca9374c4").ok());
  EXPECT_TRUE(c->Find("b5c58b2fdc427e7958412ecb2de2804a1f7c1572").ok());
  EXPECT_TRUE(c->Find("918eb5c856f6ce4cf93b4b38e4b5e156905c5943").ok());
}

// Every key a shipped commit sets is a model key with a valid value.
TEST(ShippedCatalogTest, EverySettingIsAValidModelKey) {
  absl::StatusOr<std::string> path = DefaultCatalogPath();
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<Catalog> catalog = Catalog::LoadFile(*path);
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  ModelConfig cfg;
  for (const CatalogCommit& c : catalog->commits()) {
    EXPECT_TRUE(cfg.Apply(c.set).ok()) << c.id;
  }
}

TEST(ShippedCatalogTest, EnvOverridesDefault) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("catalog_env_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "env.yaml").string();
  {
    std::ofstream out(path);
    out << "catalog: env\ncommits:\n  - {id: v1, subject: s, set: {a: 1}}\n";
  }
  ::setenv("FARM_EMU_CATALOG", path.c_str(), 1);
  auto r = ResolveKernel("v1", "");
  ::setenv("FARM_EMU_CATALOG", "/nonexistent/nope.yaml", 1);
  auto missing = DefaultCatalogPath();
  ::unsetenv("FARM_EMU_CATALOG");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->settings.at("a"), "1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(CatalogDeathTest, SettingsAtPastTheEndAborts) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  absl::StatusOr<Catalog> c = Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->SettingsAt(c->size() - 1).at("b"), "2");
  EXPECT_DEATH(c->SettingsAt(c->size()), "index < commits_.size\\(\\): SettingsAt\\(\\) past");
}

// `expect:` entries: what a commit's messages reported about its performance.
std::string WithExpect(const std::string& entry) {
  return "catalog: e\ncommits:\n  - {id: v1, subject: base}\n  - id: v2\n    subject: next\n"
         "    expect:\n" +
         entry;
}

constexpr char kGoodExpect[] = R"(      - platforms: [kunpeng920-smmuv3, arm-mmu500-8c]
        modes: [strict, lazy]
        workload: dma-map-bench
        params: {threads: 4, seconds: 0.001}
        metric: unmap_ns
        direction: faster
        speedup: {min: 1.5, max: 3}
        claim: "unmap 2x faster"
        source: "<msgid@example.org>"
        model_todo: "the model shows no change"
)";

TEST(CatalogExpectTest, ParsesEveryField) {
  auto c = Catalog::LoadString(WithExpect(kGoodExpect), "e.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->commits()[1].expect.size(), 1u);
  const CatalogExpectation& e = c->commits()[1].expect[0];
  EXPECT_EQ(e.platforms, (std::vector<std::string>{"kunpeng920-smmuv3", "arm-mmu500-8c"}));
  EXPECT_EQ(e.modes, (std::vector<std::string>{"strict", "lazy"}));
  EXPECT_EQ(e.workload, "dma-map-bench");
  EXPECT_EQ(e.params.at("threads"), "4");
  EXPECT_EQ(e.metric, ExpectMetric::kUnmapNs);
  EXPECT_EQ(e.direction, ExpectDirection::kFaster);
  EXPECT_EQ(e.min_speedup, 1.5);
  EXPECT_EQ(e.max_speedup, 3);
  EXPECT_EQ(e.source, "<msgid@example.org>");
  EXPECT_FALSE(e.from_catalog_comment());
  EXPECT_EQ(e.model_todo, "the model shows no change");
  EXPECT_EQ(e.line, 7);
}

TEST(CatalogExpectTest, DirectionsHaveDefaultBands) {
  const std::string common =
      "        workload: dma-map-bench\n        metric: throughput\n        claim: c\n"
      "        source: \"none found\"\n";
  for (auto [dir, lo, hi] : {std::tuple{"faster", kDefaultFasterMin, HUGE_VAL},
                             std::tuple{"slower", 0.0, kDefaultSlowerMax},
                             std::tuple{"neutral", kDefaultNeutralMin, kDefaultNeutralMax}}) {
    auto c = Catalog::LoadString(
        WithExpect(absl::StrCat("      - platforms: [intel-vtd-2s12c]\n        modes: [off]\n",
                                "        direction: ", dir, "\n", common)),
        "e.yaml");
    ASSERT_TRUE(c.ok()) << c.status();
    const CatalogExpectation& e = c->commits()[1].expect[0];
    EXPECT_EQ(e.min_speedup, lo) << dir;
    EXPECT_EQ(e.max_speedup, hi) << dir;
    EXPECT_TRUE(e.from_catalog_comment());
  }
}

TEST(CatalogExpectTest, BadEntriesAreRefusedWithTheirLine) {
  auto expect_error = [](const std::string& from, const std::string& to, const std::string& what) {
    std::string text = WithExpect(kGoodExpect);
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    auto c = Catalog::LoadString(text, "e.yaml");
    ASSERT_FALSE(c.ok()) << "accepted: " << to;
    EXPECT_THAT(c.status().message(), HasSubstr(what)) << to;
    EXPECT_THAT(c.status().message(), HasSubstr("e.yaml:")) << to;
  };
  expect_error("model_todo:", "modle_todo:", "unknown field 'modle_todo'");
  expect_error("arm-mmu500-8c", "no-such-box", "no-such-box");
  expect_error("[strict, lazy]", "[strict, fast]", "unknown mode 'fast'");
  expect_error("[strict, lazy]", "[]", "'modes' must be a non-empty list");
  expect_error("metric: unmap_ns", "metric: iops", "unknown metric 'iops'");
  expect_error("direction: faster", "direction: up", "unknown direction 'up'");
  expect_error("{min: 1.5, max: 3}", "{min: 0.9}", "contradicts direction 'faster'");
  expect_error("{min: 1.5, max: 3}", "{min: 2, max: 1.5}", "min is above max");
  expect_error("{min: 1.5, max: 3}", "{min: fast}", "a speedup bound is a number");
  expect_error("{min: 1.5, max: 3}", "{mid: 2}", "unknown speedup field 'mid'");
  expect_error("        source: \"<msgid@example.org>\"\n", "", "'source' is required");
  expect_error("        claim: \"unmap 2x faster\"\n", "", "'claim' is required");

  auto empty = Catalog::LoadString(
      "catalog: e\ncommits:\n  - {id: v1, subject: b}\n  - {id: v2, subject: n, expect: []}\n",
      "e.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(),
              HasSubstr("e.yaml:4: commit 'v2': 'expect' must be a non-empty list"));
  expect_error("model_todo: \"the model shows no change\"", "against: v9", "unknown commit 'v9'");
  expect_error("model_todo: \"the model shows no change\"", "against: v2",
               "does not come before the commit");
}

TEST(CatalogExpectTest, TheValidatorChecksWorkloadAndParams) {
  ExpectValidator refuse_threads = [](absl::string_view w,
                                      const std::map<std::string, std::string>& p) {
    return p.count("threads") ? absl::InvalidArgumentError(absl::StrCat(w, ": threads refused"))
                              : absl::OkStatus();
  };
  auto c = Catalog::LoadString(WithExpect(kGoodExpect), "e.yaml", {}, refuse_threads);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("e.yaml:9: commit 'v2': expect: dma-map-bench: threads refused"));
}

TEST(CatalogExpectTest, TheShippedCatalogsExpectationsLoad) {
  auto path = DefaultCatalogPath();
  ASSERT_TRUE(path.ok()) << path.status();
  auto c = Catalog::LoadFile(*path);
  ASSERT_TRUE(c.ok()) << c.status();
  size_t with = 0;
  for (const CatalogCommit& commit : c->commits()) with += commit.expect.empty() ? 0 : 1;
  EXPECT_GT(with, 0u);
}

}  // namespace
}  // namespace farm::emu
