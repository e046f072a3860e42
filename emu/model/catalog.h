// Commit catalogs: the kernel's history as a list of model-key settings.
//
// A catalog is a YAML file, oldest commit first (parents before children):
//
//   catalog: linux-iommu
//   commits:
//     - id: v4.6
//       subject: "Linux 4.6"
//       set: {iova.allocator: rbtree, map_sg: intel-private}
//     - id: 9257b4a206fc
//       subject: "iommu/iova: introduce per-cpu caching to iova allocation"
//       set: {iova.allocator: rcache}
//
// A commit may also carry `expect:`, what its own message, cover letter or
// testers reported about its performance (or, labelled, what the catalog
// comment predicts where nothing was published): CatalogExpectation below,
// checked against the model by emu/run/catalog_check.h and docs/catalog.md.
//
// Settings accumulate down the list: the model state of commit i is every `set`
// of commits 0..i applied in order, so a commit without `set` runs exactly like
// the one before it. A catalog of a merge-based history names each commit's
// `parents` (ids; default: the previous entry); its state is then every `set`
// of its ancestors (itself included) applied in list order, so a commit on a
// side branch does not inherit what the main line set after the fork. That is also how a plain
// commit list imported from a kernel tree (ImportCommitList) gets its state: it inherits from the
// catalog's end.
//
// Errors are absl::Status values whose message starts with "<file>:<line>: "
// so a user can fix their own catalog; a load checks every commit entry and
// reports every bad one, one line each (up to 20), not just the first. Key
// names and values are checked by a KeyValidator (the emulation core's
// model-key registry); without one any scalar value is accepted.
//
// Thread-safety: a Catalog is immutable after loading except through
// ImportCommitList; const methods may be called from many threads at once.
// Ownership: plain value type, copyable.
#ifndef EMU_MODEL_CATALOG_H_
#define EMU_MODEL_CATALOG_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace farm::emu {

// Checks one `key: value` of a `set`. Returns OK, or InvalidArgument /
// NotFound whose message explains the problem without a location (the loader
// prefixes file and line).
using KeyValidator = std::function<absl::Status(absl::string_view key, absl::string_view value)>;

// Checks an expectation's workload and its params (the workload registry
// lives above emu/model). OK, or InvalidArgument / NotFound without a location.
using ExpectValidator = std::function<absl::Status(
    absl::string_view workload, const std::map<std::string, std::string>& params)>;

// What an expectation compares: the workload's headline throughput, or the
// mean map / unmap latency (dma-map-bench and every DmaPath workload).
enum class ExpectMetric { kThroughput, kMapNs, kUnmapNs };
// Which way the commit moves performance against its baseline.
enum class ExpectDirection { kFaster, kSlower, kNeutral };

const char* ExpectMetricName(ExpectMetric m);        // "throughput", "map_ns", "unmap_ns"
const char* ExpectDirectionName(ExpectDirection d);  // "faster", "slower", "neutral"

// `source:` of an expectation with no published figure or statement: the
// expectation is then the catalog comment's own, and reports say so.
inline constexpr char kNoSourceFound[] = "none found";

// One `expect:` entry of a commit: the commit against its baseline (the
// previous catalog entry, or `against`) on every platform x mode named,
// running `workload` with `params`. speedup = how many times faster the
// commit is (throughput ratio commit/baseline; latency ratio
// baseline/commit) and must lie in [min_speedup, max_speedup]; the loader
// fills the direction's default band where none is given and refuses a band
// that contradicts the direction.
struct CatalogExpectation {
  std::vector<std::string> platforms;
  std::vector<std::string> modes;
  std::string workload;
  std::map<std::string, std::string> params;
  ExpectMetric metric = ExpectMetric::kThroughput;
  ExpectDirection direction = ExpectDirection::kNeutral;
  double min_speedup = 0;
  double max_speedup = 0;
  std::string against;     // baseline commit; "" = the previous entry
  std::string claim;       // what was reported (or what the catalog comment predicts)
  std::string source;      // lore message ids, commit ids, URLs; or kNoSourceFound
  std::string model_todo;  // the model is known to disagree: what it gets wrong
  int line = 0;            // 1-based line of the entry
  bool from_catalog_comment() const { return source == kNoSourceFound; }
};

// The default bands: a move of at least 1% counts as faster or slower; a
// neutral commit stays within 1%.
inline constexpr double kDefaultFasterMin = 1.01;
inline constexpr double kDefaultSlowerMax = 0.99;
inline constexpr double kDefaultNeutralMin = 0.99;
inline constexpr double kDefaultNeutralMax = 1.01;

// One entry of the list, as written.
struct CatalogCommit {
  std::string id;                          // tag ("v5.11") or abbreviated/full commit id
  std::string subject;                     // the commit's subject line or "Linux 5.11"
  std::string author;                      // "Name <email>", optional
  std::map<std::string, std::string> set;  // keys this commit changes
  std::vector<CatalogExpectation> expect;  // what was reported about its performance
  // `parents:` as the catalog's own ids (an earlier entry's id) or, for a
  // parent outside the catalog, as written (7+ hex digits); empty: the
  // previous entry.
  std::vector<std::string> parents;
  std::string source;  // file the entry came from
  int line = 0;        // 1-based line of the entry in `source`
};

// A commit resolved to its place and its accumulated model state.
struct ResolvedCommit {
  size_t index = 0;
  std::string id;
  std::string subject;
  std::map<std::string, std::string> settings;  // accumulated over its ancestors
};

// Order of lines in an imported commit list.
enum class CommitListOrder {
  kNewestFirst,  // what `git log --format='%h%x09%s'` prints
  kOldestFirst,  // `git log --reverse ...`
};

class Catalog {
 public:
  // Reads and validates a catalog file. Errors name `path` and the line.
  // Without an ExpectValidator an expectation's workload and params are
  // only checked for shape (a name, scalar values).
  static absl::StatusOr<Catalog> LoadFile(const std::string& path,
                                          const KeyValidator& validator = {},
                                          const ExpectValidator& expect_validator = {});
  // Same for text already in memory; `source_name` stands in for the file name.
  static absl::StatusOr<Catalog> LoadString(absl::string_view yaml, absl::string_view source_name,
                                            const KeyValidator& validator = {},
                                            const ExpectValidator& expect_validator = {});

  const std::string& name() const { return name_; }
  const std::vector<CatalogCommit>& commits() const { return commits_; }
  size_t size() const { return commits_.size(); }

  // Finds a commit by tag or id. Commit ids match by prefix in either
  // direction (a full 40-digit id finds a 12-digit entry and vice versa) once
  // at least 7 hex digits are given; an ambiguous prefix is an error.
  absl::StatusOr<size_t> Find(absl::string_view id) const;

  // Accumulated settings of the commit's ancestors (commits 0..index when no
  // entry names parents). REQUIRES: index < size() (FARM_DCHECK).
  std::map<std::string, std::string> SettingsAt(size_t index) const;

  // Find + SettingsAt.
  absl::StatusOr<ResolvedCommit> Resolve(absl::string_view id) const;

  // "A..B": every commit from A through B, both included (unlike git's A..B,
  // the range keeps A so that a sweep carries its own baseline). A single id
  // without ".." is a range of one. Errors if B comes before A.
  absl::StatusOr<std::vector<size_t>> Range(absl::string_view spec) const;

  // Appends a plain commit list ("<id><TAB or space><subject>" per line, blank
  // lines and lines starting with '#' ignored) after the last entry. Commits
  // already in the catalog are skipped, so re-importing an overlapping git log
  // is harmless; new ones set nothing and therefore inherit. Errors name
  // `source_name` and the line.
  absl::Status ImportCommitList(absl::string_view text, absl::string_view source_name,
                                CommitListOrder order = CommitListOrder::kNewestFirst);

 private:
  absl::Status Append(CatalogCommit commit);
  // Every `against` names a commit before its own; errors located.
  absl::Status CheckBaselines() const;
  // Every `parents` entry names an earlier commit (rewritten to its id) or
  // looks like a commit outside the catalog; fills parent_pos_.
  absl::Status CheckParents();
  // The commit SameCommit() with `id`, if any, by the index below: a scan of
  // every commit per append made loading n commits quadratic.
  const CatalogCommit* FindSame(const std::string& id) const;

  std::string name_;
  std::vector<CatalogCommit> commits_;
  // Position in commits_ by exact id, and by lower-cased id for hex ids of
  // kMinPrefix+ digits (which also match by prefix).
  std::map<std::string, size_t> by_id_;
  std::map<std::string, size_t> by_hex_;
  // Positions of each commit's parents inside the catalog; empty when no
  // entry names parents (a linear list). Entries past its end (imported
  // later) have the previous entry as their parent.
  std::vector<std::vector<size_t>> parent_pos_;
};

// The catalog `farm-emu run --kernel` uses when no --catalog is given:
// $FARM_EMU_CATALOG if set, else linux-iommu.yaml shipped beside the
// executable (<exe dir>/catalogs/ or <exe dir>/../share/iommu-farm/catalogs/),
// else the source tree's emu/model/catalogs/linux-iommu.yaml. Returns NotFound
// listing every place tried.
absl::StatusOr<std::string> DefaultCatalogPath();

// The one function `--kernel` goes through: loads `catalog_path` (or
// DefaultCatalogPath() when empty) and resolves `kernel_id` in it.
absl::StatusOr<ResolvedCommit> ResolveKernel(absl::string_view kernel_id,
                                             const std::string& catalog_path,
                                             const KeyValidator& validator = {});

}  // namespace farm::emu

#endif  // EMU_MODEL_CATALOG_H_
