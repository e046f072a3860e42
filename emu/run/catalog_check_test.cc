// The catalog truth check: its verdicts on a small catalog whose model move
// is known by construction (a commit adding software cost to every unmap),
// and the shipped catalog held to its own expectations.
#include "emu/run/catalog_check.h"

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "emu/model/catalog.h"

namespace farm::emu {
namespace {

using ::testing::HasSubstr;

// v2 adds 2,000 instructions to every unmap (sw.unmap_delta_insns): its unmap
// is slower than v1's, its map unchanged.
std::string Expectation(const std::string& metric, const std::string& direction,
                        const std::string& todo) {
  return absl::StrCat(
      "      - platforms: [kunpeng920-smmuv3]\n        modes: [strict]\n",
      "        workload: dma-map-bench\n        params: {threads: 1, seconds: 0.0002}\n",
      "        metric: ", metric, "\n        direction: ", direction,
      "\n        claim: c\n        source: s\n",
      todo.empty() ? "" : absl::StrCat("        model_todo: ", todo, "\n"));
}

std::string WriteCatalog(const std::string& name, const std::string& expectations) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << "catalog: t\ncommits:\n  - {id: v1, subject: base}\n"
                      << "  - id: v2\n    subject: slower unmap\n"
                      << "    set: {sw.unmap_delta_insns: 2000}\n    expect:\n"
                      << expectations;
  return path;
}

TEST(CatalogCheck, VerdictsFollowTheModelAndTheMarkers) {
  CatalogCheckOptions o;
  o.catalog = WriteCatalog("verdicts.yaml", Expectation("unmap_ns", "faster", "") +
                                                Expectation("unmap_ns", "slower", "") +
                                                Expectation("unmap_ns", "faster", "known") +
                                                Expectation("unmap_ns", "slower", "stale") +
                                                Expectation("throughput", "slower", ""));
  absl::StatusOr<std::vector<CatalogCheckRow>> rows = CheckCatalog(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_EQ((*rows)[0].verdict, CheckVerdict::kFail);
  EXPECT_LT((*rows)[0].speedup, 1);
  EXPECT_EQ((*rows)[0].baseline, "v1");
  EXPECT_EQ((*rows)[1].verdict, CheckVerdict::kPass);
  EXPECT_EQ((*rows)[2].verdict, CheckVerdict::kKnownFail);
  EXPECT_EQ((*rows)[3].verdict, CheckVerdict::kFixed);
  EXPECT_EQ((*rows)[4].verdict, CheckVerdict::kPass);
  EXPECT_EQ((*rows)[4].metric, "throughput");
  EXPECT_TRUE(CatalogCheckFailed(*rows));
  const std::string table = FormatCatalogCheck(*rows);
  EXPECT_THAT(table, HasSubstr("| v2 | v1 | kunpeng920-smmuv3 | strict | dma-map-bench "
                               "seconds=0.0002 threads=1 | unmap_ns | faster (>= 1.01x)"));
  EXPECT_THAT(table, HasSubstr("FIXED: remove model_todo"));
  EXPECT_THAT(table, HasSubstr("5 rows: 2 PASS, 1 FAIL, 1 known (model_todo), 1 FIXED"));

  // Only the known disagreement: nothing fails.
  o.catalog = WriteCatalog("known.yaml", Expectation("unmap_ns", "faster", "known"));
  rows = CheckCatalog(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_FALSE(CatalogCheckFailed(*rows));
}

TEST(CatalogCheck, AFailedRunIsAnErrorRow) {
  CatalogCheckOptions o;
  std::string e = Expectation("throughput", "neutral", "");
  e.replace(e.find("threads: 1"), 10, "threads: 1000");  // more than the platform's CPUs
  o.catalog = WriteCatalog("error.yaml", e);
  absl::StatusOr<std::vector<CatalogCheckRow>> rows = CheckCatalog(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].verdict, CheckVerdict::kError);
  EXPECT_FALSE((*rows)[0].note.empty());
  EXPECT_TRUE(CatalogCheckFailed(*rows));
}

TEST(CatalogCheck, BadInputIsAnError) {
  CatalogCheckOptions o;
  o.catalog = WriteCatalog("bad.yaml", Expectation("throughput", "sideways", ""));
  EXPECT_THAT(CheckCatalog(o).status().message(), HasSubstr("unknown direction 'sideways'"));
  o.catalog = WriteCatalog("param.yaml", Expectation("throughput", "neutral", ""));
  o.commit = "v9";
  EXPECT_EQ(CheckCatalog(o).status().code(), absl::StatusCode::kNotFound);
}

// The shipped catalog: every commit that sets model keys records what was
// reported about it, and the model agrees with every expectation that no
// model_todo marks (and still disagrees with every one that does). The
// table is printed either way: it is the model's to-do list.
TEST(CatalogCheck, TheShippedCatalogHoldsToItsExpectations) {
  absl::StatusOr<std::vector<CatalogCheckRow>> rows = CheckCatalog({});
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::cout << FormatCatalogCheck(*rows);
  for (const CatalogCheckRow& r : *rows) {
    EXPECT_NE(r.verdict, CheckVerdict::kUnchecked) << r.commit << ": " << r.note;
    EXPECT_TRUE(r.verdict == CheckVerdict::kPass || r.verdict == CheckVerdict::kKnownFail ||
                r.verdict == CheckVerdict::kUnchecked)
        << r.commit << " vs " << r.baseline << " on " << r.platform << " " << r.mode << " "
        << r.workload << ": " << CheckVerdictName(r.verdict) << " " << r.note;
  }
  EXPECT_FALSE(CatalogCheckFailed(*rows));
}

}  // namespace
}  // namespace farm::emu
