// Property tests of the catalog parsers -- the scheduler's ParseCatalogYaml
// over the emulator's loader (emu/model/catalog.h), and the loader's
// commit-list import -- over mutated catalogs, the shipped one among the
// seeds: any text gets an answer naming its source, never a crash or a hang;
// a catalog that loads is storable, bounded by its text, and finds each of
// its commits. testing/fuzz.h says how to run longer.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "emu/model/catalog.h"
#include "gtest/gtest.h"
#include "scheduler/catalog_yaml.h"
#include "scheduler/storable_text.h"
#include "testing/fuzz.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;
using ::farm::testing::FuzzConfigFromEnv;
using ::farm::testing::Mutator;
using ::farm::testing::RunFuzz;

constexpr char kSmall[] = R"(catalog: linux-iommu
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
)";

constexpr char kAliases[] = R"(catalog: shared
commits:
  - id: aaaaaaa1
    set: &s {fq.kind: percpu, fq.size: 256}
  - {id: bbbbbbb2, subject: 'b', set: *s}
  - id: ccccccc3
    subject: >-
      folded
      subject
)";

std::string Shipped() {
  std::ifstream in(FARM_SHIPPED_CATALOG);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<std::string>& Words() {
  static const auto* words = new std::vector<std::string>{
      "catalog: ", "commits:",           "\n  - id: ",       "id: ", "subject: ",    "set: ", "{",
      "}",         "\n    set:\n      ", "iova.allocator: ", "v4.6", "9257b4a206fc", "&s ",   "*s",
      "<<: *s"};
  return *words;
}

size_t Lines(std::string_view s) { return std::count(s.begin(), s.end(), '\n') + 1; }

void CatalogProperties(const std::string& yaml) {
  absl::StatusOr<pb::Catalog> cat = ParseCatalogYaml(yaml, "fuzz.yaml");
  if (!cat.ok()) {
    EXPECT_EQ(cat.status().code(), absl::StatusCode::kInvalidArgument) << cat.status();
    EXPECT_TRUE(absl::StartsWith(cat.status().message(), "fuzz.yaml")) << cat.status();
    // The loader reports up to 20 bad entries, one a line, and a count.
    EXPECT_LE(std::count(cat.status().message().begin(), cat.status().message().end(), '\n'), 22)
        << cat.status();
    return;
  }
  EXPECT_FALSE(cat->name().empty());
  EXPECT_TRUE(CheckStorableText(*cat).ok());
  EXPECT_LE(cat->ByteSizeLong(), 4 * yaml.size() + (1 << 20)) << "more than the text's aliases";
  for (int i = 0; i < cat->commits_size(); ++i) EXPECT_EQ(cat->commits(i).index(), i);
  ResolveCatalog(&*cat);
  if (cat->commits_size() > 0) {
    for (const pb::CatalogCommit& c : cat->commits()) {
      for (const auto& [k, v] : c.set())
        EXPECT_EQ(cat->commits().rbegin()->resolved().count(k), 1u);
    }
  }
  // The emulator's view of the same text: every commit is found where it is.
  absl::StatusOr<emu::Catalog> loaded = emu::Catalog::LoadString(yaml, "fuzz.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), static_cast<size_t>(cat->commits_size()));
  for (size_t i = 0; i < loaded->size(); ++i) {
    absl::StatusOr<size_t> at = loaded->Find(loaded->commits()[i].id);
    ASSERT_TRUE(at.ok()) << at.status();
    EXPECT_EQ(*at, i);
  }
  if (loaded->size() > 0) {
    absl::StatusOr<std::vector<size_t>> all =
        loaded->Range(loaded->commits().front().id + ".." + loaded->commits().back().id);
    if (all.ok()) EXPECT_EQ(all->size(), loaded->size());
  }
}

TEST(CatalogFuzzTest, MutatedCatalogsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(2000);
  Mutator m(config.seed, {kSmall, kAliases, Shipped()}, Words());
  RunFuzz(
      config, [&] { return m.Next(); }, CatalogProperties);
}

// `git log --format='%h%x09%s'` text imported after a catalog's end.
void ImportProperties(const std::string& log) {
  absl::StatusOr<emu::Catalog> c = emu::Catalog::LoadString(kSmall, "small.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  for (emu::CommitListOrder order :
       {emu::CommitListOrder::kNewestFirst, emu::CommitListOrder::kOldestFirst}) {
    emu::Catalog copy = *c;
    const absl::Status st = copy.ImportCommitList(log, "log.txt", order);
    if (!st.ok()) {
      EXPECT_TRUE(absl::StrContains(st.message(), "log.txt")) << st;
      EXPECT_EQ(copy.size(), c->size()) << "a failed import changed the catalog";
      continue;
    }
    EXPECT_LE(copy.size(), c->size() + Lines(log));
    for (size_t i = 0; i < copy.size(); ++i) {
      absl::StatusOr<size_t> at = copy.Find(copy.commits()[i].id);
      ASSERT_TRUE(at.ok()) << at.status();
      EXPECT_EQ(*at, i);
    }
  }
}

TEST(CatalogFuzzTest, MutatedCommitListsGetAnAnswer) {
  const auto config = FuzzConfigFromEnv(2000);
  Mutator m(config.seed,
            {"5555555eeee\tfix something\n4444444dddd\tiommu: more\n# comment\n\n",
             "abcdef0123 subject with spaces\n9257b4a206fc\tduplicate of the catalog\n"},
            {"\t", "9257b4a206fc", "v4.7", "0123456789abcdef0123456789abcdef01234567", "#"});
  RunFuzz(
      config, [&] { return m.Next(); }, ImportProperties);
}

}  // namespace
}  // namespace farm::scheduler
